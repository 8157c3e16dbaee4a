package runs_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/musterhq/muster/core/actions"
	"github.com/musterhq/muster/core/runs"
	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/action"
	"github.com/musterhq/muster/shared/limit"
	"github.com/musterhq/muster/shared/wire"
)

// upgradeRun is drain → upgrade → verify → undrain (when: always) with a
// rollback that downgrades to the version upgrade reported.
func upgradeRun(errs, onFailure string) *wire.CreateRunRequest {
	c, e := limit.MustParse("1"), limit.MustParse(errs)
	k := "muster.io/debug.ping"
	return &wire.CreateRunRequest{ClusterID: "c", Stages: []wire.StageSpec{{
		Name: "roll", Target: wire.Target{All: true}, MaxConcurrency: &c, MaxErrors: &e, OnFailure: onFailure,
		Steps: []wire.StepSpec{
			{Name: "drain", Kind: k},
			{Name: "upgrade", Kind: k, Args: []byte(`{"version":"2.0"}`)},
			{Name: "verify", Kind: k, Args: []byte(`{"was":"{{ .steps.upgrade.outputs.previous }}","on":"{{ .node.id }}"}`)},
			{Name: "undrain", Kind: k, When: "always"},
		},
		Rollback: []wire.StepSpec{
			{Name: "downgrade", Kind: k, Args: []byte(`{"version":"{{ .steps.upgrade.outputs.previous }}"}`)},
			{Name: "notify", Kind: k, When: `{{ eq .steps.verify.state "DONE" }}`},
		},
	}}}
}

// finishWith ends a child as its agent would, with outputs.
func (env *engineEnv) finishWith(id string, state action.State, outputs string) {
	env.t.Helper()
	env.update(func(ctx context.Context, tx store.Tx) error {
		rec, err := tx.Action(ctx, id)
		if err != nil {
			return err
		}
		rec.State, rec.FinishedTS, rec.PushedStoreID = state, action.TimePtr(env.now), "store-1"
		if outputs != "" {
			rec.Outputs = []byte(outputs)
		}
		return tx.UpdateAction(ctx, rec)
	})
}

func TestAFailedNodeRunsAlwaysStepsThenItsRollbackOnly(t *testing.T) {
	t.Parallel()
	env := setupEngine(t)
	r := env.startReq(upgradeRun("0", "pause"))
	var order []string
	step := func(state action.State, outputs string) store.Record {
		k := env.open(r.ID)
		order = append(order, k.NodeID+":"+k.Step)
		env.finishWith(k.ID, state, outputs)
		r = env.advance(r.ID)
		return k
	}
	// n1 goes through; verify's args carry upgrade's outputs.
	step(action.Done, "")
	step(action.Done, `{"previous":"1.0"}`)
	if v := step(action.Done, ""); string(v.Args) != `{"on":"n1","was":"1.0"}` {
		t.Fatalf("verify's args rendered %s", v.Args)
	}
	step(action.Done, "")
	// n2: upgrade fails; undrain (always) and the rollback run on n2;
	// notify's when is false (verify never ran): SKIPPED, no child.
	step(action.Done, "")
	step(action.Failed, `{"previous":"1.1"}`)
	if r.State != store.RunRunning {
		t.Fatalf("run %s while n2 rolls back, want RUNNING until its procedure ends", r.State)
	}
	step(action.Done, "")
	down := step(action.Done, "")
	if down.Step != "downgrade" || string(down.Args) != `{"version":"1.1"}` {
		t.Fatalf("rollback child %s with %s, want downgrade to 1.1", down.Step, down.Args)
	}
	want := "n1:drain n1:upgrade n1:verify n1:undrain n2:drain n2:upgrade n2:undrain n2:downgrade"
	if strings.Join(order, " ") != want {
		t.Fatalf("order %v, want %s", order, want)
	}
	if r.State != store.RunPaused || r.Stages[0].Failed == nil || r.Stages[0].Failed[0] != "n2" {
		t.Fatalf("run %s (%s) failed %v, want PAUSED with n2 failed", r.State, r.StateReason, r.Stages[0].Failed)
	}
	// n3 and n4 untouched.
	for _, k := range env.children(r.ID) {
		if k.NodeID == "n3" || k.NodeID == "n4" {
			t.Fatalf("child on %s while paused", k.NodeID)
		}
	}
	// The requester may not resume it; an approver may, and it ends PARTIAL.
	err := env.st.Update(context.Background(), func(tx store.Tx) error {
		_, err := env.e.Resume(context.Background(), tx, r.ID, actions.Actor{Name: "alice"}, true)
		return err
	})
	if !errors.Is(err, runs.ErrForbidden) {
		t.Fatalf("the requester's resume: %v, want forbidden", err)
	}
	env.update(func(ctx context.Context, tx store.Tx) error {
		_, err := env.e.Resume(ctx, tx, r.ID, actions.Actor{Name: "bob", Note: "n2 is known bad"}, true)
		return err
	})
	for range 8 {
		step(action.Done, "")
	}
	if r.State != store.RunPartial || len(r.Stages[0].Failed) != 1 {
		t.Fatalf("run %s (%s), want PARTIAL naming n2", r.State, r.StateReason)
	}
}

