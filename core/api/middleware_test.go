package api

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/musterhq/muster/shared/wire"
)

// Item 4 of the attack review: a write with a body must say it is JSON. A
// browser sends text/plain, form and multipart bodies to any origin without
// asking first, never application/json, so a page cannot forge a write.
func TestWritesNeedContentTypeJSON(t *testing.T) {
	t.Parallel()
	e := setup(t)
	body := `{"cluster_id":"prod","node_id":"db-1","kind":"muster.io/debug.ping"}`
	send := func(ct string) (int, []byte) {
		t.Helper()
		req, err := http.NewRequest(http.MethodPost, e.ts.URL+"/api/v1/actions", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+e.secrets["op"])
		req.Header.Set("Origin", "http://evil.example")
		if ct != "" {
			req.Header.Set("Content-Type", ct)
		}
		resp, err := e.ts.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}
	for _, ct := range []string{"", "text/plain", "text/plain;charset=UTF-8", "application/x-www-form-urlencoded",
		"multipart/form-data; boundary=x", "application/jsonx", "application/json-seq", "not a media type;;"} {
		status, b := send(ct)
		var env wire.ErrorBody
		if err := json.Unmarshal(b, &env); err != nil || status != http.StatusUnsupportedMediaType ||
			env.Error.Code != wire.CodeUnsupportedMediaType || !strings.Contains(env.Error.Message, "application/json") {
			t.Errorf("Content-Type %q: %d %s", ct, status, b)
		}
	}
	var list wire.ActionList
	e.call(http.MethodGet, "/api/v1/actions", "viewer", nil, http.StatusOK, &list)
	if len(list.Actions) != 0 {
		t.Fatalf("refused writes created %d actions", len(list.Actions))
	}
	for _, ct := range []string{"application/json", "application/json; charset=utf-8", "Application/JSON"} {
		if status, b := send(ct); status != http.StatusCreated {
			t.Errorf("Content-Type %q: %d %s", ct, status, b)
		}
	}
	// Writes without a body need no content type.
	e.call(http.MethodPost, "/api/v1/clusters/prod/orchestrate", "op", nil, http.StatusAccepted, nil)
}
