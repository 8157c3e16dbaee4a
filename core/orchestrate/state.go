package orchestrate

import (
	"context"
	"time"

	"github.com/musterhq/muster/core/orchestrate/nodequeue"
)

// What the orchestrator keeps about a cluster and about one sync of it
// (docs/architecture.md, "One loop per cluster"). The requests (cluster.go)
// fill it, the cluster's loop (loop.go) and pipeline (pipeline.go) use it.

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
	// ComparedIDs is true when this sync listed every record of every
	// agent and compared id sets (every CompareIDsEvery-th full sync).
	ComparedIDs bool
	// Quiet counts the nodes a full sync left as stored because their
	// change counter had not moved (spread.go): one small request each.
	// Rested counts those it left as stored without a request: their
	// counter was asked within CounterEvery.
	Quiet, Rested int
	// runMoves counts the changes that may let a run move on
	// (writePlan.runMoves).
	runMoves int
	// moved names the runs the last commit's changes may let move on
	// (writePlan.movedRuns).
	moved runSet
}

// syncDone is the answer to a request that waits.
type syncDone struct {
	rep Report
	err error
	// refused: this replica does not hold the cluster's lease; nothing ran.
	refused bool
}

// direct is a request of a direct call (FullSync, SyncNodes): it runs under
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
	running  bool            // a loop goroutine runs
	fullWait []chan syncDone // the scheduler's full syncs
	directs  []*direct       // direct calls, in order
	wake     chan struct{}   // a new request for the running loop
	// dropClients asks the running loop to drop its clients
	// (DropAgentConnections).
	dropClients bool

	// nodes is the queue of the nudged nodes (NudgeNode), and of the nodes
	// whose sync runs; safe for concurrent use.
	nodes *nodequeue.Queue

	// the loop's own
	spread      turning                // the spread's position (spread.go)
	counters    turning                // the counters' turns' position (spread.go)
	lastContact map[string]time.Time   // node id → last successful sync
	acked       map[string]ackMark     // node id → the cursor last acknowledged to its agent
	seen        map[string]seenMark    // node id → its change counter as last committed (spread.go)
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
	// spreadFrom and spreadTo place a full sync on the spread (spread.go):
	// the nodes whose place falls in [spreadFrom, spreadTo) take their
	// full turn; wholeTurn: that is a whole revolution, every node.
	spreadFrom, spreadTo uint64
	wholeTurn            bool
	compareEvery         int // CompareIDsEvery
	// counterFrom and counterTo place a full sync on the counters' turns
	// (spread.go): the nodes whose place falls in [counterFrom, counterTo)
	// have their change counter asked, the others that may be left by it
	// rest; allCounters: every node's is asked.
	counterFrom, counterTo uint64
	allCounters            bool
}

func newClusterState(id string) *clusterState {
	return &clusterState{id: id, nodes: nodequeue.New(), wake: make(chan struct{}, 1),
		lastContact: map[string]time.Time{}, acked: map[string]ackMark{}, seen: map[string]seenMark{},
		clients: map[string]*nodeClient{}, ledger: newLedger()}
}

// want asks the cluster's running loop for a sync of node: the loop's own
// commits call it (the nodes a budget hold or a run's next wave sends work
// to), and the loop serves it before it parks.
func (cs *clusterState) want(node string) {
	cs.nodes.Add(node)
	cs.wakeLoop()
}

// wakeLoop wakes the cluster's running loop, or leaves a wake-up it has not
// taken yet: it never blocks.
func (cs *clusterState) wakeLoop() {
	select {
	case cs.wake <- struct{}{}:
	default:
	}
}

// The states of a full sync's node waiting for a worker (nodeResult.claim).
const (
	queued  int32 = iota // waiting for a worker
	talking              // a worker talks to it
	taken                // taken out of the batch by a nudged sync
)

// snapRead is a full sync's snapshot, read by a worker.
type snapRead struct {
	j     *job
	order []string
	snap  map[string]*nodeResult
	err   error
}
