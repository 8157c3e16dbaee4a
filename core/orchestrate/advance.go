package orchestrate

import (
	"context"
	"sync"
)

// advancers move the clusters' runs on beside their loops
// (docs/architecture.md, "One loop per cluster"): after a commit of a
// cluster's loop that may let a run move on, the loop asks for an advance
// (request) and goes on; the advance runs in the cluster's advancer, its own
// goroutine, under the lease's fencing epoch, and nudges the nodes of the
// children it created.
type advancers struct {
	o     *Orchestrator
	nudge func(clusterID, nodeID string)

	mu      sync.Mutex
	running map[string]bool // cluster → its advancer runs
	again   map[string]bool // cluster → a request came while it ran
	closed  bool
	wg      sync.WaitGroup
}

func newAdvancers(o *Orchestrator, nudge func(clusterID, nodeID string)) *advancers {
	return &advancers{o: o, nudge: nudge, running: map[string]bool{}, again: map[string]bool{}}
}

// request asks for the cluster's runs to be moved on soon, and the nodes of
// the children that creates to be synced. Requests that come while an
// advance runs merge into one more advance after it, which sees every child
// that ended meanwhile. It never blocks.
func (a *advancers) request(clusterID string) {
	if a.o.cfg.Runs == nil {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.running[clusterID] {
		a.again[clusterID] = true
		return
	}
	if a.closed {
		return
	}
	a.running[clusterID] = true
	a.wg.Add(1)
	go a.run(clusterID)
}

// busy reports whether the cluster's advancer runs.
func (a *advancers) busy(clusterID string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.running[clusterID]
}

// run is a cluster's advancer: it moves the cluster's runs on until no
// request waits.
func (a *advancers) run(clusterID string) {
	defer a.wg.Done()
	o := a.o
	for {
		if ctx, done, ok := o.leaseContext(o.runCtx(), clusterID); ok {
			a.advance(ctx, clusterID)
			done()
		}
		a.mu.Lock()
		if a.again[clusterID] && !a.closed {
			delete(a.again, clusterID)
			a.mu.Unlock()
			continue
		}
		delete(a.running, clusterID)
		delete(a.again, clusterID)
		a.mu.Unlock()
		return
	}
}

// advance moves the cluster's runs on and nudges the nodes of the children
// it created.
func (a *advancers) advance(ctx context.Context, clusterID string) {
	for _, n := range a.o.advanceRuns(ctx, clusterID) {
		a.nudge(clusterID, n)
	}
}

// close refuses new advances: an advancer that runs ends after its advance.
func (a *advancers) close() {
	a.mu.Lock()
	a.closed = true
	a.mu.Unlock()
}

// wait waits for the advancers that run.
func (a *advancers) wait() { a.wg.Wait() }
