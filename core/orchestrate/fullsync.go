package orchestrate

import (
	"errors"
	"fmt"
	"slices"

	"github.com/musterhq/muster/core/store"
)

// Full syncs (docs/architecture.md, "One loop per cluster"): a sync of every
// node of a cluster, asked for by the scheduler every Interval, by Nudge, or
// directly (FullSync). It reads the cluster once, on a worker (snapshot),
// takes the nodes with something to push or cancel first, and goes in
// batches of BatchSize, each committed once it is all in; only its last
// commit decides the cluster's status. A node's turn in every
// CompareIDsEvery-th revolution of the spread (spread.go) also lists every
// record of its agent and compares id sets (LOST detection); a full sync
// that takes a whole revolution in turn does it for every node
// (Report.ComparedIDs).

// stepFull moves the full sync j on: it starts it, or sends its next
// batch once the last one is committed; it ends it (finish) once over.
func (p *pipeline) stepFull(j *job) {
	o, cs := p.o, p.cs
	if !j.started {
		j.started = true
		if !j.direct {
			ctx, done, ok := o.leaseContext(o.runCtx(), cs.id)
			if !ok {
				j.done = true
				for _, w := range j.waits {
					w <- syncDone{rep: Report{Cluster: cs.id}, refused: true}
				}
				return
			}
			j.ctx, j.release = ctx, done
		}
		p.full = j
		j.rep = Report{Cluster: cs.id}
		// The runs' next waves are created first, so this sync pushes them.
		o.advanceRuns(j.ctx, cs.id, allRuns())
		// The snapshot is read on a worker: nudged nodes go meanwhile
		// (those they commit are read again by the batches: touched).
		j.touched, j.reading = map[string]bool{}, true
		ctx := j.ctx
		go func() {
			order, snap, err := o.snapshot(ctx, cs)
			p.snaps <- snapRead{j: j, order: order, snap: snap, err: err}
		}()
		return
	}
	if j.reading {
		return
	}
	if j.inflight > 0 || len(j.arrived) > 0 {
		return // the batch under way
	}
	if j.err == nil {
		j.err = j.ctx.Err()
	}
	if j.err != nil {
		p.finish(j)
		return
	}
	if len(j.order) == 0 && len(j.deferred) == 0 {
		p.commitArrived(j, true) // a cluster without nodes: its status alone
		p.finish(j)
		return
	}
	var now []string
	// Nodes of the batch that another job was talking to go once free.
	for i := 0; i < len(j.deferred); {
		if n := j.deferred[i]; p.free(n) {
			now = append(now, n)
			j.deferred = slices.Delete(j.deferred, i, i+1)
			continue
		}
		i++
	}
	if len(now) == 0 && len(j.deferred) == 0 {
		n := min(o.cfg.BatchSize, len(j.order))
		batch := j.order[:n:n]
		j.order = j.order[n:]
		for _, id := range batch {
			if p.free(id) {
				now = append(now, id)
			} else {
				j.deferred = append(j.deferred, id)
			}
		}
	}
	if len(now) > 0 {
		p.sendBatch(j, now)
	}
}

// snapped takes a full sync's snapshot.
func (p *pipeline) snapped(m snapRead) {
	o, cs, j := p.o, p.cs, m.j
	j.reading = false
	if m.err != nil {
		if errors.Is(m.err, store.ErrNotFound) {
			o.forgetCluster(cs.id)
		}
		j.err = fmt.Errorf("full sync of %s: %w", cs.id, m.err)
		p.finish(j)
		return
	}
	j.compareEvery = o.cfg.CompareIDsEvery
	o.placeSpread(cs, j, len(m.order), o.cfg.Now())
	j.rep.ComparedIDs = j.wholeTurn && (j.spreadFrom/revolution)%uint64(max(1, j.compareEvery)) == 0
	forgetNodes(cs, m.order)
	j.order, j.snap = o.restNodes(cs, j, m.order, m.snap), m.snap
	j.sem = make(chan struct{}, o.cfg.NodeConcurrency)
}

// restNodes takes out of the full sync j's order (and snapshot) the nodes
// that rest in it: those it could leave by their change counter
// (mayAskCounter) whose counter's turn it is not (counterTurn). A rested
// node is sent nothing and written nothing; it counts in Report.Rested.
func (o *Orchestrator) restNodes(cs *clusterState, j *job, order []string, snap map[string]*nodeResult) []string {
	if j.allCounters {
		return order
	}
	kept := order[:0]
	for _, id := range order {
		if res := snap[id]; res != nil && !j.counterTurn(id) && o.mayAskCounter(cs, j, res) {
			delete(snap, id)
			j.rep.Rested++
			continue
		}
		kept = append(kept, id)
	}
	return kept
}

// sendBatch reads the nodes of a batch and sends them to the workers.
func (p *pipeline) sendBatch(j *job, ids []string) {
	// From the full sync's snapshot, but for the nodes another sync
	// committed since: those are read again.
	var again []string
	for _, id := range ids {
		if j.touched[id] {
			again = append(again, id)
		}
	}
	fresh := map[string]*nodeResult{}
	if len(again) > 0 {
		rs, err := p.o.prepare(j.ctx, p.cs, again)
		if err != nil {
			j.err = fmt.Errorf("full sync of %s: %w", p.cs.id, err)
			p.finish(j)
			return
		}
		for _, res := range rs {
			fresh[res.node.ID] = res
		}
	}
	var results []*nodeResult
	for _, id := range ids {
		if res, ok := fresh[id]; ok {
			results = append(results, res)
		} else if snap, ok := j.snap[id]; ok && !j.touched[id] {
			res := *snap
			results = append(results, &res)
		}
		delete(j.snap, id)
	}
	for _, res := range results {
		res.listAll = j.compares(res.node.ID)
		if p.o.mayAskCounter(p.cs, j, res) {
			res.askCounter, res.seen = true, p.cs.seen[res.node.ID].changes
		}
	}
	p.dispatch(j, results)
	p.settle()
}
