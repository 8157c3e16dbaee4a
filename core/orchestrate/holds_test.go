package orchestrate

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/musterhq/muster/core/actions"
	"github.com/musterhq/muster/core/approval"
	"github.com/musterhq/muster/core/budget"
	"github.com/musterhq/muster/core/nodes"
	"github.com/musterhq/muster/core/runs"
	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/action"
	"github.com/musterhq/muster/shared/limit"
	"github.com/musterhq/muster/shared/live"
	"github.com/musterhq/muster/shared/testwait"
	"github.com/musterhq/muster/shared/wire"
)

// TestABudgetHoldsReasonIsRefreshedWhenTheBudgetChanges: an action the
// budget holds says how much of it is taken; when another node goes DOWN
// (seen by a sync of that node alone), the held action's reason says so at
// once, without its own agent being asked.
func TestABudgetHoldsReasonIsRefreshedWhenTheBudgetChanges(t *testing.T) {
	t.Parallel()
	one, _ := limit.Parse("1")
	h := setup(t, Config{Budget: live.New(budget.Policy{MaxUnavailable: map[string]limit.Limit{cluster: one},
		Kinds: []budget.KindRule{{Kind: "muster.io/debug.sleep", Disruptive: true}}})}, "n1", "n2", "n3")
	h.fullSync()
	a := h.create("n1", nil)
	h.fullSync()
	wantState(t, h.record(a), action.New)
	b := h.create("n3", nil)
	h.fullSync()
	if r := h.record(b); r.State != action.PendingSchedule || r.StateReason != "held by the disruption budget: 1 of 1 unavailable (n1 disruptive action)" {
		t.Fatalf("held: %s %q", r.State, r.StateReason)
	}
	h.agents["n3"].calls("") // forget the requests so far
	h.agents["n2"].set(func(f *fakeAgent) { f.down = true })
	if _, err := h.o.SyncNodes(context.Background(), cluster, []string{"n2"}); err != nil {
		t.Fatal(err)
	}
	if r := h.record(b); r.StateReason != "held by the disruption budget: 2 of 1 unavailable (n1 disruptive action, n2 down)" {
		t.Fatalf("the held reason after n2 went down: %q", r.StateReason)
	}
	if calls := h.agents["n3"].calls(""); len(calls) != 0 {
		t.Fatalf("n3's agent was asked %v", calls)
	}
	// Nothing changed since: nothing is written again.
	rows := h.st.RowsWritten()
	if _, err := h.o.SyncNodes(context.Background(), cluster, []string{"n2"}); err != nil || h.st.RowsWritten() != rows {
		t.Fatalf("a sync that changes nothing wrote %d rows (%v)", h.st.RowsWritten()-rows, err)
	}
}

// TestADrainedNodesActionSaysWhyItWaits: an action on a drained node stays
// PENDING_SCHEDULE with a state_reason that names the drain (written once),
// and is pushed once the node is undrained.
func TestADrainedNodesActionSaysWhyItWaits(t *testing.T) {
	t.Parallel()
	h := setup(t, Config{}, "n1")
	h.fullSync()
	drain := func(on bool) {
		h.update(func(ctx context.Context, tx store.Tx) error {
			var err error
			if on {
				_, err = nodes.Drain(ctx, tx, cluster, "n1", "maintenance", actions.Actor{Name: "alice"})
			} else {
				_, err = nodes.Undrain(ctx, tx, cluster, "n1", actions.Actor{Name: "alice"})
			}
			return err
		})
	}
	drain(true)
	id := h.create("n1", nil)
	h.fullSync()
	if r := h.record(id); r.State != action.PendingSchedule || r.StateReason != actions.ReasonDrained {
		t.Fatalf("on a drained node: %s %q", r.State, r.StateReason)
	}
	h.idle()
	drain(false)
	if rep := h.fullSync(); rep.Pushed != 1 {
		t.Fatalf("after the undrain: %+v", rep)
	}
	if r := h.record(id); r.State != action.New || r.StateReason == actions.ReasonDrained {
		t.Fatalf("after the undrain: %s %q", r.State, r.StateReason)
	}
}

