package orchestrate

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/testwait"
)

// coreRuns is a Runs with one active run whose core steps, once armed,
// report a change once and a next moment due soon.
type coreRuns struct {
	gatedRuns
	steps    atomic.Int32
	advanced atomic.Int32
	changed  atomic.Bool
}

func (c *coreRuns) AdvanceIn(context.Context, store.Store, string) ([]string, error) {
	c.advanced.Add(1)
	return nil, nil
}

func (c *coreRuns) RunCore(context.Context, store.Store, string) (bool, time.Time, error) {
	c.steps.Add(1)
	return c.changed.CompareAndSwap(true, false), time.Time{}, nil
}

// TestCoreStepsRunOnlyUnderTheLeaseAndAdvanceTheRuns: the core's gates and
// calls are run beside the loop only by the replica holding the cluster's
// lease; a change they record makes the cluster's runs advance.
func TestCoreStepsRunOnlyUnderTheLeaseAndAdvanceTheRuns(t *testing.T) {
	t.Parallel()
	r := &coreRuns{}
	l := &leases{}
	h := setup(t, Config{Runs: r, Interval: time.Hour, Leases: l}, "n1")
	h.start()
	h.o.coreSteps.request(cluster)
	testwait.For(t, "the stepper to ask for the lease", func() bool { return l.calls.Load() > 0 && !h.o.coreSteps.busy(cluster) })
	if n := r.steps.Load(); n != 0 {
		t.Fatalf("%d core passes without the lease, want none", n)
	}
	l.held.Store(true)
	r.changed.Store(true)
	before := r.advanced.Load()
	h.o.coreSteps.request(cluster)
	testwait.For(t, "a core pass, then an advance of the runs it changed", func() bool {
		return r.steps.Load() > 0 && r.advanced.Load() > before
	})
}
