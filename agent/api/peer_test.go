package api

import (
	"context"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/musterhq/muster/agent/exposition"
	"github.com/musterhq/muster/agent/handlers"
	"github.com/musterhq/muster/agent/queue"
	"github.com/musterhq/muster/agent/runner"
	"github.com/musterhq/muster/shared/action"
	"github.com/musterhq/muster/shared/tlsutil"
)

// serveSocket serves an API (requiring the core's certificate over TCP) on
// a Unix socket, with ConnContext, and returns a client of it.
func serveSocket(t *testing.T) (*http.Client, *queue.Queue) {
	t.Helper()
	dir := t.TempDir()
	q, err := queue.Open(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	reg, _ := handlers.NewRegistry(nil, handlers.Env{NodeID: "n1", ClusterID: "c1"})
	// Never started: actions stay NEW, which is all this test needs.
	run := runner.New(runner.Config{Queue: q, Handlers: reg, Actor: "n1", Idle: 20 * time.Millisecond,
		Metrics: runner.NewMetrics(exposition.NewRegistry())})
	core := tlsutil.Core()
	srv := New(Config{NodeID: "n1", ClusterID: "c1", Version: "test", DefaultTimeout: time.Hour,
		Queue: q, Runner: run, Kinds: reg, Caller: &core})
	path := filepath.Join(dir, "agent.sock")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: srv.Handler(), ConnContext: ConnContext}
	go func() { _ = hs.Serve(ln) }()
	t.Cleanup(func() { hs.Close(); q.Close() })
	return &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", path)
	}}}, q
}

// Item 4 of the attack review, docs/architecture.md, "Who may call an agent":
// over the socket the caller is who the kernel says (its uid's user), whatever
// the body claims; origin is agent, approved_by is empty, and the creation time
// is the agent's.
func TestSocketRecordsTheCallersUserAsRequester(t *testing.T) {
	t.Parallel()
	hc, q := serveSocket(t)
	me := PeerOfUID(os.Getuid()).User
	body := `{"kind":"muster.io/debug.ping","origin":"core","requester":"alice","approved_by":"bob\u001b[31mFORGED","created_ts":"2001-01-01T00:00:00Z"}`
	req, _ := http.NewRequest(http.MethodPost, "http://agent/api/v1/actions", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("push over the socket: %d", resp.StatusCode)
	}
	acts, _, _, err := q.Changes(context.Background(), 0, 10)
	if err != nil || len(acts) != 1 {
		t.Fatalf("queue: %v %v", acts, err)
	}
	a := acts[0]
	if a.Requester != me || a.Origin != action.OriginAgent || a.ApprovedBy != "" || a.CreatedTS.Year() < 2020 {
		t.Fatalf("recorded requester %q origin %q approved_by %q created %s; want %q, agent, none, now",
			a.Requester, a.Origin, a.ApprovedBy, a.CreatedTS, me)
	}
	// The socket needs no certificate, where TCP needs the core's.
	resp, err = hc.Get("http://agent/api/v1/info")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("info over the socket: %d", resp.StatusCode)
	}
	// A cancel names the caller too.
	req, _ = http.NewRequest(http.MethodPost, "http://agent/api/v1/actions/"+a.ID+"/cancel", nil)
	req.Header.Set("Content-Type", "application/json")
	resp, err = hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	got, err := q.Get(context.Background(), a.ID)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusAccepted || len(got.History) == 0 {
		t.Fatalf("cancel over the socket: %d, history %+v", resp.StatusCode, got.History)
	}
	if last := got.History[len(got.History)-1]; last.Actor != me {
		t.Fatalf("cancel recorded actor %q, want %q", last.Actor, me)
	}
}

// Issue 30, item 6: blocking GETs held over the socket are capped per user
// and, for every user but root and the agent's own, in all; root's waits
// are never refused for others'.
func TestSocketWaitsAreCappedPerUserAndInAllButNotForRoot(t *testing.T) {
	t.Parallel()
	const own = 999
	var w waitSlots
	for i := range MaxWaitsPerUser {
		if !w.take(1000, own) {
			t.Fatalf("wait %d of uid 1000 refused under its cap", i+1)
		}
	}
	if w.take(1000, own) {
		t.Fatal("uid 1000 holds more than MaxWaitsPerUser waits")
	}
	for uid := 1001; w.shared < MaxSocketWaits; uid++ {
		for range MaxWaitsPerUser {
			if w.shared < MaxSocketWaits && !w.take(uid, own) {
				t.Fatalf("uid %d refused under the caps", uid)
			}
		}
	}
	if w.take(5000, own) {
		t.Fatal("a new user holds a wait over MaxSocketWaits")
	}
	for _, uid := range []int{0, own} {
		for i := range MaxWaitsPerUser {
			if !w.take(uid, own) {
				t.Fatalf("uid %d's wait %d refused because others hold theirs", uid, i+1)
			}
		}
	}
	w.release(1000, own)
	if !w.take(5000, own) {
		t.Fatal("a released slot is not given back")
	}
}