// TestLastContactMovesInMemoryWithoutWrites: a sync that finds nothing new
// writes no row within ContactEvery, yet the loop knows the node answered.
func TestLastContactMovesInMemoryWithoutWrites(t *testing.T) {
	t.Parallel()
	h := setup(t, Config{ContactEvery: time.Hour}, "n1")
	h.fullSync()
	stored := h.node("n1").LastContact
	if stored == nil {
		t.Fatal("no last contact after the first sync")
	}
	h.idle() // no row written
	h.o.mu.Lock()
	kept := h.o.clusters[cluster].lastContact["n1"]
	h.o.mu.Unlock()
	if !kept.After(*stored) {
		t.Fatalf("kept last contact %v, not after the stored %v", kept, *stored)
	}
	if got := h.node("n1").LastContact; !got.Equal(*stored) {
		t.Fatalf("stored last contact moved from %v to %v", *stored, got)
	}
}

// TestLastContactIsStoredOnceContactEveryHasPassed: once the node's last
// contact is ContactEvery newer than the stored one, an otherwise idle sync
// stores it (the node's row alone, no event).
func TestLastContactIsStoredOnceContactEveryHasPassed(t *testing.T) {
	t.Parallel()
	h := setup(t, Config{ContactEvery: 20 * time.Millisecond}, "n1")
	h.fullSync()
	first := *h.node("n1").LastContact
	h.events()
	testwait.For(t, "the last contact stored again", func() bool {
		h.fullSync()
		return h.node("n1").LastContact.Sub(first) >= 20*time.Millisecond
	})
	if ev := h.events(); len(ev) != 0 {
		t.Fatalf("storing the last contact appended events %v", ev)
	}
}

// runOn creates and approves a run of one debug.sleep stage on node, with
// the harness's engine.
func (h *harness) runOn(engine *runs.Engine, node string) string {
	h.t.Helper()
	var id string
	h.update(func(ctx context.Context, tx store.Tx) error {
		run, err := engine.Create(ctx, tx, &wire.CreateRunRequest{ClusterID: cluster, Stages: []wire.StageSpec{{
			Kind: "muster.io/debug.sleep", Args: json.RawMessage(`{"seconds":1}`), Target: wire.Target{Nodes: []string{node}}}}},
			actions.Actor{Name: "alice"})
		if err != nil {
			return err
		}
		id = run.ID
		_, err = engine.Approve(ctx, tx, run.ID, "", actions.Actor{Name: "bob"})
		return err
	})
	return id
}

func (h *harness) run(id string) *store.Run {
	h.t.Helper()
	var r *store.Run
	h.update(func(ctx context.Context, tx store.Tx) error {
		var err error
		r, err = tx.Run(ctx, id)
		return err
	})
	return r
}

