package storetest

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/action"
)

// ScheduledBefore lists the PENDING_SCHEDULE actions scheduled before a
// time, oldest first, and nothing else.
func testScheduledBefore(t *testing.T, db NewDB) {
	s := setup(t, db)
	var want []string
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		for i, st := range []action.State{action.PendingSchedule, action.PendingSchedule, action.New, action.PendingApprove, action.PendingSchedule} {
			r := record(action.NewID())
			r.State = st
			r.ScheduledTS = action.TimePtr(t0.Add(time.Duration(5-i) * time.Minute))
			if err := tx.InsertAction(ctx, r); err != nil {
				return err
			}
			if st == action.PendingSchedule && i > 0 {
				want = append([]string{r.ID}, want...)
			}
		}
		return nil
	})
	read(t, s, func(ctx context.Context, r store.Reader) error {
		got, err := r.ScheduledBefore(ctx, t0.Add(5*time.Minute))
		if err != nil || !slices.Equal(ids(got), want) {
			t.Errorf("ScheduledBefore = %v, %v; want %v", ids(got), err, want)
		}
		return nil
	})
}

// PurgeActions deletes finished actions last changed before a time, oldest
// first, a batch at a time, with their history; open and younger ones stay.
// PurgeEvents does the same for events.
func testPurge(t *testing.T, db NewDB) {
	s := setup(t, db)
	var old, kept []string
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		for i, st := range action.States {
			for _, at := range []time.Time{t0.Add(time.Duration(i) * time.Second), t0.Add(time.Hour)} {
				r := record(action.NewID())
				r.State, r.UpdatedTS = st, at
				if err := tx.InsertAction(ctx, r); err != nil {
					return err
				}
				if err := tx.AppendHistory(ctx, r.ID, action.Transition{TS: at, To: st, Actor: "n1"}); err != nil {
					return err
				}
				if st.Final() && at.Before(t0.Add(time.Minute)) {
					old = append(old, r.ID)
				} else {
					kept = append(kept, r.ID)
				}
			}
		}
		for i := range 5 {
			if err := tx.AppendEvent(ctx, &store.Event{TS: t0.Add(time.Duration(i) * 20 * time.Minute), Type: "x", Actor: "core"}); err != nil {
				return err
			}
		}
		return nil
	})
	before := t0.Add(time.Minute)
	var first, second, third int
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		var err error
		if first, err = tx.PurgeActions(ctx, before, 3); err != nil {
			return err
		}
		if second, err = tx.PurgeActions(ctx, before, 3); err != nil {
			return err
		}
		third, err = tx.PurgeActions(ctx, before, 3)
		return err
	})
	if first != 3 || second != 1 || third != 0 || len(old) != 4 {
		t.Fatalf("purged %d, %d, %d of %d old finished actions, want 3, 1, 0 of 4", first, second, third, len(old))
	}
	var events int
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		var err error
		events, err = tx.PurgeEvents(ctx, t0.Add(50*time.Minute), 10)
		return err
	})
	if events != 3 {
		t.Fatalf("purged %d events, want the 3 older than 50 minutes", events)
	}
	read(t, s, func(ctx context.Context, r store.Reader) error {
		for _, id := range old {
			if _, err := r.Action(ctx, id); err == nil {
				t.Errorf("old finished action %s kept", id)
			}
			if h, err := r.History(ctx, id); err != nil || len(h) != 0 {
				t.Errorf("history of purged %s: %v %v", id, h, err)
			}
		}
		for _, id := range kept {
			if _, err := r.Action(ctx, id); err != nil {
				t.Errorf("action %s: %v", id, err)
			}
		}
		evs, err := r.Events(ctx, 0, 0)
		if err != nil || len(evs) != 2 || evs[0].Seq != 4 {
			t.Errorf("events left %+v, %v; want seq 4 and 5", evs, err)
		}
		return nil
	})
}

