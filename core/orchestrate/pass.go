package orchestrate

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/action"
)

// Report says what one pass did.
type Report struct {
	Cluster string
	// Nodes counts the nodes synced, Down those found unreachable or not who
	// they should be.
	Nodes, Down int
	// Pulled counts the records the agents returned; Pushed the actions the
	// agents accepted; Cancels the cancel requests they accepted.
	Pulled, Pushed, Cancels int
	// Changes counts the records, nodes and cluster written; Events the
	// events appended. Both are zero when the pass wrote nothing.
	Changes, Events int
	// Full is true when this pass compared id sets (every FullSyncEvery passes).
	Full bool
}

// Pass runs one orchestration pass of a cluster (docs/architecture.md,
// "Orchestration pass"). The cluster's runs first create the child actions
// their waves admit (in a transaction of their own, through core/actions), so
// that this pass pushes them; then three steps:
//
//  1. read, in one snapshot, the cluster, its nodes and their open actions;
//  2. talk to every node at once, bounded by NodeConcurrency (agentsync.go):
//     info, pull, push, cancels. Each push is marked in the store, in a
//     transaction of its own, before it is sent (see pushPending);
//  3. plan every write the agents' answers call for and commit it in one
//     Update (plan.go), or open no transaction at all when the answers
//     cannot change anything (mayWrite): the cost of an idle pass follows
//     change, not fleet size. Runs whose children finished in it may then
//     admit their next wave, which gets a pass of its own (a nudge).
//
// Passes of one cluster never overlap: a second call waits for the first.
// A sync of a few nodes alone (SyncNodes, nodesync.go) may run beside a
// pass, but never talks to a node while the pass does. The disruption
// budget (budget.go) is checked before every push of a disruptive action.
func (o *Orchestrator) Pass(ctx context.Context, clusterID string) (Report, error) {
	cs := o.cluster(clusterID)
	cs.mu.Lock()
	defer cs.mu.Unlock()
	start := time.Now()
	rep, err := o.pass(ctx, cs)
	o.metrics.observePass(time.Since(start), rep, err)
	return rep, err
}

func (o *Orchestrator) pass(ctx context.Context, cs *clusterState) (Report, error) {
	rep := Report{Cluster: cs.id, Full: cs.passes%o.cfg.FullSyncEvery == 0}
	// The runs' next waves are created first, so this pass pushes them.
	o.advanceRuns(ctx, cs.id)
	var nodes []nodeResult
	readAt := time.Now()
	err := o.st.Read(ctx, func(r store.Reader) error {
		if _, err := r.Cluster(ctx, cs.id); err != nil {
			return err
		}
		ns, err := r.Nodes(ctx, cs.id)
		if err != nil {
			return err
		}
		// One query for the cluster, not one per node.
		all, err := r.OpenActions(ctx, cs.id, "")
		if err != nil {
			return err
		}
		open := map[string][]store.Record{}
		for _, a := range all {
			open[a.NodeID] = append(open[a.NodeID], a)
		}
		paused, err := pausedRuns(ctx, r, cs.id, all)
		if err != nil {
			return err
		}
		bv := o.newBudgetView(cs, ns, all, readAt)
		for _, n := range ns {
			nodes = append(nodes, nodeResult{node: n, open: open[n.ID], pausedRuns: paused, budget: bv})
		}
		return nil
	})
	if err != nil {
		return rep, fmt.Errorf("pass of %s: %w", cs.id, err)
	}
	cs.passes++
	o.nodeClients(cs, nodes)

	var wg sync.WaitGroup
	sem := make(chan struct{}, o.cfg.NodeConcurrency)
	for _, i := range syncOrder(nodes) {
		if n := &nodes[i].node; store.DownByDiscovery(n) {
			// The gossip pool holds it DOWN: not contacted until the pool
			// sees it again.
			nodes[i].held, nodes[i].status, nodes[i].reason = true, n.Status, n.StatusReason
			continue
		}
		wg.Add(1)
		sem <- struct{}{}
		go func(res *nodeResult) {
			defer func() { <-sem; wg.Done() }()
			// A sync of this node alone (SyncNodes) waits, or is waited for.
			unlock, err := cs.lockNode(ctx, res.node.ID)
			if err != nil {
				return // shutdown: the pass ends below without writing
			}
			defer unlock()
			cs.smu.Lock()
			res.gen = cs.gens[res.node.ID]
			cs.smu.Unlock()
			o.syncNode(ctx, res, rep.Full)
		}(&nodes[i])
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return rep, err // answers cut short by shutdown are not the agents' word
	}

	if err := o.commit(ctx, cs, nodes, true, &rep); err != nil {
		return rep, fmt.Errorf("pass of %s: %w", cs.id, err)
	}
	if len(nodes) > 0 {
		o.nudgeHeld(nodes[0].budget) // the budget's held actions, once another ended
	}
	// Children that finished in this pass may admit the next wave: create it
	// now and ask for the pass that pushes it.
	if o.advanceRuns(ctx, cs.id) > 0 {
		o.Nudge(cs.id)
	}
	return rep, nil
}

