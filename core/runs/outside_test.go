package runs_test

import (
	"context"
	"encoding/json"
	"slices"
	"sync"
	"testing"

	"github.com/musterhq/muster/core/actions"
	"github.com/musterhq/muster/core/runs"
	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/core/store/sqlite"
	"github.com/musterhq/muster/core/store/storetest"
	"github.com/musterhq/muster/shared/action"
	"github.com/musterhq/muster/shared/limit"
	"github.com/musterhq/muster/shared/wire"
)

// TestRunsArePlannedOutsideTheWriteTransaction: while a run is being
// planned (its templates rendered, its args checked against the nodes'
// schemas), another write of the core commits; the run is then stored.
func TestRunsArePlannedOutsideTheWriteTransaction(t *testing.T) {
	t.Parallel()
	env := setupEngine(t)
	ctx := context.Background()
	inPlan, release := make(chan struct{}), make(chan struct{})
	runs.SetPlanned(env.e, func() {
		close(inPlan)
		<-release
	})
	req := &wire.CreateRunRequest{ClusterID: "c", Stages: []wire.StageSpec{{Name: "s", Target: wire.Target{All: true},
		Steps: []wire.StepSpec{{Name: "a", Kind: "muster.io/debug.ping", When: `{{ eq .node.id "n1" }}`}}}}}
	made := make(chan error, 1)
	go func() {
		_, err := env.e.CreateIn(ctx, env.st, req, actions.Actor{Name: "alice"}, nil)
		made <- err
	}()
	<-inPlan
	storetest.WriteCommitsWhile(t, env.st, release, "a run being planned")
	if err := <-made; err != nil {
		t.Fatal(err)
	}
}

