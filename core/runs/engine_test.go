package runs_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/musterhq/muster/core/actions"
	"github.com/musterhq/muster/core/approval"
	"github.com/musterhq/muster/core/runs"
	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/core/store/sqlite"
	"github.com/musterhq/muster/shared/action"
	"github.com/musterhq/muster/shared/limit"
	"github.com/musterhq/muster/shared/live"
	"github.com/musterhq/muster/shared/wire"
)

// engineEnv is the run engine on a real SQLite store, with the real action
// rules, over cluster c of nodes n1…n4.
type engineEnv struct {
	t  *testing.T
	st *sqlite.Store
	e  *runs.Engine
	// policy is the engine's approval policy.
	policy *live.Value[approval.Policy]
	now    time.Time
}

func setupEngine(t *testing.T) *engineEnv {
	t.Helper()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	env := &engineEnv{t: t, st: st, now: time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)}
	pol := approval.DefaultPolicy()
	clock := func() time.Time { return env.now }
	env.policy = live.New(pol)
	env.e = runs.NewEngine(env.policy, &actions.Rules{Policy: live.New(pol), Now: clock}, clock)
	env.update(func(ctx context.Context, tx store.Tx) error {
		if err := tx.PutCluster(ctx, &store.Cluster{ID: "c", Status: store.ClusterHealthy}); err != nil {
			return err
		}
		for _, n := range []string{"n1", "n2", "n3", "n4"} {
			if err := tx.PutNode(ctx, &store.Node{ClusterID: "c", ID: n, Addr: "127.0.0.1:1", Source: store.SourceStatic, Status: store.NodeUp}); err != nil {
				return err
			}
		}
		return nil
	})
	return env
}

func (env *engineEnv) update(fn func(ctx context.Context, tx store.Tx) error) {
	env.t.Helper()
	ctx := context.Background()
	if err := env.st.Update(ctx, func(tx store.Tx) error { return fn(ctx, tx) }); err != nil {
		env.t.Fatal(err)
	}
}

func (env *engineEnv) children(id string) []store.Record {
	env.t.Helper()
	var out []store.Record
	env.update(func(ctx context.Context, tx store.Tx) error {
		var err error
		out, err = tx.RunChildren(ctx, id)
		return err
	})
	return out
}

// finishChild ends a child as its agent would report it.
func (env *engineEnv) finishChild(id string, state action.State) {
	env.t.Helper()
	env.update(func(ctx context.Context, tx store.Tx) error {
		rec, err := tx.Action(ctx, id)
		if err != nil {
			return err
		}
		rec.State, rec.FinishedTS, rec.PushedStoreID = state, action.TimePtr(env.now), "store-1"
		return tx.UpdateAction(ctx, rec)
	})
}

func (env *engineEnv) advance(id string) *store.Run {
	env.t.Helper()
	var r *store.Run
	env.update(func(ctx context.Context, tx store.Tx) error {
		if _, err := env.e.AdvanceNodes(ctx, tx, id); err != nil {
			return err
		}
		var err error
		r, err = tx.Run(ctx, id)
		return err
	})
	return r
}

// start creates a run of one stage over every node and has bob approve it.
func (env *engineEnv) start(conc, errs, onFailure string) *store.Run {
	env.t.Helper()
	c, e := limit.MustParse(conc), limit.MustParse(errs)
	var r *store.Run
	env.update(func(ctx context.Context, tx store.Tx) error {
		var err error
		r, err = env.e.Create(ctx, tx, &wire.CreateRunRequest{ClusterID: "c", Stages: []wire.StageSpec{{
			Kind: "muster.io/debug.ping", Target: wire.Target{All: true}, MaxConcurrency: &c, MaxErrors: &e, OnFailure: onFailure,
		}}}, actions.Actor{Name: "alice"})
		if err != nil {
			return err
		}
		r, err = env.e.Approve(ctx, tx, r.ID, "", actions.Actor{Name: "bob"})
		return err
	})
	return r
}

