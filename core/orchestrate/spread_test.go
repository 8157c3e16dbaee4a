package orchestrate

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/action"
)

// setupCounted is setup with agents that keep a change counter, and two
// full syncs run: the nodes are UP and the loop knows their counters.
func setupCounted(t *testing.T, cfg Config, nodes ...string) *harness {
	t.Helper()
	h := setup(t, cfg, nodes...)
	for _, a := range h.agents {
		a.set(func(f *fakeAgent) { f.counted, f.epoch = true, "e-" })
	}
	h.fullSync()
	h.fullSync()
	return h
}

// forget clears every agent's request log.
func (h *harness) forgetRequests() {
	for _, a := range h.agents {
		a.calls("")
	}
}

// pulled reports whether node's agent was read fully (info or changes)
// since the last forgetRequests.
func (h *harness) pulled(node string) bool {
	a := h.agents[node]
	return a.seen("GET /api/v1/info") > 0 || a.seen("GET /api/v1/actions") > 0
}

// fakeClock is a clock the test moves (Config.Now).
type fakeClock struct{ ns atomic.Int64 }

func newFakeClock() *fakeClock {
	c := &fakeClock{}
	c.ns.Store(time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC).UnixNano())
	return c
}

func (c *fakeClock) now() time.Time      { return time.Unix(0, c.ns.Load()).UTC() }
func (c *fakeClock) add(d time.Duration) { c.ns.Add(int64(d)) }

// TestOnlyNodesWhoseCounterMovedArePulled: a full sync asks every node's
// change counter; only the node whose counter moved (and a node whose turn
// in the spread it is) is read fully, and what changed there is imported.
func TestOnlyNodesWhoseCounterMovedArePulled(t *testing.T) {
	t.Parallel()
	nodes := []string{"n1", "n2", "n3", "n4", "n5", "n6"}
	clock := newFakeClock()
	h := setupCounted(t, Config{FullSyncEvery: time.Hour, Now: clock.now}, nodes...)
	h.forgetRequests()
	clock.add(10 * time.Minute) // a sixth of the period: a node of six may take its turn
	j := &job{full: true, spreadFrom: h.o.clusters[cluster].spread.pos}
	j.spreadTo = j.spreadFrom + revolution/6
	id := h.agents["n3"].add("muster.io/debug.ping", action.Done)
	rep := h.fullSync()
	for _, n := range nodes {
		a := h.agents[n]
		asks := 1
		if j.inTurn(n) {
			asks = 0 // its turn: synced fully without asking
		}
		if a.seen("GET /api/v1/changes") != asks {
			t.Errorf("%s: %d counter requests, want %d", n, a.seen("GET /api/v1/changes"), asks)
		}
		want := n == "n3" || j.inTurn(n)
		if got := h.pulled(n); got != want {
			t.Errorf("%s pulled: %v, want %v (requests %v)", n, got, want, a.calls(""))
		}
	}
	if rec := h.record(id); rec.State != action.Done {
		t.Fatalf("the moved node's new action is %s in the core, want DONE", rec.State)
	}
	if rep.Quiet < len(nodes)-2 {
		t.Fatalf("report %+v: want at least %d quiet nodes", rep, len(nodes)-2)
	}
}

// TestNodesWithWorkArePulledWhateverTheirCounter: a node with an action to
// push, and one with a cancel to send, are synced fully though their
// counters did not move.
func TestNodesWithWorkArePulledWhateverTheirCounter(t *testing.T) {
	t.Parallel()
	h := setupCounted(t, Config{FullSyncEvery: time.Hour}, "n1", "n2", "n3")
	push := h.create("n1", nil)
	h.fullSync()
	if rec := h.record(push); rec.State != action.New {
		t.Fatalf("the action to push is %s, want NEW (pushed)", rec.State)
	}
	h.fullSync() // the counter the push moved is learnt
	h.update(func(ctx context.Context, tx store.Tx) error {
		r, err := tx.Action(ctx, push)
		if err != nil {
			return err
		}
		r.CancelRequested = true
		return tx.UpdateAction(ctx, r)
	})
	h.forgetRequests()
	h.fullSync()
	if got := h.agents["n1"].seen("/cancel"); got != 1 {
		t.Fatalf("%d cancels sent to n1, want 1", got)
	}
}

