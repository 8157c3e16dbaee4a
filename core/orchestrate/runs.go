package orchestrate

import (
	"context"

	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/action"
)

// Runs is what the orchestrator needs of the run engine (core/runs): it
// moves a cluster's runs on at every pass, so each wave is created inside
// the pass that then pushes it, and expires runs nobody approved.
type Runs interface {
	// Active lists the ids of the cluster's runs that Advance may move on.
	Active(ctx context.Context, r store.Reader, clusterID string) ([]string, error)
	// Advance moves one run on: it creates the child actions its limits
	// admit now and settles its stages; it returns how many children it
	// created and writes nothing when nothing changed.
	Advance(ctx context.Context, tx store.Tx, runID string) (int, error)
	// Expire cancels the runs that waited for approval too long.
	Expire(ctx context.Context, tx store.Tx) (int, error)
}

// advanceRuns moves the cluster's active runs on, each in its own
// transaction: a run that cannot advance is logged and does not hold up the
// others or the pass. It only reads when the cluster has none, so an idle
// pass still writes nothing.
func (o *Orchestrator) advanceRuns(ctx context.Context, clusterID string) int {
	if o.cfg.Runs == nil {
		return 0
	}
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
		return 0
	}
	created := 0
	for _, id := range ids {
		var n int // set again if the store runs the transaction again
		err := o.st.Update(ctx, func(tx store.Tx) error {
			var err error
			n, err = o.cfg.Runs.Advance(ctx, tx, id)
			return err
		})
		if err != nil {
			if ctx.Err() == nil {
				o.log.Warn("advance run", "cluster", clusterID, "run", id, "err", err)
			}
			continue
		}
		created += n
	}
	return created
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

// pausedRuns lists, among the runs of the open actions, those that are not
// RUNNING, so that their children not yet sent wait. It reads only when an
// open action belongs to a run.
func pausedRuns(ctx context.Context, r store.Reader, clusterID string, open []store.Record) (map[string]bool, error) {
	ids := map[string]bool{}
	for i := range open {
		if open[i].RunID != "" && open[i].State == action.PendingSchedule && open[i].PushedStoreID == "" {
			ids[open[i].RunID] = true
		}
	}
	if len(ids) == 0 {
		return nil, nil
	}
	running, err := r.RunsInState(ctx, clusterID, store.RunRunning)
	if err != nil {
		return nil, err
	}
	for _, run := range running {
		delete(ids, run.ID)
	}
	return ids, nil
}
