package api

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/musterhq/muster/shared/action"
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

// A person on the node may POST without a body and without declaring JSON
// (`curl -X POST --unix-socket ...`): no browser reaches the socket. A body
// there still declares JSON, and over TCP every write does, a body-less one
// included.
func TestABodylessPostOnTheSocketNeedsNoContentType(t *testing.T) {
	t.Parallel()
	hc, q := serveSocket(t)
	a, _, err := q.Enqueue(context.Background(), &action.Action{ID: action.NewID(), ClusterID: "c1", NodeID: "n1",
		Kind: "muster.io/debug.ping", Args: json.RawMessage(`{}`), Origin: action.OriginAgent,
		Requester: PeerOfUID(os.Getuid()).User, TimeoutS: 60}, "test")
	if err != nil {
		t.Fatal(err)
	}
	post := func(path, body, ct string) (int, []byte) {
		t.Helper()
		var r io.Reader
		if body != "" {
			r = strings.NewReader(body)
		}
		req, _ := http.NewRequest(http.MethodPost, "http://agent"+path, r)
		if ct != "" {
			req.Header.Set("Content-Type", ct)
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}
	if st, b := post("/api/v1/actions", `{"kind":"muster.io/debug.ping"}`, "text/plain"); st != http.StatusUnsupportedMediaType {
		t.Errorf("a text/plain body on the socket: %d %s, want 415", st, b)
	}
	if st, b := post("/api/v1/actions/"+a.ID+"/cancel", "", ""); st != http.StatusAccepted {
		t.Fatalf("a body-less cancel on the socket: %d %s, want 202", st, b)
	}
	got, err := q.Get(context.Background(), a.ID)
	if err != nil || got.State != action.Cancelled {
		t.Fatalf("after the cancel: %+v %v", got, err)
	}

	// Over TCP nothing changed: a body-less write without JSON is a 415.
	f := setup(t)
	st, b := f.do(t, http.MethodPost, "/api/v1/actions", `{"kind":"muster.io/debug.sleep","args":{"seconds":60}}`)
	if st != http.StatusCreated {
		t.Fatalf("push: %d %s", st, b)
	}
	id := decode[action.Action](t, b).ID
	req, _ := http.NewRequest(http.MethodPost, f.url+"/api/v1/actions/"+id+"/cancel", nil)
	resp, err := f.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnsupportedMediaType {
		t.Fatalf("a body-less cancel over TCP without Content-Type: %d, want 415", resp.StatusCode)
	}
}
