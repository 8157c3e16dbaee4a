package actions

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/musterhq/muster/core/approval"
	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/core/store/sqlite"
	"github.com/musterhq/muster/shared/action"
	"github.com/musterhq/muster/shared/live"
)

type env struct {
	t   *testing.T
	st  *sqlite.Store
	now time.Time
	r   *Rules
}

func setup(t *testing.T) *env {
	t.Helper()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	e := &env{t: t, st: st, now: time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)}
	e.r = &Rules{Policy: live.New(approval.DefaultPolicy()), ScheduleTTL: time.Hour, Now: func() time.Time { return e.now }}
	e.update(func(ctx context.Context, tx store.Tx) error {
		if err := tx.PutCluster(ctx, &store.Cluster{ID: cluster, Status: store.ClusterHealthy}); err != nil {
			return err
		}
		return tx.PutNode(ctx, &store.Node{ClusterID: cluster, ID: "n1", Addr: "127.0.0.1:1", Source: store.SourceStatic,
			Status: store.NodeUp, Kinds: []string{"muster.io/debug.ping"}})
	})
	return e
}

func (e *env) update(fn func(ctx context.Context, tx store.Tx) error) {
	e.t.Helper()
	if err := e.st.Update(context.Background(), func(tx store.Tx) error { return fn(context.Background(), tx) }); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) get(id string) (*store.Record, []store.Event) {
	e.t.Helper()
	var rec *store.Record
	var evs []store.Event
	ctx := context.Background()
	err := e.st.Read(ctx, func(r store.Reader) error {
		var err error
		if rec, err = r.Action(ctx, id); err != nil {
			return err
		}
		if rec.History, err = r.History(ctx, id); err != nil {
			return err
		}
		all, err := r.Events(ctx, 0, 0)
		for _, ev := range all {
			if ev.ActionID == id {
				evs = append(evs, ev)
			}
		}
		return err
	})
	if err != nil {
		e.t.Fatal(err)
	}
	return rec, evs
}

var alice, bob = Actor{Name: "alice", Addr: "10.0.0.1"}, Actor{Name: "bob"}

// A run creates, approves and cancels many actions in one transaction: all
// of it commits with its history and events, or none of it.
func TestManyChangesInOneTransaction(t *testing.T) {
	t.Parallel()
	e := setup(t)
	var ids []string
	e.update(func(ctx context.Context, tx store.Tx) error {
		for range 3 {
			rec, err := e.r.Create(ctx, tx, Request{ClusterID: cluster, NodeID: "n1", Kind: "muster.io/debug.ping"}, alice)
			if err != nil {
				return err
			}
			ids = append(ids, rec.ID)
		}
		if _, err := e.r.Approve(ctx, tx, ids[0], bob); err != nil {
			return err
		}
		_, _, err := e.r.Cancel(ctx, tx, ids[1], alice)
		return err
	})
	want := []action.State{action.PendingSchedule, action.Cancelled, action.PendingApprove}
	for i, id := range ids {
		rec, evs := e.get(id)
		if rec.State != want[i] {
			t.Fatalf("action %d is %s, want %s", i, rec.State, want[i])
		}
		// One event per history line, and approval.waiting for the one created waiting.
		if len(evs) != len(rec.History)+1 || evs[1].Type != store.EventApprovalWaiting {
			t.Fatalf("action %d: %d events for %d history lines, want approval.waiting beside them", i, len(evs), len(rec.History))
		}
	}
	// A failing call rolls the whole transaction back.
	n := e.st.RowsWritten()
	err := e.st.Update(context.Background(), func(tx store.Tx) error {
		ctx := context.Background()
		if _, err := e.r.Create(ctx, tx, Request{ClusterID: cluster, NodeID: "n1", Kind: "muster.io/debug.ping"}, alice); err != nil {
			return err
		}
		_, err := e.r.Approve(ctx, tx, ids[1], bob) // CANCELLED: refused
		return err
	})
	if !errors.Is(err, ErrWrongState) {
		t.Fatalf("approve of a cancelled action: %v", err)
	}
	if e.st.RowsWritten() != n {
		t.Fatal("a failed transaction wrote rows")
	}
}

