package orchestrate

import (
	"context"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/musterhq/muster/core/budget"
	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/action"
	"github.com/musterhq/muster/shared/limit"
	"github.com/musterhq/muster/shared/live"
	"github.com/musterhq/muster/shared/testwait"
)

// stuck makes the next GET info of a node's agent wait until release is
// closed, and reports on entered when it starts waiting.
func stuck(h *harness, node string) (entered <-chan struct{}, release chan struct{}) {
	in, rel := make(chan struct{}), make(chan struct{})
	var once sync.Once
	h.agents[node].set(func(f *fakeAgent) {
		f.infoHook = func(context.Context) {
			first := false
			once.Do(func() { first = true })
			if first {
				close(in)
				<-rel
			}
		}
	})
	return in, rel
}

// TestSyncNodesPushesWhileAFullSyncIsUnderWay: a full sync of the cluster is stuck
// on one agent; a sync of another node pushes its new action at once, and
// the full sync then ends normally.
func TestSyncNodesPushesWhileAFullSyncIsUnderWay(t *testing.T) {
	t.Parallel()
	h := setup(t, Config{}, "n1", "slow")
	h.fullSync()
	entered, release := stuck(h, "slow")
	passDone := make(chan error, 1)
	go func() { _, err := h.o.FullSync(context.Background(), cluster); passDone <- err }()
	<-entered

	id := h.create("n1", nil)
	rep, err := h.o.SyncNodes(context.Background(), cluster, []string{"n1"})
	if err != nil || rep.Pushed != 1 || rep.Nodes != 1 {
		t.Fatalf("node sync: %+v, %v", rep, err)
	}
	wantState(t, h.record(id), action.New)
	select {
	case err := <-passDone:
		t.Fatalf("the full sync ended before it was released: %v", err)
	default:
	}
	close(release)
	if err := <-passDone; err != nil {
		t.Fatal(err)
	}
	wantState(t, h.record(id), action.New)
	if c := h.cluster(); c.Status != store.ClusterHealthy {
		t.Fatalf("cluster %s %s", c.Status, c.StatusReason)
	}
	h.idle()
	// A sync of a node that holds nothing new writes nothing either.
	rows := h.st.RowsWritten()
	if rep, err := h.o.SyncNodes(context.Background(), cluster, []string{"n1", "nope"}); err != nil || rep.Changes != 0 || h.st.RowsWritten() != rows {
		t.Fatalf("idle node sync: %+v, %v, %d rows", rep, err, h.st.RowsWritten()-rows)
	}
}

// TestNudgeNodeDoesNotWaitForTheFullSync: with the orchestrator running and a
// full sync stuck, NudgeNode gets the action pushed.
func TestNudgeNodeDoesNotWaitForTheFullSync(t *testing.T) {
	t.Parallel()
	h := setup(t, Config{Interval: time.Hour}, "n1", "slow")
	h.fullSync()
	entered, release := stuck(h, "slow")
	defer close(release)
	h.start()
	<-entered // the first full sync of the scheduler is stuck on "slow"
	id := h.create("n1", nil)
	h.o.NudgeNode(cluster, "n1")
	if s := h.o.TestSignals.NodesSynced.Wait(); !slices.Equal(s.Nodes, []string{"n1"}) || s.Err != nil || s.Report.Pushed != 1 {
		t.Fatalf("node sync %+v, want n1 alone, its action pushed", s)
	}
	wantState(t, h.record(id), action.New)
}

