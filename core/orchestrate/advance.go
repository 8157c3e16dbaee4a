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
	running map[string]bool   // cluster → its advancer runs
	pending map[string]runSet // cluster → the runs asked for and not advanced yet
	closed  bool
	wg      sync.WaitGroup
}

func newAdvancers(o *Orchestrator, nudge func(clusterID, nodeID string)) *advancers {
	return &advancers{o: o, nudge: nudge, running: map[string]bool{}, pending: map[string]runSet{}}
}

// request asks for all the cluster's runs to be moved on soon, and the
// nodes of the children that creates to be synced (requestRuns).
func (a *advancers) request(clusterID string) { a.requestRuns(clusterID, allRuns()) }

// requestRuns asks for the runs of the cluster named by runs to be moved on
// soon: only those are read (a commit that changed the children of one run
// does not read the others'). Requests that come while an advance runs
// merge into one more advance after it, which sees every child that ended
// meanwhile. It never blocks.
func (a *advancers) requestRuns(clusterID string, runs runSet) {
	if a.o.cfg.Runs == nil || runs.empty() {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.pending[clusterID] = a.pending[clusterID].union(runs)
	if a.running[clusterID] || a.closed {
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
		a.mu.Lock()
		runs := a.pending[clusterID]
		delete(a.pending, clusterID)
		if runs.empty() || a.closed {
			delete(a.running, clusterID)
			a.mu.Unlock()
			return
		}
		a.mu.Unlock()
		if ctx, done, ok := o.leaseContext(o.runCtx(), clusterID); ok {
			a.advance(ctx, clusterID, runs)
			done()
		}
	}
}

// advance moves the cluster's runs named by runs on and nudges the nodes
// of the children it created.
func (a *advancers) advance(ctx context.Context, clusterID string, runs runSet) {
	for _, n := range a.o.advanceRuns(ctx, clusterID, runs) {
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