// childOf makes a child of run-1 on node n1, approved with its run by bob.
func (e *env) childOf(ctx context.Context, tx store.Tx, stage string) (*store.Record, error) {
	return e.r.CreateChild(ctx, tx, Child{RunID: "run-1", Stage: stage, Wave: 2, ClusterID: cluster, NodeID: "n1",
		Kind: "muster.io/debug.ping", Requester: "alice", ApprovedBy: "bob"}, Core)
}

// A run's child is made by the action rules: approved with its run (the
// digest of its own content, so the push checks it like any approval), in
// its run, stage and wave, with a history line and an event naming them; a
// child of a run that needed no approval carries none; a child whose node
// is gone is born CANCELLED.
func TestCreateChild(t *testing.T) {
	t.Parallel()
	e := setup(t)
	var approved, free, orphan *store.Record
	e.update(func(ctx context.Context, tx store.Tx) error {
		var err error
		if approved, err = e.childOf(ctx, tx, "a"); err != nil {
			return err
		}
		if free, err = e.r.CreateChild(ctx, tx, Child{RunID: "run-2", Stage: "s", Wave: 1, ClusterID: cluster, NodeID: "n1",
			Kind: "muster.io/debug.ping", Requester: "alice"}, Core); err != nil {
			return err
		}
		orphan, err = e.r.CreateChild(ctx, tx, Child{RunID: "run-1", Stage: "a", Wave: 1, ClusterID: cluster, NodeID: "gone",
			Kind: "muster.io/debug.ping", Requester: "alice", ApprovedBy: "bob"}, Core)
		return err
	})
	if approved.State != action.PendingSchedule || approved.ApprovedBy != "bob" || approved.Requester != "alice" ||
		!ApprovalHolds(approved) || approved.ApprovalDigest == "" || approved.ScheduledTS == nil {
		t.Fatalf("approved child %+v", approved)
	}
	rec, evs := e.get(approved.ID)
	if rec.RunID != "run-1" || rec.Stage != "a" || rec.Wave != 2 {
		t.Fatalf("stored child is in run %q stage %q wave %d", rec.RunID, rec.Stage, rec.Wave)
	}
	if h := rec.History[0]; h.Actor != ActorCore || h.Reason != "run run-1, stage a, wave 2" || h.To != action.PendingSchedule {
		t.Fatalf("history %+v", h)
	}
	if len(evs) != 1 || evs[0].Type != store.EventActionCreated || evs[0].RunID != "run-1" || evs[0].Data["stage"] != "a" ||
		evs[0].Data["approved_by"] != "bob" {
		t.Fatalf("events %+v", evs)
	}
	if free.State != action.PendingSchedule || free.ApprovedBy != "" || free.ApprovalDigest != "" || !ApprovalHolds(free) {
		t.Fatalf("child of a run without approval %+v", free)
	}
	if orphan.State != action.Cancelled || orphan.StateReason != ReasonNodeForgotten || orphan.FinishedTS == nil ||
		orphan.ApprovalDigest != "" || orphan.ScheduledTS != nil {
		t.Fatalf("child on a forgotten node %+v", orphan)
	}
	var err error
	e.update(func(ctx context.Context, tx store.Tx) error {
		_, err = e.r.Create(ctx, tx, Request{ClusterID: cluster, NodeID: "n1", Kind: "example.com/unknown"}, alice)
		return nil
	})
	if !errors.Is(err, ErrUnprocessable) {
		t.Fatalf("unknown kind: %v", err)
	}
}

