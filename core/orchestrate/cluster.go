package orchestrate

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/musterhq/muster/core/store"
)

// The requests to the clusters' loops (docs/architecture.md, "One loop per
// cluster"): a full sync (the scheduler's, or FullSync), a sync of a few
// nodes (SyncNodes, NudgeNode). Each is put in its cluster's state and the
// loop is started, or woken (kick); the loop (loop.go) turns them into
// syncs.

// kick starts the cluster's loop, or wakes it. o.mu is held.
func (o *Orchestrator) kick(cs *clusterState) {
	if cs.running {
		cs.wakeLoop()
		return
	}
	if o.closed {
		return
	}
	cs.running = true
	o.loops.Add(1)
	go o.loop(cs)
}

// FullSync runs a full sync of a cluster (docs/architecture.md, "One loop
// per cluster") through its loop, under ctx, and waits for it. Full syncs of
// one cluster run one after the other.
func (o *Orchestrator) FullSync(ctx context.Context, clusterID string) (Report, error) {
	return o.call(ctx, clusterID, &direct{full: true})
}

// SyncNodes syncs the named nodes of a cluster through its loop, under ctx,
// and waits for it: info, pull, push, cancels, and one commit. Unknown node
// ids are skipped. It never lists every record of an agent (that is the full
// syncs' job), and never changes the cluster's status.
func (o *Orchestrator) SyncNodes(ctx context.Context, clusterID string, nodeIDs []string) (Report, error) {
	return o.call(ctx, clusterID, &direct{nodes: slices.Clone(nodeIDs)})
}

func (o *Orchestrator) call(ctx context.Context, clusterID string, d *direct) (Report, error) {
	rep := Report{Cluster: clusterID}
	if !d.full {
		// A note may name any cluster: keep no state for one the store lacks.
		err := o.st.Read(ctx, func(r store.Reader) error {
			_, err := r.Cluster(ctx, clusterID)
			return err
		})
		if errors.Is(err, store.ErrNotFound) {
			return rep, nil
		} else if err != nil {
			return rep, fmt.Errorf("sync of %s nodes: %w", clusterID, err)
		}
	}
	d.ctx, d.reply = ctx, make(chan syncDone, 1)
	o.mu.Lock()
	if o.closed {
		o.mu.Unlock()
		return rep, ErrStopped
	}
	cs := o.clusterLocked(clusterID)
	cs.directs = append(cs.directs, d)
	o.kick(cs)
	o.mu.Unlock()
	select {
	case done := <-d.reply:
		return done.rep, done.err
	case <-ctx.Done():
		return rep, ctx.Err()
	}
}

// scheduledFullSync asks the cluster's loop for a full sync under the
// cluster's lease and waits for it (the scheduler's; those asked for
// meanwhile and not started make one); ok is false when this replica does
// not hold the lease.
func (o *Orchestrator) scheduledFullSync(ctx context.Context, clusterID string) (rep Report, ok bool, err error) {
	reply := make(chan syncDone, 1)
	o.mu.Lock()
	cs := o.clusterLocked(clusterID)
	cs.fullWait = append(cs.fullWait, reply)
	o.kick(cs)
	o.mu.Unlock()
	select {
	case done := <-reply:
		return done.rep, !done.refused, done.err
	case <-ctx.Done():
		return Report{Cluster: clusterID}, true, ctx.Err()
	}
}

// NudgeNode asks for a sync of one node soon: at once, or, while the loop
// talks to that node, right after (the cluster's node queue, nodequeue).
// Nudges that come meanwhile are merged. It never blocks. Before Start,
// nudges wait for it.
func (o *Orchestrator) NudgeNode(clusterID, nodeID string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	cs := o.clusterLocked(clusterID)
	cs.nodes.Add(nodeID)
	if o.started {
		o.kick(cs)
	}
}

// clusterLocked returns the state of a cluster, made on first use. o.mu is held.
func (o *Orchestrator) clusterLocked(id string) *clusterState {
	cs, ok := o.clusters[id]
	if !ok {
		cs = newClusterState(id)
		o.clusters[id] = cs
	}
	delete(o.gone, id)
	return cs
}

// DropAgentConnections closes the kept connections to every agent and
// forgets the per-node clients, so that the next call to any agent makes a
// new TLS handshake. The core calls it when the revocation list changes: a
// revoked agent is refused at once, not when its kept connection ends.
//
// The clients belong to the clusters' loops: a loop that runs drops its own
// before it next talks to an agent; those of a parked loop are dropped here.
func (o *Orchestrator) DropAgentConnections() {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, cs := range o.clusters {
		if cs.running {
			cs.dropClients = true
			cs.wakeLoop()
			continue
		}
		dropClients(cs)
	}
}
