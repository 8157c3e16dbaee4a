package orchestrate

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync/atomic"
	"time"

	"github.com/musterhq/muster/core/runs"
	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/action"
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
//   - a full sync (the interval, Nudge, Pass): every node, in batches of
//     BatchSize, the nodes with something to push first; only a full sync
//     decides the cluster's status, at its last commit;
//   - a sync of a few nodes (NudgeNode: an approval, a new action, a cancel,
//     an agent's change note, a run's next wave, a drain; SyncNodes). Nudges
//     that arrive while the loop is busy merge into its next node sync,
//     which starts between the batches of a full sync, or beside a batch
//     held up by a slow agent;
//   - never two conversations with one node at once: a node still talking
//     (or whose answer is not committed yet) is synced again once its
//     answer is committed, so every answer is planned after the previous
//     one of its node was written, and none can undo a newer one.

// Report says what one sync did.
type Report struct {
	Cluster string
	// Nodes counts the nodes synced, Down those found unreachable or not who
	// they should be.
	Nodes, Down int
	// Pulled counts the records the agents returned; Pushed the actions the
	// agents accepted; Cancels the cancel requests they accepted.
	Pulled, Pushed, Cancels int
	// Changes counts the records, nodes and cluster written; Events the
	// events appended. Both are zero when the sync wrote nothing.
	Changes, Events int
	// Full is true when this sync compared id sets (every FullSyncEvery
	// full syncs).
	Full bool
	// runMoves counts the changes that may let a run move on
	// (writePlan.runMoves).
	runMoves int
}

// syncDone is the answer to a request that waits.
type syncDone struct {
	rep Report
	err error
	// refused: this replica does not hold the cluster's lease; nothing ran.
	refused bool
}

// direct is a request of a direct call (Pass, SyncNodes): it runs under
// the caller's context, apart from the merged nudges.
type direct struct {
	ctx   context.Context
	full  bool
	nodes []string
	reply chan syncDone
}

// clusterState is what the orchestrator keeps about a cluster. The fields
// under "requests" are guarded by Orchestrator.mu; the others belong to the
// cluster's loop, which runs in one goroutine at a time (the next one starts
// under Orchestrator.mu after the last one parked).
type clusterState struct {
	id string

	// requests
	running   bool            // a loop goroutine runs
	fullWait  []chan syncDone // the scheduler's full syncs
	wantNodes map[string]bool // nudged nodes (NudgeNode), merged
	directs   []*direct       // direct calls, in order
	wake      chan struct{}   // a new request for the running loop
	// dropClients asks the running loop to drop its clients
	// (DropAgentConnections).
	dropClients bool
	// advancing: the cluster's advancer runs (requestAdvance);
	// advanceAgain: a request came meanwhile.
	advancing, advanceAgain bool

	// the loop's own
	fulls       int                    // full syncs started (FullSyncEvery)
	lastContact map[string]time.Time   // node id → last successful sync
	acked       map[string]ackMark     // node id → the cursor last acknowledged to its agent
	clients     map[string]*nodeClient // node id → its HTTP client (with AgentTLS)
	ledger      *ledger                // budget admissions, shared by the loop's workers
}

// job is one sync under way in a loop: a full sync, or a sync of a few nodes.
type job struct {
	ctx     context.Context
	release context.CancelFunc
	full    bool
	direct  bool
	nodes   []string // a node job's nodes
	waits   []chan syncDone
	rep     Report
	err     error

	begin    time.Time
	started  bool
	reading  bool // a full sync's snapshot is being read
	done     bool
	order    []string // a full sync: the nodes not dispatched yet
	deferred []string // a full sync: nodes of the batch another job was talking to
	sem      chan struct{}
	inflight int
	queued   map[string]*nodeResult // a full sync's nodes waiting for a worker
	arrived  []*nodeResult          // answers not committed yet
	lost     int                    // actions made LOST by this full sync's commits
	// snap is what a full sync read at its start; touched lists the nodes
	// another sync committed since, which its batches read again.
	snap    map[string]*nodeResult
	touched map[string]bool
}

