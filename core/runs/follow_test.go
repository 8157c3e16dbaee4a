package runs_test

import (
	"context"
	"slices"
	"testing"

	"github.com/musterhq/muster/core/actions"
	"github.com/musterhq/muster/core/runs"
	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/action"
	"github.com/musterhq/muster/shared/limit"
	"github.com/musterhq/muster/shared/wire"
)

// startWeb labels n1…n4 role=web and starts (approved by bob) a run of
// one stage over role=web, one node at a time, with follow as given.
func (env *engineEnv) startWeb(follow bool) *store.Run {
	env.t.Helper()
	one, zero := limit.MustParse("1"), limit.MustParse("0")
	var r *store.Run
	env.update(func(ctx context.Context, tx store.Tx) error {
		for _, n := range []string{"n1", "n2", "n3", "n4"} {
			if err := tx.PutNode(ctx, &store.Node{ClusterID: "c", ID: n, Addr: "127.0.0.1:1", Source: store.SourceStatic,
				Status: store.NodeUp, Labels: map[string]string{"role": "web"}}); err != nil {
				return err
			}
		}
		var err error
		r, err = env.e.Create(ctx, tx, &wire.CreateRunRequest{ClusterID: "c", Stages: []wire.StageSpec{{
			Name: "upgrade", Kind: "muster.io/debug.ping", Target: wire.Target{Labels: map[string]string{"role": "web"}},
			MaxConcurrency: &one, MaxErrors: &zero, Follow: follow,
		}}}, actions.Actor{Name: "alice"})
		if err != nil {
			return err
		}
		r, err = env.e.Approve(ctx, tx, r.ID, "", actions.Actor{Name: "bob"})
		return err
	})
	return r
}

// join adds node n5, UP, with role=web among the labels the core holds
// for it (as a replace stores them).
func (env *engineEnv) join() {
	env.update(func(ctx context.Context, tx store.Tx) error {
		return tx.PutNode(ctx, &store.Node{ClusterID: "c", ID: "n5", Addr: "127.0.0.1:1", Source: store.SourceGossip,
			Status: store.NodeUp, Labels: map[string]string{"role": "web"}, CoreLabels: map[string]string{"role": "web"}})
	})
}

// A follow stage's approval covered "the nodes matching": a node whose
// agent announces the stage's labels itself (anyone with a join token can)
// does not join it; one the core holds the labels of (its configuration,
// or a replace) does.
func TestAFollowStageTakesOnlyNodesByTheLabelsTheCoreHolds(t *testing.T) {
	t.Parallel()
	env := setupEngine(t)
	env.e.SetStaticLabels(map[string]map[string]map[string]string{"c": {"n7": {"role": "web"}}})
	r := env.startWeb(true)
	env.update(func(ctx context.Context, tx store.Tx) error {
		return tx.PutNode(ctx, &store.Node{ClusterID: "c", ID: "n6", Addr: "127.0.0.1:1", Source: store.SourceGossip,
			Status: store.NodeUp, Labels: map[string]string{"role": "web"}})
	})
	r = env.advance(r.ID)
	if st := r.Stages[0]; slices.Contains(st.Nodes, "n6") || len(st.Joined) > 0 {
		t.Fatalf("a node announcing role=web itself joined: nodes %v, joined %v", st.Nodes, st.Joined)
	}
	env.update(func(ctx context.Context, tx store.Tx) error {
		return tx.PutNode(ctx, &store.Node{ClusterID: "c", ID: "n7", Addr: "127.0.0.1:1", Source: store.SourceGossip,
			Status: store.NodeUp, Labels: map[string]string{"role": "web"}})
	})
	env.join()
	r = env.advance(r.ID)
	if st := r.Stages[0]; !slices.Equal(st.Joined, []string{"n5", "n7"}) || slices.Contains(st.Nodes, "n6") {
		t.Fatalf("after n5 (core label) and n7 (configured) joined: nodes %v, joined %v", st.Nodes, st.Joined)
	}
}

