package ops

import (
	"context"
	"time"

	"github.com/musterhq/muster/core/budget"
	"github.com/musterhq/muster/core/runs"
	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/wire"
)

// The run as people see it: what the transports read of core/runs, so
// that they render runs without reaching the engine that changes them.

// RunInFlightStates are the states of a run's child that is in flight.
var RunInFlightStates = runs.InFlightStates

// RunView is run r as the API shows it, with the children counts has.
func RunView(r *store.Run, counts []store.ChildCount) wire.Run { return runs.View(r, counts) }

// RunNotIn is, by stage index, the nodes of run r's cluster (read in rd)
// that match a stage's target now but are not among its nodes
// (runs.NotInRun): a run's views name the nodes it leaves alone.
func RunNotIn(ctx context.Context, rd store.Reader, r *store.Run) (map[int][]string, error) {
	if !runs.NeedsNodes(r) {
		return nil, nil
	}
	nodes, err := rd.Nodes(ctx, r.ClusterID)
	if err != nil {
		return nil, err
	}
	return runs.NotInRun(r, nodes), nil
}

// RunNotInRun fills RunNotIn into v, the view of run r.
func RunNotInRun(ctx context.Context, rd store.Reader, r *store.Run, v *wire.Run) error {
	notIn, err := RunNotIn(ctx, rd, r)
	for i, ids := range notIn {
		if i < len(v.Stages) {
			v.Stages[i].NotInRun = ids
		}
	}
	return err
}

// RunGrid is the cells (stage × node) of run r's children.
func RunGrid(r *store.Run, children []store.Record) []wire.RunChild { return runs.Grid(r, children) }

// RunGridOf is RunGrid over the cells keep keeps.
func RunGridOf(r *store.Run, children []store.Record, keep func(stage, node string) bool) []wire.RunChild {
	return runs.GridOf(r, children, keep)
}

// RunNodes are the nodes of run r, in order, each once.
func RunNodes(r *store.Run) []string { return runs.Nodes(r) }

// RunNodePage is the page of nodes after marker, at most limit; ok is false
// when marker is not one of nodes.
func RunNodePage(nodes []string, marker string, limit int) (page []string, next string, ok bool) {
	return runs.NodePage(nodes, marker, limit)
}

// RunPausedFor says why run r is PAUSED (wire.Paused*).
func RunPausedFor(r *store.Run) string { return runs.PausedFor(r) }

// RunWave is the wave of the i-th node of a stage of concurrency c.
func RunWave(i, c int) int { return runs.Wave(i, c) }

// RunTally counts stage st of run r from counts, started nodes started.
func RunTally(r *store.Run, st *store.RunStage, counts []store.ChildCount, started int) runs.StageCounts {
	return runs.Tally(r, st, counts, started)
}

// RunChildFailed reports whether a finished child of a run approved by
// approvedBy counts as its node's error (a failure, or content its agent
// replaced).
func RunChildFailed(rec *store.Record, approvedBy string) bool {
	return rec.State.Final() && runs.IsError(runs.ChildOf(rec, approvedBy))
}

// BudgetUsage is the disruption budget of policy p in use on cluster
// clusterID (nil when it has none): its nodes unavailable, counting the
// nodes in flight in a procedure the budget holds whole (runs.InFlight), as
// the orchestrator counts them. The caller loads p once for what it shows.
func BudgetUsage(ctx context.Context, r store.Reader, p budget.Policy, clusterID string, nodes []store.Node,
	open []store.Record) (*budget.Usage, error) {
	if _, ok := p.Limit(clusterID); !ok {
		return nil, nil
	}
	procs, err := runs.InFlight(ctx, r, clusterID, time.Now(), p.Procedure)
	if err != nil {
		return nil, err
	}
	return p.UsageWith(clusterID, nodes, open, procs.InFlight), nil
}

// What a run's stage says to do on failure and with an unavailable node.
const (
	RunOnFailurePause  = runs.OnFailurePause
	RunUnavailableSkip = runs.UnavailableSkip
	RunUnavailableFail = runs.UnavailableFail
)
