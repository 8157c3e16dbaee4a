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
	// Active lists the ids of the cluster's runs that Advance may move on.
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

// advanceRuns moves the cluster's active runs on, each in its own
// transaction, decided before it (Runs.AdvanceIn): a run that cannot advance is logged and does not hold up the
// others or the pass. It only reads when the cluster has none, so an idle
// pass still writes nothing. It returns the nodes of the children it
// created, without repeats.
func (o *Orchestrator) advanceRuns(ctx context.Context, clusterID string) []string {
	if o.cfg.Runs == nil {
		return nil
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
		return nil
	}
	var created []string
	for _, id := range ids {
		nodes, err := o.cfg.Runs.AdvanceIn(ctx, o.st, id)
		if err != nil && ctx.Err() == nil {
			o.log.Warn("advance run", "cluster", clusterID, "run", id, "err", err)
		}
		created = append(created, nodes...) // those of the steps stored before an error too
	}
	slices.Sort(created)
	return slices.Compact(created)
}

// requestAdvance asks for the cluster's runs to be moved on soon, and the
// nodes of the children that creates to be synced (docs/architecture.md,
// "One loop per cluster"). The advance runs beside the loop, in its own
// goroutine, under the lease's fencing epoch, so that a commit of the loop
// never waits for it: requests that come while it runs merge into one more
// advance after it, which sees every child that ended meanwhile. It never
// blocks.
func (o *Orchestrator) requestAdvance(cs *clusterState) {
	if o.cfg.Runs == nil {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if cs.advancing {
		cs.advanceAgain = true
		return
	}
	if o.closed {
		return
	}
	cs.advancing = true
	o.loops.Add(1)
	go o.advancer(cs)
}

// advancer moves the cluster's runs on until no request waits.
func (o *Orchestrator) advancer(cs *clusterState) {
	defer o.loops.Done()
	for {
		if ctx, done, ok := o.passContext(o.runCtx(), cs.id); ok {
			o.advanceAndNudge(ctx, cs.id)
			done()
		}
		o.mu.Lock()
		if cs.advanceAgain && !o.closed {
			cs.advanceAgain = false
			o.mu.Unlock()
			continue
		}
		cs.advancing, cs.advanceAgain = false, false
		o.mu.Unlock()
		return
	}
}

// advanceAndNudge moves the cluster's runs on and asks for a sync of the
// nodes of the children it created; it returns them.
func (o *Orchestrator) advanceAndNudge(ctx context.Context, clusterID string) []string {
	nodes := o.advanceRuns(ctx, clusterID)
	for _, n := range nodes {
		o.NudgeNode(clusterID, n)
	}
	return nodes
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

// runBusy reads the nodes of the cluster (every cluster when "") that hold
// an unfinished child of a running run: cluster → node → whether the agent
// has it (NEW or RUNNING; false: not sent yet).
func runBusy(ctx context.Context, r store.Reader) (map[string]map[string]bool, error) {
	busy := map[string]map[string]bool{}
	running, err := r.RunsInState(ctx, "", store.RunRunning)
	if err != nil || len(running) == 0 {
		return busy, err
	}
	ids := map[string]bool{}
	clusters := map[string]bool{}
	for _, run := range running {
		ids[run.ID], clusters[run.ClusterID] = true, true
	}
	for c := range clusters {
		open, err := r.OpenActions(ctx, c, "")
		if err != nil {
			return nil, err
		}
		for i := range open {
			a := &open[i]
			if !ids[a.RunID] || !unfinishedChild(a.State) {
				continue
			}
			if busy[c] == nil {
				busy[c] = map[string]bool{}
			}
			busy[c][a.NodeID] = busy[c][a.NodeID] || a.State != action.PendingSchedule
		}
	}
	return busy, nil
}

// pollRuns, every RunPoll until ctx ends, asks for a sync of each node that
// holds an unfinished (NEW or RUNNING) child of a running run: that node
// alone, so the end of a child is seen within RunPoll, not at the next pass,
// whether or not gossip notes come. A node whose watcher's agent holds its
// requests (watch.go) tells of its ends itself, and is polled only every
// watchedPollEvery RunPolls, as a safety net. Each tick also starts and
// stops the watchers of every cluster. A cluster with no running run costs
// one read a tick for all clusters.
func (o *Orchestrator) pollRuns(ctx context.Context) {
	if o.cfg.Runs == nil {
		return
	}
	t := time.NewTicker(o.cfg.RunPoll)
	defer t.Stop()
	for tick := 1; ; tick++ {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		readAt := time.Now()
		var busy map[string]map[string]bool // cluster → nodes
		err := o.st.Read(ctx, func(r store.Reader) error {
			var err error
			busy, err = runBusy(ctx, r)
			return err
		})
		if err != nil {
			if ctx.Err() == nil {
				o.log.Warn("poll the nodes of running runs", "err", err)
			}
			continue
		}
		o.reconcileWatches(busy, nil, readAt)
		for c, nodes := range busy {
			for n, onAgent := range nodes {
				if !onAgent || (tick%watchedPollEvery != 0 && o.liveWatch(nodeKey{c, n})) {
					continue
				}
				o.NudgeNode(c, n)
			}
		}
	}
}