func TestAFailedRunCancelsTheChildrenItNeverSent(t *testing.T) {
	t.Parallel()
	env := setupEngine(t)
	r := env.start("2", "0", "")
	kids := env.children(r.ID)
	if len(kids) != 2 {
		t.Fatalf("%d children in the first wave, want 2", len(kids))
	}
	// n1's child ran and failed; n2's was never sent (its node was down).
	env.finishChild(kids[0].ID, action.Failed)
	r = env.advance(r.ID)
	if r.State != store.RunFailed {
		t.Fatalf("run is %s, want FAILED", r.State)
	}
	kids = env.children(r.ID)
	if len(kids) != 2 || kids[1].State != action.Cancelled || kids[1].StateReason != runs.ReasonRunEnded {
		t.Fatalf("the unsent child is %s (%q), want CANCELLED %q", kids[1].State, kids[1].StateReason, runs.ReasonRunEnded)
	}
}

func TestAManualPauseAndResumeDoNotLiftMaxErrors(t *testing.T) {
	t.Parallel()
	env := setupEngine(t)
	r := env.start("1", "1", "pause")
	env.finishChild(env.children(r.ID)[0].ID, action.Failed) // 1 error: within max_errors 1
	r = env.advance(r.ID)
	if r.State != store.RunRunning {
		t.Fatalf("one error within max_errors 1: run %s", r.State)
	}
	env.update(func(ctx context.Context, tx store.Tx) error {
		if _, err := env.e.Pause(ctx, tx, r.ID, actions.Actor{Name: "alice"}); err != nil {
			return err
		}
		_, err := env.e.Resume(ctx, tx, r.ID, actions.Actor{Name: "alice"}, false)
		return err
	})
	kids := env.children(r.ID)
	env.finishChild(kids[len(kids)-1].ID, action.Failed) // the second error
	if r = env.advance(r.ID); r.State != store.RunPaused || !strings.Contains(r.StateReason, "2 errors") {
		t.Fatalf("a second error after a manual pause and resume: run %s (%s), want PAUSED on 2 errors", r.State, r.StateReason)
	}
	// Now the stage's errors paused it: forgiving them takes an approver
	// other than the requester.
	ctx := context.Background()
	for _, tc := range []struct {
		who        string
		mayApprove bool
	}{{"alice", false}, {"alice", true}, {"carol", false}} {
		err := env.st.Update(ctx, func(tx store.Tx) error {
			_, err := env.e.Resume(ctx, tx, r.ID, actions.Actor{Name: tc.who}, tc.mayApprove)
			return err
		})
		if !errors.Is(err, runs.ErrForbidden) {
			t.Fatalf("%s (approver %v) resumed past max_errors: %v", tc.who, tc.mayApprove, err)
		}
	}
	env.update(func(ctx context.Context, tx store.Tx) error {
		_, err := env.e.Resume(ctx, tx, r.ID, actions.Actor{Name: "bob", Note: "flaky"}, true)
		return err
	})
	if kids := env.children(r.ID); len(kids) != 3 {
		t.Fatalf("%d children after the resume, want the third", len(kids))
	}
}

func TestApproveChecksTheDigestShown(t *testing.T) {
	t.Parallel()
	env := setupEngine(t)
	var r *store.Run
	env.update(func(ctx context.Context, tx store.Tx) error {
		var err error
		r, err = env.e.Create(ctx, tx, &wire.CreateRunRequest{ClusterID: "c", Stages: []wire.StageSpec{{
			Kind: "muster.io/debug.ping", Target: wire.Target{All: true}}}}, actions.Actor{Name: "alice"})
		return err
	})
	ctx := context.Background()
	err := env.st.Update(ctx, func(tx store.Tx) error {
		_, err := env.e.Approve(ctx, tx, r.ID, strings.Repeat("0", 64), actions.Actor{Name: "bob"})
		return err
	})
	if !errors.Is(err, runs.ErrWrongState) {
		t.Fatalf("approve with another digest: %v, want ErrWrongState", err)
	}
	env.update(func(ctx context.Context, tx store.Tx) error {
		_, err := env.e.Approve(ctx, tx, r.ID, r.Digest, actions.Actor{Name: "bob"})
		return err
	})
}