// TestARunHeldByTheBudgetSaysSo: a running run whose next child the budget
// holds says so in its own state_reason; the reason follows the budget
// when it changes and is gone once the child is sent.
func TestARunHeldByTheBudgetSaysSo(t *testing.T) {
	t.Parallel()
	one, _ := limit.Parse("1")
	pol := approval.DefaultPolicy()
	engine := runs.NewEngine(live.New(pol), &actions.Rules{Policy: live.New(pol)}, nil)
	h := setup(t, Config{Runs: engine, Budget: live.New(budget.Policy{MaxUnavailable: map[string]limit.Limit{cluster: one},
		Kinds: []budget.KindRule{{Kind: "muster.io/debug.sleep", Disruptive: true}}})}, "n1", "n2", "n3")
	h.fullSync()
	a := h.create("n1", nil)
	h.fullSync()
	wantState(t, h.record(a), action.New)
	id := h.runOn(engine, "n3")
	h.fullSync()
	want := runs.ReasonApproved + "; waiting: node n3 is held by the disruption budget of cluster " + cluster + ": 1 of 1 unavailable (n1 disruptive action)"
	if r := h.run(id); r.State != store.RunRunning || r.StateReason != want {
		t.Fatalf("held by the budget: %s %q, want %q", r.State, r.StateReason, want)
	}
	h.agents["n2"].set(func(f *fakeAgent) { f.down = true })
	if _, err := h.o.SyncNodes(context.Background(), cluster, []string{"n2"}); err != nil {
		t.Fatal(err)
	}
	want = runs.ReasonApproved + "; waiting: node n3 is held by the disruption budget of cluster " + cluster + ": 2 of 1 unavailable (n1 disruptive action, n2 down)"
	if r := h.run(id); r.StateReason != want {
		t.Fatalf("after n2 went down: %q, want %q", r.StateReason, want)
	}
	h.agents["n2"].set(func(f *fakeAgent) { f.down = false })
	h.agents["n1"].run(t, a, action.Done, nil)
	h.fullSync()
	h.fullSync()
	if r := h.run(id); r.State != store.RunRunning || r.StateReason != runs.ReasonApproved {
		t.Fatalf("once its child was sent: %s %q", r.State, r.StateReason)
	}
}

// TestARunHeldByADrainSaysSo: a running run whose child waits for its
// drained node says so in its state_reason, and no longer once the node is
// undrained.
func TestARunHeldByADrainSaysSo(t *testing.T) {
	t.Parallel()
	pol := approval.DefaultPolicy()
	engine := runs.NewEngine(live.New(pol), &actions.Rules{Policy: live.New(pol)}, nil)
	h := setup(t, Config{Runs: engine}, "n1")
	h.fullSync()
	drain := func(on bool) {
		h.update(func(ctx context.Context, tx store.Tx) error {
			var err error
			if on {
				_, err = nodes.Drain(ctx, tx, cluster, "n1", "maintenance", actions.Actor{Name: "alice"})
			} else {
				_, err = nodes.Undrain(ctx, tx, cluster, "n1", actions.Actor{Name: "alice"})
			}
			return err
		})
	}
	id := h.runOn(engine, "n1") // its child is created at once, not yet sent
	drain(true)
	h.fullSync()
	want := runs.ReasonApproved + "; waiting: node n1 is drained"
	if r := h.run(id); r.State != store.RunRunning || r.StateReason != want {
		t.Fatalf("on a drained node: %s %q, want %q", r.State, r.StateReason, want)
	}
	h.idle()
	drain(false)
	h.fullSync()
	if r := h.run(id); r.State != store.RunRunning || r.StateReason != runs.ReasonApproved {
		t.Fatalf("after the undrain: %s %q", r.State, r.StateReason)
	}
}

// TestANodeDownAfterALeaseChangeIsDownSinceTheTransition: a loop that never
// reached a node (a restart, a lease taken over) and finds it DOWN stores
// the transition's time as its last contact, not the stored one, which is
// the node's last change and may be days old.
func TestANodeDownAfterALeaseChangeIsDownSinceTheTransition(t *testing.T) {
	t.Parallel()
	h := setup(t, Config{ContactEvery: time.Hour}, "n1")
	h.fullSync()
	old := time.Now().Add(-72 * time.Hour).UTC()
	h.update(func(ctx context.Context, tx store.Tx) error {
		n, err := tx.Node(ctx, cluster, "n1")
		if err != nil {
			return err
		}
		n.LastContact = &old // stored with its last change, three days ago
		return tx.PutNode(ctx, n)
	})
	h.restart()
	h.agents["n1"].set(func(f *fakeAgent) { f.down = true })
	before := time.Now()
	testwait.For(t, "n1 DOWN", func() bool {
		h.o.FullSync(context.Background(), cluster)
		return h.node("n1").Status == store.NodeDown
	})
	if got := h.node("n1").LastContact; got == nil || got.Before(before.Add(-time.Second)) {
		t.Fatalf("a node found DOWN after a restart has last contact %v, want the transition's time (after %v), not the stale %v",
			got, before, old)
	}
}
