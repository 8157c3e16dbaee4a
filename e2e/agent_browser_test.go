package e2e

import (
	"net/http"
	"strings"
	"testing"

	"github.com/musterhq/muster/shared/wire"
)

// Issue 17, item 9, against a real agent with api.insecure: what a browser
// can send (a body-less cross-site form POST to cancel, a push under a
// rebound name, any request with an Origin) changes nothing, while the
// core's client (JSON, the agent's address, no Origin) still cancels.
func TestAnInsecureAgentCannotBeDrivenFromABrowser(t *testing.T) {
	t.Parallel()
	p, ag, _ := agentProc(t, "n1", "")
	queued, _, err := ag.Push(ctxT(t), &wire.PushRequest{Kind: "muster.io/debug.sleep", Args: []byte(`{"seconds":3600}`)})
	if err != nil {
		t.Fatal(err)
	}
	hc := &http.Client{}
	do := func(method, path, body string, header map[string]string) int {
		t.Helper()
		req, _ := http.NewRequestWithContext(ctxT(t), method, "http://"+p.Addr()+path, strings.NewReader(body))
		for k, v := range header {
			if k == "Host" {
				req.Host = v
			} else {
				req.Header.Set(k, v)
			}
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	cancel := "/api/v1/actions/" + queued.ID + "/cancel"
	for name, tc := range map[string]struct {
		method, path, body string
		header             map[string]string
		want               int
	}{
		"a cross-site form cancel": {"POST", cancel, "", map[string]string{"Content-Type": "application/x-www-form-urlencoded", "Origin": "http://evil.example"}, 403},
		"a form cancel, no Origin": {"POST", cancel, "", map[string]string{"Content-Type": "application/x-www-form-urlencoded"}, 415},
		"a push, rebound name":     {"POST", "/api/v1/actions", `{"kind":"muster.io/debug.ping"}`, map[string]string{"Content-Type": "application/json", "Host": "evil.example:" + strings.Split(p.Addr(), ":")[1]}, 403},
		"a read, rebound name":     {"GET", "/api/v1/actions", "", map[string]string{"Host": "evil.example"}, 403},
		"a push with an Origin":    {"POST", "/api/v1/actions", `{"kind":"muster.io/debug.ping"}`, map[string]string{"Content-Type": "application/json", "Origin": "null"}, 403},
	} {
		if got := do(tc.method, tc.path, tc.body, tc.header); got != tc.want {
			t.Errorf("%s: %d, want %d", name, got, tc.want)
		}
	}
	page, err := ag.Changes(ctxT(t), -1, 100, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Actions) != 1 || page.Actions[0].State.Final() {
		t.Fatalf("refused requests changed the queue: %+v", page.Actions)
	}
	// The core's client: a JSON cancel, and a pull that acknowledges with a
	// POST first.
	if a, err := ag.Cancel(ctxT(t), queued.ID); err != nil || a.ID != queued.ID {
		t.Fatalf("the core's cancel: %+v, %v", a, err)
	}
	if _, err := ag.Changes(ctxT(t), page.NextCursor, 10, true); err != nil {
		t.Fatalf("a pull that acknowledges: %v", err)
	}
}
