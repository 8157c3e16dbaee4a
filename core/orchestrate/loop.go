package orchestrate

import (
	"context"
	"slices"
	"time"
)

// One orchestration loop per cluster (docs/architecture.md, "One loop per
// cluster"). Every conversation of the core with a cluster's agents goes
// through one pipeline, "sync a set of nodes": read the nodes and their open
// actions, talk to their agents (info, pull, push, cancels: agentsync.go),
// plan what the answers call for against the store as it is now (plan.go)
// and commit it under the lease's fencing epoch, or write nothing when
// nothing changed.
//
// The loop is one goroutine per cluster, alive while it has work. It alone
// plans and commits, one commit at a time. The network calls run on workers
// whose answers come back to it as messages, so an agent that hangs holds
// back nothing but its own answer. It serves three kinds of request:
//
//   - a full sync (the interval, Nudge, FullSync): every node, in batches of
//     BatchSize, the nodes with something to push first; only a full sync
//     decides the cluster's status, at its last commit;
//   - a sync of a few nodes (NudgeNode: an approval, a new action, a cancel,
//     an agent's change note, a run's next wave, a drain; SyncNodes). Nudged
//     nodes wait in the cluster's node queue (nodequeue), where the nudges
//     of one node merge; the loop takes every ready node into its next node
//     sync, which starts between the batches of a full sync, or beside a
//     batch held up by a slow agent;
//   - never two conversations with one node at once: every sync of a node
//     is counted in the node queue, and a node nudged while it talks (or
//     while its answer is not committed yet) is synced again once its answer
//     is committed, so every answer is planned after the previous one of its
//     node was written, and none can undo a newer one.

// loopRun is one goroutine's run of a cluster's loop: it takes the
// requests and decides which sync starts when; the syncs under way are its
// pipeline's (pipeline.go, fullsync.go).
type loopRun struct {
	o       *Orchestrator
	cs      *clusterState
	p       *pipeline
	fulls   []*job // full syncs: the first runs, the others wait
	nodeJob []*job // direct node syncs waiting for their nodes, in order
	started bool   // Start ran (as of the last take): nudged nodes are served
}

// loop runs a cluster's loop until it has nothing left to do.
func (o *Orchestrator) loop(cs *clusterState) {
	defer o.loops.Done()
	l := &loopRun{o: o, cs: cs, p: newPipeline(o, cs)}
	for {
		l.take()
		l.step()
		if len(l.fulls) == 0 && len(l.nodeJob) == 0 && len(l.p.running) == 0 && !(l.started && cs.nodes.Len() > 0) {
			if l.park() {
				return
			}
			continue
		}
		select {
		case res := <-l.p.answers:
			l.p.arrive(res)
			for more := true; more; {
				select {
				case res := <-l.p.answers:
					l.p.arrive(res)
				default:
					more = false
				}
			}
			l.p.settle()
		case m := <-l.p.snaps:
			l.p.snapped(m)
		case <-cs.wake:
		}
	}
}

// park ends the loop's goroutine when no request waits; it reports whether
// it did.
func (l *loopRun) park() bool {
	o, cs := l.o, l.cs
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(cs.fullWait) > 0 || len(cs.directs) > 0 || (o.started && cs.nodes.Len() > 0) {
		return false
	}
	cs.running = false
	if o.gone[cs.id] {
		delete(o.clusters, cs.id) // the store has no such cluster: keep nothing
		delete(o.gone, cs.id)
	}
	return true
}

// take turns the requests that came into jobs.
func (l *loopRun) take() {
	o, cs := l.o, l.cs
	o.mu.Lock()
	defer o.mu.Unlock()
	l.started = o.started
	if cs.dropClients {
		cs.dropClients = false
		dropClients(cs)
	}
	if len(cs.fullWait) > 0 {
		// Merged into an internal full sync not started yet, if any.
		i := slices.IndexFunc(l.fulls, func(j *job) bool { return !j.direct && !j.started })
		if i < 0 {
			l.fulls = append(l.fulls, &job{full: true, begin: time.Now()})
			i = len(l.fulls) - 1
		}
		l.fulls[i].waits = append(l.fulls[i].waits, cs.fullWait...)
		cs.fullWait = nil
	}
	for _, d := range cs.directs {
		j := &job{direct: true, full: d.full, nodes: d.nodes, waits: []chan syncDone{d.reply}, begin: time.Now()}
		j.ctx, j.release = context.WithCancel(d.ctx)
		stop := context.AfterFunc(o.stopCtx, j.release) // Stop ends direct calls too
		release := j.release
		j.release = func() { stop(); release() }
		if d.full {
			l.fulls = append(l.fulls, j)
		} else {
			l.nodeJob = append(l.nodeJob, j)
		}
	}
	cs.directs = nil
}

// step starts every job that can start, then the next batch of the full
// sync under way.
func (l *loopRun) step() {
	p := l.p
	if l.started {
		// Nudged nodes first: they go before the next batch. A nudged
		// node whose answer waits for its commit has it committed now; one
		// waiting for a worker of a full sync's batch is taken out of it.
		for _, n := range l.cs.nodes.Waiting() {
			p.free(n)
		}
		if nodes := l.cs.nodes.TakeReady(); len(nodes) > 0 {
			p.startNudged(nodes)
		}
	}
	for i := 0; i < len(l.nodeJob); {
		j := l.nodeJob[i]
		if !slices.ContainsFunc(j.nodes, func(n string) bool { return !p.free(n) }) {
			l.nodeJob = slices.Delete(l.nodeJob, i, i+1)
			p.startNodes(j)
			continue
		}
		i++
	}
	for len(l.fulls) > 0 {
		if j := l.fulls[0]; !j.done {
			p.stepFull(j)
			if !j.done {
				return
			}
		}
		l.fulls = l.fulls[1:]
	}
}