func TestRunsWaitingForApprovalExpire(t *testing.T) {
	t.Parallel()
	env := setupEngine(t)
	var r *store.Run
	env.update(func(ctx context.Context, tx store.Tx) error {
		var err error
		r, err = env.e.Create(ctx, tx, &wire.CreateRunRequest{ClusterID: "c", Stages: []wire.StageSpec{{
			Kind: "muster.io/debug.ping", Target: wire.Target{All: true}}}}, actions.Actor{Name: "alice"})
		return err
	})
	env.now = env.now.Add(env.policy.Load().TTL + time.Minute)
	var n int
	env.update(func(ctx context.Context, tx store.Tx) error {
		var err error
		n, err = env.e.Expire(ctx, tx)
		if err != nil {
			return err
		}
		r, err = tx.Run(ctx, r.ID)
		return err
	})
	if n != 1 || r.State != store.RunCancelled || r.StateReason != runs.ReasonExpired {
		t.Fatalf("expired %d; run %s (%s)", n, r.State, r.StateReason)
	}
	var evs []store.Event
	env.update(func(ctx context.Context, tx store.Tx) error {
		var err error
		evs, err = tx.Events(ctx, 0, 0)
		return err
	})
	if last := evs[len(evs)-1]; last.Type != store.EventRunExpired || last.RunID != r.ID {
		t.Fatalf("last event %+v, want run.expired of the run", last)
	}
}

func TestRunEventsTellItsStory(t *testing.T) {
	t.Parallel()
	env := setupEngine(t)
	r := env.start("100%", "0", "")
	for _, k := range env.children(r.ID) {
		env.finishChild(k.ID, action.Done)
	}
	if r = env.advance(r.ID); r.State != store.RunDone {
		t.Fatalf("run %s, want DONE", r.State)
	}
	var types []string
	env.update(func(ctx context.Context, tx store.Tx) error {
		evs, err := tx.Events(ctx, 0, 0)
		for _, e := range evs {
			if e.RunID == r.ID && strings.HasPrefix(e.Type, "run.") {
				types = append(types, e.Type)
			}
		}
		return err
	})
	want := []string{store.EventRunCreated, store.EventRunApproved, store.EventRunStageStarted,
		store.EventRunStageFinished, store.EventRunFinished}
	if strings.Join(types, " ") != strings.Join(want, " ") {
		t.Fatalf("run events %v, want %v", types, want)
	}
}

func TestAChildWhoseContentTheAgentReplacedIsAnError(t *testing.T) {
	t.Parallel()
	env := setupEngine(t)
	r := env.start("1", "0", "")
	kid := env.children(r.ID)[0]
	// The agent ran other content under the child's id: the core took its
	// record (the agent wins) and voided the approval.
	env.update(func(ctx context.Context, tx store.Tx) error {
		rec, err := tx.Action(ctx, kid.ID)
		if err != nil {
			return err
		}
		rec.Kind, rec.State, rec.ApprovedBy, rec.ApprovalDigest = "muster.io/debug.sleep", action.Done, "", ""
		return tx.UpdateAction(ctx, rec)
	})
	if r = env.advance(r.ID); r.State != store.RunFailed {
		t.Fatalf("a replaced child that ended DONE: run %s, want FAILED on max_errors 0", r.State)
	}
}

