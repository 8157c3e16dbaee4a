package runs_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/musterhq/muster/core/actions"
	"github.com/musterhq/muster/core/runs"
	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/action"
	"github.com/musterhq/muster/shared/wire"
)

// failVerifyOn runs procedure drain → upgrade (whose output v is
// "old-<node>") → verify (its args read it) → undrain over every node,
// verify failing on node bad, to a PARTIAL end.
func (env *engineEnv) failVerifyOn(bad string, rollback ...wire.StepSpec) *store.Run {
	env.t.Helper()
	req := procedure("1", "4", runs.OnFailureContinue, nil)
	req.Stages[0].Rollback = rollback
	req.Stages[0].Steps[2].Args = []byte(`{"was":"{{ .steps.upgrade.outputs.v }}"}`)
	r := env.startReq(req)
	for r.State == store.RunRunning {
		k := env.open(r.ID)
		env.update(func(ctx context.Context, tx store.Tx) error {
			rec, err := tx.Action(ctx, k.ID)
			if err != nil {
				return err
			}
			rec.State, rec.FinishedTS, rec.PushedStoreID = action.Done, action.TimePtr(env.now), "store-1"
			if k.Step == "upgrade" {
				rec.Outputs = []byte(`{"v":"old-` + k.NodeID + `"}`)
			}
			if k.Step == "verify" && k.NodeID == bad {
				rec.State = action.Failed
			}
			return tx.UpdateAction(ctx, rec)
		})
		r = env.advance(r.ID)
	}
	if r.State != store.RunPartial {
		env.t.Fatalf("the run is %s (%q), want PARTIAL", r.State, r.StateReason)
	}
	return r
}

func (env *engineEnv) retryFrom(id, from string) (*store.Run, error) {
	var r *store.Run
	err := env.st.Update(context.Background(), func(tx store.Tx) error {
		var err error
		r, err = env.e.RetryFrom(context.Background(), tx, id, actions.Actor{Name: "alice"}, from)
		return err
	})
	return r, err
}

func TestARetryFromTheFailedStepRunsOnlyWhatFailedAndAfter(t *testing.T) {
	t.Parallel()
	env := setupEngine(t)
	old := env.failVerifyOn("n2")
	retry, err := env.retryFrom(old.ID, wire.RetryFromFailed)
	if err != nil {
		t.Fatal(err)
	}
	st := retry.Stages[0]
	if !slices.Equal(st.Nodes, []string{"n2"}) || len(st.Reuse["n2"]) != 2 || st.Reuse["n2"][0].Step != "drain" ||
		st.Reuse["n2"][1].Step != "upgrade" || string(st.Reuse["n2"][1].Outputs) != `{"v":"old-n2"}` {
		t.Fatalf("the retry's stage: nodes %v, reuse %+v", st.Nodes, st.Reuse)
	}
	// What it shows: n2 starts at verify, drain and upgrade reused.
	v := runs.View(retry, nil)
	if re := v.Stages[0].Reuse; len(re) != 1 || re[0].NodeID != "n2" || re[0].From != "verify" ||
		!slices.Equal(re[0].Steps, []string{"drain", "upgrade"}) {
		t.Fatalf("the view's reuse: %+v", re)
	}
	plain, err := env.retryFrom(old.ID, "")
	if err != nil {
		t.Fatal(err)
	}
	if plain.Stages[0].Reuse != nil || plain.Digest == retry.Digest {
		t.Fatalf("a retry from the first step reuses %+v, digest %s (from failed: %s)", plain.Stages[0].Reuse, plain.Digest, retry.Digest)
	}
	env.update(func(ctx context.Context, tx store.Tx) error {
		_, err := env.e.Approve(ctx, tx, retry.ID, "", actions.Actor{Name: "bob"})
		return err
	})
	var ran []string
	r := env.advance(retry.ID)
	for r.State == store.RunRunning {
		k := env.open(r.ID)
		ran = append(ran, k.NodeID+":"+k.Step)
		if k.Step == "verify" && string(k.Args) != `{"was":"old-n2"}` {
			t.Fatalf("verify's args %s: the reused upgrade's outputs are not seen", k.Args)
		}
		env.finishChild(k.ID, action.Done)
		r = env.advance(r.ID)
	}
	if r.State != store.RunDone || !slices.Equal(ran, []string{"n2:verify", "n2:undrain"}) {
		t.Fatalf("the retry ran %v and is %s; want n2:verify, n2:undrain and DONE", ran, r.State)
	}
}

func TestARetryFromAnUnknownPlaceIsRefused(t *testing.T) {
	t.Parallel()
	env := setupEngine(t)
	old := env.failVerifyOn("n1")
	if _, err := env.retryFrom(old.ID, "verify"); !errors.Is(err, runs.ErrInvalid) {
		t.Fatalf("retry from verify: %v, want ErrInvalid", err)
	}
}

func TestARetryFromTheFailedStepReusesNothingOfANodeRolledBack(t *testing.T) {
	t.Parallel()
	env := setupEngine(t)
	old := env.failVerifyOn("n3", wire.StepSpec{Name: "downgrade", Kind: "muster.io/debug.ping"})
	retry, err := env.retryFrom(old.ID, wire.RetryFromFailed)
	if err != nil {
		t.Fatal(err)
	}
	if st := retry.Stages[0]; !slices.Equal(st.Nodes, []string{"n3"}) || len(st.Reuse) != 0 {
		t.Fatalf("the retry of a node whose rollback ran: nodes %v, reuse %+v; want n3 from its first step", st.Nodes, st.Reuse)
	}
}
