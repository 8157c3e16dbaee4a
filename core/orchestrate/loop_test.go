package orchestrate

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/action"
	"github.com/musterhq/muster/shared/testwait"
)

// readSteps reads the Steps signal, as they come, until a step of kind
// "end"; the channel it returns then carries them all.
func readSteps(h *harness) <-chan []Step {
	out := make(chan []Step, 1)
	go func() {
		var steps []Step
		for {
			s := h.o.TestSignals.Steps.Wait()
			if s.Kind == "end" {
				out <- steps
				return
			}
			steps = append(steps, s)
		}
	}()
	return out
}

// endSteps ends readSteps and returns what it read.
func endSteps(h *harness, read <-chan []Step) []Step {
	h.o.TestSignals.Steps.Send(Step{Kind: "end"})
	return <-read
}

// checkSteps fails the test when two commits of one cluster overlap, when
// one node is talked to twice at once, or when a node is talked to again
// before its previous answer was committed (or dropped).
func checkSteps(t *testing.T, steps []Step) (commits int) {
	t.Helper()
	committing := false
	talking := map[string]bool{}
	uncommitted := map[string]bool{}
	for i, s := range steps {
		switch s.Kind {
		case StepCommit:
			if s.Begin == committing {
				t.Fatalf("step %d: commit begin=%t while committing=%t: two commits of one cluster overlap", i, s.Begin, committing)
			}
			committing = s.Begin
			if s.Begin {
				commits++
				for _, n := range s.Nodes {
					delete(uncommitted, n)
				}
			}
		case StepDrop:
			for _, n := range s.Nodes {
				delete(uncommitted, n)
			}
		case StepTalk:
			n := s.Nodes[0]
			if s.Begin {
				if talking[n] {
					t.Fatalf("step %d: %s talked to twice at once", i, n)
				}
				if uncommitted[n] {
					t.Fatalf("step %d: %s talked to again before its answer was committed", i, n)
				}
				talking[n] = true
			} else {
				talking[n], uncommitted[n] = false, true
			}
		}
	}
	return commits
}