func TestAChildOnAForgottenNodeEndsAndCountsAsAnError(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		maxErrors, want string
	}{{"0", store.RunFailed}, {"1", store.RunRunning}} {
		env := setupEngine(t)
		c, e := limit.MustParse("100%"), limit.MustParse(tc.maxErrors)
		var r *store.Run
		env.update(func(ctx context.Context, tx store.Tx) error {
			var err error
			r, err = env.e.Create(ctx, tx, &wire.CreateRunRequest{ClusterID: "c", Stages: []wire.StageSpec{{
				Kind: "muster.io/debug.ping", Target: wire.Target{All: true}, MaxConcurrency: &c, MaxErrors: &e,
			}}}, actions.Actor{Name: "alice"})
			if err != nil {
				return err
			}
			// n2 is forgotten after the run was resolved, before it starts.
			if err := tx.DeleteNode(ctx, "c", "n2"); err != nil {
				return err
			}
			if _, err := env.e.Approve(ctx, tx, r.ID, "", actions.Actor{Name: "bob"}); err != nil {
				return err
			}
			r, err = tx.Run(ctx, r.ID)
			return err
		})
		var onN2 *store.Record
		for _, k := range env.children(r.ID) {
			if k.NodeID == "n2" {
				onN2 = &k
			}
		}
		if onN2 == nil || onN2.State != action.Cancelled || onN2.StateReason != runs.ReasonNodeForgotten {
			t.Fatalf("max_errors %s: n2's child %+v, want CANCELLED %q", tc.maxErrors, onN2, runs.ReasonNodeForgotten)
		}
		if r.State != tc.want {
			t.Fatalf("max_errors %s: run %s (%s), want %s", tc.maxErrors, r.State, r.StateReason, tc.want)
		}
	}
}

// TestRunsWaitingForApprovalExpirePageByPage: expiring reads the runs
// waiting a page at a time, oldest first, and cancels every run past the
// TTL, however many pages they fill, and none of the others.
func TestRunsWaitingForApprovalExpirePageByPage(t *testing.T) {
	t.Parallel()
	env := setupEngine(t)
	create := func(n int) {
		env.update(func(ctx context.Context, tx store.Tx) error {
			for range n {
				if _, err := env.e.Create(ctx, tx, &wire.CreateRunRequest{ClusterID: "c", Stages: []wire.StageSpec{{
					Kind: "muster.io/debug.ping", Target: wire.Target{All: true}}}}, actions.Actor{Name: "alice"}); err != nil {
					return err
				}
			}
			return nil
		})
	}
	create(250)
	env.now = env.now.Add(env.policy.Load().TTL + time.Minute)
	create(30)
	var n int
	var left []store.Run
	env.update(func(ctx context.Context, tx store.Tx) error {
		var err error
		if n, err = env.e.Expire(ctx, tx); err != nil {
			return err
		}
		left, err = tx.RunsInState(ctx, "", store.RunPendingApprove)
		return err
	})
	if n != 250 || len(left) != 30 {
		t.Fatalf("expired %d, %d left waiting; want 250 and 30", n, len(left))
	}
}

// runWaits lists the reasons of the approval.waiting events of a run.
func (env *engineEnv) runWaits(runID string) []string {
	var out []string
	env.update(func(ctx context.Context, tx store.Tx) error {
		evs, err := tx.Events(ctx, 0, 0)
		for _, e := range evs {
			if e.RunID == runID && e.Type == store.EventApprovalWaiting {
				out = append(out, e.Data["reason"].(string))
			}
		}
		return err
	})
	return out
}

func TestARunWaitingForAnApproverSaysSo(t *testing.T) {
	t.Parallel()
	env := setupEngine(t)
	r := env.start("1", "0", "pause")
	if got := strings.Join(env.runWaits(r.ID), " "); got != "created" {
		t.Fatalf("a run created waiting for approval: approval.waiting reasons %q, want created", got)
	}
	env.finishChild(env.children(r.ID)[0].ID, action.Failed)
	if r = env.advance(r.ID); r.State != store.RunPaused {
		t.Fatalf("run %s, want PAUSED by its error", r.State)
	}
	if got := strings.Join(env.runWaits(r.ID), " "); got != "created paused" {
		t.Fatalf("approval.waiting reasons %q, want created then paused", got)
	}
}

