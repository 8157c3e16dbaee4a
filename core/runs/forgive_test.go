package runs_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/musterhq/muster/core/actions"
	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/action"
)

// TestForgivingTakesAReasonAndIsRecorded: resuming past errors without a
// reason is refused and changes nothing; with one, the run records
// "forgiven by bob: REASON" and its PARTIAL end says the errors were
// forgiven, not that they were within max_errors.
func TestForgivingTakesAReasonAndIsRecorded(t *testing.T) {
	t.Parallel()
	env := setupEngine(t)
	r := env.startReq(upgradeRun("0", "pause"))
	for range 20 {
		if r.State != store.RunRunning {
			break
		}
		k := env.open(r.ID)
		state := action.Done
		if k.NodeID == "n2" && k.Step == "upgrade" {
			state = action.Failed
		}
		env.finishWith(k.ID, state, "")
		r = env.advance(r.ID)
	}
	resume := func(note string) (*store.Run, error) {
		var out *store.Run
		err := env.st.Update(context.Background(), func(tx store.Tx) error {
			var err error
			out, err = env.e.Resume(context.Background(), tx, r.ID, actions.Actor{Name: "bob", Note: note}, true)
			return err
		})
		return out, err
	}
	if _, err := resume("  "); !errors.Is(err, actions.ErrUnprocessable) || !strings.Contains(err.Error(), "reason is required") {
		t.Fatalf("resume past errors without a reason: %v", err)
	}
	if again, _ := env.runAndSeq(r.ID); again.State != store.RunPaused {
		t.Fatalf("a refused resume left the run %s", again.State)
	}
	r, err := resume("n2's mirror was down; retried by hand")
	if err != nil {
		t.Fatal(err)
	}
	if r.StateReason != "forgiven by bob: n2's mirror was down; retried by hand" ||
		len(r.Stages[0].ForgivenBy) != 1 || r.Stages[0].ForgivenBy[0] != r.StateReason {
		t.Fatalf("run %s, forgiven %v", r.StateReason, r.Stages[0].ForgivenBy)
	}
	r = env.runThrough(r)
	if r.State != store.RunPartial || strings.Contains(r.StateReason, "within max_errors") ||
		!strings.Contains(r.StateReason, "errors past max_errors were forgiven (forgiven by bob: n2's mirror was down; retried by hand)") {
		t.Fatalf("run %s (%s), want PARTIAL saying the errors were forgiven", r.State, r.StateReason)
	}
}

// TestPromoteTakesAReason: promoting a canary without a reason is refused;
// with one, it is recorded.
func TestPromoteTakesAReason(t *testing.T) {
	t.Parallel()
	env := setupEngine(t)
	r := env.canaryPaused()
	promote := func(note string) (*store.Run, error) {
		var out *store.Run
		err := env.st.Update(context.Background(), func(tx store.Tx) error {
			var err error
			out, err = env.e.Promote(context.Background(), tx, r.ID, actions.Actor{Name: "bob", Note: note}, true)
			return err
		})
		return out, err
	}
	if _, err := promote(""); !errors.Is(err, actions.ErrUnprocessable) {
		t.Fatalf("promote without a reason: %v", err)
	}
	r, err := promote("p99 flat for 10 min")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(r.StateReason, "promoted by bob: p99 flat for 10 min") || r.Stages[0].PromotedBy != "promoted by bob: p99 flat for 10 min" {
		t.Fatalf("run %s, stage promoted by %q", r.StateReason, r.Stages[0].PromotedBy)
	}
}

// TestForgivesNamesWhatResumeForgives: Forgives, read-only, names the
// stage a resume past its errors forgives, and changes nothing; once that
// resume forgave them, nothing is left to forgive.
func TestForgivesNamesWhatResumeForgives(t *testing.T) {
	t.Parallel()
	env := setupEngine(t)
	ctx := context.Background()
	r := env.startReq(upgradeRun("0", "pause"))
	for range 20 {
		if r.State != store.RunRunning {
			break
		}
		k := env.open(r.ID)
		state := action.Done
		if k.NodeID == "n2" && k.Step == "upgrade" {
			state = action.Failed
		}
		env.finishWith(k.ID, state, "")
		r = env.advance(r.ID)
	}
	forgives := func(r *store.Run) []string {
		t.Helper()
		var out []string
		if err := env.st.Read(ctx, func(rd store.Reader) (err error) { out, err = env.e.Forgives(ctx, rd, r); return err }); err != nil {
			t.Fatal(err)
		}
		return out
	}
	_, seq := env.runAndSeq(r.ID)
	got := forgives(r)
	if len(got) != 1 || got[0] != r.Stages[0].Name {
		t.Fatalf("paused past errors, Forgives says %v, want [%s]", got, r.Stages[0].Name)
	}
	if again, after := env.runAndSeq(r.ID); again.State != store.RunPaused || after != seq {
		t.Fatal("Forgives changed the run")
	}
	if err := env.st.Update(ctx, func(tx store.Tx) (err error) {
		r, err = env.e.Resume(ctx, tx, r.ID, actions.Actor{Name: "bob", Note: "n2 retried by hand"}, true)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if r.Stages[0].Forgiven != 1 {
		t.Fatalf("resume forgave %d", r.Stages[0].Forgiven)
	}
	r.State = store.RunPaused // as if paused again by hand, with no new error
	if got := forgives(r); len(got) != 0 {
		t.Fatalf("after the errors were forgiven, Forgives says %v", got)
	}
}
