// Package agenttest runs real agents (agent.New and Run, a real SQLite queue
// and a real listener on loopback) inside another package's tests.
package agenttest

import (
	"context"
	"sync"
	"testing"

	"github.com/musterhq/muster/agent"
)

// Running is an agent started by Start.
type Running struct {
	// Addr is the API's host:port.
	Addr string

	once sync.Once
	stop func()
}

// Stop stops the agent and waits for Run to return; it is idempotent, and
// the test's cleanup calls it too.
func (r *Running) Stop() { r.once.Do(r.stop) }

// Start runs an agent with cfg until the test ends or Stop is called; it
// returns once the API listens. An error from New or Run fails the test.
func Start(t testing.TB, cfg agent.Config) *Running {
	t.Helper()
	a, err := agent.New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	select {
	case <-a.Ready():
	case err := <-done:
		cancel()
		t.Fatalf("agent %s: %v", cfg.NodeID, err)
	}
	r := &Running{Addr: a.Addr().String(), stop: func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("agent %s: %v", cfg.NodeID, err)
		}
	}}
	t.Cleanup(r.Stop)
	return r
}
