package api

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/musterhq/muster/shared/wire"
)

// Item 4 of the attack review: a text/plain POST with a foreign Origin was
// answered 201, so a web page open on the node could queue work. A write
// with a body must now say it is JSON.
func TestWritesNeedContentTypeJSON(t *testing.T) {
	t.Parallel()
	f := setup(t)
	for _, ct := range []string{"", "text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x"} {
		req, _ := http.NewRequest(http.MethodPost, f.url+"/api/v1/actions", strings.NewReader(`{"kind":"muster.io/debug.ping"}`))
		if ct != "" {
			req.Header.Set("Content-Type", ct)
		}
		resp, err := f.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnsupportedMediaType || decode[wire.ErrorBody](t, b).Error.Code != wire.CodeUnsupportedMediaType {
			t.Errorf("Content-Type %q: %d %s", ct, resp.StatusCode, b)
		}
	}
	if n := f.count(t); n != 0 {
		t.Fatalf("refused pushes queued %d actions", n)
	}
	if st, b := f.do(t, http.MethodPost, "/api/v1/actions", `{"kind":"muster.io/debug.ping"}`); st != http.StatusCreated {
		t.Fatalf("JSON push: %d %s", st, b)
	}
}