func TestCancel(t *testing.T) {
	t.Parallel()
	e := setup(t)
	mk := func(s action.State, pushed string) string {
		var id string
		e.update(func(ctx context.Context, tx store.Tx) error {
			rec, err := e.r.Create(ctx, tx, Request{ClusterID: cluster, NodeID: "n1", Kind: "muster.io/debug.ping"}, alice)
			if err != nil {
				return err
			}
			rec.State, rec.PushedStoreID = s, pushed
			id = rec.ID
			return tx.UpdateAction(ctx, rec)
		})
		return id
	}
	cancel := func(id string) (CancelOutcome, error) {
		var o CancelOutcome
		var cerr error
		e.update(func(ctx context.Context, tx store.Tx) error {
			_, o, cerr = e.r.Cancel(ctx, tx, id, alice)
			return nil
		})
		return o, cerr
	}
	for _, c := range []struct {
		name   string
		state  action.State
		pushed string
		want   CancelOutcome
		final  action.State
	}{
		{"waiting for approval", action.PendingApprove, "", Cancelled, action.Cancelled},
		{"never sent", action.PendingSchedule, "", Cancelled, action.Cancelled},
		{"sent, unanswered", action.PendingSchedule, "store-1", Requested, action.PendingSchedule},
		{"on the agent", action.Running, "store-1", Requested, action.Running},
	} {
		id := mk(c.state, c.pushed)
		o, err := cancel(id)
		if err != nil || o != c.want {
			t.Fatalf("%s: outcome %v err %v, want %v", c.name, o, err, c.want)
		}
		rec, evs := e.get(id)
		if rec.State != c.final || (c.want == Requested) != rec.CancelRequested {
			t.Fatalf("%s: record %s cancel requested %v", c.name, rec.State, rec.CancelRequested)
		}
		if evs[len(evs)-1].ClientAddr != alice.Addr || evs[len(evs)-1].Actor != alice.Name {
			t.Fatalf("%s: event %+v does not name the caller", c.name, evs[len(evs)-1])
		}
		if c.want == Requested {
			n := e.st.RowsWritten()
			if o, err := cancel(id); err != nil || o != Requested || e.st.RowsWritten() != n {
				t.Fatalf("%s: asking again: %v %v, %d rows", c.name, o, err, e.st.RowsWritten()-n)
			}
		}
	}
	if _, err := cancel(mk(action.Done, "store-1")); !errors.Is(err, ErrWrongState) {
		t.Fatalf("cancel of a finished action: %v", err)
	}
}

func TestExpireSchedules(t *testing.T) {
	t.Parallel()
	e := setup(t)
	var never, sent, recent string
	e.update(func(ctx context.Context, tx store.Tx) error {
		for i, p := range []*string{&never, &sent} {
			rec, err := e.childOf(ctx, tx, fmt.Sprint(i))
			if err != nil {
				return err
			}
			*p = rec.ID
		}
		_, ok, err := MarkSending(ctx, tx, sent, "store-1")
		if !ok {
			t.Error("MarkSending refused an approved action")
		}
		return err
	})
	e.now = e.now.Add(30 * time.Minute)
	e.update(func(ctx context.Context, tx store.Tx) error {
		rec, err := e.childOf(ctx, tx, "recent")
		recent = rec.ID
		return err
	})
	e.now = e.now.Add(31 * time.Minute)
	var out []*store.Record
	e.update(func(ctx context.Context, tx store.Tx) error {
		var err error
		out, err = e.r.ExpireSchedules(ctx, tx)
		return err
	})
	if len(out) != 2 {
		t.Fatalf("changed %d, want 2", len(out))
	}
	rec, evs := e.get(never)
	if rec.State != action.Cancelled || rec.StateReason != ReasonScheduleTimeout || rec.FinishedTS == nil {
		t.Fatalf("never sent: %s %q", rec.State, rec.StateReason)
	}
	if last := evs[len(evs)-1]; last.Type != store.EventActionStateChanged || last.Actor != ActorCore || last.Data["reason"] != ReasonScheduleTimeout {
		t.Fatalf("event %+v", last)
	}
	if rec, _ := e.get(sent); rec.State != action.PendingSchedule || !rec.CancelRequested {
		t.Fatalf("sent, unanswered: %s cancel requested %v; want a cancel request", rec.State, rec.CancelRequested)
	}
	if rec, _ := e.get(recent); rec.State != action.PendingSchedule || rec.CancelRequested {
		t.Fatalf("recent: %s", rec.State)
	}
	n := e.st.RowsWritten()
	e.update(func(ctx context.Context, tx store.Tx) error {
		out, err := e.r.ExpireSchedules(ctx, tx)
		if len(out) != 0 {
			t.Errorf("second sweep changed %d", len(out))
		}
		return err
	})
	if e.st.RowsWritten() != n {
		t.Fatal("a sweep with nothing to do wrote rows")
	}
}