// loopRun is one goroutine's run of a cluster's loop.
type loopRun struct {
	o       *Orchestrator
	cs      *clusterState
	answers chan *nodeResult
	snaps   chan snapRead
	busy    map[string]*job // node → the job talking to it, or holding its uncommitted answer
	fulls   []*job          // full syncs: the first runs, the others wait
	nodeJob []*job          // direct node syncs waiting for their nodes, in order
	running []*job          // node syncs with workers out
	waiting map[string]bool // nudged nodes not yet in a job
	seq     uint64          // dispatch order: answers are committed in it
}

func newClusterState(id string) *clusterState {
	return &clusterState{id: id, wantNodes: map[string]bool{}, wake: make(chan struct{}, 1),
		lastContact: map[string]time.Time{}, acked: map[string]ackMark{},
		clients: map[string]*nodeClient{}, ledger: newLedger()}
}

// kick starts the cluster's loop, or wakes it. o.mu is held.
func (o *Orchestrator) kick(cs *clusterState) {
	if cs.running {
		select {
		case cs.wake <- struct{}{}:
		default:
		}
		return
	}
	if o.closed {
		return
	}
	cs.running = true
	o.loops.Add(1)
	go o.loop(cs)
}

// Pass runs a full sync of a cluster (docs/architecture.md, "One loop per
// cluster") through its loop, under ctx, and waits for it. Full syncs of one
// cluster run one after the other.
func (o *Orchestrator) Pass(ctx context.Context, clusterID string) (Report, error) {
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

// fullSync asks the cluster's loop for a full sync under the cluster's
// lease and waits for it; ok is false when this replica does not hold it.
func (o *Orchestrator) fullSync(ctx context.Context, clusterID string) (rep Report, ok bool, err error) {
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
// talks to that node, right after. Nudges that come meanwhile are merged. It
// never blocks. Before Start, nudges wait for it.
func (o *Orchestrator) NudgeNode(clusterID, nodeID string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	cs := o.clusterLocked(clusterID)
	cs.wantNodes[nodeID] = true
	if o.started {
		o.kick(cs)
	}
}

// loop runs a cluster's loop until it has nothing left to do.
func (o *Orchestrator) loop(cs *clusterState) {
	defer o.loops.Done()
	l := &loopRun{o: o, cs: cs, answers: make(chan *nodeResult), snaps: make(chan snapRead), busy: map[string]*job{}, waiting: map[string]bool{}}
	for {
		l.take()
		l.step()
		if len(l.fulls) == 0 && len(l.nodeJob) == 0 && len(l.running) == 0 && len(l.waiting) == 0 {
			if l.park() {
				return
			}
			continue
		}
		select {
		case res := <-l.answers:
			l.arrive(res)
			for more := true; more; {
				select {
				case res := <-l.answers:
					l.arrive(res)
				default:
					more = false
				}
			}
			l.settle()
		case m := <-l.snaps:
			l.snapped(m)
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
	if len(cs.fullWait) > 0 || len(cs.directs) > 0 || (o.started && len(cs.wantNodes) > 0) {
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
	if o.started {
		for n := range cs.wantNodes {
			l.waiting[n] = true
		}
		clear(cs.wantNodes)
	}
}

// step starts every job that can start, then the next batch of the full
// sync under way.
func (l *loopRun) step() {
	// Nudged nodes first: they go before the next batch.
	if len(l.waiting) > 0 {
		var free []string
		for n := range l.waiting {
			if l.free(n) {
				free = append(free, n)
				delete(l.waiting, n)
			}
		}
		if len(free) > 0 {
			sort.Strings(free)
			j := &job{nodes: free, begin: time.Now()}
			ctx, done, ok := l.o.passContext(l.o.runCtx(), l.cs.id)
			if ok {
				j.ctx, j.release = ctx, done
				l.startNodes(j)
			} else {
				l.o.TestSignals.NodesSynced.Send(NodesSynced{Cluster: l.cs.id, Nodes: free, Err: errNotLeased})
			}
		}
	}
	for i := 0; i < len(l.nodeJob); {
		j := l.nodeJob[i]
		if !slices.ContainsFunc(j.nodes, func(n string) bool { return !l.free(n) }) {
			l.nodeJob = slices.Delete(l.nodeJob, i, i+1)
			l.startNodes(j)
			continue
		}
		i++
	}
	for len(l.fulls) > 0 {
		if j := l.fulls[0]; !j.done {
			l.stepFull(j)
			if !j.done {
				return
			}
		}
		l.fulls = l.fulls[1:]
	}
}

// errNotLeased marks a nudged sync this replica did not run (NodesSynced).
var errNotLeased = errors.New("not the holder of the cluster's lease")

// free reports whether node n may be synced now: no worker talks to it and
// no answer of it waits for its commit. An answer that waits is committed
// now, with those of its job that came.
func (l *loopRun) free(n string) bool {
	j, ok := l.busy[n]
	if !ok {
		return true
	}
	for _, res := range j.arrived {
		if res.node.ID == n {
			l.commitArrived(j, false)
			return l.busy[n] == nil
		}
	}
	// Still waiting for a worker of a full sync's batch: the node is taken
	// out of the batch (the full sync learns of it from this sync's commit).
	if res, ok := j.queued[n]; ok && res.claim.CompareAndSwap(queued, taken) {
		delete(j.queued, n)
		delete(l.busy, n)
		return true
	}
	return false
}

// The states of a full sync's node waiting for a worker (nodeResult.claim).
const (
	queued  int32 = iota // waiting for a worker
	talking              // a worker talks to it
	taken                // taken out of the batch by a nudged sync
)

// startNodes starts a node job: one read, then a worker per node.
func (l *loopRun) startNodes(j *job) {
	j.started = true
	j.rep = Report{Cluster: l.cs.id}
	results, err := l.o.prepare(j.ctx, l.cs, j.nodes)
	if err != nil {
		if errors.Is(err, store.ErrNotFound) {
			l.o.forgetCluster(l.cs.id) // a nudge may name any cluster
			err = nil
		} else {
			err = fmt.Errorf("sync of %s nodes: %w", l.cs.id, err)
		}
		j.err = err
		l.finish(j)
		return
	}
	l.running = append(l.running, j)
	l.dispatch(j, results)
	l.settle()
}

// stepFull moves the full sync j on: it starts it, or sends its next
// batch once the last one is committed; it ends it (finish) once over.
func (l *loopRun) stepFull(j *job) {
	o, cs := l.o, l.cs
	if !j.started {
		j.started = true
		if !j.direct {
			ctx, done, ok := o.passContext(o.runCtx(), cs.id)
			if !ok {
				j.done = true
				for _, w := range j.waits {
					w <- syncDone{rep: Report{Cluster: cs.id}, refused: true}
				}
				return
			}
			j.ctx, j.release = ctx, done
		}
		j.rep = Report{Cluster: cs.id, Full: cs.fulls%o.cfg.FullSyncEvery == 0}
		// The runs' next waves are created first, so this sync pushes them.
		o.advanceRuns(j.ctx, cs.id)
		// The snapshot is read on a worker: nudged nodes go meanwhile
		// (those they commit are read again by the batches: touched).
		j.touched, j.reading = map[string]bool{}, true
		ctx := j.ctx
		go func() {
			order, snap, err := o.snapshot(ctx, cs)
			l.snaps <- snapRead{j: j, order: order, snap: snap, err: err}
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
		l.finish(j)
		return
	}
	if len(j.order) == 0 && len(j.deferred) == 0 {
		l.commitArrived(j, true) // a cluster without nodes: its status alone
		l.finish(j)
		return
	}
	var now []string
	// Nodes of the batch that another job was talking to go once free.
	for i := 0; i < len(j.deferred); {
		if n := j.deferred[i]; l.free(n) {
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
			if l.free(id) {
				now = append(now, id)
			} else {
				j.deferred = append(j.deferred, id)
			}
		}
	}
	if len(now) > 0 {
		l.sendBatch(j, now)
	}
}

// snapRead is a full sync's snapshot, read by a worker.
type snapRead struct {
	j     *job
	order []string
	snap  map[string]*nodeResult
	err   error
}

// snapped takes a full sync's snapshot.
func (l *loopRun) snapped(m snapRead) {
	o, cs, j := l.o, l.cs, m.j
	j.reading = false
	if m.err != nil {
		if errors.Is(m.err, store.ErrNotFound) {
			o.forgetCluster(cs.id)
		}
		j.err = fmt.Errorf("pass of %s: %w", cs.id, m.err)
		l.finish(j)
		return
	}
	cs.fulls++
	forgetNodes(cs, m.order)
	j.order, j.snap = m.order, m.snap
	j.sem = make(chan struct{}, o.cfg.NodeConcurrency)
}

// sendBatch reads the nodes of a batch and sends them to the workers.
func (l *loopRun) sendBatch(j *job, ids []string) {
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
		rs, err := l.o.prepare(j.ctx, l.cs, again)
		if err != nil {
			j.err = fmt.Errorf("pass of %s: %w", l.cs.id, err)
			l.finish(j)
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
	l.dispatch(j, results)
	l.settle()
}

// dispatch sends every node of results to a worker (a node discovery holds
// DOWN answers at once, untouched). A full sync's workers start in the
// order of results, at most NodeConcurrency at once.
func (l *loopRun) dispatch(j *job, results []*nodeResult) {
	o, cs := l.o, l.cs
	o.nodeClients(cs, results)
	var out []*nodeResult
	for _, res := range results {
		res.job = j
		res.acked = cs.acked[res.node.ID]
		l.seq++
		res.seq = l.seq
		l.busy[res.node.ID] = j
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
			go l.work(j, res)
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
					l.answers <- res // taken by a nudged sync
					continue
				}
				go func() {
					defer func() { <-j.sem }()
					l.work(j, res)
				}()
			case <-j.ctx.Done():
				l.answers <- res // not talked to: the commit drops it
			}
		}
	}()
}

// work is a worker: it talks to one node's agent and sends the answer back.
func (l *loopRun) work(j *job, res *nodeResult) {
	sig := &l.o.TestSignals.Steps
	sig.Send(Step{Cluster: l.cs.id, Kind: StepTalk, Begin: true, Nodes: []string{res.node.ID}})
	l.o.syncNode(j.ctx, res, j.full && j.rep.Full)
	sig.Send(Step{Cluster: l.cs.id, Kind: StepTalk, Nodes: []string{res.node.ID}})
	l.answers <- res
}

// arrive takes a worker's answer.
func (l *loopRun) arrive(res *nodeResult) {
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
func (l *loopRun) settle() {
	for i := 0; i < len(l.running); {
		j := l.running[i]
		if len(j.arrived) > 0 {
			l.commitArrived(j, false)
		}
		if j.inflight == 0 {
			l.running = slices.Delete(l.running, i, i+1)
			l.finish(j)
			continue
		}
		i++
	}
	if len(l.fulls) > 0 {
		// A full sync's batch is committed once it is all in; the last
		// commit of the sync decides the cluster's status.
		if j := l.fulls[0]; j.started && !j.done && j.inflight == 0 && len(j.arrived) > 0 {
			last := len(j.order) == 0 && len(j.deferred) == 0
			l.commitArrived(j, last)
			if last {
				l.finish(j)
			}
		}
	}
}

// commitArrived commits the answers of j that came (whole: the last commit
// of a full sync, which decides the cluster's status).
func (l *loopRun) commitArrived(j *job, whole bool) {
	o, cs := l.o, l.cs
	results := j.arrived
	j.arrived = nil
	ids := make([]string, len(results))
	for i, res := range results {
		delete(l.busy, res.node.ID)
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
		what = "pass of " + cs.id
	}
	ids = ids[:0]
	for i := range vals {
		ids = append(ids, vals[i].node.ID)
	}
	sig.Send(Step{Cluster: cs.id, Kind: StepCommit, Begin: true, Nodes: ids})
	moves := j.rep.runMoves
	lost, err := o.commit(j.ctx, cs, vals, whole, j.lost, &j.rep)
	sig.Send(Step{Cluster: cs.id, Kind: StepCommit, Nodes: ids})
	j.lost += lost
	if err != nil {
		j.err = fmt.Errorf("%s: %w", what, err)
		return
	}
	if !j.full && len(l.fulls) > 0 {
		if f := l.fulls[0]; f.touched != nil {
			for _, id := range ids {
				f.touched[id] = true
			}
		}
	}
	views := map[*budgetView]bool{}
	for i := range vals {
		views[vals[i].budget] = true
	}
	refreshed := false
	for v := range views {
		o.nudgeHeld(v)
		refreshed = o.refreshHeld(j.ctx, v) || refreshed
	}
	// A child of a run that this commit saw finish may admit the run's
	// next wave or its node's next step: create them, and sync the nodes
	// they go to. A child held, or held for a new reason, changes its run's
	// reason (core/runs). A commit that only saw run children start or
	// report progress asks for nothing: no run can move on for it. A direct call
	// (Pass, SyncNodes) does it before it returns; the loop's own syncs
	// leave it to the cluster's advancer, so that the next commit does not
	// wait for it.
	if j.rep.runMoves > moves || refreshed {
		if j.direct {
			o.advanceAndNudge(j.ctx, cs.id)
		} else {
			o.requestAdvance(cs)
		}
	}
}

// finish answers whoever waits for j.
func (l *loopRun) finish(j *job) {
	o, cs := l.o, l.cs
	if j.done {
		return
	}
	j.done = true
	if j.release != nil {
		j.release()
	}
	if len(j.arrived) > 0 {
		ids := make([]string, len(j.arrived))
		for i, res := range j.arrived {
			delete(l.busy, res.node.ID)
			ids[i] = res.node.ID
		}
		j.arrived = nil
		o.TestSignals.Steps.Send(Step{Cluster: cs.id, Kind: StepDrop, Nodes: ids})
	}
	err := j.err
	// Counted before whoever waits is answered.
	if j.full {
		o.metrics.observePass(time.Since(j.begin), j.rep, err)
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

// commit counts what the node syncs of nodes learnt into rep, then plans
// and writes it in one Update, or opens no write transaction when the
// answers cannot change anything (mayWrite). whole is true for the last
// commit of a full sync: only it decides the cluster's status, with lost,
// the actions the full sync's earlier commits made LOST. It returns how
// many actions this commit made LOST.
func (o *Orchestrator) commit(ctx context.Context, cs *clusterState, nodes []nodeResult, whole bool, lost int, rep *Report) (int, error) {
	now := action.UTC(time.Now())
	for _, res := range nodes {
		if res.ackSent.storeID != "" {
			cs.acked[res.node.ID] = res.ackSent
		}
		rep.Nodes++
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
	for _, wn := range w.warnings {
		o.log.Warn(wn[0].(string), wn[1:]...)
	}
	o.watchSent(cs.id, w)
	rep.Changes += w.changes()
	rep.runMoves += w.runMoves()
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
	return len(w.nodes) > 0 || w.cluster != nil, err
}