// TestSpreadSyncsEveryNodeFullyOncePerPeriod: with nothing changing, each
// node is read fully exactly once over as many full syncs as the spread
// has slices.
func TestSpreadSyncsEveryNodeFullyOncePerPeriod(t *testing.T) {
	t.Parallel()
	nodes := []string{"a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l"}
	clock := newFakeClock()
	h := setupCounted(t, Config{FullSyncEvery: 36 * time.Second, Now: clock.now}, nodes...)
	full := map[string]int{}
	for range 3 { // three full syncs 12 s apart: one period
		clock.add(12 * time.Second)
		h.forgetRequests()
		h.idle()
		for _, n := range nodes {
			if h.pulled(n) {
				full[n]++
			}
		}
	}
	for _, n := range nodes {
		if full[n] != 1 {
			t.Errorf("%s fully synced %d times in a period, want 1", n, full[n])
		}
	}
}

// TestIdleFleetWritesNoRowsAsTimePasses: an idle fleet's full syncs write no
// row, whether the nodes are left by their counters or in their turn, and
// however long ago their last contact was stored.
func TestIdleFleetWritesNoRowsAsTimePasses(t *testing.T) {
	t.Parallel()
	var now time.Time
	clock := func() time.Time { return now }
	now = time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	h := setupCounted(t, Config{FullSyncEvery: 22 * time.Second, Now: clock}, "n1", "n2", "n3", "n4")
	for range 6 {
		now = now.Add(10 * time.Minute)
		h.idle()
	}
}

// TestSpreadTurnFindsALostActionOnAQuietNode: an action the agent lost
// without its counter moving is found LOST in the node's turn, within one
// period; the node, with an action in flight as the core sees it, is
// synced fully at every pass meanwhile (work in flight is never left by its
// counter).
func TestSpreadTurnFindsALostActionOnAQuietNode(t *testing.T) {
	t.Parallel()
	nodes := []string{"a", "b", "c", "d", "e", "f"}
	clock := newFakeClock()
	h := setupCounted(t, Config{FullSyncEvery: 36 * time.Second, CompareIDsEvery: 1, Now: clock.now}, nodes...)
	id := h.create("c", nil)
	h.fullSync() // pushed
	h.fullSync() // the counter the push moved is learnt
	if rec := h.record(id); rec.State != action.New {
		t.Fatalf("the action is %s, want NEW", rec.State)
	}
	h.agents["c"].forget(id) // no change, no tombstone: the counter stays
	for pass := range 3 {
		clock.add(12 * time.Second)
		h.forgetRequests()
		inFlight := h.record(id).State == action.New
		h.fullSync()
		if inFlight && !h.pulled("c") {
			t.Fatalf("pass %d left node c by its counter with an action in flight", pass)
		}
	}
	if rec := h.record(id); rec.State != action.Lost {
		t.Fatalf("the action the agent lost is %s after a period, want LOST", rec.State)
	}
}

// TestSpreadTurnsEveryNodeWithinThePeriodWhateverThePassLengths: with full
// syncs irregularly apart (short and long passes, as a fleet whose pass
// length or node count changes sees), no node waits longer than
// FullSyncEvery plus the longest gap between two full syncs for its full
// turn, and every node takes one in every period.
func TestSpreadTurnsEveryNodeWithinThePeriodWhateverThePassLengths(t *testing.T) {
	t.Parallel()
	var nodes []string
	for i := range 24 {
		nodes = append(nodes, fmt.Sprintf("node-%02d", i))
	}
	const period = time.Minute
	clock := newFakeClock()
	h := setupCounted(t, Config{FullSyncEvery: period, Now: clock.now}, nodes...)
	last := map[string]time.Time{}
	for _, n := range nodes {
		last[n] = clock.now()
	}
	gaps := []time.Duration{25 * time.Second, 30 * time.Second, 28 * time.Second, 40 * time.Second,
		2 * time.Second, 27 * time.Second, 30 * time.Second, time.Second, 29 * time.Second}
	var longest time.Duration
	for i := range 60 {
		gap := gaps[i%len(gaps)]
		longest = max(longest, gap)
		clock.add(gap)
		h.forgetRequests()
		h.fullSync()
		for _, n := range nodes {
			if h.pulled(n) {
				last[n] = clock.now()
			} else if waited := clock.now().Sub(last[n]); waited > period+longest {
				t.Fatalf("pass %d: %s not fully synced for %s, want at most %s", i, n, waited, period+longest)
			}
		}
	}
}

