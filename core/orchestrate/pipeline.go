package orchestrate

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"github.com/musterhq/muster/core/store"
)

// The pipeline of a cluster's loop (docs/architecture.md, "One loop per
// cluster"): the syncs under way, how their nodes go to the workers, and how
// the workers' answers are committed. The loop (loop.go) decides which
// sync starts when; the full syncs' batches are fullsync.go's. A node's
// syncs are counted in the cluster's node queue (nodequeue): hold marks a
// node's sync running, release ends it, so that a node asked for meanwhile
// is synced again once its answer is committed.

// pipeline is the syncs under way in one goroutine's run of a cluster's
// loop. Only that goroutine touches it.
type pipeline struct {
	o       *Orchestrator
	cs      *clusterState
	answers chan *nodeResult
	snaps   chan snapRead
	busy    map[string]*job // node → the job talking to it, or holding its uncommitted answer
	running []*job          // node syncs with workers out
	// full is the full sync under way (started, not done), if any: its
	// batches read again the nodes other syncs commit (job.touched).
	full *job
	seq  uint64 // dispatch order: answers are committed in it
}

func newPipeline(o *Orchestrator, cs *clusterState) *pipeline {
	return &pipeline{o: o, cs: cs, answers: make(chan *nodeResult), snaps: make(chan snapRead), busy: map[string]*job{}}
}

// hold marks node n taken by j: its sync runs until release.
func (p *pipeline) hold(n string, j *job) {
	p.busy[n] = j
	p.cs.nodes.Start(n) // false for a nudged node, which the queue handed out
}

// release ends the sync of node n: a node asked for meanwhile is ready again.
func (p *pipeline) release(n string) {
	delete(p.busy, n)
	p.cs.nodes.Done(n)
}

// unsent releases the nodes of a node sync that were not sent to a worker
// (unknown to the store, or the sync failed first).
func (p *pipeline) unsent(nodes []string) {
	for _, n := range nodes {
		if p.busy[n] == nil {
			p.cs.nodes.Done(n)
		}
	}
}

// errNotLeased marks a nudged sync this replica did not run (NodesSynced).
var errNotLeased = errors.New("not the holder of the cluster's lease")

// free reports whether node n may be synced now: no worker talks to it and
// no answer of it waits for its commit. An answer that waits is committed
// now, with those of its job that came.
func (p *pipeline) free(n string) bool {
	j, ok := p.busy[n]
	if !ok {
		return true
	}
	for _, res := range j.arrived {
		if res.node.ID == n {
			p.commitArrived(j, false)
			return p.busy[n] == nil
		}
	}
	// Still waiting for a worker of a full sync's batch: the node is taken
	// out of the batch (the full sync learns of it from this sync's commit).
	if res, ok := j.queued[n]; ok && res.claim.CompareAndSwap(queued, taken) {
		delete(j.queued, n)
		p.release(n)
		return true
	}
	return false
}

// startNudged starts a sync of the nudged nodes the queue handed out, under
// the cluster's lease.
func (p *pipeline) startNudged(nodes []string) {
	slices.Sort(nodes)
	ctx, done, ok := p.o.leaseContext(p.o.runCtx(), p.cs.id)
	if !ok {
		p.unsent(nodes)
		p.o.TestSignals.NodesSynced.Send(NodesSynced{Cluster: p.cs.id, Nodes: nodes, Err: errNotLeased})
		return
	}
	p.startNodes(&job{nodes: nodes, begin: time.Now(), ctx: ctx, release: done})
}

// startNodes starts a node job: one read, then a worker per node.
func (p *pipeline) startNodes(j *job) {
	j.started = true
	j.rep = Report{Cluster: p.cs.id}
	results, err := p.o.prepare(j.ctx, p.cs, j.nodes)
	if err != nil {
		if errors.Is(err, store.ErrNotFound) {
			p.o.forgetCluster(p.cs.id) // a nudge may name any cluster
			err = nil
		} else {
			err = fmt.Errorf("sync of %s nodes: %w", p.cs.id, err)
		}
		j.err = err
		p.unsent(j.nodes)
		p.finish(j)
		return
	}
	p.running = append(p.running, j)
	p.dispatch(j, results)
	p.unsent(j.nodes)
	p.settle()
}

