package orchestrate_test

import (
	"context"
	"testing"

	"github.com/musterhq/muster/core/budget"
	"github.com/musterhq/muster/core/orchestrate"
	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/action"
	"github.com/musterhq/muster/shared/limit"
	"github.com/musterhq/muster/shared/live"
)

const kindSleep = "muster.io/debug.sleep"

func budgetOf(t *testing.T, max string) budget.Policy {
	t.Helper()
	l, err := limit.Parse(max)
	if err != nil {
		t.Fatal(err)
	}
	return budget.Policy{MaxUnavailable: map[string]limit.Limit{cluster: l},
		Kinds: []budget.KindRule{{Kind: kindSleep, Disruptive: true}}}
}

// TestBudgetHoldsADisruptiveActionUntilThereIsRoom: with max_unavailable 1,
// a disruptive action on a second node waits in PENDING_SCHEDULE, saying
// why (written once: full syncs that hold it again write nothing), and goes
// once the first is over. A node's later actions wait behind its held one;
// non-disruptive actions of other nodes go.
func TestBudgetHoldsADisruptiveActionUntilThereIsRoom(t *testing.T) {
	t.Parallel()
	e := setup(t, orchestrate.Config{Budget: live.New(budgetOf(t, "1"))}, "n1", "n2", "n3")
	first := e.create("n1", kindSleep, `{"seconds":300}`)
	e.fullSyncUntil("the first to run", func() bool { return e.record(first).State == action.Running })
	second := e.create("n2", kindSleep, `{"seconds":0}`)
	behind := e.create("n2", "muster.io/debug.ping", `{}`)
	other := e.create("n3", "muster.io/debug.ping", `{}`)
	e.fullSyncUntil("the ping of n3", func() bool { return e.record(other).State == action.Done })

	rec := e.record(second)
	if rec.State != action.PendingSchedule || rec.StateReason != "held by the disruption budget: 1 of 1 unavailable (n1 disruptive action)" || rec.PushedStoreID != "" {
		t.Fatalf("second: %s %q pushed to %q", rec.State, rec.StateReason, rec.PushedStoreID)
	}
	if r := e.record(behind); r.State != action.PendingSchedule || r.PushedStoreID != "" {
		t.Fatalf("the action behind the held one was pushed: %s", r.State)
	}
	rows := e.st.RowsWritten()
	for range 3 {
		if rep := e.fullSync(); rep.Changes != 0 || rep.Pushed != 0 {
			t.Fatalf("a full sync holding the action again wrote %+v", rep)
		}
	}
	if e.st.RowsWritten() != rows {
		t.Fatalf("full syncs holding the action again wrote %d rows", e.st.RowsWritten()-rows)
	}

	e.update(func(ctx context.Context, tx store.Tx) error {
		r, err := tx.Action(ctx, first)
		if err != nil {
			return err
		}
		r.CancelRequested = true
		return tx.UpdateAction(ctx, r)
	})
	e.fullSyncUntil("the second and the ping behind it to finish", func() bool {
		return e.record(second).State == action.Done && e.record(behind).State == action.Done
	})
	a, b := e.record(first), e.record(second)
	if a.State != action.Cancelled || a.FinishedTS == nil || b.StartedTS == nil || b.StartedTS.Before(*a.FinishedTS) {
		t.Fatalf("overlap: first %s finished %v, second started %v", a.State, a.FinishedTS, b.StartedTS)
	}
	if b.StateReason != "" {
		t.Fatalf("the held reason stayed after the push: %q", b.StateReason)
	}
}

// TestBudgetCountsDownNodes: a DOWN node takes the budget's only room.
func TestBudgetCountsDownNodes(t *testing.T) {
	t.Parallel()
	e := setup(t, orchestrate.Config{Budget: live.New(budgetOf(t, "1"))}, "n1", "n2")
	e.agents["n1"].stop()
	e.fullSync()
	id := e.create("n2", kindSleep, `{"seconds":0}`)
	e.fullSync()
	if rec := e.record(id); rec.State != action.PendingSchedule || rec.StateReason != "held by the disruption budget: 1 of 1 unavailable (n1 down)" {
		t.Fatalf("with n1 down: %s %q", rec.State, rec.StateReason)
	}
}

// TestBudgetCountsDrainedNodes: a drained node takes the budget's only room.
func TestBudgetCountsDrainedNodes(t *testing.T) {
	t.Parallel()
	e := setup(t, orchestrate.Config{Budget: live.New(budgetOf(t, "1"))}, "n1", "n2")
	e.fullSync()
	e.update(func(ctx context.Context, tx store.Tx) error {
		n, err := tx.Node(ctx, cluster, "n1")
		if err != nil {
			return err
		}
		n.Drained = true
		return tx.PutNode(ctx, n)
	})
	id := e.create("n2", kindSleep, `{"seconds":0}`)
	e.fullSync()
	if rec := e.record(id); rec.State != action.PendingSchedule || rec.StateReason != "held by the disruption budget: 1 of 1 unavailable (n1 drained)" {
		t.Fatalf("with n1 drained: %s %q", rec.State, rec.StateReason)
	}
}