// PurgeActions keeps the finished children of runs still open, however old:
// a run that lost them would create them again. Those of a finished run go.
func testPurgeKeepsChildrenOfOpenRuns(t *testing.T, db NewDB) {
	s := setup(t, db)
	open, done := testRun(action.NewID(), t0), testRun(action.NewID(), t0)
	open.State, done.State = store.RunRunning, store.RunDone
	var keep, gone string
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		for _, run := range []*store.Run{open, done} {
			if err := tx.InsertRun(ctx, run); err != nil {
				return err
			}
			r := record(action.NewID())
			r.State, r.UpdatedTS, r.RunID, r.Stage = action.Done, t0, run.ID, "main"
			if err := tx.InsertAction(ctx, r); err != nil {
				return err
			}
			if run == open {
				keep = r.ID
			} else {
				gone = r.ID
			}
		}
		n, err := tx.PurgeActions(ctx, t0.Add(time.Hour), 100)
		if err != nil || n != 1 {
			t.Errorf("PurgeActions = %d, %v; want 1", n, err)
		}
		return nil
	})
	read(t, s, func(ctx context.Context, r store.Reader) error {
		if _, err := r.Action(ctx, keep); err != nil {
			t.Errorf("the child of a RUNNING run was purged: %v", err)
		}
		if _, err := r.Action(ctx, gone); err == nil {
			t.Error("the child of a DONE run was kept")
		}
		return nil
	})
}

// PurgeRuns deletes finished runs older than the cut whole (their
// children, counts and approvals), oldest first in batches, never an open
// run or a recent one; then the playbook versions no run refers to, but
// for each playbook's newest.
func testPurgeRuns(t *testing.T, db NewDB) {
	s := setup(t, db)
	finished := func(id string, state string, at time.Time, version int) *store.Run {
		r := testRun(id, t0)
		r.State, r.FinishedTS, r.Playbook, r.PlaybookVersion = state, &at, "pb", version
		return r
	}
	old1 := finished(action.NewID(), store.RunDone, t0, 1)
	old2 := finished(action.NewID(), store.RunAborted, t0.Add(time.Second), 1)
	recent := finished(action.NewID(), store.RunFailed, t0.Add(2*time.Hour), 2)
	open := testRun(action.NewID(), t0)
	open.State = store.RunRunning
	children := map[string]string{}
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		for v := 1; v <= 4; v++ {
			if err := tx.InsertPlaybook(ctx, &store.Playbook{Name: "pb", Version: v, Document: "x", Digest: "d", CreatedTS: t0}); err != nil {
				return err
			}
		}
		for _, run := range []*store.Run{old1, old2, recent, open} {
			if err := tx.InsertRun(ctx, run); err != nil {
				return err
			}
			r := record(action.NewID())
			r.State, r.UpdatedTS, r.RunID, r.Stage = action.Done, t0, run.ID, "main"
			if err := tx.InsertAction(ctx, r); err != nil {
				return err
			}
			if err := tx.AppendHistory(ctx, r.ID, action.Transition{TS: t0, To: action.Done, Actor: "n1"}); err != nil {
				return err
			}
			children[run.ID] = r.ID
		}
		return nil
	})
	before := t0.Add(time.Hour)
	var first, second, third int
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		var err error
		if first, err = tx.PurgeRuns(ctx, before, 1); err != nil {
			return err
		}
		if second, err = tx.PurgeRuns(ctx, before, 1); err != nil {
			return err
		}
		third, err = tx.PurgeRuns(ctx, before, 1)
		return err
	})
	if first != 1 || second != 1 || third != 0 {
		t.Fatalf("purged %d, %d, %d runs, want 1, 1, 0", first, second, third)
	}
	read(t, s, func(ctx context.Context, r store.Reader) error {
		for _, run := range []*store.Run{old1, old2} {
			if _, err := r.Run(ctx, run.ID); err == nil {
				t.Errorf("old finished run %s kept", run.ID)
			}
			if _, err := r.Action(ctx, children[run.ID]); err == nil {
				t.Errorf("the child of purged run %s kept", run.ID)
			}
		}
		for _, run := range []*store.Run{recent, open} {
			if _, err := r.Run(ctx, run.ID); err != nil {
				t.Errorf("run %s (%s): %v", run.ID, run.State, err)
			}
			if _, err := r.Action(ctx, children[run.ID]); err != nil {
				t.Errorf("the child of kept run %s: %v", run.ID, err)
			}
		}
		// Version 1 only the purged runs named goes; 2 (a kept run's) and
		// 4 (the newest) stay; 3, named by none, goes.
		vs, err := r.PlaybookVersions(ctx, "pb")
		var got []int
		for _, v := range vs {
			got = append(got, v.Version)
		}
		if err != nil || len(got) != 2 || got[0] != 2 || got[1] != 4 {
			t.Errorf("playbook versions left %v, %v; want 2 and 4", got, err)
		}
		return nil
	})
}
