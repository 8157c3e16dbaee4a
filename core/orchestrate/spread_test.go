package orchestrate

import (
	"context"
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

// turnOf is the spread slice whose turn the next full sync of h is, and
// the slices, as the loop computes them (no full sync runs meanwhile).
func (h *harness) spreadTurn(n int) (turn, slices int) {
	h.o.mu.Lock()
	cs := h.o.clusters[cluster]
	h.o.mu.Unlock()
	s := h.o.spreadSlices(cs, n)
	return cs.fullSyncs % s, s
}

// TestOnlyNodesWhoseCounterMovedArePulled: a full sync asks every node's
// change counter; only the node whose counter moved (and a node whose turn
// in the spread it is) is read fully, and what changed there is imported.
func TestOnlyNodesWhoseCounterMovedArePulled(t *testing.T) {
	t.Parallel()
	nodes := []string{"n1", "n2", "n3", "n4", "n5", "n6"}
	h := setupCounted(t, Config{FullSyncEvery: time.Hour}, nodes...)
	h.forgetRequests()
	turn, slices := h.spreadTurn(len(nodes))
	if slices < 100 {
		t.Fatalf("%d spread slices for an hour at the default interval, want hundreds", slices)
	}
	id := h.agents["n3"].add("muster.io/debug.ping", action.Done)
	rep := h.fullSync()
	for _, n := range nodes {
		a := h.agents[n]
		if a.seen("GET /api/v1/changes") != 1 {
			t.Errorf("%s: %d counter requests, want 1", n, a.seen("GET /api/v1/changes"))
		}
		want := n == "n3" || sliceOf(n, slices) == turn
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
	// Three full syncs, an interval (10 s, +10%) apart, fit in 36 s.
	h := setupCounted(t, Config{FullSyncEvery: 36 * time.Second}, nodes...)
	if _, slices := h.spreadTurn(len(nodes)); slices != 3 {
		t.Fatalf("%d slices, want 3", slices)
	}
	full := map[string]int{}
	for range 3 {
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
// period, though the other passes leave the node by its counter.
func TestSpreadTurnFindsALostActionOnAQuietNode(t *testing.T) {
	t.Parallel()
	nodes := []string{"a", "b", "c", "d", "e", "f"}
	h := setupCounted(t, Config{FullSyncEvery: 36 * time.Second, CompareIDsEvery: 1}, nodes...)
	id := h.create("c", nil)
	h.fullSync() // pushed
	h.fullSync() // the counter the push moved is learnt
	if rec := h.record(id); rec.State != action.New {
		t.Fatalf("the action is %s, want NEW", rec.State)
	}
	h.agents["c"].forget(id) // no change, no tombstone: the counter stays
	full := 0
	for range 3 {
		h.forgetRequests()
		h.fullSync()
		if h.pulled("c") {
			full++
		}
	}
	if rec := h.record(id); rec.State != action.Lost {
		t.Fatalf("the action the agent lost is %s after a period, want LOST", rec.State)
	}
	if full != 1 {
		t.Fatalf("node c synced fully %d times in a period of 3 passes, want 1 (its turn)", full)
	}
}
