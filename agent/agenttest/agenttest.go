// Package agenttest runs real agents (agent.New and Run, a real SQLite queue
// and a real listener on loopback) inside another package's tests.
package agenttest

import (
	"testing"

	"github.com/musterhq/muster/agent"
	"github.com/musterhq/muster/shared/apiserver/apiservertest"
)

// Running is an agent started by Start.
type Running struct {
	// Addr is the API's host:port.
	Addr string

	stop func()
}

// Stop stops the agent and waits for Run to return; it is idempotent, and
// the test's cleanup calls it too.
func (r *Running) Stop() { r.stop() }

// Start runs an agent with cfg until the test ends or Stop is called; it
// returns once the API listens (apiservertest.Start). An error from New or
// Run fails the test.
func Start(t testing.TB, cfg agent.Config) *Running {
	t.Helper()
	a, err := agent.New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	stop := apiservertest.Start(t, a)
	return &Running{Addr: a.Addr().String(), stop: stop}
}
