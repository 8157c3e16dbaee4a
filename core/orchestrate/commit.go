package orchestrate

import (
	"context"
	"fmt"
	"time"

	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/action"
)

// commit counts what the node syncs of nodes learnt into rep, then plans
// and writes it in one Update, or opens no write transaction when the
// answers cannot change anything (mayWrite). whole is true for the last
// commit of a full sync: only it decides the cluster's status, with lost,
// the actions the full sync's earlier commits made LOST. It returns how
// many actions this commit made LOST.
func (o *Orchestrator) commit(ctx context.Context, cs *clusterState, nodes []nodeResult, whole bool, lost int, rep *Report) (int, error) {
	now := action.UTC(o.cfg.Now())
	for _, res := range nodes {
		if res.ackSent.storeID != "" {
			cs.acked[res.node.ID] = res.ackSent
		}
		rep.Nodes++
		if res.quiet {
			rep.Quiet++
		}
		if res.status != store.NodeUp {
			rep.Down++
		} else if !res.held {
			cs.lastContact[res.node.ID] = now
		}
		rep.Pulled += res.pulled
		rep.Pushed += res.pushed
		rep.Cancels += res.cancels
	}
	write, err := o.mayWrite(ctx, cs, nodes, now, whole, lost)
	if err != nil || !write {
		if err == nil {
			noteCounters(cs, nodes)
			o.watches.sent(cs.id, nodes, nil)
		}
		return 0, err
	}
	var w *writePlan
	err = o.st.Update(ctx, func(tx store.Tx) error {
		var err error
		if w, err = o.plan(ctx, tx, cs, nodes, now, whole, lost); err != nil {
			return err
		}
		return w.apply(ctx, tx)
	})
	if err != nil {
		return 0, fmt.Errorf("commit: %w", err)
	}
	noteCounters(cs, nodes)
	for _, wn := range w.warnings {
		o.log.Warn(wn[0].(string), wn[1:]...)
	}
	o.watches.sent(cs.id, nodes, w)
	rep.Changes += w.changes()
	rep.runMoves += w.runMoves()
	rep.moved = rep.moved.union(w.movedRuns())
	rep.Events += len(w.events) + w.actionEvents()
	return w.lost, nil
}

// mayWrite reports whether the answers of a sync can change anything: an
// agent reported or refused an action (whether that changes a record is
// decided by plan, in the write transaction), or, as read now, a node's
// status or bookkeeping or the cluster's status would move. When it says
// no, the sync opens no write transaction.
func (o *Orchestrator) mayWrite(ctx context.Context, cs *clusterState, nodes []nodeResult, now time.Time, whole bool, lost int) (bool, error) {
	for i := range nodes {
		if len(nodes[i].ops) > 0 {
			return true, nil
		}
	}
	w := newWritePlan()
	if !whole {
		// The nodes as read before their agents were talked to: nothing
		// else writes them meanwhile but discovery and people, whose
		// changes no sync's write would need to follow.
		stored := make(map[string]*store.Node, len(nodes))
		for i := range nodes {
			n := nodes[i].node
			stored[n.ID] = &n
		}
		err := o.planStatus(ctx, nil, cs, nodes, stored, lost, now, false, w)
		return len(w.nodes) > 0, err
	}
	err := o.st.Read(ctx, func(r store.Reader) error {
		stored, err := storedNodes(ctx, r, cs.id, nodes)
		if err != nil {
			return err
		}
		return o.planStatus(ctx, r, cs, nodes, stored, lost, now, whole, w)
	})
	return len(w.nodes) > 0 || w.cluster != nil || len(w.reaped) > 0, err
}
