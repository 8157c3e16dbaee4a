package orchestrate

import (
	"context"
	"errors"
	"time"

	"github.com/musterhq/muster/core/runs"
	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/action"
)

// snapshot reads, in one snapshot, what a full sync talks to the agents
// from: every node of the cluster, their open actions, the paused runs
// among theirs and the budget's view. It returns the nodes in the order the
// full sync takes them: first those with an action to push or a cancel to
// send, so that an approval reaches its agent in the first batch, then the
// others.
func (o *Orchestrator) snapshot(ctx context.Context, cs *clusterState) ([]string, map[string]*nodeResult, error) {
	var first, rest []string
	snap := map[string]*nodeResult{}
	readAt := time.Now()
	err := o.st.Read(ctx, func(r store.Reader) error {
		if _, err := r.Cluster(ctx, cs.id); err != nil {
			return err
		}
		ns, err := r.Nodes(ctx, cs.id)
		if err != nil {
			return err
		}
		open, err := r.OpenActions(ctx, cs.id, "")
		if err != nil {
			return err
		}
		byNode := map[string][]store.Record{}
		busy := map[string]bool{}
		for _, a := range open {
			byNode[a.NodeID] = append(byNode[a.NodeID], a)
			if a.State == action.PendingSchedule || a.CancelRequested {
				busy[a.NodeID] = true
			}
		}
		paused, err := pausedRuns(ctx, r, cs.id, open)
		if err != nil {
			return err
		}
		procs, err := o.procedures(ctx, r, cs.id, readAt)
		if err != nil {
			return err
		}
		bv := o.newBudgetView(cs, ns, open, procs, readAt)
		g := o.newGate(cs.id, procs)
		for i := range ns {
			id := ns[i].ID
			snap[id] = &nodeResult{node: ns[i], open: byNode[id], pausedRuns: paused, budget: bv, gate: g}
			if busy[id] {
				first = append(first, id)
			} else {
				rest = append(rest, id)
			}
		}
		return nil
	})
	return append(first, rest...), snap, err
}

// prepare reads, in one snapshot, the named nodes, their open actions, the
// paused runs among theirs and, with a budget, the whole cluster for it.
// Unknown nodes are skipped.
func (o *Orchestrator) prepare(ctx context.Context, cs *clusterState, ids []string) ([]*nodeResult, error) {
	var out []*nodeResult
	readAt := time.Now()
	err := o.st.Read(ctx, func(r store.Reader) error {
		if _, err := r.Cluster(ctx, cs.id); err != nil {
			return err
		}
		_, hasBudget := o.cfg.Budget.Load().Limit(cs.id)
		var all []store.Node
		var open []store.Record
		var err error
		if hasBudget {
			if all, err = r.Nodes(ctx, cs.id); err != nil {
				return err
			}
			if open, err = r.OpenActions(ctx, cs.id, ""); err != nil {
				return err
			}
		}
		var mine []store.Record
		seen := map[string]bool{}
		for _, id := range ids {
			if seen[id] {
				continue
			}
			seen[id] = true
			n, err := r.Node(ctx, cs.id, id)
			if errors.Is(err, store.ErrNotFound) {
				continue
			} else if err != nil {
				return err
			}
			acts, err := r.OpenActions(ctx, cs.id, id)
			if err != nil {
				return err
			}
			out = append(out, &nodeResult{node: *n, open: acts})
		}
		for _, res := range out {
			mine = append(mine, res.open...)
		}
		paused, err := pausedRuns(ctx, r, cs.id, mine)
		if err != nil {
			return err
		}
		var bv *budgetView
		var procs *runs.Procedures
		if hasBudget || o.cfg.Calendars.Load().Of(cs.id) != nil {
			if procs, err = o.procedures(ctx, r, cs.id, readAt); err != nil {
				return err
			}
		}
		if hasBudget {
			bv = o.newBudgetView(cs, all, open, procs, readAt)
		}
		g := o.newGate(cs.id, procs)
		for _, res := range out {
			res.pausedRuns, res.budget, res.gate = paused, bv, g
		}
		return nil
	})
	return out, err
}

// forgetCluster drops the state of a cluster the store no longer has, once
// its loop parks.
func (o *Orchestrator) forgetCluster(id string) {
	o.mu.Lock()
	o.gone[id] = true
	o.mu.Unlock()
}