// drain finishes every open child DONE and advances, until the run ends.
func (env *engineEnv) drain(r *store.Run) *store.Run {
	env.t.Helper()
	for range 20 {
		for _, k := range env.children(r.ID) {
			if !k.State.Final() {
				env.finishChild(k.ID, action.Done)
			}
		}
		if r = env.advance(r.ID); store.RunFinal(r.State) {
			return r
		}
	}
	env.t.Fatalf("run %s did not end: %s", r.ID, r.State)
	return r
}

// Issue 33, item 5: a node that joins with the labels of a running stage
// with follow is added to it (Joined, a run.node_joined event) and gets
// its child; the approval's digest covers the labels, not the list, so it
// still holds after the join.
func TestAFollowStageTakesANodeThatJoins(t *testing.T) {
	t.Parallel()
	env := setupEngine(t)
	r := env.startWeb(true)
	if len(env.children(r.ID)) != 1 {
		t.Fatal("the first node has no child")
	}
	env.join()
	r = env.advance(r.ID)
	st := r.Stages[0]
	if !slices.Contains(st.Nodes, "n5") || !slices.Equal(st.Joined, []string{"n5"}) {
		t.Fatalf("stage after n5 joined: nodes %v, joined %v", st.Nodes, st.Joined)
	}
	if d := runs.DigestRunLocked(r.ClusterID, r.Stages, r.DeadlineS, r.NotBefore, r.Lock); d != r.Digest {
		t.Fatalf("the digest moved with the join: %s, approved %s", d, r.Digest)
	}
	joined := 0
	env.update(func(ctx context.Context, tx store.Tx) error {
		evs, err := tx.Events(ctx, 0, 0)
		for _, ev := range evs {
			if ev.Type == store.EventRunNodeJoined && ev.RunID == r.ID {
				joined++
			}
		}
		return err
	})
	if joined != 1 {
		t.Fatalf("%d run.node_joined events, want 1", joined)
	}
	r = env.drain(r)
	if r.State != store.RunDone {
		t.Fatalf("run %s", r.State)
	}
	var nodes []string
	for _, k := range env.children(r.ID) {
		nodes = append(nodes, k.NodeID)
	}
	slices.Sort(nodes)
	if !slices.Equal(nodes, []string{"n1", "n2", "n3", "n4", "n5"}) {
		t.Fatalf("children on %v, want n1…n5", nodes)
	}
	// Once the stage ended, a node that joins is not in the run.
	env.update(func(ctx context.Context, tx store.Tx) error {
		return tx.PutNode(ctx, &store.Node{ClusterID: "c", ID: "n6", Addr: "127.0.0.1:1", Source: store.SourceGossip,
			Status: store.NodeUp, Labels: map[string]string{"role": "web"}})
	})
	if got := notInRun(env, r); !slices.Equal(got, []string{"n6"}) {
		t.Fatalf("not in the run after it ended: %v", got)
	}
}

// Without follow, the joined node is left alone and shown not in the run.
func TestWithoutFollowAJoinedNodeIsNotInTheRun(t *testing.T) {
	t.Parallel()
	env := setupEngine(t)
	r := env.startWeb(false)
	env.join()
	r = env.drain(r)
	for _, k := range env.children(r.ID) {
		if k.NodeID == "n5" {
			t.Fatal("n5 got a child without follow")
		}
	}
	if got := notInRun(env, r); !slices.Equal(got, []string{"n5"}) {
		t.Fatalf("not in the run: %v, want n5", got)
	}
}

// A stage with follow must target labels; its digest leaves its nodes
// out, and a stage without follow keeps the digest it always had.
func TestFollowNeedsLabelsAndTheDigestCoversThem(t *testing.T) {
	t.Parallel()
	env := setupEngine(t)
	err := env.st.Update(context.Background(), func(tx store.Tx) error {
		_, err := env.e.Create(context.Background(), tx, &wire.CreateRunRequest{ClusterID: "c", Stages: []wire.StageSpec{{
			Kind: "muster.io/debug.ping", Target: wire.Target{All: true}, Follow: true}}}, actions.Actor{Name: "alice"})
		return err
	})
	if err == nil {
		t.Fatal("follow on a target of every node was accepted")
	}
	st := store.RunStage{Name: "s", Kind: "k", Target: store.Target{Labels: map[string]string{"role": "web"}},
		Nodes: []string{"n1"}, State: store.StagePending}
	plain := runs.DigestRunLocked("c", []store.RunStage{st}, 0, nil, nil)
	more := st
	more.Nodes = []string{"n1", "n2"}
	if runs.DigestRunLocked("c", []store.RunStage{more}, 0, nil, nil) == plain {
		t.Fatal("without follow, the digest ignores the nodes")
	}
	st.Follow, more.Follow = true, true
	if runs.DigestRunLocked("c", []store.RunStage{st}, 0, nil, nil) != runs.DigestRunLocked("c", []store.RunStage{more}, 0, nil, nil) {
		t.Fatal("with follow, the digest depends on the nodes")
	}
	other := more
	other.Target = store.Target{Labels: map[string]string{"role": "db"}}
	if runs.DigestRunLocked("c", []store.RunStage{other}, 0, nil, nil) == runs.DigestRunLocked("c", []store.RunStage{more}, 0, nil, nil) {
		t.Fatal("with follow, the digest ignores the labels")
	}
}

