package runs_test

import (
	"context"
	"errors"
	"testing"

	"github.com/musterhq/muster/core/actions"
	"github.com/musterhq/muster/core/runs"
	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/action"
)

// childless is a reader that refuses to read a run's children: what
// MayResume and MayPromote decide must not depend on them.
type childless struct{ store.Reader }

var errChildRead = errors.New("read a run's children")

func (childless) RunChildren(context.Context, string) ([]store.Record, error) {
	return nil, errChildRead
}
func (childless) ListActions(context.Context, store.ListQuery) ([]store.Record, error) {
	return nil, errChildRead
}

// TestMayResumeDecidesAsResumeWithoutReadingChildren: a run paused by its
// errors is an approver's to resume, a run paused by hand an operator's;
// MayResume says so from the run alone, as ResumeAs does from its
// children.
func TestMayResumeDecidesAsResumeWithoutReadingChildren(t *testing.T) {
	t.Parallel()
	env := setupEngine(t)
	byErrors := env.start("1", "0", "pause")
	env.finishChild(env.children(byErrors.ID)[0].ID, action.Failed)
	if byErrors = env.advance(byErrors.ID); byErrors.State != store.RunPaused {
		t.Fatalf("run is %s, want PAUSED by its error", byErrors.State)
	}
	byHand := env.start("1", "1", "pause")
	env.update(func(ctx context.Context, tx store.Tx) error {
		var err error
		byHand, err = env.e.Pause(ctx, tx, byHand.ID, actions.Actor{Name: "alice"})
		return err
	})
	ctx := context.Background()
	for _, tc := range []struct {
		name                   string
		r                      *store.Run
		who                    string
		mayApprove, mayOperate bool
		want                   error
	}{
		{"errors, requester", byErrors, "alice", true, true, runs.ErrForbidden},
		{"errors, operator", byErrors, "carol", false, true, runs.ErrForbidden},
		{"errors, approver", byErrors, "bob", true, false, nil},
		{"by hand, approver", byHand, "bob", true, false, runs.ErrForbidden},
		{"by hand, operator", byHand, "carol", false, true, nil},
	} {
		var may, resume error
		err := env.st.Read(ctx, func(rd store.Reader) error {
			may = env.e.MayResume(ctx, childless{rd}, tc.r, tc.who, tc.mayApprove, tc.mayOperate)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		// ResumeAs, rolled back: the decision only.
		errRollback := errors.New("rollback")
		_ = env.st.Update(ctx, func(tx store.Tx) error {
			_, resume = env.e.ResumeAs(ctx, tx, tc.r.ID, actions.Actor{Name: tc.who}, tc.mayApprove, tc.mayOperate)
			return errRollback
		})
		if !errors.Is(may, tc.want) || (tc.want == nil) != (may == nil) || (may == nil) != (resume == nil) {
			t.Errorf("%s: MayResume %v, ResumeAs %v; want %v from both", tc.name, may, resume, tc.want)
		}
	}
}