// TestTwoSyncsOfOneClusterNeverOverlap: the interval, nudges of the
// cluster and of nodes, direct full syncs and node syncs, all at once, over
// a cluster cut into batches of two: the pipeline's steps show every commit
// alone, every node talked to by one worker at a time, and every answer
// committed before its node is talked to again.
func TestTwoSyncsOfOneClusterNeverOverlap(t *testing.T) {
	t.Parallel()
	nodes := []string{"n1", "n2", "n3", "n4", "n5"}
	h := setup(t, Config{Interval: 50 * time.Millisecond, Debounce: time.Millisecond, BatchSize: 2}, nodes...)
	h.o.TestSignals.InitSteps(t)
	read := readSteps(h)
	h.start()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var ids []string
	var mu sync.Mutex
	for i, n := range nodes {
		wg.Add(2)
		go func() { // nudges and direct node syncs, with new actions to push
			defer wg.Done()
			for k := 0; ctx.Err() == nil && k < 10; k++ {
				mu.Lock() // create is not safe for concurrent use
				id := h.create(n, nil)
				ids = append(ids, id)
				mu.Unlock()
				h.o.NudgeNode(cluster, n)
				if _, err := h.o.SyncNodes(ctx, cluster, []string{n, nodes[(i+1)%len(nodes)]}); err != nil && ctx.Err() == nil {
					t.Error(err)
				}
			}
		}()
		go func() { // direct full syncs and nudges of the cluster
			defer wg.Done()
			for k := 0; ctx.Err() == nil && k < 5; k++ {
				h.o.Nudge(cluster)
				if _, err := h.o.FullSync(ctx, cluster); err != nil && ctx.Err() == nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	cancel()
	mu.Lock()
	for _, id := range ids {
		testwait.For(t, "every action pushed", func() bool { return h.record(id).State != action.PendingSchedule })
	}
	mu.Unlock()
	h.o.Stop()
	steps := endSteps(h, read)
	if commits := checkSteps(t, steps); commits < 10 {
		t.Fatalf("%d commits: the test did not exercise the loop", commits)
	}
}

// TestAFullSyncGoesInBatches: a full sync of five nodes in batches of two
// commits three times, each batch apart, the last one deciding the
// cluster's status.
func TestAFullSyncGoesInBatches(t *testing.T) {
	t.Parallel()
	h := setup(t, Config{BatchSize: 2, NodeConcurrency: 1}, "n1", "n2", "n3", "n4", "n5")
	h.o.TestSignals.InitSteps(t)
	read := readSteps(h)
	rep := h.fullSync()
	if rep.Nodes != 5 || rep.Changes != 5 { // five nodes UP; the cluster was healthy already
		t.Fatalf("report %+v", rep)
	}
	steps := endSteps(h, read)
	var batches [][]string
	for _, s := range steps {
		if s.Kind == StepCommit && s.Begin {
			batches = append(batches, s.Nodes)
		}
	}
	want := [][]string{{"n1", "n2"}, {"n3", "n4"}, {"n5"}}
	if !slices.EqualFunc(batches, want, slices.Equal) {
		t.Fatalf("commits %v, want %v", batches, want)
	}
	checkSteps(t, steps)
	for _, n := range []string{"n1", "n5"} {
		if got := h.node(n).Status; got != "UP" {
			t.Fatalf("%s is %s", n, got)
		}
	}
}

// TestTheLastBatchCountsTheDownNodesOfEarlierOnes: the cluster's status is
// decided by the last commit of a full sync, from every DOWN node, not only
// those of the last batch: a node found DOWN in the first batch keeps the
// cluster in alert, and the alert ends once it is up again.
func TestTheLastBatchCountsTheDownNodesOfEarlierOnes(t *testing.T) {
	t.Parallel()
	h := setup(t, Config{BatchSize: 2, NodeConcurrency: 1}, "n1", "n2", "n3", "n4", "n5")
	h.agents["n1"].set(func(f *fakeAgent) { f.down = true })
	h.fullSync()
	if c := h.cluster(); c.Status != store.ClusterAlert || !strings.Contains(c.StatusReason, "n1") {
		t.Fatalf("n1 down in the first batch, cluster = %+v", c)
	}
	h.fullSync() // n1 still down: still in alert
	if c := h.cluster(); c.Status != store.ClusterAlert || !strings.Contains(c.StatusReason, "n1") {
		t.Fatalf("second full sync, cluster = %+v", c)
	}
	h.agents["n1"].set(func(f *fakeAgent) { f.down = false })
	h.fullSync()
	if c := h.cluster(); c.Status != store.ClusterHealthy {
		t.Fatalf("n1 up again, cluster = %+v", c)
	}
}

// TestANudgedNodeGoesBetweenBatches: a full sync whose first batch hangs on
// one agent; a nudged node of a later batch is synced and its action pushed
// before the hung batch ends.
func TestANudgedNodeGoesBetweenBatches(t *testing.T) {
	t.Parallel()
	nodes := []string{"slow", "n2", "n3", "n4"}
	h := setup(t, Config{Interval: time.Hour, BatchSize: 2}, nodes...)
	h.fullSync()
	entered, release := stuck(h, "slow")
	defer close(release)
	done := make(chan error, 1)
	go func() { _, err := h.o.FullSync(context.Background(), cluster); done <- err }()
	<-entered
	h.start() // its first full sync waits for the direct one
	id := h.create("n4", nil)
	h.o.NudgeNode(cluster, "n4")
	s := h.o.TestSignals.NodesSynced.WaitFor("n4's sync", func(s NodesSynced) bool { return slices.Contains(s.Nodes, "n4") })
	if s.Err != nil || s.Report.Pushed != 1 {
		t.Fatalf("n4's sync: %+v", s)
	}
	select {
	case err := <-done:
		t.Fatalf("the full sync ended while its first batch hung: %v", err)
	default:
	}
	if got := h.record(id).State; got != action.New {
		t.Fatalf("n4's action %s", got)
	}
}

// TestANudgedNodeDoesNotWaitForItsTurnInTheBatch: one worker for a full
// sync, stuck on a hung agent, the other nodes of the batch waiting behind
// it; a nudged node among them is taken out of the batch and synced at once.
func TestANudgedNodeDoesNotWaitForItsTurnInTheBatch(t *testing.T) {
	t.Parallel()
	h := setup(t, Config{Interval: time.Hour, NodeConcurrency: 1, AgentTimeout: time.Hour}, "n2", "n3", "slow")
	h.fullSync()
	h.create("slow", nil) // something to push: the full sync takes it first
	entered, rel := stuck(h, "slow")
	release := sync.OnceFunc(func() { close(rel) })
	defer release()
	done := make(chan error, 1)
	go func() { _, err := h.o.FullSync(context.Background(), cluster); done <- err }()
	<-entered
	h.start()
	id := h.create("n3", nil)
	h.o.NudgeNode(cluster, "n3")
	s := h.o.TestSignals.NodesSynced.WaitFor("n3's sync", func(s NodesSynced) bool { return slices.Contains(s.Nodes, "n3") })
	if s.Err != nil || s.Report.Pushed != 1 {
		t.Fatalf("n3's sync: %+v", s)
	}
	if got := h.record(id).State; got != action.New {
		t.Fatalf("n3's action %s", got)
	}
	release()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"slow", "n2", "n3"} {
		if got := h.node(n).Status; got != "UP" {
			t.Fatalf("%s is %s after the full sync", n, got)
		}
	}
}