// TestARunPlannedOnNodesThatChangedIsPlannedAgain: the write transaction
// only checks that the nodes are those the run was planned on; when a
// node changed meanwhile, the run is planned again on the nodes as they
// are now.
func TestARunPlannedOnNodesThatChangedIsPlannedAgain(t *testing.T) {
	t.Parallel()
	env := setupEngine(t)
	ctx := context.Background()
	plans := 0
	runs.SetPlanned(env.e, func() {
		if plans++; plans == 1 {
			env.update(func(ctx context.Context, tx store.Tx) error {
				return tx.PutNode(ctx, &store.Node{ClusterID: "c", ID: "n5", Addr: "127.0.0.1:1", Source: store.SourceStatic, Status: store.NodeUp})
			})
		}
	})
	req := &wire.CreateRunRequest{ClusterID: "c", Stages: []wire.StageSpec{{Name: "s", Kind: "muster.io/debug.ping",
		Target: wire.Target{All: true}}}}
	r, err := env.e.CreateIn(ctx, env.st, req, actions.Actor{Name: "alice"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if plans != 2 || len(r.Stages[0].Nodes) != 5 {
		t.Fatalf("planned %d times over %v: want twice, the second over the five nodes there are now", plans, r.Stages[0].Nodes)
	}
}

// advanceReq is a run over n1…n4, one node at a time, of a step whose when
// reads each node's labels.
func advanceReq() *wire.CreateRunRequest {
	one := limit.MustParse("1")
	return &wire.CreateRunRequest{ClusterID: "c", Stages: []wire.StageSpec{{Name: "s", Target: wire.Target{All: true},
		MaxConcurrency: &one, Steps: []wire.StepSpec{{Name: "a", Kind: "muster.io/debug.ping",
			When: `{{ or (eq .node.labels.x "y") (ne .node.id "") }}`, Args: json.RawMessage(`{"msg": "{{ .node.id }}"}`)}}}}}
}

// TestRunsAreAdvancedOutsideTheWriteTransaction: while the orchestrator
// decides a run's next step (every node's when evaluated, the args of the
// children to create rendered), another write of the core commits; the
// step is then stored.
func TestRunsAreAdvancedOutsideTheWriteTransaction(t *testing.T) {
	t.Parallel()
	env := setupEngine(t)
	ctx := context.Background()
	r := env.startReq(advanceReq())
	env.finishChild(env.open(r.ID).ID, action.Done)
	inPlan, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	runs.SetAdvancePlanned(env.e, func() {
		once.Do(func() {
			close(inPlan)
			<-release
		})
	})
	type result struct {
		nodes []string
		err   error
	}
	advanced := make(chan result, 1)
	go func() {
		nodes, err := env.e.AdvanceIn(ctx, env.st, r.ID)
		advanced <- result{nodes, err}
	}()
	<-inPlan
	storetest.WriteCommitsWhile(t, env.st, release, "a run's next step being decided")
	got := <-advanced
	if got.err != nil || !slices.Equal(got.nodes, []string{"n2"}) {
		t.Fatalf("advanced: %v, %v; want the child on n2", got.nodes, got.err)
	}
	if args := string(env.open(r.ID).Args); args != `{"msg":"n2"}` {
		t.Fatalf("n2's child has args %s, want them rendered for n2", args)
	}
}

// TestAnAdvanceDecidedOnARunThatChangedIsDecidedAgain: a run paused while
// its next step was decided is not moved on by that decision: the write
// transaction finds the run changed and the step is decided again, on the
// paused run.
func TestAnAdvanceDecidedOnARunThatChangedIsDecidedAgain(t *testing.T) {
	t.Parallel()
	env := setupEngine(t)
	ctx := context.Background()
	r := env.startReq(advanceReq())
	env.finishChild(env.open(r.ID).ID, action.Done)
	plans := 0
	runs.SetAdvancePlanned(env.e, func() {
		if plans++; plans == 1 {
			env.update(func(ctx context.Context, tx store.Tx) error {
				_, err := env.e.Pause(ctx, tx, r.ID, actions.Actor{Name: "bob"})
				return err
			})
		}
	})
	nodes, err := env.e.AdvanceIn(ctx, env.st, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	if plans != 2 || len(nodes) != 0 {
		t.Fatalf("decided %d times, created children on %v: want twice, and none on the paused run", plans, nodes)
	}
}

// TestAChildEndingWhileARunAdvancesDoesNotDecideItAgain: a child that was
// in flight when the step was decided may end before it is stored (the
// step took it as in flight, and that end asks for another pass); the
// step is stored as decided.
func TestAChildEndingWhileARunAdvancesDoesNotDecideItAgain(t *testing.T) {
	t.Parallel()
	env := setupEngine(t)
	ctx := context.Background()
	two := limit.MustParse("2")
	req := advanceReq()
	req.Stages[0].MaxConcurrency = &two
	r := env.startReq(req)
	kids := env.children(r.ID)
	env.finishChild(kids[0].ID, action.Done)
	plans := 0
	runs.SetAdvancePlanned(env.e, func() {
		if plans++; plans == 1 {
			env.finishChild(kids[1].ID, action.Done)
		}
	})
	nodes, err := env.e.AdvanceIn(ctx, env.st, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	if plans != 1 || !slices.Equal(nodes, []string{"n3"}) {
		t.Fatalf("decided %d times, created children on %v: want once, on n3", plans, nodes)
	}
}

// countedStore counts the write transactions made through it.
type countedStore struct {
	*sqlite.Store
	updates int
}

func (s *countedStore) Update(ctx context.Context, fn func(tx store.Tx) error) error {
	s.updates++
	return s.Store.Update(ctx, fn)
}

// TestAnAdvanceThatChangesNothingTakesNoWriteTransaction: a pass over a
// run whose step changes nothing (its child still in flight) decides on a
// read and takes no write transaction.
func TestAnAdvanceThatChangesNothingTakesNoWriteTransaction(t *testing.T) {
	t.Parallel()
	env := setupEngine(t)
	r := env.startReq(advanceReq())
	st := &countedStore{Store: env.st}
	nodes, err := env.e.AdvanceIn(context.Background(), st, r.ID)
	if err != nil || len(nodes) != 0 || st.updates != 0 {
		t.Fatalf("advanced: %v, %v, in %d write transaction(s); want nothing, in none", nodes, err, st.updates)
	}
}