func notInRun(env *engineEnv, r *store.Run) []string {
	env.t.Helper()
	var nodes []store.Node
	env.update(func(ctx context.Context, tx store.Tx) error {
		var err error
		nodes, err = tx.Nodes(ctx, "c")
		return err
	})
	return runs.NotInRun(r, nodes)[0]
}

// A stage without follow digests as it did before follow existed: the
// approvals of runs and schedules made then still hold.
func TestADigestWithoutFollowIsUnchanged(t *testing.T) {
	t.Parallel()
	one := limit.MustParse("1")
	st := store.RunStage{Name: "s", Kind: "muster.io/debug.ping", Args: []byte(`{"a":1}`),
		Target: store.Target{Labels: map[string]string{"role": "web"}}, Nodes: []string{"n1", "n2"},
		MaxConcurrency: one, MaxErrors: one, OnFailure: "abort", DependsOn: []string{}, State: store.StagePending}
	const want = "c1e2441e5dad64685c43f8f5f9db354ec97ec19c302d8f6f51bc45c4ef1390e0"
	if got := runs.DigestRunLocked("c", []store.RunStage{st}, 0, nil, nil); got != want {
		t.Fatalf("digest %s, want %s", got, want)
	}
}

// A retry of a run with a follow stage is over the nodes listed: it
// does not follow (nor keep the old Joined), so a node that succeeded,
// which still matches, is never taken back.
func TestARetryOfAFollowStageDoesNotTakeBackNodesThatSucceeded(t *testing.T) {
	t.Parallel()
	env := setupEngine(t)
	r := env.startWeb(true)
	env.update(func(ctx context.Context, tx store.Tx) error {
		for _, id := range []string{"n1", "n2", "n3", "n4"} {
			n, err := tx.Node(ctx, "c", id)
			if err != nil {
				return err
			}
			n.CoreLabels = map[string]string{"role": "web"}
			if err := tx.PutNode(ctx, n); err != nil {
				return err
			}
		}
		return nil
	})
	env.join()
	r = env.advance(r.ID)
	for _, want := range []action.State{action.Done, action.Failed} {
		kids := env.children(r.ID)
		env.finishChild(kids[len(kids)-1].ID, want)
		r = env.advance(r.ID)
	}
	if !store.RunFinal(r.State) {
		t.Fatalf("run %s after a failure with max_errors 0", r.State)
	}
	var retry *store.Run
	env.update(func(ctx context.Context, tx store.Tx) error {
		var err error
		if retry, err = env.e.Retry(ctx, tx, r.ID, actions.Actor{Name: "alice"}); err != nil {
			return err
		}
		retry, err = env.e.Approve(ctx, tx, retry.ID, "", actions.Actor{Name: "bob"})
		return err
	})
	st := retry.Stages[0]
	if st.Follow || len(st.Joined) > 0 || slices.Contains(st.Nodes, "n1") {
		t.Fatalf("retry stage: follow %t, joined %v, nodes %v", st.Follow, st.Joined, st.Nodes)
	}
	retry = env.advance(retry.ID)
	if st := retry.Stages[0]; slices.Contains(st.Nodes, "n1") || len(st.Joined) > 0 {
		t.Fatalf("the retry took back n1: nodes %v, joined %v", st.Nodes, st.Joined)
	}
}
