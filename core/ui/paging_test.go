package ui

import (
	"net/http"
	"net/url"
	"testing"
)

// TestListPageAddressesAndLiveRegion: a list's next page keeps its filter
// and sets the marker; the last page has none; the live region asks for the
// list part of the same page and narrows the stream to the filter's
// cluster; a filter that did not decode is a 400 with what was wrong.
func TestListPageAddressesAndLiveRegion(t *testing.T) {
	t.Parallel()
	p := listPage{path: "/ui/runs", filter: url.Values{"state": {"RUNNING"}, "cluster": {"c<1>"}}}
	if got, want := p.url("m1"), "/ui/runs?cluster=c%3C1%3E&marker=m1&state=RUNNING"; got != want {
		t.Errorf("next page: %q, want %q", got, want)
	}
	if got := p.url(""); got != "" {
		t.Errorf("after the last page: %q, want none", got)
	}
	live := p.live("m0", url.Values{"run": {"*"}}, "c<1>")
	if want := "/ui/runs?cluster=c%3C1%3E&marker=m0&part=live&state=RUNNING"; live.URL != want {
		t.Errorf("live URL: %q, want %q", live.URL, want)
	}
	if want := "cluster=c%3C1%3E&run=%2A"; live.Stream != want {
		t.Errorf("live stream: %q, want %q", live.Stream, want)
	}
	if p.filter.Has("marker") || p.filter.Has("part") {
		t.Errorf("the filter was changed: %v", p.filter)
	}
	if status, why := filterStatus(formError("state: %q is not a state", "X")); status != http.StatusBadRequest || why != `state: "X" is not a state` {
		t.Errorf("bad filter: %d %q", status, why)
	}
	if status, why := filterStatus(nil); status != http.StatusOK || why != "" {
		t.Errorf("good filter: %d %q", status, why)
	}
}
