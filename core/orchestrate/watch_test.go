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
	"github.com/musterhq/muster/shared/action"
	"github.com/musterhq/muster/shared/client"
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

// TestStandaloneActionEndIsSeenWithoutAPassOrGossip: with full syncs an hour
// apart, no run and no gossip, the end of an action outside any run is told
// by its node's watcher: one the core pushed, and one created on the agent's
// own API that a sync of the node found there, are DONE in the core within
// seconds of their ends, not at the next full sync; and no watcher is left
// once nothing is in flight.
//
// Not parallel: it counts the process's watcher goroutines.
func TestStandaloneActionEndIsSeenWithoutAPassOrGossip(t *testing.T) {
	// The run polls run, often, with no run: they must leave the watches
	// of actions outside any run alone.
	pol := approval.DefaultPolicy()
	engine := runs.NewEngine(live.New(pol), &actions.Rules{Policy: live.New(pol)}, nil)
	e := setup(t, orchestrate.Config{Interval: time.Hour, RunPoll: 2 * time.Millisecond, Runs: engine}, "n1", "n2")
	if err := e.o.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.o.Stop)
	testwait.For(t, "the first full sync to mark n1 up", func() bool { return e.node("n1").Status == store.NodeUp })
	// visibleWithin waits for id to be DONE in the core and checks it was
	// seen within a few seconds of its end on the agent.
	visibleWithin := func(id string) {
		t.Helper()
		testwait.Within(t, 20*time.Second, "the action "+id+" DONE in the core, without a full sync", func() bool {
			return e.record(id).State == action.Done
		})
		if rec := e.record(id); rec.FinishedTS == nil || time.Since(*rec.FinishedTS) > 10*time.Second {
			t.Fatalf("action %s finished at %v, seen DONE only at %v", id, rec.FinishedTS, time.Now())
		}
	}

	// Pushed by the core: the commit that sends it starts the watch.
	for range 3 {
		pushed := e.create("n1", "muster.io/debug.sleep", `{"seconds":1}`)
		e.o.NudgeNode(cluster, "n1")
		visibleWithin(pushed)
	}

	// Created on the agent's own API: the sync that finds it in flight
	// starts the watch.
	local := action.NewID()
	ag := client.NewAgent("http://"+e.agents["n2"].addr, nil)
	if _, _, err := ag.Push(context.Background(), &wire.PushRequest{ID: local, Kind: "muster.io/debug.sleep",
		Args: []byte(`{"seconds":2}`), Origin: action.OriginAgent, Requester: "root"}); err != nil {
		t.Fatal(err)
	}
	e.o.NudgeNode(cluster, "n2") // one sync finds it, as a counter ask would
	testwait.For(t, "the agent's own action imported", func() bool {
		rec, err := e.recordMaybe(local)
		return err == nil && !rec.State.Final()
	})
	visibleWithin(local)
	testwait.Within(t, 10*time.Second, "the watchers to stop once nothing is in flight", func() bool { return !testgoroutine.Running(watchFn) })
}

// recordMaybe reads the action id, which may not be in the store yet.
func (e *env) recordMaybe(id string) (*store.Record, error) {
	var rec *store.Record
	ctx := context.Background()
	err := e.st.Read(ctx, func(r store.Reader) error {
		var err error
		rec, err = r.Action(ctx, id)
		return err
	})
	return rec, err
}

// TestWatchesStopAtMaxWatches: with MaxWatches 2 and a long action in
// flight on each of four nodes, two watches are held, and no more while
// passes go on over the four; none is left after Stop.
//
// Not parallel: it counts the process's watcher goroutines.
func TestWatchesStopAtMaxWatches(t *testing.T) {
	pol := approval.DefaultPolicy()
	engine := runs.NewEngine(live.New(pol), &actions.Rules{Policy: live.New(pol)}, nil)
	e := setup(t, orchestrate.Config{Interval: 200 * time.Millisecond, MaxWatches: 2, Runs: engine}, "n1", "n2", "n3", "n4")
	long := map[string]string{}
	for _, n := range []string{"n1", "n2", "n3", "n4"} {
		long[n] = e.create(n, "muster.io/debug.sleep", `{"seconds":3600}`)
	}
	if err := e.o.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	testwait.Within(t, 20*time.Second, "every long action RUNNING in the core", func() bool {
		for _, id := range long {
			if e.record(id).State != action.Running {
				return false
			}
		}
		return true
	})
	testwait.For(t, "two watches held", func() bool { return testgoroutine.Count(watchFn) == 2 })
	// Passes go on with every node in flight: the cap holds.
	for range 5 {
		e.o.Nudge(cluster)
		if n := testgoroutine.Count(watchFn); n > 2 {
			t.Fatalf("%d watches held, MaxWatches is 2", n)
		}
	}
	testgoroutine.Returns(t, 10*time.Second, "Stop with held watches", e.o.Stop)
	testgoroutine.None(t, watchFn)
}
