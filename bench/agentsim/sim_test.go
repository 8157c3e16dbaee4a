package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/musterhq/muster/shared/action"
	"github.com/musterhq/muster/shared/wire"
)

// setup is a fleet of one node on a loopback address of its own, served.
func setup(t testing.TB) (*Fleet, *node) {
	t.Helper()
	f, err := NewFleet("c", "n", 1, 1, net.ParseIP("127.77.0.1"), 10*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f, f.nodes[0]
}

// serve sends one request to the node's handler.
func serve(f *Fleet, n *node, method, target, body string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(method, target, strings.NewReader(body))
	if method == http.MethodPost {
		r.Header.Set("Content-Type", "application/json")
	}
	r = r.WithContext(context.WithValue(r.Context(), nodeKey{}, n))
	w := httptest.NewRecorder()
	f.routes().ServeHTTP(w, r)
	return w
}

// TestChangeCounterMovesWithTheQueue: the counter moves on every change of
// the queue (push, start, end) and stays when nothing changes; the epoch is
// the node's for the life of the process.
func TestChangeCounterMovesWithTheQueue(t *testing.T) {
	t.Parallel()
	f, n := setup(t)
	counter := func() wire.ChangeCounter {
		t.Helper()
		var c wire.ChangeCounter
		if err := json.Unmarshal(serve(f, n, "GET", "/api/v1/changes", "").Body.Bytes(), &c); err != nil {
			t.Fatal(err)
		}
		return c
	}
	c0 := counter()
	if c0.Epoch == "" {
		t.Fatal("no epoch")
	}
	serve(f, n, "GET", "/api/v1/info", "")
	serve(f, n, "GET", "/api/v1/actions?since=0", "")
	if c := counter(); c != c0 {
		t.Fatalf("reads moved the counter: %+v → %+v", c0, c)
	}
	id := action.NewID()
	if w := serve(f, n, "POST", "/api/v1/actions", `{"id":"`+id+`","kind":"muster.io/debug.ping"}`); w.Code != http.StatusCreated {
		t.Fatalf("push: %d %s", w.Code, w.Body)
	}
	c1 := counter()
	if c1.Epoch != c0.Epoch || c1.Counter <= c0.Counter {
		t.Fatalf("push: counter %+v → %+v, want it moved in the same epoch", c0, c1)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		var a action.Action
		_ = json.Unmarshal(serve(f, n, "GET", "/api/v1/actions/"+id, "").Body.Bytes(), &a)
		if a.State == action.Done {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("action %s is %s after 5 s, want DONE", id, a.State)
		}
		time.Sleep(5 * time.Millisecond) // polling with a deadline
	}
	if c2 := counter(); c2.Counter <= c1.Counter {
		t.Fatalf("the action's end did not move the counter: %+v → %+v", c1, c2)
	}
}

// FuzzRequests: whatever the query and body, the simulator answers 2xx or
// 4xx with a JSON body (or none), never a 5xx.
func FuzzRequests(f *testing.F) {
	f.Add("GET", "/api/v1/actions?since=0&limit=500", "")
	f.Add("GET", "/api/v1/actions?since=-1", "")
	f.Add("GET", "/api/v1/actions?limit=0&wait=1ms", "")
	f.Add("GET", "/api/v1/actions?wait=x", "")
	f.Add("POST", "/api/v1/actions", `{"kind":"muster.io/debug.sleep","args":{"seconds":0.001}}`)
	f.Add("POST", "/api/v1/actions", `{"kind":`)
	f.Add("POST", "/api/v1/actions/ack", `{"cursor":-1}`)
	f.Add("POST", "/api/v1/actions/ack", `{"cursor":3}`)
	f.Add("POST", "/api/v1/actions/"+action.NewID()+"/cancel", ``)
	fl, n := setup(f)
	f.Fuzz(func(t *testing.T, method, target, body string) {
		if method != "GET" && method != "POST" || !strings.HasPrefix(target, "/") || strings.ContainsAny(target, " \r\n\t#") {
			return
		}
		if _, err := http.NewRequest(method, "http://x"+target, nil); err != nil {
			return
		}
		w := serve(fl, n, method, target, body)
		if w.Code >= 500 {
			t.Fatalf("%s %s %q: %d %s", method, target, body, w.Code, w.Body)
		}
		if b := bytes.TrimSpace(w.Body.Bytes()); len(b) > 0 && !json.Valid(b) {
			t.Fatalf("%s %s: not JSON: %q", method, target, b)
		}
		if w.Code >= 400 {
			var e wire.ErrorBody
			if err := json.Unmarshal(w.Body.Bytes(), &e); err != nil || e.Error.Code == "" {
				t.Fatalf("%s %s: %d without the error envelope: %s", method, target, w.Code, w.Body)
			}
		}
	})
}
