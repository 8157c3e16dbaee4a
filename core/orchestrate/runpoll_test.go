package orchestrate

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/musterhq/muster/core/actions"
	"github.com/musterhq/muster/core/approval"
	"github.com/musterhq/muster/core/runs"
	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/action"
	"github.com/musterhq/muster/shared/live"
	"github.com/musterhq/muster/shared/testwait"
	"github.com/musterhq/muster/shared/wire"
)

// TestARunsNextWaveDoesNotWaitForTheInterval: with no gossip and full syncs an
// hour apart, the end of a run's child is seen by the poll of the nodes
// holding its unfinished children, and the next wave goes out at once.
func TestARunsNextWaveDoesNotWaitForTheInterval(t *testing.T) {
	t.Parallel()
	pol := approval.DefaultPolicy()
	engine := runs.NewEngine(live.New(pol), &actions.Rules{Policy: live.New(pol)}, nil)
	h := setup(t, Config{Interval: time.Hour, RunPoll: 50 * time.Millisecond, Runs: engine}, "n1", "n2")
	var run *store.Run
	h.update(func(ctx context.Context, tx store.Tx) error {
		var err error
		if run, err = engine.Create(ctx, tx, &wire.CreateRunRequest{ClusterID: cluster, Stages: []wire.StageSpec{{
			Kind: "muster.io/debug.ping", Target: wire.Target{All: true}}}}, actions.Actor{Name: "alice"}); err != nil {
			return err
		}
		_, err = engine.Approve(ctx, tx, run.ID, "", actions.Actor{Name: "bob"})
		return err
	})
	h.start()
	children := func() []store.Record {
		var out []store.Record
		h.update(func(ctx context.Context, tx store.Tx) error {
			var err error
			out, err = tx.RunChildren(ctx, run.ID)
			return err
		})
		return out
	}
	first := testwait.Value(t, "the first child on n1's agent", func() (string, bool) {
		kids := children()
		if len(kids) != 1 {
			return "", false
		}
		_, ok := h.agents["n1"].get(kids[0].ID)
		return kids[0].ID, ok
	})
	h.agents["n1"].run(t, first, action.Done, nil)
	testwait.For(t, "the second child on n2's agent, well before the hour's full sync", func() bool {
		kids := children()
		if len(kids) != 2 {
			return false
		}
		_, ok := h.agents["n2"].get(kids[1].ID)
		return ok
	})
}

// TestRunWatchDoesNotSpinOnAnAgentThatIgnoresWait: an agent of an earlier
// release answers a blocking GET of its changes at once (it ignores wait).
// The node's watcher then asks again only after RunPoll, leaving the node
// to pollRuns, instead of asking again and again.
func TestRunWatchDoesNotSpinOnAnAgentThatIgnoresWait(t *testing.T) {
	t.Parallel()
	pol := approval.DefaultPolicy()
	engine := runs.NewEngine(live.New(pol), &actions.Rules{Policy: live.New(pol)}, nil)
	h := setup(t, Config{Interval: time.Hour, RunPoll: time.Hour, Runs: engine}, "n1")
	h.update(func(ctx context.Context, tx store.Tx) error {
		run, err := engine.Create(ctx, tx, &wire.CreateRunRequest{ClusterID: cluster, Stages: []wire.StageSpec{{
			Kind: "muster.io/debug.sleep", Args: []byte(`{"seconds":60}`), Target: wire.Target{All: true}}}},
			actions.Actor{Name: "alice"})
		if err != nil {
			return err
		}
		_, err = engine.Approve(ctx, tx, run.ID, "", actions.Actor{Name: "bob"})
		return err
	})
	h.o.TestSignals.WatchPaused.Init(t)
	h.start()
	ag := h.agents["n1"]
	testwait.For(t, "the watcher's first blocking GET", func() bool { return ag.seen("wait=") > 0 })
	if got := h.o.watched(); len(got) != 1 || got[0] != cluster+"/n1" {
		t.Fatalf("watched %q, want n1", got)
	}
	// One GET may return the pushed child (a change), the next one is
	// answered at once with nothing: then the watcher pauses for RunPoll
	// (an hour) before it asks again.
	p := h.o.TestSignals.WatchPaused.WaitFor("the watcher's pause", func(p WatchPause) bool { return p.Node == "n1" })
	if p.For != time.Hour {
		t.Errorf("the watcher pauses %s, want RunPoll, an hour", p.For)
	}
	// Twenty syncs of the node while it pauses: a watcher asking again at
	// once would have sent many more GETs meanwhile.
	for range 20 {
		if _, err := h.o.SyncNodes(context.Background(), cluster, []string{"n1"}); err != nil {
			t.Fatal(err)
		}
	}
	if n := ag.seen("wait="); n > 2 {
		t.Fatalf("%d blocking GETs to an agent that answers them at once, want at most 2", n)
	}
	// Paused after an answer with nothing before its wait: not live, so
	// pollRuns polls the node at every tick.
	if h.o.watches.live(nodeKey{cluster, "n1"}) {
		t.Error("the watch of an agent that ignores wait counts as live")
	}
	if got := h.o.watched(); len(got) != 1 || got[0] != cluster+"/n1" {
		t.Fatalf("watched %q after the early answers, want n1 still (waiting to ask again)", got)
	}
}

// TestRunWatchesOnlyNodesWhoseChildIsOnItsAgent: a node whose run child
// waits in PENDING_SCHEDULE (a window, a freeze, the budget) has nothing on
// its agent to end, so it gets no watcher, which would hold a connection
// for as long as the hold lasts; a watcher that exists is kept while its
// node is busy, and one found idle looks once more when a commit wanted it.
func TestRunWatchesOnlyNodesWhoseChildIsOnItsAgent(t *testing.T) {
	t.Parallel()
	h := setup(t, Config{Interval: time.Hour, RunPoll: time.Hour}, "n1", "n2")
	h.start()
	h.o.watches.reconcile(map[string]map[string]bool{cluster: {"n1": false}}, nil, time.Now())
	if got := h.o.watched(); len(got) != 0 {
		t.Fatalf("watched %q for a node whose child is not on its agent", got)
	}
	k := nodeKey{cluster, "n2"}
	w := &watcher{cancel: func() {}, begun: time.Now()}
	h.o.watches.mu.Lock()
	h.o.watches.m[k] = w
	h.o.watches.mu.Unlock()
	h.o.watches.reconcile(map[string]map[string]bool{cluster: {"n2": true}}, map[string]bool{}, time.Now())
	if !h.o.watches.once(k, w) {
		t.Fatal("a watcher found idle right after a commit sent its node a child ends instead of looking again")
	}
	if h.o.watches.once(k, w) {
		t.Fatal("a watcher found idle twice, wanted once, keeps watching")
	}
	if got := h.o.watched(); len(got) != 0 {
		t.Fatalf("a watcher that ended is still listed: %q", got)
	}
}

// watched lists the watched nodes as "cluster/node" (tests).
func (o *Orchestrator) watched() []string {
	o.watches.mu.Lock()
	defer o.watches.mu.Unlock()
	out := make([]string, 0, len(o.watches.m))
	for k := range o.watches.m {
		out = append(out, k.cluster+"/"+k.node)
	}
	slices.Sort(out)
	return out
}
