package runs_test

import (
	"context"
	"strings"
	"testing"

	"github.com/musterhq/muster/core/actions"
	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/action"
)

// pauseEvents are the messages of the run.paused and approval.waiting
// events of run id, in order.
func (env *engineEnv) pauseEvents(id string) []string {
	env.t.Helper()
	var out []string
	for _, ev := range env.eventsSince(0) {
		if ev.RunID == id && (ev.Type == store.EventRunPaused || ev.Type == store.EventApprovalWaiting) {
			out = append(out, ev.Type+": "+ev.Message)
		}
	}
	return out
}

// TestEachPauseHasItsOwnWords: the events (and so the notifications) of a
// canary's pause say it waits for a promote, never that errors paused it;
// a pause by errors says so; a manual pause says it was by hand.
func TestEachPauseHasItsOwnWords(t *testing.T) {
	t.Parallel()
	env := setupEngine(t)
	canary := env.canaryPaused()
	got := strings.Join(env.pauseEvents(canary.ID), "\n")
	if strings.Contains(got, "errors") || !strings.Contains(got, "run.paused: run "+canary.ID+" waits for a promote") ||
		!strings.Contains(got, "approval.waiting: run "+canary.ID+"'s canary is through: it waits for an approver other than alice to promote it") {
		t.Fatalf("a canary's pause says:\n%s", got)
	}

	errs := env.startReq(upgradeRun("0", "pause"))
	for range 10 {
		if errs.State != store.RunRunning {
			break
		}
		k := env.open(errs.ID)
		state := action.Done
		if k.Step == "upgrade" {
			state = action.Failed
		}
		env.finishWith(k.ID, state, "")
		errs = env.advance(errs.ID)
	}
	got = strings.Join(env.pauseEvents(errs.ID), "\n")
	if strings.Contains(got, "promote") || !strings.Contains(got, "run.paused: run "+errs.ID+" paused by its errors") ||
		!strings.Contains(got, "to resume it, forgiving them") {
		t.Fatalf("a pause by errors says:\n%s", got)
	}

	manual := env.startReq(upgradeRun("0", "pause"))
	env.update(func(ctx context.Context, tx store.Tx) error {
		_, err := env.e.Pause(ctx, tx, manual.ID, actions.Actor{Name: "carol"})
		return err
	})
	got = strings.Join(env.pauseEvents(manual.ID), "\n")
	if !strings.HasSuffix(got, "\nrun.paused: carol paused run "+manual.ID+" by hand: an operator resumes it") {
		t.Fatalf("a manual pause says:\n%s", got)
	}
}
