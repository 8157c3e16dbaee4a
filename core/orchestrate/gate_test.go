package orchestrate

import (
	"strings"
	"testing"
	"time"

	"github.com/musterhq/muster/core/budget"
	"github.com/musterhq/muster/core/schedule"
	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/action"
	"github.com/musterhq/muster/shared/live"
	"github.com/musterhq/muster/shared/testwait"
)

const kindPing = "muster.io/debug.ping"

// gateSetup is a cluster whose sleep kind is disruptive and whose calendar
// the test sets through cals.
func gateSetup(t *testing.T, nodes ...string) (*harness, *live.Value[schedule.Calendars]) {
	t.Helper()
	cals := live.New[schedule.Calendars](nil)
	h := setup(t, Config{Interval: time.Hour, Calendars: cals,
		Budget: live.New(budget.Policy{Kinds: []budget.KindRule{{Kind: "muster.io/debug.sleep", Disruptive: true}}})}, nodes...)
	return h, cals
}

// closedWindow opens on 29 February only, for a minute.
func closedWindow(t *testing.T) *schedule.Calendar {
	t.Helper()
	w, err := schedule.NewWindow("0 0 29 2 *", time.Minute, "UTC")
	if err != nil {
		t.Fatal(err)
	}
	return &schedule.Calendar{Windows: []schedule.Window{w}}
}

func frozenNow(reason string) *schedule.Calendar {
	now := time.Now()
	return &schedule.Calendar{Freezes: []schedule.Freeze{{From: now.Add(-time.Hour), To: now.Add(time.Hour), Reason: reason}}}
}

// TestWindowHoldsDisruptiveActionsOnly: outside every window a disruptive
// action waits in PENDING_SCHEDULE saying when the window opens (written
// once), and a non-disruptive one behind it on the same node goes at
// once; when the window opens (the calendar is reloaded here), it goes.
func TestWindowHoldsDisruptiveActionsOnly(t *testing.T) {
	t.Parallel()
	h, cals := gateSetup(t, "n1")
	cals.Store(schedule.Calendars{cluster: closedWindow(t)})
	held := h.create("n1", nil)
	ping := h.create("n1", func(r *store.Record) { r.Kind = kindPing })
	h.fullSync()
	rec := h.record(held)
	wantState(t, rec, action.PendingSchedule)
	if !strings.HasPrefix(rec.StateReason, "outside the maintenance window; next opens 20") || rec.PushedStoreID != "" {
		t.Fatalf("held: %q, pushed to %q", rec.StateReason, rec.PushedStoreID)
	}
	wantState(t, h.record(ping), action.New)
	if rep := h.fullSync(); rep.Changes != 0 || rep.Pushed != 0 {
		t.Fatalf("a full sync holding it again wrote %+v", rep)
	}
	cals.Store(nil)
	h.fullSync()
	wantState(t, h.record(held), action.New)
}

// TestFreezeHoldsEvenUrgentAndUrgentPassesAClosedWindow: urgent passes a
// closed window, never a freeze; the freeze's reason is shown.
func TestFreezeHoldsEvenUrgentAndUrgentPassesAClosedWindow(t *testing.T) {
	t.Parallel()
	h, cals := gateSetup(t, "n1", "n2")
	urgent := func(r *store.Record) { r.Urgent = "the disk fills up" }
	cals.Store(schedule.Calendars{cluster: frozenNow("year-end")})
	frozen := h.create("n1", urgent)
	h.fullSync()
	rec := h.record(frozen)
	wantState(t, rec, action.PendingSchedule)
	if !strings.HasPrefix(rec.StateReason, "frozen until ") || !strings.HasSuffix(rec.StateReason, ": year-end") {
		t.Fatalf("frozen urgent action: %q", rec.StateReason)
	}
	cals.Store(schedule.Calendars{cluster: closedWindow(t)})
	passing := h.create("n2", urgent)
	plain := h.create("n2", nil)
	h.fullSync()
	wantState(t, h.record(passing), action.New)
	wantState(t, h.record(frozen), action.New)
	wantState(t, h.record(plain), action.PendingSchedule)
}

// TestNotBeforeHoldsAnyActionAndAWakeUpPushesIt: an action whose
// not_before is to come waits, whatever its kind, saying until when; the
// wake-up armed for that moment nudges its node, with no full sync between.
func TestNotBeforeHoldsAnyActionAndAWakeUpPushesIt(t *testing.T) {
	t.Parallel()
	h, _ := gateSetup(t, "n1")
	h.fullSync()
	// Far enough ahead that the full sync below ends before it even on a loaded
	// machine; the wake-up then pushes it about 3 s from now.
	at := action.UTC(time.Now().Add(3 * time.Second))
	id := h.create("n1", func(r *store.Record) { r.Kind, r.NotBefore = kindPing, &at })
	h.fullSync()
	rec := h.record(id)
	wantState(t, rec, action.PendingSchedule)
	if rec.StateReason != "not before "+at.Format(time.RFC3339) {
		t.Fatalf("reason %q", rec.StateReason)
	}
	h.start() // its first full sync holds it again and arms the wake-up; the interval is an hour
	testwait.For(t, "the wake-up to push it", func() bool { return h.record(id).State == action.New })
	if _, ok := h.agents["n1"].get(id); !ok {
		t.Fatal("the agent does not hold it")
	}
}

// TestAFreezeThatBeginsDuringABatchStopsItsLaterPushes: a node's pushes go
// one after another; a freeze that begins (here, reloaded) while the first
// is on its way holds the second, which is not sent and says why.
func TestAFreezeThatBeginsDuringABatchStopsItsLaterPushes(t *testing.T) {
	t.Parallel()
	h, cals := gateSetup(t, "n1")
	first := h.create("n1", nil)
	second := h.create("n1", nil)
	ag := h.agents["n1"]
	ag.set(func(f *fakeAgent) {
		f.pushHook = func(id string) {
			if id == first {
				cals.Store(schedule.Calendars{cluster: frozenNow("incident 42")})
			}
		}
	})
	h.fullSync()
	wantState(t, h.record(first), action.New)
	if _, sent := ag.get(second); sent {
		t.Fatal("the second push went out after the freeze began")
	}
	// Never sent, it is as never pushed: cancel and urgent apply at once,
	// and an agent database change does not make it LOST.
	if m := h.record(second).PushedStoreID; m != "" {
		t.Fatalf("the second keeps a push mark %q though it was never sent", m)
	}
	ag.set(func(f *fakeAgent) { f.pushHook = nil })
	h.fullSync()
	rec := h.record(second)
	wantState(t, rec, action.PendingSchedule)
	if !strings.HasSuffix(rec.StateReason, ": incident 42") {
		t.Fatalf("held by the freeze: reason %q", rec.StateReason)
	}
	cals.Store(nil)
	h.fullSync()
	wantState(t, h.record(second), action.New)
}
