package orchestrate

import (
	"context"
	"time"

	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/action"
	"github.com/musterhq/muster/shared/startstop"
)

// Run polls (docs/architecture.md, "Node syncs and reactive progress"): the
// safety net under the run watches (watch.go).

// runPoller polls the nodes of running runs, a shared/startstop part.
type runPoller struct {
	*startstop.Func
	o       *Orchestrator
	watches *watches
	nudge   func(clusterID, nodeID string)
}

var _ startstop.Service = (*runPoller)(nil)

func newRunPoller(o *Orchestrator, w *watches, nudge func(clusterID, nodeID string)) *runPoller {
	p := &runPoller{o: o, watches: w, nudge: nudge}
	p.Func = startstop.NewFunc(p.run)
	return p
}

// runBusy reads the nodes of the cluster (every cluster when "") that hold
// an unfinished child of a running run: cluster → node → whether the agent
// has it (NEW or RUNNING; false: not sent yet).
func runBusy(ctx context.Context, r store.Reader) (map[string]map[string]bool, error) {
	busy := map[string]map[string]bool{}
	running, err := r.RunsInStateBrief(ctx, "", store.RunRunning)
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

// run, every RunPoll until ctx ends, asks for a sync of each node that
// holds an unfinished (NEW or RUNNING) child of a running run: that node
// alone, so the end of a child is seen within RunPoll, not at the next full sync,
// whether or not gossip notes come. A node whose watcher's agent holds its
// requests (watch.go) tells of its ends itself, and is polled only every
// watchedPollEvery RunPolls, as a safety net. Each tick also starts and
// stops the watchers of every cluster. A cluster with no running run costs
// one read a tick for all clusters.
func (p *runPoller) run(ctx context.Context) {
	o := p.o
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
		p.watches.reconcile(busy, nil, readAt)
		for c, nodes := range busy {
			for n, onAgent := range nodes {
				if !onAgent || (tick%watchedPollEvery != 0 && p.watches.live(nodeKey{c, n})) {
					continue
				}
				p.nudge(c, n)
			}
		}
	}
}