func TestOnFailureContinueNeverStops(t *testing.T) {
	t.Parallel()
	env := setupEngine(t)
	r := env.startReq(upgradeRun("0", "continue"))
	for range 40 {
		kids := env.children(r.ID)
		var open *store.Record
		for i := range kids {
			if !kids[i].State.Final() {
				open = &kids[i]
			}
		}
		if open == nil {
			break
		}
		state := action.Done
		if open.Step == "upgrade" && (open.NodeID == "n1" || open.NodeID == "n3") {
			state = action.Failed
		}
		env.finishWith(open.ID, state, "")
		r = env.advance(r.ID)
	}
	if r.State != store.RunPartial || strings.Join(r.Stages[0].Failed, ",") != "n1,n3" {
		t.Fatalf("run %s failed %v, want PARTIAL with n1 and n3 failed", r.State, r.Stages[0].Failed)
	}
}

func TestAFalseWhenSkipsWithoutAChild(t *testing.T) {
	t.Parallel()
	env := setupEngine(t)
	req := procedure("4", "0", "", nil)
	req.Stages[0].Steps[1].When = `{{ eq .node.id "n2" }}`
	r := env.startReq(req)
	for range 20 {
		for _, k := range env.children(r.ID) {
			if !k.State.Final() {
				env.finishChild(k.ID, action.Done)
			}
		}
		if r = env.advance(r.ID); store.RunFinal(r.State) {
			break
		}
	}
	upgrades := 0
	for _, k := range env.children(r.ID) {
		if k.Step == "upgrade" {
			upgrades++
			if k.NodeID != "n2" {
				t.Fatalf("upgrade ran on %s", k.NodeID)
			}
		}
	}
	if r.State != store.RunDone || upgrades != 1 {
		t.Fatalf("run %s with %d upgrades, want DONE with upgrade on n2 only", r.State, upgrades)
	}
}

func TestBadStepTemplatesAreRefused(t *testing.T) {
	t.Parallel()
	env := setupEngine(t)
	cases := map[string]struct {
		mut  func(r *wire.CreateRunRequest)
		want string
	}{
		"unknown step in when": {func(r *wire.CreateRunRequest) { r.Stages[0].Steps[3].When = `{{ eq .steps.nope.state "DONE" }}` }, `names no step "nope"`},
		"later step's outputs": {func(r *wire.CreateRunRequest) {
			r.Stages[0].Steps[0].Args = []byte(`{"v":"{{ .steps.upgrade.outputs.previous }}"}`)
		}, "step upgrade comes later"},
		"when not a template": {func(r *wire.CreateRunRequest) { r.Stages[0].Steps[3].When = "sometimes" }, "neither"},
		"bad template":        {func(r *wire.CreateRunRequest) { r.Stages[0].Steps[3].When = "{{ .steps. }}" }, "when"},
		"rollback no steps": {func(r *wire.CreateRunRequest) {
			r.Stages[0].Steps = nil
			r.Stages[0].Kind = "muster.io/debug.ping"
		}, "a rollback needs steps"},
		"on_failure": {func(r *wire.CreateRunRequest) { r.Stages[0].OnFailure = "shrug" }, "on_failure"},
	}
	for name, tc := range cases {
		req := upgradeRun("0", "")
		tc.mut(req)
		err := env.st.Update(context.Background(), func(tx store.Tx) error {
			_, err := env.e.Create(context.Background(), tx, req, actions.Actor{Name: "alice"})
			return err
		})
		if !errors.Is(err, runs.ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want ErrInvalid naming %q", name, err, tc.want)
		}
	}
}

