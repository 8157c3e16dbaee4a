package orchestrate

import (
	"context"
	"slices"
	"time"

	"github.com/musterhq/muster/core/runs"
	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/action"
)

// Runs is what the orchestrator needs of the run engine (core/runs): it
// moves a cluster's runs on at every full sync and after every commit that
// changed something, so each wave is created by the loop's cluster and then
// pushed to the nodes it goes to, and expires runs nobody approved.
type Runs interface {
	// Active lists the ids of the cluster's runs that AdvanceIn may move on.
	Active(ctx context.Context, r store.Reader, clusterID string) ([]string, error)
	// AdvanceIn moves one run on: it creates the child actions its limits
	// admit now and settles its stages; it returns the node of every child
	// it created and writes nothing when nothing changed. It decides the
	// run's next step outside the write transaction and takes one of st
	// only to store it (under ctx's fencing epoch).
	AdvanceIn(ctx context.Context, st store.Store, runID string) ([]string, error)
	// Expire cancels the runs that waited for approval too long.
	Expire(ctx context.Context, tx store.Tx) (int, error)
}

// runSet names runs: some (ids), or all of a cluster's (nil ids, all set).
// The zero runSet names none.
type runSet struct {
	all bool
	ids map[string]bool
}

func allRuns() runSet { return runSet{all: true} }

// with adds run id.
func (s runSet) with(id string) runSet {
	if s.all {
		return s
	}
	if s.ids == nil {
		s.ids = map[string]bool{}
	}
	s.ids[id] = true
	return s
}

// union is s and t.
func (s runSet) union(t runSet) runSet {
	if s.all || t.all {
		return allRuns()
	}
	for id := range t.ids {
		s = s.with(id)
	}
	return s
}

func (s runSet) empty() bool { return !s.all && len(s.ids) == 0 }

// has reports whether s names run id.
func (s runSet) has(id string) bool { return s.all || s.ids[id] }

// advanceRuns moves the cluster's active runs named by only on (those
// whose children a commit changed, or all), each in its own transaction,
// decided before it (Runs.AdvanceIn): a run that cannot advance is logged
// and does not hold up the others or the sync. A run is read, its children
// with it, only when something it decides on may have changed; when one of
// those ends (here or through any other path: a cancel, an expiry) or
// releases a lock at the end of a stage, the others are advanced too (they
// may wait for its locks). It only reads when the cluster has none, so an idle full sync
// still writes nothing. It returns the nodes of the children it created,
// without repeats.
func (o *Orchestrator) advanceRuns(ctx context.Context, clusterID string, only runSet) []string {
	if o.cfg.Runs == nil {
		return nil
	}
	active := func() []string {
		var ids []string
		err := o.st.Read(ctx, func(r store.Reader) error {
			var err error
			ids, err = o.cfg.Runs.Active(ctx, r, clusterID)
			return err
		})
		if err != nil {
			if ctx.Err() == nil {
				o.log.Warn("list the runs to advance", "cluster", clusterID, "err", err)
			}
			return nil
		}
		return ids
	}
	ids := active()
	var created []string
	advanced := map[string]bool{}
	// freed: a named run released a lock (a stage of it ended), or ended:
	// the others may wait for its locks.
	freed := false
	for id := range only.ids {
		if !slices.Contains(ids, id) {
			freed = true // it became final elsewhere (a cancel, an expiry)
		}
	}
	advance := func(ids []string, only runSet) {
		for _, id := range ids {
			if !only.has(id) || advanced[id] {
				continue
			}
			advanced[id] = true
			o.metrics.runAdvances.Inc()
			var held []string
			if !only.all {
				held = o.runLocks(ctx, id)
			}
			nodes, err := o.cfg.Runs.AdvanceIn(ctx, o.st, id)
			if err != nil && ctx.Err() == nil {
				o.log.Warn("advance run", "cluster", clusterID, "run", id, "err", err)
			}
			if len(held) > 0 {
				now := o.runLocks(ctx, id)
				for _, k := range held {
					if !slices.Contains(now, k) {
						freed = true
					}
				}
			}
			created = append(created, nodes...) // those of the steps stored before an error too
		}
	}
	advance(ids, only)
	if !only.all && (freed || len(advanced) > 0) {
		now := active()
		for id := range advanced {
			if !slices.Contains(now, id) { // it ended
				freed = true
			}
		}
		if freed {
			advance(now, allRuns())
		}
	}
	if len(ids) > 0 {
		o.coreSteps.request(clusterID) // their gates and calls, beside the loop
	}
	slices.Sort(created)
	return slices.Compact(created)
}

// runLocks lists the keys of the locks run id holds (none when they cannot
// be read: then no release is seen, and the next full sync wakes the
// waiters).
func (o *Orchestrator) runLocks(ctx context.Context, id string) []string {
	var keys []string
	_ = o.st.Read(ctx, func(r store.Reader) error {
		locks, err := r.RunLocks(ctx, id)
		for _, l := range locks {
			keys = append(keys, l.Key)
		}
		return err
	})
	return keys
}

// expireRuns cancels the runs waiting for approval past its TTL.
func (o *Orchestrator) expireRuns(ctx context.Context) (int, error) {
	if o.cfg.Runs == nil {
		return 0, nil
	}
	n := 0
	err := o.st.Update(ctx, func(tx store.Tx) error {
		var err error
		n, err = o.cfg.Runs.Expire(ctx, tx)
		return err
	})
	return n, err
}

// pausedRuns lists the runs that hold their children not yet sent (core/runs).
func pausedRuns(ctx context.Context, r store.Reader, clusterID string, open []store.Record) (map[string]bool, error) {
	return runs.PausedRuns(ctx, r, clusterID, open)
}

// procedures reads, for a cluster with a budget or a calendar, the stages
// of its runs whose nodes the budget holds for their whole time in flight
// (and the windows hold at their first step), and those nodes
// (core/runs); nil without either.
func (o *Orchestrator) procedures(ctx context.Context, r store.Reader, clusterID string, now time.Time) (*runs.Procedures, error) {
	pol := o.cfg.Budget.Load()
	if _, ok := pol.Limit(clusterID); !ok && o.cfg.Calendars.Load().Of(clusterID) == nil {
		return nil, nil
	}
	return runs.InFlight(ctx, r, clusterID, now, pol.Procedure)
}

// onAgent reports whether an action in state s is in flight on its agent:
// pushed, not finished.
func onAgent(s action.State) bool { return s == action.New || s == action.Running }

// unfinishedChild reports whether a run's child in state s is one whose
// end a watch waits for: in flight (runs.InFlightStates: not sent yet, NEW
// or RUNNING).
func unfinishedChild(s action.State) bool { return slices.Contains(runs.InFlightStates, s) }
