package runs_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/musterhq/muster/core/actions"
	"github.com/musterhq/muster/core/runs"
	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/action"
)

// abort aborts run id as who (an approver when mayApprove).
func (env *engineEnv) abort(id, who string, mayApprove bool, reason string) (*store.Run, error) {
	env.t.Helper()
	var r *store.Run
	err := env.st.Update(context.Background(), func(tx store.Tx) error {
		var err error
		r, err = env.e.Abort(context.Background(), tx, id, actions.Actor{Name: who}, mayApprove, reason)
		return err
	})
	return r, err
}

// canaryPaused is upgradeRun with canary 1, its canary node n1 through
// every step (upgrade reporting previous 1.0): PAUSED for its promote.
func (env *engineEnv) canaryPaused() *store.Run {
	env.t.Helper()
	req := upgradeRun("0", "pause")
	req.Stages[0].Canary = 1
	r := env.startReq(req)
	for range 4 {
		k := env.open(r.ID)
		out := ""
		if k.Step == "upgrade" {
			out = `{"previous":"1.0"}`
		}
		env.finishWith(k.ID, action.Done, out)
		r = env.advance(r.ID)
	}
	if runs.PausedFor(r) != runs.PauseCanary {
		env.t.Fatalf("run %s (%s), want paused on its canary", r.State, r.StateReason)
	}
	return r
}

func TestAbortRollsBackTheCanaryAndEndsAborted(t *testing.T) {
	t.Parallel()
	env := setupEngine(t)
	r := env.canaryPaused()
	_, seq := env.runAndSeq(r.ID)
	// An operator who is neither the requester nor an approver may not.
	if _, err := env.abort(r.ID, "carol", false, "no"); !errors.Is(err, runs.ErrForbidden) {
		t.Fatalf("carol's abort: %v, want forbidden", err)
	}
	// The requester may: the canary node rolls back, nothing else starts.
	r, err := env.abort(r.ID, "alice", false, "latency doubled")
	if err != nil {
		t.Fatal(err)
	}
	if r.State != store.RunRunning || !strings.HasPrefix(r.StateReason, "aborted by alice: latency doubled") {
		t.Fatalf("run %s (%s), want RUNNING while it rolls back", r.State, r.StateReason)
	}
	down := env.open(r.ID)
	if down.NodeID != "n1" || down.Step != "downgrade" || string(down.Args) != `{"version":"1.0"}` {
		t.Fatalf("child %s on %s with %s, want n1's downgrade to 1.0", down.Step, down.NodeID, down.Args)
	}
	if _, err := env.abort(r.ID, "bob", true, ""); !errors.Is(err, runs.ErrWrongState) {
		t.Fatalf("a second abort: %v, want a wrong state", err)
	}
	env.finishWith(down.ID, action.Done, "")
	r = env.advance(r.ID)
	// notify's when holds (n1's verify was DONE): the rollback's last step.
	if notify := env.open(r.ID); notify.Step != "notify" || notify.NodeID != "n1" {
		t.Fatalf("child %s on %s, want n1's notify", notify.Step, notify.NodeID)
	} else {
		env.finishWith(notify.ID, action.Done, "")
		r = env.advance(r.ID)
	}
	if r.State != store.RunAborted || r.StateReason != "aborted by alice: latency doubled" || r.FinishedTS == nil ||
		r.Stages[0].State != store.StageAborted {
		t.Fatalf("run %s (%s), stage %s, want ABORTED", r.State, r.StateReason, r.Stages[0].State)
	}
	for _, k := range env.children(r.ID) {
		if k.NodeID != "n1" {
			t.Fatalf("child %s on %s after the abort", k.Step, k.NodeID)
		}
	}
	var types []string
	for _, ev := range env.eventsSince(seq) {
		types = append(types, ev.Type)
	}
	if !slices.Contains(types, store.EventRunAborted) || types[len(types)-1] != store.EventRunFinished {
		t.Fatalf("events %v, want run.aborted then run.finished", types)
	}
	if !store.RunFinal(r.State) {
		t.Fatal("ABORTED is not final")
	}
}

func TestAbortIsForPausedAndCanaryRuns(t *testing.T) {
	t.Parallel()
	env := setupEngine(t)
	r := env.startReq(upgradeRun("0", "pause"))
	if _, err := env.abort(r.ID, "bob", true, ""); !errors.Is(err, runs.ErrWrongState) {
		t.Fatalf("abort of a running run without canary: %v, want a wrong state", err)
	}
	// An operator's cancel --rollback stops it: n1's drain was never
	// sent, so n1 never started and nothing rolls back.
	env.update(func(ctx context.Context, tx store.Tx) error {
		var err error
		r, err = env.e.CancelRollback(ctx, tx, r.ID, actions.Actor{Name: "carol"}, "")
		return err
	})
	if r.State != store.RunAborted {
		t.Fatalf("run %s (%s), want ABORTED at once", r.State, r.StateReason)
	}
	kids := env.children(r.ID)
	if len(kids) != 1 || kids[0].State != action.Cancelled || kids[0].StateReason != runs.ReasonRunAborted {
		t.Fatalf("children %+v, want n1's drain cancelled unsent", kids)
	}
}

func TestCancelRollbackTakesAStartedNodeThroughItsAlwaysStepsAndRollback(t *testing.T) {
	t.Parallel()
	env := setupEngine(t)
	r := env.startReq(upgradeRun("0", "pause"))
	drain := env.open(r.ID)
	env.finishWith(drain.ID, action.Done, "")
	r = env.advance(r.ID)
	up := env.open(r.ID) // n1's upgrade, not yet sent
	env.update(func(ctx context.Context, tx store.Tx) error {
		var err error
		r, err = env.e.CancelRollback(ctx, tx, r.ID, actions.Actor{Name: "carol"}, "wrong version")
		return err
	})
	var order []string
	for range 5 {
		if r.State != store.RunRunning {
			break
		}
		k := env.open(r.ID)
		order = append(order, k.NodeID+":"+k.Step)
		env.finishWith(k.ID, action.Done, "")
		r = env.advance(r.ID)
	}
	if got := strings.Join(order, " "); got != "n1:undrain n1:downgrade" {
		t.Fatalf("after the cancel: %s, want n1's undrain then downgrade", got)
	}
	for _, k := range env.children(r.ID) {
		if k.ID == up.ID && (k.State != action.Cancelled || k.StateReason != runs.ReasonRunAborted) {
			t.Fatalf("n1's unsent upgrade %s (%s), want cancelled by the abort", k.State, k.StateReason)
		}
	}
	if r.State != store.RunAborted || len(r.Stages[0].Failed) != 0 {
		t.Fatalf("run %s (%s) failed %v, want ABORTED with no failed node", r.State, r.StateReason, r.Stages[0].Failed)
	}
	// A retry of an aborted run goes over its nodes again, afresh.
	env.update(func(ctx context.Context, tx store.Tx) error {
		again, err := env.e.Retry(ctx, tx, r.ID, actions.Actor{Name: "alice"})
		if err == nil && (again.Stages[0].Aborted || len(again.Stages[0].Nodes) != 4) {
			t.Errorf("retry stages %+v", again.Stages[0])
		}
		return err
	})
}
