package orchestrate

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/musterhq/muster/core/actions"
	"github.com/musterhq/muster/core/nodes"
	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/action"
	"github.com/musterhq/muster/shared/labels"
)

// This file plans the writes of a commit of a cluster's loop: it turns what
// the agents said (the ops of every nodeResult) into action changes, made by
// core/actions, and into node and cluster updates. plan is pure: it reads
// through the Tx it is given and changes nothing but the plan it returns; it
// runs once per commit, inside the commit's write transaction, against the
// store as it is then.

// writePlan is everything a commit must write, in order.
type writePlan struct {
	lost    int // actions this plan makes LOST
	records map[string]*actions.Change
	order   []string
	nodes   []store.Node
	// nodesMoved: a node changed beyond its agent's bookkeeping (cursor,
	// store id, last contact): what a run may decide on (movedRuns).
	nodesMoved bool
	cluster    *store.Cluster
	events     []store.Event // node and cluster events; action events ride with their change
	// reaped are the nodes of cluster reapIn to forget (reap), DOWN past
	// reapAfter; written before the cluster.
	reaped    []string
	reapIn    string
	reapAfter time.Duration
	// warnings are logged once the plan is committed: a transaction the
	// store runs again plans again, and must not log twice.
	warnings [][]any
}

// warn keeps a warning (a message and its key-value pairs) for after the commit.
func (w *writePlan) warn(msg string, args ...any) {
	w.warnings = append(w.warnings, append([]any{msg}, args...))
}

func newWritePlan() *writePlan {
	return &writePlan{records: map[string]*actions.Change{}}
}

func (w *writePlan) changes() int {
	n := len(w.order) + len(w.nodes) + len(w.reaped)
	if w.cluster != nil {
		n++
	}
	return n
}

// runMoves counts the changes that may let a run move on: all but those of
// a run's child that was started or reports progress (RUNNING before and
// after, or NEW to RUNNING), which change nothing a run's advance decides
// on (docs/architecture.md, "One loop per cluster").
func (w *writePlan) runMoves() int {
	n := len(w.nodes)
	if w.cluster != nil {
		n++
	}
	for _, c := range w.records {
		started := c.Rec.RunID != "" && c.Rec.State == action.Running && !c.Insert && !c.Lost
		for _, t := range c.History {
			started = started && t.To == action.Running
		}
		if !started {
			n++
		}
	}
	return n
}

// movedRuns names the runs this plan's changes may let move on (those of
// runMoves): the runs of the children that changed, or every run (all)
// when a node, the cluster or an action outside any run changed, which any
// run may wait for.
func (w *writePlan) movedRuns() (ids runSet) {
	if w.nodesMoved || len(w.reaped) > 0 || w.cluster != nil {
		return allRuns()
	}
	for _, c := range w.records {
		if c.Rec.RunID == "" {
			return allRuns()
		}
		started := c.Rec.State == action.Running && !c.Insert && !c.Lost
		for _, t := range c.History {
			started = started && t.To == action.Running
		}
		if !started {
			ids = ids.with(c.Rec.RunID)
		}
	}
	return ids
}

func (w *writePlan) actionEvents() int {
	n := 0
	for _, c := range w.records {
		n += len(c.Events)
	}
	return n
}

