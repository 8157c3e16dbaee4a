package api

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/musterhq/muster/agent/exposition"
	"github.com/musterhq/muster/agent/handlers"
	"github.com/musterhq/muster/agent/queue"
	"github.com/musterhq/muster/agent/runner"
)

// ackSpy records the cursors acknowledged.
type ackSpy struct {
	*queue.Queue
	mu   sync.Mutex
	acks []int64
}

func (q *ackSpy) Ack(ctx context.Context, cursor int64) error {
	q.mu.Lock()
	q.acks = append(q.acks, cursor)
	q.mu.Unlock()
	return q.Queue.Ack(ctx, cursor)
}

func (q *ackSpy) acked() []int64 {
	q.mu.Lock()
	defer q.mu.Unlock()
	return append([]int64(nil), q.acks...)
}

// Issue 17, item 9: with api.insecure, a web page must not drive the agent's
// TCP API. A body-less cross-site form POST (cancel), a request whose Host is
// a name the agent was not given (DNS rebinding), any request carrying an
// Origin, and a GET that would acknowledge the cursor all change nothing.
func TestAgentTCPAPIRefusesWhatABrowserSends(t *testing.T) {
	t.Parallel()
	q, err := queue.Open(context.Background(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	spy := &ackSpy{Queue: q}
	reg, _ := handlers.NewRegistry(nil, handlers.Env{NodeID: "n1", ClusterID: "c1"})
	prom := exposition.NewRegistry()
	run := runner.New(runner.Config{Queue: q, Handlers: reg, Actor: "n1", Idle: 20 * time.Millisecond, Metrics: runner.NewMetrics(prom)})
	_ = run.Start(context.Background())
	srv := New(Config{NodeID: "n1", ClusterID: "c1", Version: "test", DefaultTimeout: time.Hour,
		Queue: spy, Runner: run, Kinds: reg, Metrics: prom, Hosts: []string{"db-1.internal"}})
	f, ts := newFixture(t, srv.Handler(), q)
	t.Cleanup(func() { ts.Close(); run.Stop(); q.Close() })

	send := func(method, path, body string, header map[string]string) int {
		t.Helper()
		req, _ := http.NewRequest(method, ts.URL+path, strings.NewReader(body))
		for k, v := range header {
			if k == "Host" {
				req.Host = v
			} else {
				req.Header.Set(k, v)
			}
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	json := map[string]string{"Content-Type": "application/json"}
	st, b := f.do(t, "POST", "/api/v1/actions", `{"kind":"muster.io/debug.sleep","args":{"seconds":3600}}`)
	if st != http.StatusCreated {
		t.Fatalf("push: %d %s", st, b)
	}
	id := decode[struct{ ID string }](t, b).ID

	for name, tc := range map[string]struct {
		method, path, body string
		header             map[string]string
		want               int
	}{
		"cancel as a form":       {"POST", "/api/v1/actions/" + id + "/cancel", "", map[string]string{"Content-Type": "application/x-www-form-urlencoded"}, 415},
		"cancel without a type":  {"POST", "/api/v1/actions/" + id + "/cancel", "", nil, 415},
		"push to a foreign Host": {"POST", "/api/v1/actions", `{"kind":"muster.io/debug.ping"}`, map[string]string{"Content-Type": "application/json", "Host": "evil.example:7420"}, 403},
		"read by a foreign Host": {"GET", "/api/v1/actions", "", map[string]string{"Host": "evil.example"}, 403},
		"push with an Origin":    {"POST", "/api/v1/actions", `{"kind":"muster.io/debug.ping"}`, map[string]string{"Content-Type": "application/json", "Origin": "http://127.0.0.1:7420"}, 403},
		"cancel with an Origin":  {"POST", "/api/v1/actions/" + id + "/cancel", "", map[string]string{"Content-Type": "application/json", "Origin": "null"}, 403},
		"ack as a form":          {"POST", "/api/v1/actions/ack", `cursor=1`, map[string]string{"Content-Type": "text/plain"}, 415},
	} {
		if got := send(tc.method, tc.path, tc.body, tc.header); got != tc.want {
			t.Errorf("%s: status %d, want %d", name, got, tc.want)
		}
	}
	if n := f.count(t); n != 1 {
		t.Fatalf("refused pushes queued actions: %d in the queue", n)
	}
	if a, _ := q.Get(context.Background(), id); a == nil || a.State.Final() {
		t.Fatalf("a refused cancel ended the action: %+v", a)
	}
	// A GET never acknowledges, even with the parameter older cores send.
	if got := send("GET", "/api/v1/actions?since=1&ack=1", "", nil); got != http.StatusOK {
		t.Fatalf("GET with ack=1: %d", got)
	}
	if acks := spy.acked(); len(acks) != 0 {
		t.Fatalf("a GET acknowledged %v", acks)
	}
	// What the core sends passes: an IP literal, a configured name, a POST
	// to acknowledge, and a cancel declared JSON.
	for _, host := range []string{"127.0.0.1:1", "[::1]:7420", "db-1.internal:7420", "DB-1.internal.", "localhost:7420"} {
		if got := send("GET", "/api/v1/health", "", map[string]string{"Host": host}); got != http.StatusOK {
			t.Errorf("Host %s: %d, want 200", host, got)
		}
	}
	if got := send("POST", "/api/v1/actions/ack", `{"cursor":1}`, json); got != http.StatusNoContent {
		t.Fatalf("POST ack: %d", got)
	}
	if acks := spy.acked(); len(acks) != 1 || acks[0] != 1 {
		t.Fatalf("acks %v, want [1]", acks)
	}
	if got := send("POST", "/api/v1/actions/"+id+"/cancel", "", json); got != http.StatusAccepted {
		t.Fatalf("cancel declared JSON: %d", got)
	}
}

// Issue 17, hardening: a member of the socket group cancels only the actions
// it queued itself on the socket; another user's, or the core's, are a 403
// that changes nothing, and root cancels any. The kernel's word on the
// caller (ConnContext) is stood in for by a fixed peer per listener.
func TestASocketUserCancelsOnlyItsOwnActions(t *testing.T) {
	t.Parallel()
	q, err := queue.Open(context.Background(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	reg, _ := handlers.NewRegistry(nil, handlers.Env{NodeID: "n1", ClusterID: "c1"})
	prom := exposition.NewRegistry()
	run := runner.New(runner.Config{Queue: q, Handlers: reg, Actor: "n1", Idle: 20 * time.Millisecond, Metrics: runner.NewMetrics(prom)})
	_ = run.Start(context.Background())
	srv := New(Config{NodeID: "n1", ClusterID: "c1", Version: "test", DefaultTimeout: time.Hour, Queue: q, Runner: run, Kinds: reg})
	t.Cleanup(func() { run.Stop(); q.Close() })
	as := func(p *Peer) string {
		ts := httptest.NewUnstartedServer(srv.Handler())
		if p != nil {
			ts.Config.ConnContext = func(ctx context.Context, _ net.Conn) context.Context {
				return context.WithValue(ctx, peerKey{}, peerInfo{peer: *p})
			}
		}
		ts.Start()
		t.Cleanup(ts.Close)
		return ts.URL
	}
	alice, bob := as(&Peer{UID: 4001, User: "alice"}), as(&Peer{UID: 4002, User: "bob"})
	root, core := as(&Peer{UID: 0, User: "root"}), as(nil)
	call := func(base, path, body string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, base+path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if path == "/api/v1/actions" {
			return resp.StatusCode, decode[struct{ ID string }](t, b).ID
		}
		return resp.StatusCode, string(b)
	}
	sleep := `{"kind":"muster.io/debug.sleep","args":{"seconds":3600}}`
	_, byAlice := call(alice, "/api/v1/actions", sleep)
	_, byAlice2 := call(alice, "/api/v1/actions", sleep)
	_, byCore := call(core, "/api/v1/actions", `{"kind":"muster.io/debug.sleep","args":{"seconds":3600},"origin":"core","requester":"bob"}`)
	for _, id := range []string{byAlice, byCore} {
		if st, b := call(bob, "/api/v1/actions/"+id+"/cancel", ""); st != http.StatusForbidden || !strings.Contains(b, "only the actions it queued") {
			t.Fatalf("bob cancelling %s: %d %s", id, st, b)
		}
		if a, _ := q.Get(context.Background(), id); a == nil || a.State.Final() {
			t.Fatalf("a refused cancel ended %s: %+v", id, a)
		}
	}
	if st, b := call(alice, "/api/v1/actions/"+byAlice+"/cancel", ""); st != http.StatusAccepted {
		t.Fatalf("alice cancelling her own: %d %s", st, b)
	}
	for _, id := range []string{byAlice2, byCore} {
		if st, b := call(root, "/api/v1/actions/"+id+"/cancel", ""); st != http.StatusAccepted {
			t.Fatalf("root cancelling %s: %d %s", id, st, b)
		}
	}
}
