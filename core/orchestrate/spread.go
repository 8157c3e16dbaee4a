package orchestrate

import (
	"context"
	"hash/fnv"
	"time"

	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/action"
	"github.com/musterhq/muster/shared/client"
	"github.com/musterhq/muster/shared/wire"
)

// Idle cost follows changes (docs/architecture.md, "Change counters and the
// spread full sync"; DESIGN §27). Every agent keeps a change counter over
// its queue and its identity (GET /api/v1/changes, also in its info). A
// full sync asks a node for it first, and syncs the node fully (info,
// changes, pushes) only when it moved since the sync the loop last
// committed for that node, when the node has something to push or cancel,
// when a run's child is in flight there, or when it is the node's turn in
// the spread: every node takes a full turn once per FullSyncEvery, the
// nodes split evenly over the full syncs of that period. A node that
// answered the same counter is left as stored: nothing is read from it,
// nothing is written.

// seenMark is the change counter a node's agent told in the sync whose
// answer the loop last committed, at the address it was reached at.
type seenMark struct {
	addr    string
	changes wire.ChangeCounter
}

// Bounds of ScaledFullSyncEvery.
const (
	minFullSyncEvery = 10 * time.Second
	maxFullSyncEvery = 5 * time.Minute
	// fullSyncPerNode is what each node adds to the scaled period: 10 s at
	// 1,000 nodes, 100 s at 10,000, the 5 minutes at 30,000 and beyond.
	fullSyncPerNode = 10 * time.Millisecond
)

// ScaledFullSyncEvery is the default FullSyncEvery of a cluster of n nodes:
// 10 ms a node, from 10 seconds up to 5 minutes.
func ScaledFullSyncEvery(n int) time.Duration {
	return min(max(time.Duration(n)*fullSyncPerNode, minFullSyncEvery), maxFullSyncEvery)
}

// spreadSlices is how many slices the nodes of a cluster of n nodes are
// split into: so many full syncs, each Interval (+10% jitter) and the last
// full sync's length apart, fit in FullSyncEvery. At least 1: every node
// takes its full turn at every full sync.
func (o *Orchestrator) spreadSlices(cs *clusterState, n int) int {
	period := o.cfg.FullSyncEvery
	if period <= 0 {
		period = ScaledFullSyncEvery(n)
	}
	apart := o.cfg.Interval + o.cfg.Interval/10 + cs.lastFull
	return max(1, int(period/apart))
}

// sliceOf is the slice of node id among slices (a stable hash: a node keeps
// its slice from one full sync to the next, whatever nodes come and go).
func sliceOf(id string, slices int) int {
	if slices <= 1 {
		return 0
	}
	h := fnv.New32a()
	h.Write([]byte(id))
	return int(h.Sum32() % uint32(slices))
}

// inTurn reports whether it is node id's turn in the full sync j: it is
// synced fully.
func (j *job) inTurn(id string) bool {
	return j.full && sliceOf(id, j.slices) == j.turn%j.slices
}

// compares reports whether the turns of the full sync j list every record
// and compare id sets: every CompareIDsEvery-th round of the spread's
// slices.
func (j *job) compares() bool {
	return (j.turn/j.slices)%j.compareEvery == 0
}

// mayAskCounter reports whether the full sync j may sync res's node by its
// change counter alone: the node is UP as stored and was reached at this
// address with a counter the loop committed, has nothing to push or cancel
// and no run child in flight, and it is not its turn in the spread.
func (o *Orchestrator) mayAskCounter(cs *clusterState, j *job, res *nodeResult) bool {
	n := &res.node
	if !j.full || j.inTurn(n.ID) || n.Status != store.NodeUp || store.DownByDiscovery(n) {
		return false
	}
	if seen, ok := cs.seen[n.ID]; !ok || seen.addr != n.Addr {
		return false
	}
	for i := range res.open {
		if due(&res.open[i]) {
			return false
		}
	}
	return true
}

// due reports whether an open action calls for a full sync of its node:
// one to push or cancel, or a run's child the agent may be running (its
// end moves its run on).
func due(r *store.Record) bool {
	return r.State == action.PendingSchedule || r.CancelRequested || (r.RunID != "" && unfinishedChild(r.State))
}

// askCounter asks the node's agent for its change counter; it reports
// whether the node is left as stored (quiet) because the counter is the one
// the loop last committed. Any failure leaves the node to a full sync, which
// tells why it failed.
func (o *Orchestrator) askCounter(ctx context.Context, res *nodeResult) bool {
	n := &res.node
	ag := client.NewAgent(o.agentURL(n.Addr), res.hc)
	c, err := call(ctx, o.cfg.AgentTimeout, ag.ChangeCounter)
	if err != nil || *c != res.seen {
		return false
	}
	res.quiet = true
	res.status, res.storeID, res.cursor = store.NodeUp, n.StoreID, n.Cursor
	res.budget.observe(n.ID, false, nil)
	return true
}

// noteCounters keeps, after a commit, the change counter each node's agent
// told in its answer: a node UP with a counter keeps it, a node DOWN or
// without one (an agent of an earlier release) loses it.
func noteCounters(cs *clusterState, results []nodeResult) {
	for i := range results {
		res := &results[i]
		switch {
		case res.quiet || res.held:
		case res.status == store.NodeUp && res.info != nil && res.info.Changes != nil:
			cs.seen[res.node.ID] = seenMark{addr: res.node.Addr, changes: *res.info.Changes}
		default:
			delete(cs.seen, res.node.ID)
		}
	}
}
