package api

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/musterhq/muster/shared/action"
	"github.com/musterhq/muster/shared/names"
	"github.com/musterhq/muster/shared/wire"
)

// Issue 31, item 7: the core's push places a run's child in its run, and
// the agent keeps and shows that place; info says the agent takes it (a
// core sends it to no agent that does not, since an agent of an earlier
// release refuses a field it does not know). A person on the socket cannot
// claim a run: what the body says of one is dropped there, as approved_by.
func TestAPushKeepsTheRunChildsPlace(t *testing.T) {
	t.Parallel()
	f := setup(t)
	st, b := f.do(t, http.MethodGet, "/api/v1/info", "")
	b0 := b
	if st != http.StatusOK || !slices.Contains(decode[wire.AgentInfo](t, b).PushFields, "run_id") {
		t.Fatalf("info: %d %s, want push_fields with run_id", st, b)
	}
	run := action.NewID()
	body := `{"kind":"muster.io/debug.ping","run_id":"` + run + `","stage":"roll","step":"reboot","wave":2,"attempt":3}`
	st, b = f.do(t, http.MethodPost, "/api/v1/actions", body)
	if st != http.StatusCreated {
		t.Fatalf("push: %d %s", st, b)
	}
	a := decode[action.Action](t, b)
	if a.RunID != run || a.Stage != "roll" || a.Step != "reboot" || a.Wave != 2 || a.Attempt != 3 {
		t.Fatalf("pushed record: run %q stage %q step %q wave %d attempt %d", a.RunID, a.Stage, a.Step, a.Wave, a.Attempt)
	}
	st, b = f.do(t, http.MethodGet, "/api/v1/actions/"+a.ID, "")
	if got := decode[action.Action](t, b); st != http.StatusOK || got.RunID != run || got.Attempt != 3 {
		t.Fatalf("show: %d %s", st, b)
	}
	for name, bad := range map[string]string{
		"run_id not a UUID":   `"run_id":"r1"`,
		"stage without a run": `"stage":"roll"`,
		"negative wave":       `"run_id":"` + run + `","wave":-1`,
		"control characters":  `"run_id":"` + run + `","step":"a\u001b[31m"`,
		"a stage too long":    `"run_id":"` + run + `","stage":"` + strings.Repeat("s", names.MaxStep+1) + `"`,
	} {
		if st, b := f.do(t, http.MethodPost, "/api/v1/actions", `{"kind":"muster.io/debug.ping",`+bad+`}`); st != http.StatusBadRequest {
			t.Errorf("%s: %d %s, want 400", name, st, b)
		}
	}

	// Issue 38: the trace context is kept and shown; a malformed one is a 400.
	if !slices.Contains(decode[wire.AgentInfo](t, b0).PushFields, "traceparent") {
		t.Fatalf("info: %s, want push_fields with traceparent", b0)
	}
	const tp = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	st, b = f.do(t, http.MethodPost, "/api/v1/actions", `{"kind":"muster.io/debug.ping","traceparent":"`+tp+`"}`)
	if st != http.StatusCreated {
		t.Fatalf("push with a traceparent: %d %s", st, b)
	}
	st, b = f.do(t, http.MethodGet, "/api/v1/actions/"+decode[action.Action](t, b).ID, "")
	if got := decode[action.Action](t, b); st != http.StatusOK || got.Traceparent != tp {
		t.Fatalf("show: %d %s, want traceparent %s", st, b, tp)
	}
	for _, bad := range []string{"01-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
		"00-00000000000000000000000000000000-b7ad6b7169203331-01", "00-0AF7651916CD43DD8448EB211C80319C-b7ad6b7169203331-01",
		"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01\nX=1", "x"} {
		if st, b := f.do(t, http.MethodPost, "/api/v1/actions", `{"kind":"muster.io/debug.ping","traceparent":"`+bad+`"}`); st != http.StatusBadRequest {
			t.Errorf("traceparent %q: %d %s, want 400", bad, st, b)
		}
	}

	hc, q := serveSocket(t)
	req, _ := http.NewRequest(http.MethodPost, "http://agent/api/v1/actions", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	acts, _, _, err := q.Changes(context.Background(), 0, 10)
	if resp.StatusCode != http.StatusCreated || err != nil || len(acts) != 1 {
		t.Fatalf("push over the socket: %d, queue %v %v", resp.StatusCode, acts, err)
	}
	if s := acts[0]; s.RunID != "" || s.Stage != "" || s.Step != "" || s.Wave != 0 || s.Attempt != 0 {
		t.Fatalf("a push over the socket claimed run %q stage %q step %q wave %d attempt %d", s.RunID, s.Stage, s.Step, s.Wave, s.Attempt)
	}
}
