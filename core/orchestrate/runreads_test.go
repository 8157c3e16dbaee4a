package orchestrate

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/musterhq/muster/core/actions"
	"github.com/musterhq/muster/core/approval"
	"github.com/musterhq/muster/core/runs"
	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/action"
	"github.com/musterhq/muster/shared/limit"
	"github.com/musterhq/muster/shared/live"
	"github.com/musterhq/muster/shared/wire"
)

// childReads is a store that counts the run children its reads and
// transactions return (RunChildren, RunChildrenBrief).
type childReads struct {
	store.Store
	rows atomic.Int64
}

type childReader struct {
	store.Reader
	rows *atomic.Int64
}

func (r childReader) RunChildren(ctx context.Context, id string) ([]store.Record, error) {
	out, err := r.Reader.RunChildren(ctx, id)
	r.rows.Add(int64(len(out)))
	return out, err
}

func (r childReader) RunChildrenBrief(ctx context.Context, id string) ([]store.Record, error) {
	out, err := r.Reader.RunChildrenBrief(ctx, id)
	r.rows.Add(int64(len(out)))
	return out, err
}

type childTx struct {
	store.Tx
	rows *atomic.Int64
}

func (t childTx) RunChildren(ctx context.Context, id string) ([]store.Record, error) {
	return childReader{t.Tx, t.rows}.RunChildren(ctx, id)
}

func (t childTx) RunChildrenBrief(ctx context.Context, id string) ([]store.Record, error) {
	return childReader{t.Tx, t.rows}.RunChildrenBrief(ctx, id)
}

func (s *childReads) Read(ctx context.Context, fn func(r store.Reader) error) error {
	return s.Store.Read(ctx, func(r store.Reader) error { return fn(childReader{r, &s.rows}) })
}

func (s *childReads) Update(ctx context.Context, fn func(tx store.Tx) error) error {
	return s.Store.Update(ctx, func(tx store.Tx) error { return fn(childTx{tx, &s.rows}) })
}

// TestARunsChildEndingReadsOnlyItsRun: with several runs under way in a
// cluster, a sync that sees one run's child end advances that run alone:
// the children read are that run's, not every run's.
func TestARunsChildEndingReadsOnlyItsRun(t *testing.T) {
	t.Parallel()
	const nRuns, perRun = 5, 4
	var nodes []string
	for r := range nRuns {
		for n := range perRun {
			nodes = append(nodes, fmt.Sprintf("r%d-n%d", r, n))
		}
	}
	h := setup(t, Config{}, nodes...)
	pol := approval.DefaultPolicy()
	engine := runs.NewEngine(live.New(pol), &actions.Rules{Policy: live.New(pol)}, nil)
	counted := &childReads{Store: h.st}
	h.o.Stop()
	o, err := New(Config{CompareIDsEvery: 1000, AgentTimeout: 5 * time.Second, Interval: time.Hour, Runs: engine}, counted, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(o.Stop)
	h.o = o
	all := limit.MustParse("100%")
	runIDs := make([]string, nRuns)
	for r := range nRuns {
		h.update(func(ctx context.Context, tx store.Tx) error {
			run, err := engine.Create(ctx, tx, &wire.CreateRunRequest{ClusterID: cluster, Stages: []wire.StageSpec{{
				Kind: "muster.io/debug.ping", MaxConcurrency: &all,
				Target: wire.Target{Nodes: nodes[r*perRun : (r+1)*perRun]}}}}, actions.Actor{Name: "alice"})
			if err != nil {
				return err
			}
			runIDs[r] = run.ID
			_, err = engine.Approve(ctx, tx, run.ID, "", actions.Actor{Name: "bob"})
			return err
		})
	}
	h.fullSync() // creates and pushes every run's children
	h.fullSync()
	var child store.Record
	h.update(func(ctx context.Context, tx store.Tx) error {
		kids, err := tx.RunChildren(ctx, runIDs[2])
		if err == nil && len(kids) != perRun {
			err = fmt.Errorf("run 2 has %d children, want %d", len(kids), perRun)
		}
		if err == nil {
			child = kids[0]
		}
		return err
	})
	if child.State != action.New {
		t.Fatalf("run 2's child is %s, want NEW (on its agent)", child.State)
	}
	h.agents[child.NodeID].run(t, child.ID, action.Done, nil)
	counted.rows.Store(0)
	if _, err := h.o.SyncNodes(context.Background(), cluster, []string{child.NodeID}); err != nil {
		t.Fatal(err)
	}
	if rec := h.record(child.ID); rec.State != action.Done {
		t.Fatalf("the child is %s in the core, want DONE", rec.State)
	}
	// Run 2's children, read to decide and, at most, again in its write.
	if got := counted.rows.Load(); got == 0 || got > 2*perRun {
		t.Fatalf("%d run children read to advance after one child of one run ended; want at most %d (that run's), not %d (every run's)",
			got, 2*perRun, nRuns*perRun)
	}
}

// endingRuns is a Runs whose run "ends" leaves the active list at its
// advance; it records the runs advanced.
type endingRuns struct {
	mu       sync.Mutex
	active   []string
	advanced []string
}

func (e *endingRuns) Active(context.Context, store.Reader, string) ([]string, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.active), nil
}