// record returns the record as this plan has it so far, or as stored (nil
// when there is none).
func (w *writePlan) record(ctx context.Context, r store.Reader, id string) (*store.Record, error) {
	if c, ok := w.records[id]; ok {
		rec := c.Rec
		return &rec, nil
	}
	rec, err := r.Action(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	return rec, err
}

// add merges a change into the plan: a later change of the same record was
// decided against the earlier one's result.
func (w *writePlan) add(c *actions.Change) {
	if prev, ok := w.records[c.Rec.ID]; ok {
		prev.Then(c)
		return
	}
	w.records[c.Rec.ID] = c
	w.order = append(w.order, c.Rec.ID)
}

// decide makes the change an op calls for on cur (nil: none). cur is nil
// when the core has no record of the id.
func decide(o *op, cur *store.Record, node *store.Node, storeID string, now time.Time) *actions.Change {
	if cur == nil {
		if o.kind == opAgent {
			return actions.Import(o.rec, node, now)
		}
		return nil
	}
	switch o.kind {
	case opAgent:
		return actions.Adopt(cur, o.rec, node.ID, now)
	case opGone:
		return actions.LoseGone(cur, now)
	case opLost:
		return actions.LoseMissing(cur, now)
	case opRefused:
		return actions.Refused(cur, node.ID, o.msg, now)
	case opReapprove:
		return actions.Reapprove(cur, now)
	case opCancelled:
		return actions.SettleCancel(cur, now)
	case opUnconfirmed:
		return actions.LoseUnconfirmed(cur, storeID, now)
	case opHeld:
		return actions.Hold(cur, o.msg, now)
	}
	return nil
}

// plan computes, against what r reads, every write the results call for.
// whole is true for the last commit of a full sync, which decides the
// cluster's status given lost, the actions its earlier commits made LOST.
func (o *Orchestrator) plan(ctx context.Context, r store.Reader, cs *clusterState, results []nodeResult, now time.Time, whole bool, lost int) (*writePlan, error) {
	w := newWritePlan()
	for i := range results {
		res := &results[i]
		node := &res.node
		for j := range res.ops {
			op := &res.ops[j]
			cur, err := w.record(ctx, r, op.id)
			if err != nil {
				return nil, err
			}
			if cur != nil && (cur.ClusterID != node.ClusterID || cur.NodeID != node.ID) {
				w.warn("agent reports an action the core has on another node; ignored",
					"cluster", node.ClusterID, "node", node.ID, "action", op.id,
					"core_cluster", cur.ClusterID, "core_node", cur.NodeID)
				continue
			}
			c := decide(op, cur, node, res.storeID, now)
			if c == nil {
				continue
			}
			if cur != nil && cur.State.Final() && c.Rec.State != cur.State {
				w.warn("the agent's record overrides a final state of the core",
					"cluster", node.ClusterID, "node", node.ID, "action", op.id,
					"core_state", cur.State, "core_reason", cur.StateReason, "agent_state", c.Rec.State)
			}
			w.add(c)
			if c.Lost {
				w.lost++
			}
		}
	}
	stored, err := storedNodes(ctx, r, cs.id, results)
	if err != nil {
		return nil, err
	}
	if err := o.planStatus(ctx, r, cs, results, stored, lost+w.lost, now, whole, w); err != nil {
		return nil, err
	}
	return w, nil
}

// planStatus adds to w the node and cluster updates, and their events, that
// the results call for against stored (the synced nodes as stored), given
// the actions the full sync made LOST. r is read for the cluster and its
// DOWN nodes when whole. The
// cluster's status is decided by the last commit of a full sync (whole)
// only, from every node as it now stands. A node's last contact is stored
// with any other change of the node (its status going DOWN), or alone once
// it is ContactEvery older than the one the loop keeps, when ContactEvery
// is set (by default never: an idle fleet writes nothing).
func (o *Orchestrator) planStatus(ctx context.Context, r store.Reader, cs *clusterState, results []nodeResult, stored map[string]*store.Node, lost int, now time.Time, whole bool, w *writePlan) error {
	down := map[string]bool{}
	if whole {
		// Every DOWN node as stored; the results below override theirs.
		ids, err := r.DownNodes(ctx, cs.id)
		if err != nil {
			return err
		}
		for _, id := range ids {
			down[id] = true
		}
	}
	for i := range results {
		res := &results[i]
		node := &res.node
		fresh, ok := stored[node.ID]
		if !ok {
			continue // removed by discovery meanwhile
		}
		next, write, isDown := nodeNext(fresh, res)
		down[node.ID] = isDown
		if !write {
			continue
		}
		t, contacted := cs.lastContact[node.ID]
		stale := contacted && (fresh.LastContact == nil ||
			o.cfg.ContactEvery > 0 && t.Sub(*fresh.LastContact) >= o.cfg.ContactEvery)
		if sameNode(fresh, &next) && !stale {
			continue
		}
		switch {
		case contacted:
			next.LastContact = &t
		case next.Status == store.NodeDown && fresh.Status != store.NodeDown:
			// No contact since this loop began (a restart, a lease
			// taken over): the stored one is the node's last change, maybe
			// days old, not its last contact. Its DOWN time is the
			// transition's (muster_core_node_down_since_timestamp_seconds).
			next.LastContact = &now
		}
		next.UpdatedTS = now
		w.nodes = append(w.nodes, next)
		bookkept := *fresh // as stored, with the agent's bookkeeping of next
		bookkept.Cursor, bookkept.StoreID = next.Cursor, next.StoreID
		w.nodesMoved = w.nodesMoved || !sameNode(&bookkept, &next)
		if len(res.schemasRefused) > 0 && !sameSchemas(fresh.ArgsSchemas, next.ArgsSchemas) {
			w.events = append(w.events, schemaRefusedEvent(&next, res.schemasRefused))
		}
		if fresh.Status != next.Status {
			typ := store.EventNodeUp
			msg := fmt.Sprintf("node %s is up", node.ID)
			if next.Status == store.NodeDown {
				typ, msg = store.EventNodeDown, fmt.Sprintf("node %s is down: %s", node.ID, next.StatusReason)
			}
			w.events = append(w.events, store.Event{Type: typ, Actor: actions.ActorCore, ClusterID: node.ClusterID,
				NodeID: node.ID, Message: msg, Data: map[string]any{"reason": next.StatusReason}})
		}
	}

	if !whole {
		return nil
	}
	cluster, err := r.Cluster(ctx, cs.id)
	if errors.Is(err, store.ErrNotFound) {
		return nil
	} else if err != nil {
		return err
	}
	var downIDs []string
	for id, d := range down {
		if d {
			downIDs = append(downIDs, id)
		}
	}
	sort.Strings(downIDs)
	reaped, err := o.reap(ctx, r, cs.id, downIDs, w, now)
	if err != nil {
		return err
	}
	if len(reaped) > 0 {
		downIDs = slices.DeleteFunc(downIDs, func(id string) bool { return slices.Contains(reaped, id) })
	}
	missing, err := o.missing(ctx, r, cs.id, w.nodes, now)
	if err != nil {
		return err
	}
	if next, changed := clusterNext(cluster, downIDs, lost, missing); changed {
		next.UpdatedTS = now
		w.cluster = &next
		if next.Status != cluster.Status {
			typ, msg := store.EventClusterHealthy, fmt.Sprintf("cluster %s is healthy", cs.id)
			if next.Status == store.ClusterAlert {
				typ, msg = store.EventClusterAlert, fmt.Sprintf("cluster %s: %s", cs.id, next.StatusReason)
			}
			w.events = append(w.events, store.Event{Type: typ, Actor: actions.ActorCore, ClusterID: cs.id, Message: msg,
				Data: map[string]any{"reason": next.StatusReason}})
		}
	}
	return nil
}

// schemaRefusedEvent records that the core refuses args schemas n
// announced (why, by kind): those kinds are unusable on n.
func schemaRefusedEvent(n *store.Node, why map[string]string) store.Event {
	kinds := slices.Sorted(maps.Keys(why))
	return store.Event{Type: store.EventNodeSchemaRefused, Actor: actions.ActorCore, ClusterID: n.ClusterID, NodeID: n.ID,
		Message: fmt.Sprintf("node %s: the core refuses the args_schema of %s, unusable on it until fixed: %s",
			n.ID, strings.Join(kinds, ", "), why[kinds[0]]),
		Data: map[string]any{"refused": why}}
}

// nodeNext returns the node stored as res says it should now be. write is
// false when discovery holds the node DOWN (it was not contacted, or
// discovery marked it during the sync): discovery alone writes it until the
// pool sees it again. isDown says whether the node counts as DOWN for the
// cluster's status.
func nodeNext(stored *store.Node, res *nodeResult) (next store.Node, write, isDown bool) {
	next = *stored
	if res.quiet {
		return next, false, false // its change counter did not move: as stored, UP
	}
	if res.held || store.DownByDiscovery(stored) {
		return next, false, stored.Status == store.NodeDown
	}
	next.Status, next.StatusReason, next.DownCause = res.status, res.reason, ""
	if res.status == store.NodeUp {
		kinds := slices.Clone(res.info.Kinds)
		sort.Strings(kinds)
		next.StoreID, next.Cursor, next.Kinds, next.Version = res.storeID, res.cursor, kinds, res.info.Version
		next.ArgsSchemas = nil
		if len(res.info.ArgsSchemas) > 0 {
			next.ArgsSchemas = maps.Clone(res.info.ArgsSchemas)
		}
		next.Secrets = nil
		if len(res.info.Secrets) > 0 {
			next.Secrets = slices.Sorted(slices.Values(res.info.Secrets))
		}
		if res.storeID == stored.StoreID && res.cursor < stored.Cursor {
			next.Cursor = stored.Cursor // a sync of this node alone committed a later one meanwhile
		}
		next.Labels = nodes.Labels(nil, res.labels, stored.CoreLabels)
	}
	return next, true, res.status != store.NodeUp
}

// reap adds to w the nodes of the cluster to forget as of now (DOWN past
// ReapAfter, not declared, above the floor: nodes.Membership.Reapable),
// and returns their ids. down are the cluster's DOWN nodes as this sync
// leaves them: only they are read, unless the cluster declares a count
// (the floor counts every node matching its selector). It runs in the
// lease holder's full sync, whose commit is fenced: one replica reaps.
func (o *Orchestrator) reap(ctx context.Context, r store.Reader, clusterID string, down []string, w *writePlan, now time.Time) ([]string, error) {
	if o.cfg.ReapAfter <= 0 || len(down) == 0 {
		return nil, nil
	}
	var m nodes.Membership
	if o.cfg.Members != nil {
		m = o.cfg.Members.Load()
	}
	var all []store.Node
	if m[clusterID].Count > 0 {
		var err error
		if all, err = r.Nodes(ctx, clusterID); err != nil {
			return nil, err
		}
	} else {
		for _, id := range down {
			n, err := r.Node(ctx, clusterID, id)
			if errors.Is(err, store.ErrNotFound) {
				continue
			} else if err != nil {
				return nil, err
			}
			all = append(all, *n)
		}
	}
	for _, u := range w.nodes {
		for i := range all {
			if all[i].ID == u.ID {
				all[i] = u
			}
		}
	}
	ids := m.Reapable(clusterID, all, o.cfg.ReapAfter, now)
	if len(ids) == 0 {
		return nil, nil
	}
	w.nodes = slices.DeleteFunc(w.nodes, func(n store.Node) bool { return slices.Contains(ids, n.ID) })
	w.reaped, w.reapIn, w.reapAfter = ids, clusterID, o.cfg.ReapAfter
	return ids, nil
}

// missing is the status reason the cluster's declared membership gives it
// ("" when nothing is missing or nothing is declared), from its nodes as
// stored with updated (this sync's writes) laid over them.
func (o *Orchestrator) missing(ctx context.Context, r store.Reader, clusterID string, updated []store.Node, now time.Time) (string, error) {
	if o.cfg.Members == nil {
		return "", nil
	}
	m := o.cfg.Members.Load()
	if _, ok := m[clusterID]; !ok {
		return "", nil
	}
	all, err := r.Nodes(ctx, clusterID)
	if err != nil {
		return "", err
	}
	for _, u := range updated {
		for i := range all {
			if all[i].ID == u.ID {
				all[i] = u
			}
		}
	}
	members, _ := m.Of(clusterID, all, now)
	return members.Alert(), nil
}

// clusterNext returns the cluster's status given its DOWN nodes (sorted),
// the actions this full sync made LOST and its missing declared nodes (a
// status reason, "" when none), and whether it changed.
func clusterNext(cur *store.Cluster, down []string, lost int, missing string) (store.Cluster, bool) {
	next := *cur
	next.Status, next.StatusReason = store.ClusterHealthy, ""
	var why []string
	if len(down) > 0 {
		why = append(why, "down: "+strings.Join(down, ", "))
	}
	if missing != "" {
		why = append(why, missing)
	}
	if lost > 0 {
		why = append(why, fmt.Sprintf("%d action(s) lost", lost))
	}
	if len(why) > 0 {
		next.Status, next.StatusReason = store.ClusterAlert, strings.Join(why, "; ")
	}
	return next, next.Status != cur.Status || next.StatusReason != cur.StatusReason
}

func sameNode(a, b *store.Node) bool {
	return a.Status == b.Status && a.StatusReason == b.StatusReason && a.DownCause == b.DownCause && a.StoreID == b.StoreID &&
		a.Cursor == b.Cursor && slices.Equal(a.Kinds, b.Kinds) && a.Version == b.Version && sameSchemas(a.ArgsSchemas, b.ArgsSchemas) &&
		slices.Equal(a.Secrets, b.Secrets) &&
		a.Addr == b.Addr && a.Source == b.Source && labels.Equal(a.Labels, b.Labels)
}

func sameSchemas(a, b map[string]json.RawMessage) bool {
	return maps.EqualFunc(a, b, func(x, y json.RawMessage) bool { return bytes.Equal(x, y) })
}

// apply writes the plan in tx: every action change with its history and
// events (actions.Write), then the nodes, the cluster and their events.
func (w *writePlan) apply(ctx context.Context, tx store.Tx) error {
	for _, id := range w.order {
		if err := actions.Write(ctx, tx, w.records[id]); err != nil {
			return err
		}
	}
	for i := range w.nodes {
		if err := nodes.Save(ctx, tx, &w.nodes[i]); err != nil {
			return err
		}
	}
	for _, id := range w.reaped {
		if err := nodes.Reap(ctx, tx, w.reapIn, id, w.reapAfter); err != nil {
			return err
		}
	}
	if w.cluster != nil {
		if err := tx.PutCluster(ctx, w.cluster); err != nil {
			return err
		}
	}
	for i := range w.events {
		if err := tx.AppendEvent(ctx, &w.events[i]); err != nil {
			return err
		}
	}
	return nil
}

// storedNodes reads the stored nodes a commit needs: the synced ones. (The
// last commit of a full sync, which decides the cluster's status, reads the
// names of the DOWN nodes beside them, never every node whole: at 10,000
// nodes that read held the loop, and the write lock, for tens of
// milliseconds; docs/performance.md.)
func storedNodes(ctx context.Context, r store.Reader, clusterID string, results []nodeResult) (map[string]*store.Node, error) {
	out := make(map[string]*store.Node, len(results))
	for i := range results {
		n, err := r.Node(ctx, clusterID, results[i].node.ID)
		if errors.Is(err, store.ErrNotFound) {
			continue
		} else if err != nil {
			return nil, err
		}
		out[n.ID] = n
	}
	return out, nil
}