// dispatch sends every node of results to a worker (a node discovery holds
// DOWN answers at once, untouched). A full sync's workers start in the
// order of results, at most NodeConcurrency at once.
func (p *pipeline) dispatch(j *job, results []*nodeResult) {
	o, cs := p.o, p.cs
	o.nodeClients(cs, results)
	var out []*nodeResult
	for _, res := range results {
		res.job = j
		res.acked = cs.acked[res.node.ID]
		p.seq++
		res.seq = p.seq
		p.hold(res.node.ID, j)
		if store.DownByDiscovery(&res.node) {
			// The gossip pool holds it DOWN: not contacted until the pool
			// sees it again.
			res.held, res.status, res.reason = true, res.node.Status, res.node.StatusReason
			j.arrived = append(j.arrived, res)
			continue
		}
		j.inflight++
		out = append(out, res)
	}
	if j.sem == nil {
		for _, res := range out {
			go p.work(j, res)
		}
		return
	}
	if j.queued == nil {
		j.queued = map[string]*nodeResult{}
	}
	for _, res := range out {
		res.claim = new(atomic.Int32)
		j.queued[res.node.ID] = res
	}
	go func() {
		for _, res := range out {
			select {
			case j.sem <- struct{}{}:
				if !res.claim.CompareAndSwap(queued, talking) {
					<-j.sem
					p.answers <- res // taken by a nudged sync
					continue
				}
				go func() {
					defer func() { <-j.sem }()
					p.work(j, res)
				}()
			case <-j.ctx.Done():
				p.answers <- res // not talked to: the commit drops it
			}
		}
	}()
}

// work is a worker: it talks to one node's agent and sends the answer back.
func (p *pipeline) work(j *job, res *nodeResult) {
	sig := &p.o.TestSignals.Steps
	sig.Send(Step{Cluster: p.cs.id, Kind: StepTalk, Begin: true, Nodes: []string{res.node.ID}})
	if !res.askCounter || !p.o.askCounter(j.ctx, res) {
		p.o.syncNode(j.ctx, res, res.listAll)
	}
	sig.Send(Step{Cluster: p.cs.id, Kind: StepTalk, Nodes: []string{res.node.ID}})
	p.answers <- res
}

// arrive takes a worker's answer.
func (p *pipeline) arrive(res *nodeResult) {
	j := res.job
	j.inflight--
	if res.claim != nil {
		if res.claim.Load() == taken {
			return // a nudged sync has the node now
		}
		delete(j.queued, res.node.ID)
	}
	j.arrived = append(j.arrived, res)
}

// settle commits what the jobs' answers call for: a node job's answers as
// they come (a slow node holds back no other), a full sync's once its batch
// is in; and ends the jobs that are over.
func (p *pipeline) settle() {
	for i := 0; i < len(p.running); {
		j := p.running[i]
		if len(j.arrived) > 0 {
			p.commitArrived(j, false)
		}
		if j.inflight == 0 {
			p.running = slices.Delete(p.running, i, i+1)
			p.finish(j)
			continue
		}
		i++
	}
	// A full sync's batch is committed once it is all in; the last commit
	// of the sync decides the cluster's status.
	if j := p.full; j != nil && !j.done && j.inflight == 0 && len(j.arrived) > 0 {
		last := len(j.order) == 0 && len(j.deferred) == 0
		p.commitArrived(j, last)
		if last {
			p.finish(j)
		}
	}
}