// TestConcurrentSyncsShareTheBudget: syncs of two nodes at once, each with
// a disruptive action, in a cluster with room for one: one is pushed, the
// other held.
func TestConcurrentSyncsShareTheBudget(t *testing.T) {
	t.Parallel()
	one, _ := limit.Parse("1")
	h := setup(t, Config{Budget: live.New(budget.Policy{MaxUnavailable: map[string]limit.Limit{cluster: one},
		Kinds: []budget.KindRule{{Kind: "muster.io/debug.sleep", Disruptive: true}}})}, "n1", "n2")
	h.fullSync()
	a, b := h.create("n1", nil), h.create("n2", nil)
	var wg sync.WaitGroup
	for _, n := range []string{"n1", "n2"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := h.o.SyncNodes(context.Background(), cluster, []string{n}); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	ra, rb := h.record(a), h.record(b)
	pushed := 0
	for _, r := range []*store.Record{ra, rb} {
		switch {
		case r.State == action.New:
			pushed++
		case r.State != action.PendingSchedule || !strings.HasPrefix(r.StateReason, "held by the disruption budget: 1 of 1 unavailable (n"):
			t.Fatalf("%s: %s %q", r.NodeID, r.State, r.StateReason)
		}
	}
	if pushed != 1 {
		t.Fatalf("%d disruptive actions pushed with room for 1: %s, %s", pushed, ra.State, rb.State)
	}
}

// TestAgentLabelsBeyondBoundsAreRefused: an agent whose info carries labels
// beyond the bounds stays UP with the configured labels only.
func TestAgentLabelsBeyondBoundsAreRefused(t *testing.T) {
	t.Parallel()
	h := setup(t, Config{StaticLabels: map[string]map[string]map[string]string{cluster: {"n1": {"dc": "a"}}}}, "n1", "n2")
	h.agents["n1"].set(func(f *fakeAgent) { f.labels = map[string]string{"role": "<script>"} })
	h.agents["n2"].set(func(f *fakeAgent) { f.labels = map[string]string{"role": "replica"} })
	h.fullSync()
	if n := h.node("n1"); n.Status != store.NodeUp || len(n.Labels) != 1 || n.Labels["dc"] != "a" {
		t.Fatalf("n1: %s %v", n.Status, n.Labels)
	}
	if n := h.node("n2"); len(n.Labels) != 1 || n.Labels["role"] != "replica" {
		t.Fatalf("n2: %v", n.Labels)
	}
}

// TestAHeldActionGoesWhenTheNoteSaysTheOtherEnded: the sync of a node whose
// disruptive action ended (an agent's note) nudges the node the budget held,
// and its action is pushed at once, without a full sync.
func TestAHeldActionGoesWhenTheNoteSaysTheOtherEnded(t *testing.T) {
	t.Parallel()
	one, _ := limit.Parse("1")
	h := setup(t, Config{Interval: time.Hour, Budget: live.New(budget.Policy{MaxUnavailable: map[string]limit.Limit{cluster: one},
		Kinds: []budget.KindRule{{Kind: "muster.io/debug.sleep", Disruptive: true}}})}, "n1", "n2")
	h.start()
	testwait.For(t, "the first full sync", func() bool { return h.node("n2").Status == store.NodeUp })
	infos := func() int {
		h.agents["n1"].mu.Lock()
		defer h.agents["n1"].mu.Unlock()
		n := 0
		for _, r := range h.agents["n1"].requests {
			if r == "GET /api/v1/info" {
				n++
			}
		}
		return n
	}
	a := h.create("n1", nil)
	h.o.NudgeNode(cluster, "n1")
	testwait.For(t, "a pushed", func() bool { return h.record(a).State == action.New })
	b := h.create("n2", nil)
	h.o.NudgeNode(cluster, "n2")
	testwait.For(t, "b held", func() bool {
		return strings.HasPrefix(h.record(b).StateReason, "held by the disruption budget: 1 of 1 unavailable (n1 ")
	})

	h.agents["n1"].run(t, a, action.Running, nil)
	h.agents["n1"].run(t, a, action.Done, nil)
	before := infos()
	h.o.NudgeNode(cluster, "n1") // what the agent's note does
	testwait.For(t, "b pushed", func() bool { return h.record(b).State == action.New })
	wantState(t, h.record(a), action.Done)
	if got := infos(); got != before+1 {
		t.Fatalf("n1 was asked for its info %d times, want once (its own sync, no full sync)", got-before)
	}
}

// TestSyncOfAnUnknownClusterKeepsNothing: a note may name any cluster; a
// sync of one the store lacks does nothing and keeps no state for it.
func TestSyncOfAnUnknownClusterKeepsNothing(t *testing.T) {
	t.Parallel()
	h := setup(t, Config{}, "n1")
	rep, err := h.o.SyncNodes(context.Background(), "no-such-cluster", []string{"n1"})
	if err != nil || rep.Nodes != 0 {
		t.Fatalf("%+v, %v", rep, err)
	}
	h.o.mu.Lock()
	_, kept := h.o.clusters["no-such-cluster"]
	h.o.mu.Unlock()
	if kept {
		t.Fatal("state kept for a cluster the store lacks")
	}
}

// gate is a Leases that holds a cluster's lease only while held is set, and
// reports every question on asked.
type gate struct {
	held  atomic.Bool
	asked chan string
}

func (g *gate) PassContext(ctx context.Context, clusterID string) (context.Context, context.CancelFunc, bool) {
	g.asked <- clusterID
	return ctx, func() {}, g.held.Load()
}

// TestNodeSyncsNeedTheClustersLease: with several replicas, a nudged node
// sync runs only on the replica that holds the cluster's lease, like a full sync.
func TestNodeSyncsNeedTheClustersLease(t *testing.T) {
	t.Parallel()
	g := &gate{asked: make(chan string, 100)}
	h := setup(t, Config{Interval: time.Hour, Leases: g}, "n1")
	h.fullSync() // n1 UP
	h.start()
	id := h.create("n1", nil)
	<-g.asked // the scheduler's first full sync, refused
	// Two refused nudges: the second is asked only once the first has ended
	// (one sync of a cluster at a time), so the first had every chance to push.
	for range 2 {
		h.o.NudgeNode(cluster, "n1")
		if c := <-g.asked; c != cluster {
			t.Fatalf("asked for the lease of %q", c)
		}
	}
	if calls := h.agents["n1"].calls("POST"); len(calls) != 0 {
		t.Fatalf("a replica without the lease pushed: %v", calls)
	}
	wantState(t, h.record(id), action.PendingSchedule)
	g.held.Store(true)
	h.o.NudgeNode(cluster, "n1")
	testwait.For(t, "the push under the lease", func() bool { return h.record(id).State == action.New })
}

// TestFullSyncCommitDoesNotUndoANewerNodeSync: a full sync talks to n1 (its action
// RUNNING) and is then held up by another node; meanwhile the action ends
// and a sync of n1 alone commits DONE. The full sync's commit must not take the
// record back to RUNNING.
func TestFullSyncCommitDoesNotUndoANewerNodeSync(t *testing.T) {
	t.Parallel()
	h := setup(t, Config{}, "n1", "slow")
	h.fullSync()
	id := h.create("n1", nil)
	h.fullSync()
	h.agents["n1"].run(t, id, action.Running, nil)
	h.agents["n1"].calls("") // forget the requests so far
	entered, release := stuck(h, "slow")
	passDone := make(chan error, 1)
	go func() { _, err := h.o.FullSync(context.Background(), cluster); passDone <- err }()
	<-entered
	pulled := 0
	testwait.For(t, "the full sync to pull n1", func() bool {
		pulled += len(h.agents["n1"].calls("GET /api/v1/actions"))
		return pulled > 0
	})
	h.agents["n1"].run(t, id, action.Done, nil)
	if _, err := h.o.SyncNodes(context.Background(), cluster, []string{"n1"}); err != nil {
		t.Fatal(err)
	}
	wantState(t, h.record(id), action.Done)
	close(release)
	if err := <-passDone; err != nil {
		t.Fatal(err)
	}
	wantState(t, h.record(id), action.Done)
	for _, e := range h.events() {
		if strings.Contains(e, "conflict") {
			t.Fatalf("a false conflict: %v", h.events())
		}
	}
}
