package runs_test

import (
	"context"
	"testing"
	"time"

	"github.com/musterhq/muster/core/actions"
	"github.com/musterhq/muster/core/runs"
	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/testwait"
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
	wrote := make(chan error, 1)
	go func() {
		wrote <- env.st.Update(ctx, func(tx store.Tx) error {
			return tx.AppendEvent(ctx, &store.Event{TS: env.now, Type: store.EventRunCreated, Actor: "admin", Message: "another write"})
		})
	}()
	select {
	case err := <-wrote:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(testwait.Timeout):
		close(release)
		t.Fatal("a write waited for a run being planned: the plan holds the write transaction")
	}
	close(release)
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
