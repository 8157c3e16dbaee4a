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
	"github.com/musterhq/muster/shared/limit"
	"github.com/musterhq/muster/shared/wire"
)

// twoStages is stage a (drain) then stage b (upgrade) over every node, one
// node at a time, max_errors 1.
func twoStages(includeFailed bool) *wire.CreateRunRequest {
	c, e := limit.MustParse("1"), limit.MustParse("1")
	k := "muster.io/debug.ping"
	return &wire.CreateRunRequest{ClusterID: "c", Stages: []wire.StageSpec{
		{Name: "a", Target: wire.Target{All: true}, MaxConcurrency: &c, MaxErrors: &e,
			Steps: []wire.StepSpec{{Name: "drain", Kind: k}}},
		{Name: "b", Target: wire.Target{All: true}, MaxConcurrency: &c, MaxErrors: &e, IncludeFailed: includeFailed,
			Steps: []wire.StepSpec{{Name: "upgrade", Kind: k}}},
	}}
}

// runThrough finishes the run's children one at a time, failing those
// fail names (stage/node), until the run is final.
func (env *engineEnv) runThrough(r *store.Run, fail ...string) *store.Run {
	env.t.Helper()
	for range 40 {
		if store.RunFinal(r.State) {
			return r
		}
		for _, k := range env.children(r.ID) {
			if k.State.Final() {
				continue
			}
			state := action.Done
			if slices.Contains(fail, k.Stage+"/"+k.NodeID) {
				state = action.Failed
			}
			env.finishChild(k.ID, state)
		}
		r = env.advance(r.ID)
	}
	env.t.Fatalf("run %s still %s", r.ID, r.State)
	return nil
}

func TestANodeThatFailedAStageIsSkippedByLaterStages(t *testing.T) {
	t.Parallel()
	env := setupEngine(t)
	r := env.runThrough(env.startReq(twoStages(false)), "a/n2")
	for _, k := range env.children(r.ID) {
		if k.Stage == "b" && k.NodeID == "n2" {
			t.Fatalf("stage b ran %s on n2, which failed stage a", k.Step)
		}
	}
	if r.State != store.RunPartial || !slices.Equal(r.Stages[1].Skipped, []string{"n2"}) {
		t.Fatalf("run %s (%s), stage b skipped %v, want PARTIAL with n2 skipped", r.State, r.StateReason, r.Stages[1].Skipped)
	}
	v := runs.View(r, store.CountChildren(env.children(r.ID)))
	if v.Summary == nil || len(v.Summary.Skipped) != 1 || v.Summary.Skipped[0].Reason != "failed stage a" {
		t.Fatalf("summary %+v, want n2 skipped in b for failing stage a", v.Summary)
	}
}

func TestIncludeFailedRunsAStageOnNodesThatFailedBefore(t *testing.T) {
	t.Parallel()
	env := setupEngine(t)
	r := env.runThrough(env.startReq(twoStages(true)), "a/n2")
	ran := false
	for _, k := range env.children(r.ID) {
		ran = ran || (k.Stage == "b" && k.NodeID == "n2")
	}
	if !ran || len(r.Stages[1].Skipped) != 0 || !r.Stages[1].IncludeFailed {
		t.Fatalf("stage b ran on n2: %t, skipped %v; want it run with include_failed", ran, r.Stages[1].Skipped)
	}
}

func TestIncludeFailedIsSignedAndChecked(t *testing.T) {
	t.Parallel()
	env := setupEngine(t)
	var without, with *store.Run
	env.update(func(ctx context.Context, tx store.Tx) error {
		var err error
		if without, err = env.e.Create(ctx, tx, twoStages(false), actions.Actor{Name: "alice"}); err != nil {
			return err
		}
		with, err = env.e.Create(ctx, tx, twoStages(true), actions.Actor{Name: "alice"})
		return err
	})
	if without.Digest == with.Digest {
		t.Fatal("include_failed does not change the run's digest")
	}
	req := twoStages(false)
	req.Stages[0].IncludeFailed = true
	err := env.st.Update(context.Background(), func(tx store.Tx) error {
		_, err := env.e.Create(context.Background(), tx, req, actions.Actor{Name: "alice"})
		return err
	})
	if !errors.Is(err, runs.ErrInvalid) || !strings.Contains(err.Error(), "include_failed") {
		t.Fatalf("include_failed on the first stage: %v, want invalid", err)
	}
}