// commit counts what the node syncs of nodes learnt into rep, then plans
// and writes it in one Update, or opens no write transaction when the
// answers cannot change anything (mayWrite). whole is true for a pass over
// every node of the cluster: only such a pass decides the cluster's status.
// A sync of a few nodes alone (SyncNodes) commits through here too.
//
// A pass releases a node once it has talked to it, so a sync of that node
// alone (SyncNodes) may commit newer answers before the pass commits: the
// pass then drops what it learnt of that node, which would undo them, and
// treats the node as not contacted.
func (o *Orchestrator) commit(ctx context.Context, cs *clusterState, nodes []nodeResult, whole bool, rep *Report) error {
	cs.commitMu.Lock()
	defer cs.commitMu.Unlock()
	now := action.UTC(time.Now())
	cs.smu.Lock()
	if whole {
		for i := range nodes {
			if res := &nodes[i]; !res.held && cs.gens[res.node.ID] != res.gen {
				res.held, res.ops, res.status, res.reason = true, nil, res.node.Status, res.node.StatusReason
			}
		}
	}
	for _, res := range nodes {
		rep.Nodes++
		if res.status != store.NodeUp {
			rep.Down++
		} else {
			cs.lastContact[res.node.ID] = now
		}
		rep.Pulled += res.pulled
		rep.Pushed += res.pushed
		rep.Cancels += res.cancels
	}
	cs.smu.Unlock()

	write, err := o.mayWrite(ctx, cs, nodes, now, whole)
	if err != nil || !write {
		return err
	}
	var w *writePlan
	err = o.st.Update(ctx, func(tx store.Tx) error {
		var err error
		if w, err = o.plan(ctx, tx, cs, nodes, now, whole); err != nil {
			return err
		}
		return w.apply(ctx, tx)
	})
	if err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	for _, wn := range w.warnings {
		o.log.Warn(wn[0].(string), wn[1:]...)
	}
	cs.smu.Lock()
	for i := range nodes {
		if !nodes[i].held {
			cs.gens[nodes[i].node.ID]++
		}
	}
	cs.smu.Unlock()
	rep.Changes, rep.Events = w.changes(), len(w.events)+w.actionEvents()
	return nil
}

// mayWrite reports whether the answers of a pass can change anything: an
// agent reported or refused an action (whether that changes a record is
// decided by plan, in the write transaction), or, as read now, a node's
// status or bookkeeping or the cluster's status would move. When it says
// no, the pass opens no write transaction.
func (o *Orchestrator) mayWrite(ctx context.Context, cs *clusterState, nodes []nodeResult, now time.Time, whole bool) (bool, error) {
	for i := range nodes {
		if len(nodes[i].ops) > 0 {
			return true, nil
		}
	}
	w := newWritePlan()
	err := o.st.Read(ctx, func(r store.Reader) error {
		return planStatus(ctx, r, cs, nodes, 0, now, whole, w)
	})
	return len(w.nodes) > 0 || w.cluster != nil, err
}
