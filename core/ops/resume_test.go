package ops_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/musterhq/muster/core/runs"
	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/action"
)

// TestResumeOfHandPauseForgivingErrorsTakesEveryLevel: a run paused by
// hand whose running node then fails past its stage's max_errors (0, with
// on_failure pause) has errors to forgive, whatever its pause reason says:
// the resume waits in levels like one of a pause for errors. Its pending
// approval shows; one approver from db records level 1 and leaves the run
// PAUSED, forgiving nothing; the one from sre resumes it.
func TestResumeOfHandPauseForgivingErrorsTakesEveryLevel(t *testing.T) {
	t.Parallel()
	e := setupLevels(t)
	ctx := context.Background()
	r := pausedRun("", 0)
	r.State = store.RunRunning
	now := time.Now().UTC()
	kid := store.Record{Action: action.Action{ID: action.NewID(), ClusterID: "prod", NodeID: "db-1", Kind: kindSleep,
		Args: json.RawMessage(`{"seconds":1}`), State: action.Running, Origin: action.OriginCore,
		Requester: "rita", ApprovedBy: "appr", CreatedTS: now, UpdatedTS: now, RunID: r.ID,
		Stage: "upgrade", Step: "sleep", Attempt: 1, Wave: 1}}
	id := e.storeRun(r, kid)

	if _, err := e.ops.PauseRun(ctx, rita, id); err != nil {
		t.Fatal(err)
	}
	// db-1, running while the run was paused, fails: past max_errors 0.
	if err := e.st.Update(ctx, func(tx store.Tx) error {
		rec, err := tx.Action(ctx, kid.ID)
		if err != nil {
			return err
		}
		done := time.Now().UTC()
		rec.State, rec.StateReason, rec.UpdatedTS, rec.FinishedTS = action.Failed, "exit status 1", done, &done
		return tx.UpdateAction(ctx, rec)
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := runs.NewEngine(e.policy, nil, nil).AdvanceIn(ctx, e.st, id); err != nil {
		t.Fatal(err)
	}
	if got := e.run(id); got.State != store.RunPaused || runs.PausedFor(got) != runs.PauseManual {
		t.Fatalf("run %s %q, want PAUSED by hand", got.State, got.StateReason)
	}

	if view := e.runView(id); view == nil || view.Subject != store.SubjectResume || view.Satisfied || len(view.Levels) != 2 {
		t.Fatalf("view before any approval %+v, want the resume waiting for two levels", view)
	}

	if _, err := e.ops.ResumeRun(ctx, dana, id, "db-1 is known flaky"); err != nil {
		t.Fatal(err)
	}
	got := e.run(id)
	if got.State != store.RunPaused || got.Stages[0].Forgiven != 0 {
		t.Fatalf("one level of two left the run %s, forgiven %d; want PAUSED, nothing forgiven", got.State, got.Stages[0].Forgiven)
	}
	if n := e.approvals(store.SubjectResume, id); n != 1 {
		t.Fatalf("%d approvals of the resume stored, want 1", n)
	}
	view := e.runView(id)
	if view == nil || view.Satisfied || len(view.Levels) != 2 || len(view.Levels[0].ApprovedBy) != 1 ||
		view.Levels[0].ApprovedBy[0] != "dana" || view.Levels[1].Remaining != 1 {
		t.Fatalf("view after db's approval %+v", view)
	}
	if ev := e.lastEvent(); ev.Actor != "dana" || !strings.Contains(ev.Message, "1 more from sre") {
		t.Fatalf("event %s %q", ev.Type, ev.Message)
	}

	if _, err := e.ops.ResumeRun(ctx, sam, id, "db-1 is known flaky"); err != nil {
		t.Fatal(err)
	}
	got = e.run(id)
	if got.State != store.RunRunning || got.Stages[0].Forgiven != 1 {
		t.Fatalf("both levels left the run %s, forgiven %d; want RUNNING, 1 forgiven", got.State, got.Stages[0].Forgiven)
	}
	if e.runView(id) != nil {
		t.Fatal("a resumed run still shows a pending approval")
	}
}

// TestResumeOfHandPauseWithoutErrorsIsAnOperators: a run paused by hand
// with nothing to forgive waits for no approval, and its operator resumes
// it alone.
func TestResumeOfHandPauseWithoutErrorsIsAnOperators(t *testing.T) {
	t.Parallel()
	e := setupLevels(t)
	ctx := context.Background()
	r := pausedRun("", 0)
	r.State = store.RunRunning
	id := e.storeRun(r)
	if _, err := e.ops.PauseRun(ctx, rita, id); err != nil {
		t.Fatal(err)
	}
	if view := e.runView(id); view != nil {
		t.Fatalf("a hand pause with nothing to forgive shows approval %+v", view)
	}
	if _, err := e.ops.ResumeRun(ctx, rita, id, ""); err != nil {
		t.Fatal(err)
	}
	if got := e.run(id); got.State != store.RunRunning || e.approvals(store.SubjectResume, id) != 0 {
		t.Fatalf("run %s, %d approvals; want RUNNING, none", got.State, e.approvals(store.SubjectResume, id))
	}
}
