package runs_test

import (
	"context"
	"errors"
	"testing"

	"github.com/musterhq/muster/core/actions"
	"github.com/musterhq/muster/core/runs"
	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/action"
	"github.com/musterhq/muster/shared/wire"
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
			_, resume = env.e.ResumeAs(ctx, tx, tc.r.ID, actions.Actor{Name: tc.who, Note: "checked"}, tc.mayApprove, tc.mayOperate)
			return errRollback
		})
		if !errors.Is(may, tc.want) || (tc.want == nil) != (may == nil) || (may == nil) != (resume == nil) {
			t.Errorf("%s: MayResume %v, ResumeAs %v; want %v from both", tc.name, may, resume, tc.want)
		}
	}
}

// TestTallyCountsAsCountDoesFromTheCounters: after each advance of a
// one-step run and of a run of steps (errors, retries, nodes in flight,
// nodes not started), Tally from the store's counters says what Count
// says from every child: the nodes pending, the errors and the nodes done.
func TestTallyCountsAsCountDoesFromTheCounters(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		req  *wire.CreateRunRequest
	}{
		{"one step", nil},
		{"steps", procedure("2", "4", "continue", &wire.Retry{Attempts: 2})},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			env := setupEngine(t)
			var r *store.Run
			if tc.req == nil {
				r = env.start("2", "4", "continue")
			} else {
				r = env.startReq(tc.req)
			}
			ctx := context.Background()
			for round := 0; round < 12 && r.State == store.RunRunning; round++ {
				kids := env.children(r.ID)
				for i, k := range kids {
					if k.State.Final() {
						continue
					}
					st := action.Done
					if (round+i)%3 == 0 {
						st = action.Failed
					}
					env.finishChild(k.ID, st)
					break // one child a round: others stay in flight
				}
				r = env.advance(r.ID)
				err := env.st.Read(ctx, func(rd store.Reader) error {
					counts, err := rd.RunChildCounts(ctx, []string{r.ID})
					if err != nil {
						return err
					}
					started, err := rd.RunStartedNodes(ctx, r.ID)
					if err != nil {
						return err
					}
					kids, err := rd.RunChildren(ctx, r.ID)
					if err != nil {
						return err
					}
					ch := make([]runs.Child, len(kids))
					for i := range kids {
						ch[i] = runs.ChildOf(&kids[i], r.ApprovedBy)
					}
					st := &r.Stages[0]
					want, got := runs.Count(st, ch), runs.Tally(r, st, counts, started[st.Name])
					if got.Pending != want.Pending || got.Errors != want.Errors || got.Done != want.Done {
						t.Errorf("round %d: Tally pending %d, errors %d, done %d; Count %d, %d, %d", round,
							got.Pending, got.Errors, got.Done, want.Pending, want.Errors, want.Done)
					}
					return nil
				})
				if err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}