func TestADeadlineStartsNoNewNodeAndFailsTheRun(t *testing.T) {
	t.Parallel()
	env := setupEngine(t)
	req := procedure("1", "0", "", nil)
	req.DeadlineS = 60
	r := env.startReq(req)
	if r.DeadlineTS == nil || !r.DeadlineTS.Equal(env.now.Add(time.Minute)) {
		t.Fatalf("deadline_ts %v, want a minute after the approval", r.DeadlineTS)
	}
	env.finishChild(env.open(r.ID).ID, action.Done) // n1 drain
	env.now = env.now.Add(2 * time.Minute)
	// Past the deadline, n1 (in flight) finishes its procedure; n2 never starts.
	for range 3 {
		r = env.advance(r.ID)
		env.finishChild(env.open(r.ID).ID, action.Done)
	}
	r = env.advance(r.ID)
	if r.State != store.RunFailed || r.StateReason != runs.ReasonDeadline || len(env.children(r.ID)) != 4 {
		t.Fatalf("run %s (%s) with %d children, want FAILED on its deadline after n1's 4 steps", r.State, r.StateReason,
			len(env.children(r.ID)))
	}
}

// A run that may start only later (not_before) has its deadline counted
// from then, not from its approval: a run approved two days before its
// not_before, with a one-hour deadline, is not failed on its deadline
// before a node ran.
func TestADeadlineCountsFromTheRunsNotBefore(t *testing.T) {
	t.Parallel()
	env := setupEngine(t)
	req := procedure("1", "0", "", nil)
	req.DeadlineS = 3600
	later := env.now.Add(48 * time.Hour)
	req.NotBefore = &later
	r := env.startReq(req)
	if r.DeadlineTS == nil || !r.DeadlineTS.Equal(later.Add(time.Hour)) {
		t.Fatalf("deadline_ts %v, want an hour after not_before %v", r.DeadlineTS, later)
	}
	env.now = later.Add(time.Minute)
	if r = env.advance(r.ID); r.State != store.RunRunning {
		t.Fatalf("a minute after not_before the run is %s (%s), want RUNNING", r.State, r.StateReason)
	}
}

func TestSoakKeepsANodeInFlight(t *testing.T) {
	t.Parallel()
	env := setupEngine(t)
	req := procedure("1", "0", "", nil)
	req.Stages[0].SoakS = 120
	r := env.startReq(req)
	for range 4 {
		env.finishChild(env.open(r.ID).ID, action.Done)
		r = env.advance(r.ID)
	}
	if n := len(env.children(r.ID)); n != 4 {
		t.Fatalf("%d children: n2 started while n1 soaks", n)
	}
	env.now = env.now.Add(2 * time.Minute)
	env.advance(r.ID)
	if k := env.open(r.ID); k.NodeID != "n2" || k.Step != "drain" {
		t.Fatalf("after the soak came %s:%s, want n2:drain", k.NodeID, k.Step)
	}
}

func TestUnavailableWaitWaitsThenFails(t *testing.T) {
	t.Parallel()
	env := setupEngine(t)
	env.update(func(ctx context.Context, tx store.Tx) error {
		n, err := tx.Node(ctx, "c", "n1")
		if err != nil {
			return err
		}
		n.Status = store.NodeDown
		return tx.PutNode(ctx, n)
	})
	req := procedure("4", "1", "", nil)
	req.Stages[0].Unavailable, req.Stages[0].UnavailableTimeoutS = "wait", 60
	r := env.startReq(req)
	for _, k := range env.children(r.ID) {
		if k.NodeID == "n1" {
			t.Fatal("a child on the DOWN node")
		}
	}
	env.now = env.now.Add(59 * time.Second)
	if r = env.advance(r.ID); len(r.Stages[0].Failed) != 0 {
		t.Fatalf("n1 failed before its wait ended: %v", r.Stages[0].Failed)
	}
	env.now = env.now.Add(time.Second)
	if r = env.advance(r.ID); strings.Join(r.Stages[0].Failed, ",") != "n1" {
		t.Fatalf("failed %v after the wait, want n1", r.Stages[0].Failed)
	}
}
