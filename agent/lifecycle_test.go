package agent

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/musterhq/muster/agent/queue"
	"github.com/musterhq/muster/shared/action"
	"github.com/musterhq/muster/shared/apiserver/apiservertest"
	"github.com/musterhq/muster/shared/client"
	"github.com/musterhq/muster/shared/testwait"
	"github.com/musterhq/muster/shared/wire"
)

// startAgent runs an agent on a loopback TCP API (plaintext, insecure) with
// the given shutdown_timeout, and returns it with the channel Run's result
// arrives on and the function that ends Run's context.
func startAgent(t *testing.T, shutdown time.Duration) (*Agent, Config, <-chan error, context.CancelFunc) {
	t.Helper()
	cfg := DefaultConfig()
	cfg.NodeID, cfg.ClusterID, cfg.DataDir = "n1", "c1", t.TempDir()
	cfg.API.Addr, cfg.API.Insecure = "127.0.0.1:0", true
	cfg.ShutdownTimeout = shutdown
	ag, err := New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	done := make(chan error, 1)
	go func() { done <- ag.Run(ctx) }()
	select {
	case <-ag.Ready():
	case err := <-done:
		t.Fatalf("Run: %v", err)
	}
	return ag, cfg, done, cancel
}

// TestRunStopsEveryPartAndClosesTheQueue: after its context ends, Run stops
// its parts and returns nil, and the queue it closed opens again with the
// action the runner finished.
func TestRunStopsEveryPartAndClosesTheQueue(t *testing.T) {
	t.Parallel()
	ag, cfg, done, cancel := startAgent(t, 10*time.Second)
	id := pingDone(t, ag)
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run returned %v", err)
	}
	if _, err := net.DialTimeout("tcp", ag.Addr().String(), time.Second); err == nil {
		t.Fatal("the API still accepts connections after Run returned")
	}
	q, err := queue.Open(context.Background(), cfg.DataDir)
	if err != nil {
		t.Fatalf("the queue does not open again: %v", err)
	}
	defer q.Close()
	if got, err := q.Get(context.Background(), id); err != nil || got.State != action.Done {
		t.Fatalf("after restart: %v, %v", got, err)
	}
}

// TestRunReportsAPartThatDoesNotStopInTime: a request that never completes
// keeps the API from stopping; Run gives up at shutdown_timeout (not a
// hard-coded wait) and says which part failed, and the queue still closes.
func TestRunReportsAPartThatDoesNotStopInTime(t *testing.T) {
	t.Parallel()
	ag, _, done, cancel := startAgent(t, 300*time.Millisecond)
	c, err := net.Dial("tcp", ag.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	apiservertest.HoldRequest(t, c, "")
	start := time.Now()
	cancel()
	var runErr error
	select {
	case runErr = <-done:
	case <-time.After(testwait.Timeout):
		t.Fatal("Run did not return")
	}
	if !errors.Is(runErr, context.DeadlineExceeded) || !strings.Contains(runErr.Error(), "stop api") {
		t.Fatalf("Run = %v, want the api's deadline", runErr)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("Run took %s to give up, with a shutdown_timeout of 300ms", d)
	}
}

// pingDone pushes a muster.io/debug.ping to ag, waits until it is DONE and
// returns its id.
func pingDone(t *testing.T, ag *Agent) string {
	t.Helper()
	cl := client.NewAgent(ag.Addr().String(), nil)
	a, _, err := cl.Push(context.Background(), &wire.PushRequest{ID: action.NewID(), Kind: "muster.io/debug.ping"})
	if err != nil {
		t.Fatal(err)
	}
	testwait.For(t, "the ping to finish", func() bool {
		got, err := cl.Get(context.Background(), a.ID)
		return err == nil && got.State == action.Done
	})
	return a.ID
}