func (e *endingRuns) AdvanceIn(_ context.Context, _ store.Store, id string) ([]string, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.advanced = append(e.advanced, id)
	if id == "ends" {
		e.active = slices.DeleteFunc(e.active, func(r string) bool { return r == id })
	}
	return nil, nil
}

func (e *endingRuns) Expire(context.Context, store.Tx) (int, error) { return 0, nil }

// TestAdvanceOfNamedRunsReachesTheOthersOnlyWhenOneEnds: an advance asked
// for some runs advances those alone, unless one of them ends (it may have
// held a lock another waits for): then every other run is advanced too.
func TestAdvanceOfNamedRunsReachesTheOthersOnlyWhenOneEnds(t *testing.T) {
	t.Parallel()
	e := &endingRuns{active: []string{"a", "b", "ends", "c"}}
	h := setup(t, Config{Runs: e}, "n1")
	ctx := context.Background()
	h.o.advanceRuns(ctx, cluster, runSet{}.with("b"))
	if !slices.Equal(e.advanced, []string{"b"}) {
		t.Fatalf("advanced %q for run b, want b alone", e.advanced)
	}
	e.advanced = nil
	h.o.advanceRuns(ctx, cluster, runSet{}.with("ends"))
	if !slices.Equal(e.advanced, []string{"ends", "a", "b", "c"}) {
		t.Fatalf("advanced %q for a run that ended, want it then every other", e.advanced)
	}
	// A run made final elsewhere (a cancel through the API) is named by
	// its children's sync but no longer active: the others are advanced.
	e.advanced = nil
	h.o.advanceRuns(ctx, cluster, runSet{}.with("cancelled"))
	if !slices.Equal(e.advanced, []string{"a", "b", "c"}) {
		t.Fatalf("advanced %q for a run final elsewhere, want every active run", e.advanced)
	}
}

// TestAStageLockReleaseWakesTheWaitingRun: a run whose stage ends and
// releases a lock, while the run goes on, wakes the run waiting for that
// lock in the same sync: its child is created without a full sync.
func TestAStageLockReleaseWakesTheWaitingRun(t *testing.T) {
	t.Parallel()
	h := setup(t, Config{}, "n1", "n2", "n3")
	pol := approval.DefaultPolicy()
	engine := runs.NewEngine(live.New(pol), &actions.Rules{Policy: live.New(pol)}, nil)
	h.o.Stop()
	o, err := New(Config{CompareIDsEvery: 1000, AgentTimeout: 5 * time.Second, Interval: time.Hour, Runs: engine}, h.st, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(o.Stop)
	h.o = o
	start := func(stages ...wire.StageSpec) string {
		var id string
		h.update(func(ctx context.Context, tx store.Tx) error {
			run, err := engine.Create(ctx, tx, &wire.CreateRunRequest{ClusterID: cluster, Stages: stages}, actions.Actor{Name: "alice"})
			if err != nil {
				return err
			}
			id = run.ID
			_, err = engine.Approve(ctx, tx, run.ID, "", actions.Actor{Name: "bob"})
			return err
		})
		return id
	}
	children := func(run string) []store.Record {
		var kids []store.Record
		h.update(func(ctx context.Context, tx store.Tx) error {
			var err error
			kids, err = tx.RunChildren(ctx, run)
			return err
		})
		return kids
	}
	a := start(wire.StageSpec{Name: "migrate", Kind: "muster.io/debug.ping", Lock: &wire.Lock{Name: "db"}, Target: wire.Target{Nodes: []string{"n1"}}},
		wire.StageSpec{Name: "after", Kind: "muster.io/debug.ping", Target: wire.Target{Nodes: []string{"n2"}}})
	b := start(wire.StageSpec{Name: "backup", Kind: "muster.io/debug.ping", Lock: &wire.Lock{Name: "db"}, Target: wire.Target{Nodes: []string{"n3"}}})
	h.fullSync() // a takes the lock and pushes its child; b waits for it
	h.fullSync()
	kids := children(a)
	if len(kids) != 1 || kids[0].State != action.New {
		t.Fatalf("run a's children %+v, want one NEW", kids)
	}
	if got := children(b); len(got) != 0 {
		t.Fatalf("run b has %d children while a holds the lock, want 0", len(got))
	}
	h.agents["n1"].run(t, kids[0].ID, action.Done, nil)
	if _, err := h.o.SyncNodes(context.Background(), cluster, []string{"n1"}); err != nil {
		t.Fatal(err)
	}
	if got := children(a); len(got) != 2 {
		t.Fatalf("run a has %d children after its first stage, want 2 (it goes on)", len(got))
	}
	if got := children(b); len(got) != 1 {
		t.Fatalf("run b has %d children after a released the lock, want 1 without a full sync", len(got))
	}
}
