package orchestrate

import (
	"context"
	"time"

	"github.com/musterhq/muster/core/runs"
	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/action"
)

// Runs is what the orchestrator needs of the run engine (core/runs): it
// moves a cluster's runs on at every full sync and after every commit that
// changed something, so each wave is created by the loop that then pushes
// it, and expires runs nobody approved.
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

// pausedRuns lists the runs that hold their children not yet sent (core/runs).
func pausedRuns(ctx context.Context, r store.Reader, clusterID string, open []store.Record) (map[string]bool, error) {
	return runs.PausedRuns(ctx, r, clusterID, open)
}

// procedures reads, for a cluster with a budget or a calendar, the stages
// of its runs whose nodes the budget holds for their whole time in flight
// (and the windows hold at their first step), and those nodes
// (core/runs); nil without either.
func (o *Orchestrator) procedures(ctx context.Context, r store.Reader, clusterID string, now time.Time) (*runs.Procedures, error) {
	if _, ok := o.cfg.Budget.Limit(clusterID); !ok && o.cfg.Calendars.Of(clusterID) == nil {
		return nil, nil
	}
	return runs.InFlight(ctx, r, clusterID, now, o.cfg.Budget.Procedure)
}

// nudgeUnsent asks for a sync of every node of the cluster with an action
// not yet sent: after a run's next wave was created, the nodes it goes to.
func (o *Orchestrator) nudgeUnsent(ctx context.Context, clusterID string) {
	nodes := map[string]bool{}
	err := o.st.Read(ctx, func(r store.Reader) error {
		open, err := r.OpenActions(ctx, clusterID, "")
		for i := range open {
			if a := &open[i]; a.State == action.PendingSchedule && a.PushedStoreID == "" {
				nodes[a.NodeID] = true
			}
		}
		return err
	})
	if err != nil {
		if ctx.Err() == nil {
			o.log.Warn("list the actions to push", "cluster", clusterID, "err", err)
		}
		return
	}
	for n := range nodes {
		o.NudgeNode(clusterID, n)
	}
}

// pollRuns, every RunPoll until ctx ends, asks for a sync of each node that
// holds an unfinished (NEW or RUNNING) child of a running run: that node
// alone, so the end of a child is seen within RunPoll, not at the next pass,
// whether or not gossip notes come. A cluster with no running run costs one
// read a tick for all clusters.
func (o *Orchestrator) pollRuns(ctx context.Context) {
	if o.cfg.Runs == nil {
		return
	}
	t := time.NewTicker(o.cfg.RunPoll)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		busy := map[string]map[string]bool{} // cluster → nodes
		err := o.st.Read(ctx, func(r store.Reader) error {
			running, err := r.RunsInState(ctx, "", store.RunRunning)
			if err != nil || len(running) == 0 {
				return err
			}
			ids := map[string]bool{}
			clusters := map[string]bool{}
			for _, run := range running {
				ids[run.ID], clusters[run.ClusterID] = true, true
			}
			for c := range clusters {
				open, err := r.OpenActions(ctx, c, "")
				if err != nil {
					return err
				}
				for i := range open {
					a := &open[i]
					if ids[a.RunID] && (a.State == action.New || a.State == action.Running) {
						if busy[c] == nil {
							busy[c] = map[string]bool{}
						}
						busy[c][a.NodeID] = true
					}
				}
			}
			return nil
		})
		if err != nil {
			if ctx.Err() == nil {
				o.log.Warn("poll the nodes of running runs", "err", err)
			}
			continue
		}
		for c, nodes := range busy {
			for n := range nodes {
				o.NudgeNode(c, n)
			}
		}
	}
}
