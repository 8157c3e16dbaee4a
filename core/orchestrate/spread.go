package orchestrate

import (
	"context"
	"hash/fnv"
	"math/bits"
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
// the spread: every node takes a full turn once per FullSyncEvery (plus
// one full sync's gap), whatever the lengths of the passes. A node that
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

// counterPerNode is what each node adds to the scaled CounterEvery: a
// cluster asks about 1,000 counters a second at most, whatever its size.
const counterPerNode = time.Millisecond

// ScaledCounterEvery is the default CounterEvery of a cluster of n nodes
// whose full syncs come every interval and whose every node is fully synced
// every fullEvery: the interval, or 1 ms a node when longer (10 s at 10,000
// nodes with the default interval, 50 s at 50,000), never longer than
// fullEvery (a node's full turn reads it anyway).
func ScaledCounterEvery(n int, interval, fullEvery time.Duration) time.Duration {
	return min(max(interval, time.Duration(n)*counterPerNode), fullEvery)
}

// The spread turns by time. A node's place on the spread is the 32-bit
// hash of its id (nodeMark), a fraction of a revolution; the cluster's
// spread position (clusterState.spread, in 2^-32 revolutions) moves on at
// every full sync by the time since the last one over FullSyncEvery, and a
// full sync takes the turn of the nodes whose place it moved over. The
// windows of successive full syncs are contiguous whatever their lengths,
// the node count or FullSyncEvery do meanwhile: every node takes its turn
// once a revolution, so within FullSyncEvery plus one full sync's gap.
// A gap of a whole period or more (and the first full sync) is a whole
// revolution from the next revolution's start: every node in turn, once.
const revolution = uint64(1) << 32

// nodeMark is node id's place on the spread (a stable hash: a node keeps
// its place whatever nodes come and go). FNV-1a alone keeps ids that
// differ in their last bytes close together; the mix spreads them.
func nodeMark(id string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(id))
	x := h.Sum64()
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	return (x ^ x>>31) >> 32
}

// spreadPeriod is the cluster's FullSyncEvery for n nodes.
func (o *Orchestrator) spreadPeriod(n int) time.Duration {
	if o.cfg.FullSyncEvery > 0 {
		return o.cfg.FullSyncEvery
	}
	return ScaledFullSyncEvery(n)
}

// counterPeriod is the cluster's CounterEvery for n nodes.
func (o *Orchestrator) counterPeriod(n int) time.Duration {
	if o.cfg.CounterEvery > 0 {
		return o.cfg.CounterEvery
	}
	return ScaledCounterEvery(n, o.cfg.Interval, o.spreadPeriod(n))
}

// placeSpread places the full sync j, of n nodes starting at now, on the
// spread and on the counters' turns, and moves the cluster's positions
// on. A direct full sync (FullSync) asks every node's counter, and leaves
// the counters' position where it was.
func (o *Orchestrator) placeSpread(cs *clusterState, j *job, n int, now time.Time) {
	j.spreadFrom, j.spreadTo, j.wholeTurn = cs.spread.move(o.spreadPeriod(n), now)
	if j.direct {
		j.allCounters = true
		return
	}
	j.counterFrom, j.counterTo, j.allCounters = cs.counters.move(o.counterPeriod(n), now)
}

// turning is a position on a revolution that turns by time, once per
// period (the spread, the counters' turns).
type turning struct {
	pos uint64    // in 2^-32 revolutions
	at  time.Time // when it last moved
}

// move moves t on to now, over period, and returns the window it moved
// over, [from, to); whole when that is a whole revolution, from the next
// revolution's start: the first move, or one after a gap of a period or
// more.
func (t *turning) move(period time.Duration, now time.Time) (from, to uint64, whole bool) {
	from = t.pos
	if !t.at.IsZero() && now.Sub(t.at) < period {
		hi, lo := bits.Mul64(uint64(max(0, now.Sub(t.at))), revolution)
		moved, _ := bits.Div64(hi, lo, uint64(period)) // hi < period: the gap is under it
		to = from + moved
	} else {
		from = (t.pos + revolution - 1) &^ (revolution - 1)
		to = from + revolution
		whole = true
	}
	t.pos, t.at = to, now
	return from, to, whole
}

// inWindow is where node id's place falls in the window [from, to) of a
// revolution, if it does.
func inWindow(from, to uint64, id string) (uint64, bool) {
	p := from&^(revolution-1) | nodeMark(id)
	if p < from {
		p += revolution
	}
	return p, p < to
}

// turnMark is where node id's turn falls in the full sync j's window, if it
// does.
func (j *job) turnMark(id string) (uint64, bool) {
	p, ok := inWindow(j.spreadFrom, j.spreadTo, id)
	return p, j.full && ok
}

// counterTurn reports whether node id's change counter is asked in the full
// sync j, if the node may be left by it (mayAskCounter): every node once
// per CounterEvery, spread evenly over the full syncs of that period (the
// full sync's window of the counters' turns); every node in a direct one.
// The others rest: the full sync sends them nothing.
func (j *job) counterTurn(id string) bool {
	if j.allCounters {
		return true
	}
	_, ok := inWindow(j.counterFrom, j.counterTo, id)
	return ok
}

// inTurn reports whether it is node id's turn in the full sync j: it is
// synced fully.
func (j *job) inTurn(id string) bool {
	_, ok := j.turnMark(id)
	return ok
}

// compares reports whether node id's turn in the full sync j lists every
// record and compares id sets: its turn of every CompareIDsEvery-th
// revolution of the spread.
func (j *job) compares(id string) bool {
	p, ok := j.turnMark(id)
	return ok && (p/revolution)%uint64(max(1, j.compareEvery)) == 0
}

// mayAskCounter reports whether the full sync j may sync res's node by its
// change counter alone: the node is UP as stored and was reached at this
// address with a counter the loop committed, has nothing to push or cancel
// and no action in flight, and it is not its turn in the spread.
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
// one to push or cancel, or one in flight on the agent (its end is what
// the node's next sync brings; its watcher tells it first, watch.go).
func due(r *store.Record) bool {
	return r.State == action.PendingSchedule || r.CancelRequested || onAgent(r.State)
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
