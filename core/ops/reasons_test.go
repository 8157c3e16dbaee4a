package ops_test

import (
	"context"
	"strings"
	"testing"

	"github.com/musterhq/muster/core/ops"
	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/action"
	"github.com/musterhq/muster/shared/wire"
)

// TestCancelRetryPauseResumeDeleteRecordTheReason: the optional reason of
// cancel, retry, pause, resume and delete is in the history line or the
// state reason and in the event, once; a bad reason changes nothing.
func TestCancelRetryPauseResumeDeleteRecordTheReason(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	rec := e.create(operator, "db-1")
	before := e.events()
	if _, _, err := e.ops.CancelAction(ctx, operator, rec.ID, "ok\x1b[2J"); ops.Describe(err).Status != 400 {
		t.Fatalf("a reason with control characters: %v, want 400", err)
	}
	// A caller who may not cancel hears that first, whatever the reason.
	viewer := ops.Caller{Name: "vera", Roles: []string{store.RoleViewer}}
	if _, _, err := e.ops.CancelAction(ctx, viewer, rec.ID, "ok\x1b[2J"); ops.Describe(err).Status != 403 {
		t.Fatalf("a viewer's cancel with a bad reason: %v, want 403", err)
	}
	if e.events() != before {
		t.Fatal("a refused cancel wrote an event")
	}
	got, _, err := e.ops.CancelAction(ctx, operator, rec.ID, "wrong node")
	if err != nil {
		t.Fatal(err)
	}
	if got.State != action.Cancelled || got.StateReason != "wrong node" {
		t.Fatalf("cancelled: %s %q, want CANCELLED for the reason", got.State, got.StateReason)
	}
	if ev := e.lastEvent(); !strings.HasSuffix(ev.Message, ": wrong node") || strings.Count(ev.Message, "wrong node") != 1 {
		t.Fatalf("cancel event %q does not end with the reason once", ev.Message)
	}
	retry, err := e.ops.RetryAction(ctx, operator, rec.ID, "right node now")
	if err != nil {
		t.Fatal(err)
	}
	if ev := e.findEvent(store.EventActionCreated, retry.ID); ev.Data["note"] != "right node now" ||
		!strings.Contains(ev.Message, "right node now") {
		t.Fatalf("retry event lacks the reason: %+v", ev)
	}
	var hist []action.Transition
	_ = e.st.Read(ctx, func(rd store.Reader) error { hist, err = rd.History(ctx, retry.ID); return err })
	if len(hist) == 0 || !strings.HasSuffix(hist[0].Reason, ": right node now") {
		t.Fatalf("retry history %+v lacks the reason", hist)
	}

	doc := "name: nightly\nstages:\n  - name: sleep\n    kind: " + kindSleep + "\n    args: {seconds: 1}\n    target: {nodes: [db-1]}\n"
	if _, _, err := e.ops.ApplyPlaybook(ctx, operator, doc); err != nil {
		t.Fatal(err)
	}
	if _, err := e.ops.ApplySchedule(ctx, operator, &wire.CreateScheduleRequest{Name: "nightly", Cluster: "prod",
		Playbook: "nightly", Cron: "0 2 * * *"}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.ops.ApproveSchedule(ctx, approver, "nightly", ""); err != nil {
		t.Fatal(err)
	}
	sc, err := e.ops.PauseSchedule(ctx, operator, "nightly", "db migration tonight")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(sc.StateReason, ": db migration tonight") {
		t.Fatalf("paused schedule's reason %q lacks the reason", sc.StateReason)
	}
	if ev := e.lastEvent(); ev.Type != store.EventSchedulePaused || ev.Data["reason"] != "db migration tonight" {
		t.Fatalf("pause event %+v lacks the reason", ev)
	}
	if _, err := e.ops.ResumeSchedule(ctx, operator, "nightly", "migration done"); err != nil {
		t.Fatal(err)
	}
	if ev := e.lastEvent(); ev.Type != store.EventScheduleResumed || ev.Data["reason"] != "migration done" {
		t.Fatalf("resume event %+v lacks the reason", ev)
	}
	if err := e.ops.DeleteSchedule(ctx, operator, "nightly", strings.Repeat("x", wire.MaxReason+1)); ops.Describe(err).Status != 400 {
		t.Fatalf("a reason too long: %v, want 400", err)
	}
	if err := e.ops.DeleteSchedule(ctx, operator, "nightly", "replaced by weekly"); err != nil {
		t.Fatal(err)
	}
	if ev := e.lastEvent(); ev.Type != store.EventScheduleDeleted || ev.Data["reason"] != "replaced by weekly" ||
		!strings.Contains(ev.Message, "replaced by weekly") {
		t.Fatalf("delete event %+v lacks the reason", ev)
	}
}

// findEvent is the first event of type typ about action id.
func (e *env) findEvent(typ, id string) store.Event {
	e.t.Helper()
	var out store.Event
	if _, err := store.EachEvent(context.Background(), e.st, 0, 500, func(ev *store.Event) error {
		if ev.Type == typ && ev.ActionID == id && out.Type == "" {
			out = *ev
		}
		return nil
	}); err != nil {
		e.t.Fatal(err)
	}
	return out
}

// TestEveryVerbRefusesWhoMayNotBeforeJudgingTheReason: a caller whose roles
// cannot do a verb hears 403 naming the role, not a 400 about the reason it
// gave, whatever the verb (the reason is judged for callers who may).
func TestEveryVerbRefusesWhoMayNotBeforeJudgingTheReason(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	viewer := ops.Caller{Name: "vera", Roles: []string{store.RoleViewer}}
	bad := "ok\x1b[2J"
	verbs := map[string]func() error{
		"approve action": func() error { _, err := e.ops.ApproveAction(ctx, viewer, "a-1", bad); return err },
		"reject action":  func() error { _, err := e.ops.RejectAction(ctx, viewer, "a-1", bad); return err },
		"urgent action":  func() error { _, err := e.ops.MarkActionUrgent(ctx, viewer, "a-1", bad); return err },
		"retry action":   func() error { _, err := e.ops.RetryAction(ctx, viewer, "a-1", bad); return err },
		"cancel action":  func() error { _, _, err := e.ops.CancelAction(ctx, viewer, "a-1", bad); return err },
		"reject run":     func() error { _, err := e.ops.RejectRun(ctx, viewer, "r-1", bad); return err },
		"resume run":     func() error { _, err := e.ops.ResumeRun(ctx, viewer, "r-1", bad); return err },
		"promote run":    func() error { _, err := e.ops.PromoteRun(ctx, viewer, "r-1", bad); return err },
		"cancel run":     func() error { _, err := e.ops.CancelRun(ctx, viewer, "r-1", bad); return err },
		"urgent run":     func() error { _, err := e.ops.MarkRunUrgent(ctx, viewer, "r-1", bad); return err },
		"abort run":      func() error { _, err := e.ops.AbortRun(ctx, viewer, "r-1", bad); return err },
		"cancel run with rollback": func() error {
			_, err := e.ops.CancelRunRollback(ctx, viewer, "r-1", bad)
			return err
		},
		"reject schedule": func() error { _, err := e.ops.RejectSchedule(ctx, viewer, "nightly", bad); return err },
		"pause schedule":  func() error { _, err := e.ops.PauseSchedule(ctx, viewer, "nightly", bad); return err },
		"resume schedule": func() error { _, err := e.ops.ResumeSchedule(ctx, viewer, "nightly", bad); return err },
		"delete schedule": func() error { return e.ops.DeleteSchedule(ctx, viewer, "nightly", bad) },
		"drain node":      func() error { _, err := e.ops.DrainNode(ctx, viewer, "prod", "db-1", bad); return err },
		"freeze": func() error {
			_, err := e.ops.CreateFreeze(ctx, viewer, "prod", &wire.CreateFreezeRequest{Reason: bad})
			return err
		},
		"lift freeze": func() error { _, err := e.ops.LiftFreeze(ctx, viewer, "f-1", bad); return err },
	}
	for name, verb := range verbs {
		if d := ops.Describe(verb()); d.Status != 403 {
			t.Errorf("%s by a viewer with a bad reason: %d %s, want 403", name, d.Status, d.Message)
		}
	}
}
