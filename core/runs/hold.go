package runs

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/musterhq/muster/core/actions"
	"github.com/musterhq/muster/core/budget"
	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/action"
)

// A run that is not RUNNING (paused, or waiting for approval again) holds
// its children not yet sent: they go when it runs again. What was already
// sent to an agent runs on; the agent decides it.

// PausedRuns lists, among the runs of the open actions, those that hold
// their children not yet sent. It reads only when one of the actions is a
// run's child not yet sent.
func PausedRuns(ctx context.Context, r store.Reader, clusterID string, open []store.Record) (map[string]bool, error) {
	ids := map[string]bool{}
	for i := range open {
		if open[i].RunID != "" && open[i].State == action.PendingSchedule && open[i].PushedStoreID == "" {
			ids[open[i].RunID] = true
		}
	}
	if len(ids) == 0 {
		return nil, nil
	}
	running, err := r.RunsInStateBrief(ctx, clusterID, store.RunRunning)
	if err != nil {
		return nil, err
	}
	for _, run := range running {
		delete(ids, run.ID)
	}
	return ids, nil
}

// HoldsChild reports whether the action r waits for its run: a child not
// yet sent whose run is among paused (PausedRuns).
func HoldsChild(paused map[string]bool, r *store.Record) bool {
	return r.RunID != "" && r.PushedStoreID == "" && paused[r.RunID]
}

// Procedures are the stages of a cluster's active runs whose nodes the
// disruption budget holds for their whole time in flight (budget.Policy's
// Procedure decides which), and the nodes in flight in them now.
type Procedures struct {
	// Stages holds "run id/stage name" of every such stage.
	Stages map[string]bool
	// InFlight holds the nodes in flight in one of them.
	InFlight map[string]bool
	// started holds "run id/stage/node" of every node of such a stage
	// with a child pushed: its procedure has begun.
	started map[string]bool
}

// Started reports whether r is a child of such a stage on a node whose
// procedure has begun (a child of it was pushed): a maintenance window
// that closed meanwhile lets it finish its steps.
func (p *Procedures) Started(r *store.Record) bool {
	return p != nil && r.RunID != "" && p.started[r.RunID+"/"+r.Stage+"/"+r.NodeID]
}

// Holds reports whether r is a child of one of the stages, whose push
// waits for the budget whatever its kind.
func (p *Procedures) Holds(r *store.Record) bool {
	return p != nil && r.RunID != "" && p.Stages[r.RunID+"/"+r.Stage]
}

// InFlight reads the RUNNING and PAUSED runs of a cluster and returns, among
// their started stages for which holds(kinds of its steps and rollback) is
// true, the stages and their nodes in flight at now: from the push of a
// node's first child until its procedure ended (soak included). A node
// whose children were created but none pushed yet is not in flight: its
// push waits for the budget.
func InFlight(ctx context.Context, r store.Reader, clusterID string, now time.Time, holds func(kinds []string) bool) (*Procedures, error) {
	p := &Procedures{Stages: map[string]bool{}, InFlight: map[string]bool{}, started: map[string]bool{}}
	active, err := r.RunsInState(ctx, clusterID, store.RunRunning, store.RunPaused)
	if err != nil {
		return nil, err
	}
	var labels map[string]map[string]string
	for ri := range active {
		run := &active[ri]
		var kids []Child
		started := map[string]bool{} // stage/node with a child pushed
		loaded := false
		for si := range run.Stages {
			st := &run.Stages[si]
			if st.State != store.StageRunning || !holds(st.Kinds()) {
				continue
			}
			p.Stages[run.ID+"/"+st.Name] = true
			if !loaded {
				recs, err := r.RunChildrenBrief(ctx, run.ID)
				if err != nil {
					return nil, err
				}
				kids = make([]Child, len(recs))
				for i := range recs {
					kids[i] = ChildOf(&recs[i], run.ApprovedBy)
					if recs[i].State != action.PendingSchedule || recs[i].PushedStoreID != "" {
						started[recs[i].Stage+"/"+recs[i].NodeID] = true
					}
				}
				loaded = true
			}
			if labels == nil && hasTemplates(st) {
				nodes, err := r.Nodes(ctx, clusterID)
				if err != nil {
					return nil, err
				}
				labels = map[string]map[string]string{}
				for _, n := range nodes {
					labels[n.ID] = n.Labels
				}
			}
			for _, n := range st.Nodes {
				if started[st.Name+"/"+n] {
					p.started[run.ID+"/"+st.Name+"/"+n] = true
				}
			}
			v := viewStage(st, kids, PlanEnv{Now: now, Labels: labels}, nil)
			for i, ns := range v.nodes {
				if ns.status == nodeBusy && started[st.Name+"/"+st.Nodes[i]] {
					p.InFlight[st.Nodes[i]] = true
				}
			}
		}
	}
	return p, nil
}

