package ui

import (
	"net/http"
	"net/url"
)

// listPage is what the UI's paged lists (Actions, Runs, the runs of
// Approvals) share: the address of a page of a filter after a marker, and
// its live region. The pages themselves are cut by store.ActionPage and
// store.RunPage, as the API's are.
type listPage struct {
	path   string     // the list's path, "/ui/actions"
	filter url.Values // the filter's values, without the marker
}

// query is the filter with marker ("": the first page) and more set.
func (p listPage) query(marker string, more ...string) url.Values {
	q := url.Values{}
	for k, vs := range p.filter {
		q[k] = append([]string(nil), vs...)
	}
	if marker != "" {
		q.Set("marker", marker)
	}
	for i := 0; i+1 < len(more); i += 2 {
		q.Set(more[i], more[i+1])
	}
	return q
}

// url is the address of the page after marker; "" when marker is "" (no
// next page).
func (p listPage) url(marker string) string {
	if marker == "" {
		return ""
	}
	return p.path + "?" + p.query(marker).Encode()
}

// live is the live region of the page after marker: the page's list alone
// (part=live), refreshed on the events stream selects, of cluster when
// the filter names one.
func (p listPage) live(marker string, stream url.Values, cluster string) *liveRegion {
	if cluster != "" {
		stream.Set("cluster", cluster)
	}
	return &liveRegion{URL: p.path + "?" + p.query(marker, "part", "live").Encode(), Stream: stream.Encode()}
}

// filterStatus is the status and message of a list page whose filter did
// not decode (ferr): 400 and what was wrong, or 200 and "".
func filterStatus(ferr error) (int, string) {
	if ferr == nil {
		return http.StatusOK, ""
	}
	return http.StatusBadRequest, formMessage(ferr)
}