// commitArrived commits the answers of j that came (whole: the last commit
// of a full sync, which decides the cluster's status).
func (p *pipeline) commitArrived(j *job, whole bool) {
	o, cs := p.o, p.cs
	results := j.arrived
	j.arrived = nil
	ids := make([]string, len(results))
	for i, res := range results {
		p.release(res.node.ID)
		ids[i] = res.node.ID
	}
	sig := &o.TestSignals.Steps
	if j.err == nil {
		j.err = j.ctx.Err() // answers cut short by shutdown are not the agents' word
	}
	if j.err != nil {
		sig.Send(Step{Cluster: cs.id, Kind: StepDrop, Nodes: ids})
		return
	}
	slices.SortFunc(results, func(a, b *nodeResult) int { return cmp.Compare(a.seq, b.seq) })
	vals := make([]nodeResult, len(results))
	for i, res := range results {
		vals[i] = *res
	}
	what := "sync of " + cs.id + " nodes"
	if j.full {
		what = "full sync of " + cs.id
	}
	ids = ids[:0]
	for i := range vals {
		ids = append(ids, vals[i].node.ID)
	}
	sig.Send(Step{Cluster: cs.id, Kind: StepCommit, Begin: true, Nodes: ids})
	moves := j.rep.runMoves
	j.rep.moved = runSet{}
	lost, err := o.commit(j.ctx, cs, vals, whole, j.lost, &j.rep)
	sig.Send(Step{Cluster: cs.id, Kind: StepCommit, Nodes: ids})
	j.lost += lost
	if err != nil {
		j.err = fmt.Errorf("%s: %w", what, err)
		return
	}
	if f := p.full; !j.full && f != nil && f.touched != nil {
		for _, id := range ids {
			f.touched[id] = true
		}
	}
	views := map[*budgetView]bool{}
	for i := range vals {
		views[vals[i].budget] = true
	}
	refreshed := false
	for v := range views {
		for _, n := range v.heldToNudge() {
			cs.want(n)
		}
		refreshed = o.refreshHeld(j.ctx, v) || refreshed
	}
	// A child of a run that this commit saw finish may admit the run's
	// next wave or its node's next step: create them, and sync the nodes
	// they go to. A child held, or held for a new reason, changes its run's
	// reason (core/runs). A commit that only saw run children start or
	// report progress asks for nothing: no run can move on for it. A
	// direct call (FullSync, SyncNodes) does it before it returns; the
	// loop's own syncs leave it to the cluster's advancer (advance.go), so
	// that the next commit does not wait for it.
	if j.rep.runMoves > moves || refreshed {
		moved := j.rep.moved
		if refreshed {
			moved = allRuns() // a budget hold any run may wait for was freed
		}
		if j.direct {
			for _, n := range o.advanceRuns(j.ctx, cs.id, moved) {
				cs.want(n)
			}
		} else {
			o.advancers.requestRuns(cs.id, moved)
		}
	}
}

// finish answers whoever waits for j.
func (p *pipeline) finish(j *job) {
	o, cs := p.o, p.cs
	if j.done {
		return
	}
	j.done = true
	if p.full == j {
		p.full = nil
	}
	if j.release != nil {
		j.release()
	}
	if len(j.arrived) > 0 {
		ids := make([]string, len(j.arrived))
		for i, res := range j.arrived {
			p.release(res.node.ID)
			ids[i] = res.node.ID
		}
		j.arrived = nil
		o.TestSignals.Steps.Send(Step{Cluster: cs.id, Kind: StepDrop, Nodes: ids})
	}
	err := j.err
	// Counted before whoever waits is answered.
	if j.full {
		o.metrics.observeFullSync(time.Since(j.begin), j.rep, err)
	} else {
		o.metrics.observeNodeSync(j.rep, err)
	}
	for _, w := range j.waits {
		w <- syncDone{rep: j.rep, err: err}
	}
	if j.full || j.direct {
		return
	}
	o.TestSignals.NodesSynced.Send(NodesSynced{Cluster: cs.id, Nodes: j.nodes, Report: j.rep, Err: err})
	switch {
	case errors.Is(err, store.ErrFenced):
		o.metrics.latePushes.Add(float64(j.rep.Pushed))
		o.log.Info("node sync refused: the lease was lost", "cluster", cs.id, "pushed", j.rep.Pushed)
	case err != nil && o.runCtx().Err() == nil:
		o.log.Warn("node sync failed", "cluster", cs.id, "nodes", j.nodes, "err", err)
	case j.rep.Changes > 0:
		o.log.Debug("node sync", "cluster", cs.id, "nodes", j.nodes, "pushed", j.rep.Pushed, "changes", j.rep.Changes)
	}
}
