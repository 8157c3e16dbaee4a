package orchestrate

import (
	"context"
	"sync"
	"time"

	"github.com/musterhq/muster/core/store"
)

// Core-side steps (docs/architecture.md, "Runs and playbooks"): the gates
// and calls of a cluster's runs are evaluated beside its loop, never in
// it, by the cluster's core stepper: its own goroutine under the lease's
// fencing epoch (only the replica holding the cluster's lease evaluates),
// as the advancers are. After every advance of a cluster with active runs
// the stepper is asked to run (requests merge); what it records makes
// the runs advance again, and a timer asks again when a gate under watch,
// a soak or a retry is next due.

// CoreRunner is what the orchestrator needs of a run engine that runs
// core-side steps (core/runs' Engine); a Runs without it has none.
type CoreRunner interface {
	// RunCore evaluates what is due of the cluster's gates and calls and
	// records the verdicts: whether it changed a run, and when something
	// is next due (zero: nothing waits).
	RunCore(ctx context.Context, st store.Store, clusterID string) (changed bool, next time.Time, err error)
}

type coreSteppers struct {
	o *Orchestrator
	// advance asks for the cluster's runs to advance (advancers.request).
	advance func(clusterID string)

	mu      sync.Mutex
	running map[string]bool
	again   map[string]bool
	timers  map[string]coreTimer
	closed  bool
	wg      sync.WaitGroup
}

type coreTimer struct {
	at time.Time
	t  *time.Timer
}

func newCoreSteppers(o *Orchestrator, advance func(clusterID string)) *coreSteppers {
	return &coreSteppers{o: o, advance: advance, running: map[string]bool{}, again: map[string]bool{}, timers: map[string]coreTimer{}}
}

// runner is the engine's CoreRunner, or nil.
func (c *coreSteppers) runner() CoreRunner {
	r, _ := c.o.cfg.Runs.(CoreRunner)
	return r
}

// request asks for the cluster's core steps to be run soon. It never
// blocks.
func (c *coreSteppers) request(clusterID string) {
	if c.runner() == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return
	}
	if c.running[clusterID] {
		c.again[clusterID] = true
		return
	}
	c.running[clusterID] = true
	c.wg.Add(1)
	go c.run(clusterID)
}

// busy reports whether the cluster's stepper runs.
func (c *coreSteppers) busy(clusterID string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.running[clusterID]
}

// run is a cluster's stepper: it runs until no request waits.
func (c *coreSteppers) run(clusterID string) {
	defer c.wg.Done()
	o := c.o
	for {
		if ctx, done, ok := o.leaseContext(o.runCtx(), clusterID); ok {
			changed, next, err := c.runner().RunCore(ctx, o.st, clusterID)
			done()
			if err != nil && ctx.Err() == nil {
				o.log.Warn("run the core's steps", "cluster", clusterID, "err", err)
			}
			if changed {
				c.advance(clusterID)
			}
			c.at(clusterID, next)
		}
		c.mu.Lock()
		if c.again[clusterID] && !c.closed {
			delete(c.again, clusterID)
			c.mu.Unlock()
			continue
		}
		delete(c.running, clusterID)
		delete(c.again, clusterID)
		c.mu.Unlock()
		return
	}
}

// at arms the cluster's timer for at (the earliest wins): the cluster's
// runs advance then (a retry is admitted by the planner), and so its
// steps run.
func (c *coreSteppers) at(clusterID string, at time.Time) {
	if at.IsZero() {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return
	}
	now := time.Now()
	if cur, ok := c.timers[clusterID]; ok {
		if !cur.at.After(at) && cur.at.After(now) {
			return
		}
		cur.t.Stop()
	}
	t := time.AfterFunc(max(at.Sub(now), 0)+wakeSlack, func() {
		c.mu.Lock()
		delete(c.timers, clusterID)
		c.mu.Unlock()
		c.advance(clusterID)
	})
	c.timers[clusterID] = coreTimer{at: at, t: t}
}

// close refuses new requests and stops the timers.
func (c *coreSteppers) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	for id, t := range c.timers {
		t.t.Stop()
		delete(c.timers, id)
	}
}

func (c *coreSteppers) wait() { c.wg.Wait() }