// TestAdvanceSkipsNodesUnavailableAtTheirTurn: the engine reads only the
// nodes it would start, and plans again when one of them is DOWN or
// drained: with n2 DOWN and n3 drained, the end of n1's child skips both
// (unavailable: skip) and starts n4, in one advance; a skipped node gets
// no child.
func TestAdvanceSkipsNodesUnavailableAtTheirTurn(t *testing.T) {
	t.Parallel()
	env := setupEngine(t)
	env.update(func(ctx context.Context, tx store.Tx) error {
		for _, n := range []struct {
			id      string
			down    bool
			drained bool
		}{{"n2", true, false}, {"n3", false, true}} {
			node, err := tx.Node(ctx, "c", n.id)
			if err != nil {
				return err
			}
			if n.down {
				node.Status = store.NodeDown
			}
			node.Drained = n.drained
			if err := tx.PutNode(ctx, node); err != nil {
				return err
			}
		}
		return nil
	})
	one := limit.MustParse("1")
	var r *store.Run
	env.update(func(ctx context.Context, tx store.Tx) error {
		var err error
		r, err = env.e.Create(ctx, tx, &wire.CreateRunRequest{ClusterID: "c", Stages: []wire.StageSpec{{
			Kind: "muster.io/debug.ping", Target: wire.Target{All: true}, MaxConcurrency: &one, Unavailable: runs.UnavailableSkip,
		}}}, actions.Actor{Name: "alice"})
		if err != nil {
			return err
		}
		r, err = env.e.Approve(ctx, tx, r.ID, "", actions.Actor{Name: "bob"})
		return err
	})
	kids := env.children(r.ID)
	if len(kids) != 1 || kids[0].NodeID != "n1" {
		t.Fatalf("first wave %+v, want one child on n1", kids)
	}
	env.finishChild(kids[0].ID, action.Done)
	var created []string
	env.update(func(ctx context.Context, tx store.Tx) error {
		var err error
		created, err = env.e.AdvanceNodes(ctx, tx, r.ID)
		return err
	})
	if len(created) != 1 || created[0] != "n4" {
		t.Fatalf("the advance created children on %v, want [n4]", created)
	}
	kids = env.children(r.ID)
	if len(kids) != 2 || kids[1].NodeID != "n4" {
		t.Fatalf("children %+v, want n1's and n4's", kids)
	}
	var got *store.Run
	env.update(func(ctx context.Context, tx store.Tx) error {
		var err error
		got, err = tx.Run(ctx, r.ID)
		return err
	})
	if s := got.Stages[0].Skipped; len(s) != 2 || s[0] != "n2" || s[1] != "n3" {
		t.Fatalf("skipped %v, want [n2 n3]", s)
	}
}

// TestRetryStartsItsStagesAfresh: a retry is a new run of the same spec,
// so its stages keep the canary but not the first run's promotion (it
// pauses after its canary again, for an approver to promote), nor what
// the first run decided of nodes unavailable at their turn.
func TestRetryStartsItsStagesAfresh(t *testing.T) {
	t.Parallel()
	env := setupEngine(t)
	r := env.start("1", "0", "")
	env.update(func(ctx context.Context, tx store.Tx) error {
		cur, err := tx.Run(ctx, r.ID)
		if err != nil {
			return err
		}
		st := &cur.Stages[0]
		st.Canary, st.Promoted, st.State = 1, true, store.StageFailed
		st.Unreachable = map[string]store.Unreachable{"n2": {As: runs.UnavailableSkip}}
		cur.State = store.RunFailed
		return tx.UpdateRun(ctx, cur)
	})
	var retry *store.Run
	env.update(func(ctx context.Context, tx store.Tx) error {
		var err error
		retry, err = env.e.Retry(ctx, tx, r.ID, actions.Actor{Name: "alice"})
		return err
	})
	st := retry.Stages[0]
	if st.Canary != 1 || st.Promoted {
		t.Errorf("retry stage: canary %d, promoted %v; want canary 1, not promoted", st.Canary, st.Promoted)
	}
	if len(st.Unreachable) != 0 {
		t.Errorf("retry stage carries the first run's unavailable nodes: %v", st.Unreachable)
	}
}
