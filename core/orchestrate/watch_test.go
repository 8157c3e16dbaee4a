package orchestrate_test

import (
	"context"
	"testing"
	"time"

	"github.com/musterhq/muster/core/actions"
	"github.com/musterhq/muster/core/approval"
	"github.com/musterhq/muster/core/orchestrate"
	"github.com/musterhq/muster/core/runs"
	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/limit"
	"github.com/musterhq/muster/shared/live"
	"github.com/musterhq/muster/shared/testgoroutine"
	"github.com/musterhq/muster/shared/testwait"
	"github.com/musterhq/muster/shared/wire"
)

// watchFn names the run watchers' goroutines (testgoroutine).
const watchFn = "core/orchestrate.(*watches).watchNode"

// runOver creates and approves a run of one stage over every node of e,
// one node at a time (a wave each), and returns it.
func runOver(t *testing.T, e *env, engine *runs.Engine, kind, args string) *store.Run {
	t.Helper()
	one := limit.MustParse("1")
	var run *store.Run
	e.update(func(ctx context.Context, tx store.Tx) error {
		var err error
		run, err = engine.Create(ctx, tx, &wire.CreateRunRequest{ClusterID: cluster, Stages: []wire.StageSpec{{
			Kind: kind, Args: []byte(args), Target: wire.Target{All: true}, MaxConcurrency: &one}}}, actions.Actor{Name: "alice"})
		if err != nil {
			return err
		}
		_, err = engine.Approve(ctx, tx, run.ID, "", actions.Actor{Name: "bob"})
		return err
	})
	return run
}

func (e *env) runState(id string) string {
	e.t.Helper()
	var state string
	ctx := context.Background()
	if err := e.st.Read(ctx, func(r store.Reader) error {
		run, err := r.Run(ctx, id)
		if err == nil {
			state = run.State
		}
		return err
	}); err != nil {
		e.t.Fatal(err)
	}
	return state
}

// TestRunWatchCarriesARunWithoutPollsOrGossip: with full syncs and the polls of
// a run's busy nodes an hour apart and no gossip, the end of each child is
// told by the node's watcher (a blocking GET of the agent's changes), so a
// run of three waves over real agents finishes within seconds; once it has
// ended no watcher is left, and none after Stop.
//
// Not parallel: it counts the process's watcher goroutines.
func TestRunWatchCarriesARunWithoutPollsOrGossip(t *testing.T) {
	pol := approval.DefaultPolicy()
	engine := runs.NewEngine(live.New(pol), &actions.Rules{Policy: live.New(pol)}, nil)
	e := setup(t, orchestrate.Config{Interval: time.Hour, RunPoll: time.Hour, Runs: engine}, "n1", "n2", "n3")
	run := runOver(t, e, engine, "muster.io/debug.ping", `{}`)
	if err := e.o.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	// The first full sync (at Start) sends the first wave; every later
	// one goes out when the watcher of the node before tells of its end.
	testwait.Within(t, 15*time.Second, "the run to finish, without a poll or a full sync", func() bool {
		return store.RunFinal(e.runState(run.ID))
	})
	if got := e.runState(run.ID); got != store.RunDone {
		t.Fatalf("run ended %s, want %s", got, store.RunDone)
	}
	testwait.Within(t, 5*time.Second, "the watchers to stop once the run ended", func() bool { return !testgoroutine.Running(watchFn) })

	// A watcher held on a child that runs for an hour ends with Stop.
	long := runOver(t, e, engine, "muster.io/debug.sleep", `{"seconds":3600}`)
	e.o.Nudge(cluster)
	testwait.For(t, "a watcher on the long child's node", func() bool { return testgoroutine.Running(watchFn) })
	testgoroutine.Returns(t, 10*time.Second, "Stop with a held watch", e.o.Stop)
	testgoroutine.None(t, watchFn)
	if got := e.runState(long.ID); got != store.RunRunning {
		t.Fatalf("long run is %s, want %s", got, store.RunRunning)
	}
}