// scheduled runs a full sync as the scheduler asks for one (not a direct
// FullSync, which asks every counter).
func (h *harness) scheduled() Report {
	h.t.Helper()
	rep, ok, err := h.o.scheduledFullSync(context.Background(), cluster)
	if err != nil || !ok {
		h.t.Fatalf("scheduled full sync: ok %v, %v", ok, err)
	}
	return rep
}

// TestCounterAsksSpreadOverCounterEvery: the scheduler's full syncs ask each
// idle node's change counter once per CounterEvery, not at every pass, the
// asks spread over the passes of that period; the nodes whose turn it is not
// are sent nothing and written nothing; a node with an action to push is
// synced at its first pass whatever its turn, and so is a node with an
// action in flight at every pass.
func TestCounterAsksSpreadOverCounterEvery(t *testing.T) {
	t.Parallel()
	var nodes []string
	for i := range 24 {
		nodes = append(nodes, fmt.Sprintf("node-%02d", i))
	}
	clock := newFakeClock()
	h := setupCounted(t, Config{FullSyncEvery: 1000 * time.Hour, CounterEvery: 36 * time.Second, Now: clock.now}, nodes...)
	clock.add(time.Hour) // the first scheduled pass asks all: its window is a whole turn
	h.scheduled()
	asked := map[string]int{}
	rested := 0
	for pass := range 6 { // six passes 12 s apart: two periods
		clock.add(12 * time.Second)
		h.forgetRequests()
		rows := h.st.RowsWritten()
		rep := h.scheduled()
		if rep.Changes != 0 || h.st.RowsWritten() != rows {
			t.Fatalf("pass %d wrote %d rows: %+v", pass, h.st.RowsWritten()-rows, rep)
		}
		rested += rep.Rested
		for _, n := range nodes {
			for _, c := range h.agents[n].calls("") {
				if c != "GET /api/v1/changes" {
					t.Errorf("pass %d: idle %s sent %s", pass, n, c)
				}
				asked[n]++
			}
		}
	}
	for _, n := range nodes {
		if asked[n] != 2 {
			t.Errorf("%s: counter asked %d times in two periods, want 2", n, asked[n])
		}
	}
	if rested != 6*len(nodes)-2*len(nodes) {
		t.Errorf("%d nodes rested over the passes, want %d", rested, 4*len(nodes))
	}

	// A push due: synced at the next pass, whatever its counter's turn, and
	// with the action in flight at every pass after.
	clock.add(12 * time.Second)
	h.scheduled()
	id := h.create("node-07", nil)
	for pass := range 3 {
		clock.add(12 * time.Second)
		h.forgetRequests()
		h.scheduled()
		if !h.pulled("node-07") {
			t.Fatalf("pass %d: node-07 with work not synced", pass)
		}
	}
	if rec := h.record(id); rec.State != action.New {
		t.Fatalf("the action is %s, want NEW (pushed)", rec.State)
	}
}

// TestScaledCounterEvery: the interval up to 10,000 nodes, 1 ms a node
// beyond, never past the full sync period.
func TestScaledCounterEvery(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		n              int
		interval, full time.Duration
		want           time.Duration
	}{
		{1000, 10 * time.Second, 10 * time.Second, 10 * time.Second},
		{10000, 10 * time.Second, 100 * time.Second, 10 * time.Second},
		{50000, 10 * time.Second, 5 * time.Minute, 50 * time.Second},
		{500000, 10 * time.Second, 5 * time.Minute, 5 * time.Minute},
		{100, time.Minute, 10 * time.Second, 10 * time.Second},
	} {
		if got := ScaledCounterEvery(c.n, c.interval, c.full); got != c.want {
			t.Errorf("ScaledCounterEvery(%d, %v, %v) = %v, want %v", c.n, c.interval, c.full, got, c.want)
		}
	}
}