// The run engine's children follow the rules of every action: stored with
// their history and an action.created event naming the run, cancelled at
// once when never sent, as a request once a push was attempted, and left
// alone when finished.
func TestChildrenOfARun(t *testing.T) {
	t.Parallel()
	e := setup(t)
	var fresh, sent, done *store.Record
	e.update(func(ctx context.Context, tx store.Tx) error {
		var err error
		for _, c := range []struct {
			rec   **store.Record
			stage string
		}{{&fresh, "a"}, {&sent, "b"}, {&done, "c"}} {
			if *c.rec, err = e.childOf(ctx, tx, c.stage); err != nil {
				return err
			}
		}
		if _, ok, err := MarkSending(ctx, tx, sent.ID, "store-1"); err != nil || !ok {
			return fmt.Errorf("mark sending: %v %w", ok, err)
		}
		d, err := tx.Action(ctx, done.ID)
		if err != nil {
			return err
		}
		d.State = action.Done
		return tx.UpdateAction(ctx, d)
	})
	_, evs := e.get(fresh.ID)
	if len(evs) != 1 || evs[0].Type != store.EventActionCreated || evs[0].RunID != "run-1" {
		t.Fatalf("created events %+v", evs)
	}
	n := e.st.RowsWritten()
	e.update(func(ctx context.Context, tx store.Tx) error {
		for _, id := range []string{fresh.ID, sent.ID, done.ID} {
			r, err := tx.Action(ctx, id)
			if err != nil {
				return err
			}
			if _, err := e.r.CancelChild(ctx, tx, r, Actor{Name: "alice", Addr: "10.0.0.1"}, "run cancelled"); err != nil {
				return err
			}
		}
		return nil
	})
	if rec, _ := e.get(fresh.ID); rec.State != action.Cancelled || rec.StateReason != "run cancelled" {
		t.Fatalf("never-sent child: %s %q", rec.State, rec.StateReason)
	}
	if rec, evs := e.get(sent.ID); rec.State != action.PendingSchedule || !rec.CancelRequested ||
		evs[len(evs)-1].Type != store.EventActionCancelRequested || evs[len(evs)-1].RunID != "run-1" {
		t.Fatalf("sent child: %s cancel requested %v, events %+v", rec.State, rec.CancelRequested, evs)
	}
	if rec, _ := e.get(done.ID); rec.State != action.Done {
		t.Fatalf("finished child became %s", rec.State)
	}
	if e.st.RowsWritten() == n {
		t.Fatal("nothing written")
	}
}

// What a person says with a change (Actor.Note) follows the fixed reason in
// the history line and is the event's note; the state reason stays fixed.
func TestANoteGoesToTheHistoryAndTheEvent(t *testing.T) {
	t.Parallel()
	e := setup(t)
	var approved, rejected string
	e.update(func(ctx context.Context, tx store.Tx) error {
		for _, id := range []*string{&approved, &rejected} {
			rec, err := e.r.Create(ctx, tx, Request{ClusterID: cluster, NodeID: "n1", Kind: "muster.io/debug.ping"}, alice)
			if err != nil {
				return err
			}
			*id = rec.ID
		}
		if _, err := e.r.Approve(ctx, tx, approved, Actor{Name: "bob", Note: "change CH-42"}); err != nil {
			return err
		}
		_, err := e.r.Reject(ctx, tx, rejected, Actor{Name: "bob", Note: "not on a Friday"})
		return err
	})
	for id, want := range map[string][2]string{approved: {ReasonApproved, "change CH-42"}, rejected: {ReasonRejected, "not on a Friday"}} {
		rec, evs := e.get(id)
		last := rec.History[len(rec.History)-1]
		if last.Reason != want[0]+": "+want[1] || rec.StateReason != want[0] {
			t.Fatalf("history reason %q, state reason %q; want %q and %q", last.Reason, rec.StateReason, want[0]+": "+want[1], want[0])
		}
		ev := evs[len(evs)-1]
		if ev.Data["note"] != want[1] || ev.Data["reason"] != want[0] {
			t.Fatalf("event data %v, want note %q and reason %q", ev.Data, want[1], want[0])
		}
	}
	// Without a note, nothing changes.
	var plain string
	e.update(func(ctx context.Context, tx store.Tx) error {
		rec, err := e.r.Create(ctx, tx, Request{ClusterID: cluster, NodeID: "n1", Kind: "muster.io/debug.ping"}, alice)
		if err == nil {
			plain = rec.ID
			_, err = e.r.Approve(ctx, tx, plain, bob)
		}
		return err
	})
	rec, evs := e.get(plain)
	if r := rec.History[len(rec.History)-1].Reason; r != ReasonApproved {
		t.Fatalf("history reason without a note: %q", r)
	}
	if _, ok := evs[len(evs)-1].Data["note"]; ok {
		t.Fatal("an event without a note has one")
	}
}