// A running run whose next nodes are held says so in its own state_reason,
// after the reason it runs for: "approved; waiting: node n1 is drained".
// The part after waitingSep is refreshed at every advance of the run
// (after every commit that held, refreshed or sent one of its children)
// and dropped once nothing holds it. What holds it:
//   - a child not yet sent that the disruption budget holds, that waits
//     for its drained node, for the cluster's maintenance window, the end
//     of a freeze or its not_before (the child's own state_reason, set by
//     core/actions.Hold);
//   - a node whose turn came while it was DOWN or drained, in a stage that
//     waits for it (unavailable: wait).
const waitingSep = "; waiting: "

// WithWaiting is reason with its waiting part replaced by waiting (dropped
// when waiting is "").
func WithWaiting(reason, waiting string) string {
	base, _, _ := strings.Cut(reason, waitingSep)
	if i := strings.Index(reason, lockSep); i >= 0 && i < len(base) {
		// The locks it waits for are said by each advance that finds
		// them held (withLocks).
		base = reason[:i]
	}
	if waiting == "" {
		return base
	}
	return base + waitingSep + waiting
}

// Waiting says what holds the next nodes of run r, whose children are kids,
// in env; "" when nothing does.
func Waiting(r *store.Run, kids []Child, env PlanEnv) string {
	var budgeted, drained, down, calendar []string
	usage, when := "", ""
	for i := range kids {
		c := &kids[i]
		if c.State != action.PendingSchedule {
			continue
		}
		switch {
		case c.Reason == actions.ReasonDrained:
			drained = append(drained, c.Node)
		case action.HeldForTime(c.Reason):
			calendar = append(calendar, c.Node)
			if when == "" {
				when = c.Reason
			}
		case strings.HasPrefix(c.Reason, budget.HeldPrefix):
			budgeted = append(budgeted, c.Node)
			if usage == "" {
				usage = strings.TrimPrefix(strings.TrimPrefix(c.Reason, budget.HeldPrefix), ": ")
			}
		}
	}
	for i := range r.Stages {
		st := &r.Stages[i]
		if st.State != store.StageRunning {
			continue
		}
		for node, u := range st.Unreachable {
			if u.As != UnavailableWait || !env.Unavailable[node] || started(kids, st.Name, node) {
				continue
			}
			if env.Drained[node] {
				drained = append(drained, node)
			} else {
				down = append(down, node)
			}
		}
	}
	var parts []string
	if len(calendar) > 0 {
		parts = append(parts, fmt.Sprintf("%s held: %s", strings.TrimSuffix(strings.TrimSuffix(nodeList(calendar), " is"), " are"), when))
	}
	if len(budgeted) > 0 {
		s := fmt.Sprintf("%s held by the disruption budget of cluster %s", nodeList(budgeted), r.ClusterID)
		if usage != "" {
			s += ": " + usage
		}
		parts = append(parts, s)
	}
	if len(drained) > 0 {
		parts = append(parts, nodeList(drained)+" drained")
	}
	if len(down) > 0 {
		parts = append(parts, nodeList(down)+" DOWN")
	}
	return strings.Join(parts, "; ")
}

// started reports whether node has a child in stage.
func started(kids []Child, stage, node string) bool {
	for i := range kids {
		if kids[i].Stage == stage && kids[i].Node == node {
			return true
		}
	}
	return false
}

// nodeList names nodes, sorted and without repeats, the first three of
// them, with the verb: "node n1 is", "nodes n1, n2 are".
func nodeList(nodes []string) string {
	slices.Sort(nodes)
	nodes = slices.Compact(nodes)
	switch {
	case len(nodes) == 1:
		return "node " + nodes[0] + " is"
	case len(nodes) > 3:
		return "nodes " + strings.Join(nodes[:3], ", ") + fmt.Sprintf(" and %d more are", len(nodes)-3)
	}
	return "nodes " + strings.Join(nodes, ", ") + " are"
}
