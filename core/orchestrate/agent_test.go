package orchestrate_test

// These tests run full syncs against real agents (agent.New/Run on loopback
// ports, real SQLite queues). The fake agent of the package's own tests
// covers the answers a real agent rarely gives.

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/musterhq/muster/agent"
	"github.com/musterhq/muster/agent/agenttest"
	"github.com/musterhq/muster/agent/handlers"
	"github.com/musterhq/muster/core/actions"
	"github.com/musterhq/muster/core/orchestrate"
	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/core/store/pgtest"
	"github.com/musterhq/muster/core/store/postgres"
	"github.com/musterhq/muster/core/store/sqlite"
	"github.com/musterhq/muster/shared/action"
	"github.com/musterhq/muster/shared/client"
	"github.com/musterhq/muster/shared/secret"
	"github.com/musterhq/muster/shared/testwait"
	"github.com/musterhq/muster/shared/wire"
)

const cluster = "prod"

// realAgent is one agent process-in-a-goroutine.
type realAgent struct {
	addr string
	stop func()
}

func runAgent(t *testing.T, nodeID, addr, dataDir string) *realAgent {
	t.Helper()
	cfg := agent.DefaultConfig()
	cfg.NodeID, cfg.ClusterID, cfg.DataDir, cfg.API.Addr = nodeID, cluster, dataDir, addr
	cfg.API.Insecure = true
	r := agenttest.Start(t, cfg)
	return &realAgent{addr: r.Addr, stop: r.Stop}
}

type env struct {
	t      *testing.T
	st     store.Store
	o      *orchestrate.Orchestrator
	agents map[string]*realAgent
}

func setup(t *testing.T, cfg orchestrate.Config, nodes ...string) *env {
	t.Helper()
	st, err := sqlite.Open(context.Background(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return setupOn(t, st, cfg, nodes...)
}

// setupOn is setup on the store st.
func setupOn(t *testing.T, st store.Store, cfg orchestrate.Config, nodes ...string) *env {
	t.Helper()
	var err error
	e := &env{t: t, st: st, agents: map[string]*realAgent{}}
	for _, n := range nodes {
		e.agents[n] = runAgent(t, n, "127.0.0.1:0", t.TempDir())
	}
	e.update(func(ctx context.Context, tx store.Tx) error {
		if err := tx.PutCluster(ctx, &store.Cluster{ID: cluster, Status: store.ClusterHealthy}); err != nil {
			return err
		}
		for _, n := range nodes {
			err := tx.PutNode(ctx, &store.Node{ClusterID: cluster, ID: n, Addr: e.agents[n].addr,
				Source: store.SourceStatic, Status: store.NodeUnknown})
			if err != nil {
				return err
			}
		}
		return nil
	})
	if cfg.CompareIDsEvery == 0 {
		cfg.CompareIDsEvery = 1000
	}
	e.o, err = orchestrate.New(cfg, st, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func (e *env) update(fn func(ctx context.Context, tx store.Tx) error) {
	e.t.Helper()
	ctx := context.Background()
	if err := e.st.Update(ctx, func(tx store.Tx) error { return fn(ctx, tx) }); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) fullSync() orchestrate.Report {
	e.t.Helper()
	rep, err := e.o.FullSync(context.Background(), cluster)
	if err != nil {
		e.t.Fatal(err)
	}
	return rep
}

func (e *env) create(node, kind, args string) string {
	e.t.Helper()
	now := action.UTC(time.Now())
	r := &store.Record{Action: action.Action{ID: action.NewID(), ClusterID: cluster, NodeID: node, Kind: kind,
		Args: json.RawMessage(args), State: action.PendingSchedule, Origin: action.OriginCore,
		Requester: "alice", CreatedTS: now, UpdatedTS: now}}
	e.update(func(ctx context.Context, tx store.Tx) error { return tx.InsertAction(ctx, r) })
	return r.ID
}

func (e *env) record(id string) *store.Record {
	e.t.Helper()
	var rec *store.Record
	ctx := context.Background()
	if err := e.st.Read(ctx, func(r store.Reader) error {
		var err error
		rec, err = r.Action(ctx, id)
		return err
	}); err != nil {
		e.t.Fatal(err)
	}
	return rec
}

// fullSyncUntil runs full syncs until cond holds.
func (e *env) fullSyncUntil(what string, cond func() bool) {
	e.t.Helper()
	testwait.For(e.t, what, func() bool {
		e.fullSync()
		return cond()
	})
}

// TestRealAgentsRunActionsAndIdleFullSyncsWriteNothing, on SQLite and on
// PostgreSQL: the rows an idle full sync writes are zero on both.
func TestRealAgentsRunActionsAndIdleFullSyncsWriteNothing(t *testing.T) {
	t.Parallel()
	for _, driver := range []string{"sqlite", "postgres"} {
		t.Run(driver, func(t *testing.T) {
			t.Parallel()
			var e *env
			if driver == "sqlite" {
				e = setup(t, orchestrate.Config{}, "n1", "n2", "n3")
			} else {
				st, err := postgres.Open(context.Background(), pgtest.NewDatabase(t))
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { st.Close() })
				e = setupOn(t, st, orchestrate.Config{}, "n1", "n2", "n3")
			}
			runActionsAndIdlePasses(t, e)
		})
	}
}

func runActionsAndIdlePasses(t *testing.T, e *env) {
	var ids []string
	for n := range e.agents {
		ids = append(ids, e.create(n, "muster.io/debug.ping", `{}`))
		ids = append(ids, e.create(n, "muster.io/debug.fail", `{"message":"boom"}`))
	}
	e.fullSyncUntil("every action to finish", func() bool {
		for _, id := range ids {
			if !e.record(id).State.Final() {
				return false
			}
		}
		return true
	})
	for _, id := range ids {
		rec := e.record(id)
		want := action.Done
		if rec.Kind == "muster.io/debug.fail" {
			want = action.Failed
		}
		if rec.State != want || rec.FinishedTS == nil || rec.StartedTS == nil {
			t.Fatalf("%s %s: %s, want %s (%+v)", rec.Kind, id, rec.State, want, rec)
		}
	}
	// Once everything is mirrored, full syncs cost no write.
	e.fullSync()
	for range 3 {
		rows := e.st.RowsWritten()
		rep := e.fullSync()
		if rep.Changes != 0 || e.st.RowsWritten() != rows {
			t.Fatalf("idle full sync over real agents wrote %d rows: %+v", e.st.RowsWritten()-rows, rep)
		}
	}
}

func TestRealAgentCancelsARunningAction(t *testing.T) {
	t.Parallel()
	e := setup(t, orchestrate.Config{}, "n1")
	id := e.create("n1", "muster.io/debug.sleep", `{"seconds":300}`)
	e.fullSyncUntil("the action to run", func() bool { return e.record(id).State == action.Running })
	// A running action whose steps change nothing costs no write either.
	e.fullSync()
	rows := e.st.RowsWritten()
	if rep := e.fullSync(); rep.Changes != 0 || e.st.RowsWritten() != rows {
		t.Fatalf("full sync over a running sleep wrote %d rows: %+v", e.st.RowsWritten()-rows, rep)
	}
	e.update(func(ctx context.Context, tx store.Tx) error {
		r, err := tx.Action(ctx, id)
		if err != nil {
			return err
		}
		r.CancelRequested = true
		return tx.UpdateAction(ctx, r)
	})
	e.fullSyncUntil("the action to be cancelled", func() bool { return e.record(id).State == action.Cancelled })
	if rec := e.record(id); rec.CancelRequested || !rec.SeenOnAgent {
		t.Fatalf("record %+v", rec)
	}
}

func TestRealAgentRefusesAnUnknownKind(t *testing.T) {
	t.Parallel()
	e := setup(t, orchestrate.Config{}, "n1")
	id := e.create("n1", "example.com/not.installed", `{}`)
	e.fullSync()
	rec := e.record(id)
	if rec.State != action.Failed || !strings.Contains(rec.StateReason, "example.com/not.installed") {
		t.Fatalf("record %s %q", rec.State, rec.StateReason)
	}
}

// The args_schema a real agent announces is kept with the node's kinds,
// and dropped once the agent no longer declares it.
func TestRealAgentsArgsSchemaIsStoredWithItsKinds(t *testing.T) {
	t.Parallel()
	e := setup(t, orchestrate.Config{}, "n1")
	old := e.agents["n1"]
	old.stop()
	cfg := agent.DefaultConfig()
	cfg.NodeID, cfg.ClusterID, cfg.DataDir, cfg.API.Addr, cfg.API.Insecure = "n1", cluster, t.TempDir(), old.addr, true
	cfg.Actions.External = []handlers.External{{Kind: "example.com/pkg.upgrade", Run: []string{"/bin/true"},
		ArgsSchema: `{"type": "object", "required": ["version"]}`}}
	r := agenttest.Start(t, cfg)
	e.agents["n1"] = &realAgent{addr: r.Addr, stop: r.Stop}
	e.fullSync()
	n := e.node("n1")
	if got := string(n.ArgsSchemas["example.com/pkg.upgrade"]); got != `{"required":["version"],"type":"object"}` || len(n.ArgsSchemas) != 1 ||
		!slices.Contains(n.Kinds, "example.com/pkg.upgrade") {
		t.Fatalf("stored node: kinds %v schemas %v", n.Kinds, n.ArgsSchemas)
	}
	// An idle full sync writes the node no more: the schema read back is the one announced.
	e.fullSync()
	if again := e.node("n1"); !again.UpdatedTS.Equal(n.UpdatedTS) {
		t.Fatalf("an idle full sync rewrote the node (updated %s, then %s)", n.UpdatedTS, again.UpdatedTS)
	}
	r.Stop()
	e.agents["n1"] = runAgent(t, "n1", r.Addr, t.TempDir())
	e.fullSync()
	if n := e.node("n1"); n.ArgsSchemas != nil || slices.Contains(n.Kinds, "example.com/pkg.upgrade") {
		t.Fatalf("after the kind went: kinds %v schemas %v", n.Kinds, n.ArgsSchemas)
	}
}

func TestRealAgentWinsAConflict(t *testing.T) {
	t.Parallel()
	e := setup(t, orchestrate.Config{}, "n1")
	e.fullSync()
	id := e.create("n1", "muster.io/debug.sleep", `{"seconds":1}`)
	// Someone queued another action under the same id on the agent directly.
	ag := client.NewAgent(e.agents["n1"].addr, nil)
	if _, status, err := ag.Push(context.Background(), &wire.PushRequest{ID: id, Kind: "muster.io/debug.ping"}); err != nil || status != 201 {
		t.Fatalf("direct push: %d %v", status, err)
	}
	e.fullSync()
	rec := e.record(id)
	if rec.Kind != "muster.io/debug.ping" || rec.State == action.PendingSchedule {
		t.Fatalf("the agent did not win: %s %s", rec.Kind, rec.State)
	}
	ctx := context.Background()
	err := e.st.Read(ctx, func(r store.Reader) error {
		evs, err := r.Events(ctx, 0, 0)
		for _, ev := range evs {
			if ev.Type == store.EventActionConflict && ev.ActionID == id && ev.Data["old_kind"] == "muster.io/debug.sleep" {
				return err
			}
		}
		t.Errorf("no action.conflict event with the old kind in %+v", evs)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestRealAgentWithANewDatabaseLosesItsActions(t *testing.T) {
	t.Parallel()
	e := setup(t, orchestrate.Config{}, "n1")
	id := e.create("n1", "muster.io/debug.sleep", `{"seconds":300}`)
	e.fullSyncUntil("the action to run", func() bool { return e.record(id).State == action.Running })

	// The node's database is replaced: a new agent on the same address and an empty data directory.
	old := e.agents["n1"]
	old.stop()
	e.agents["n1"] = runAgent(t, "n1", old.addr, t.TempDir())
	e.fullSync()
	rec := e.record(id)
	if rec.State != action.Lost || rec.StateReason != actions.ReasonMissing {
		t.Fatalf("record %s %q", rec.State, rec.StateReason)
	}
	ctx := context.Background()
	err := e.st.Read(ctx, func(r store.Reader) error {
		c, err := r.Cluster(ctx, cluster)
		if err == nil && c.Status != store.ClusterAlert {
			t.Errorf("cluster %+v", c)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// A cancel requested while the action is PENDING_SCHEDULE is settled by the
// agent's own answer: an action the agent never received is cancelled in the
// core and never pushed; one an earlier push delivered (its answer lost) is
// cancelled on the agent, and the core mirrors that. Neither may end
// CANCELLED in the core while the agent runs it.
func TestRealAgentSettlesCancelOfPendingSchedule(t *testing.T) {
	t.Parallel()
	e := setup(t, orchestrate.Config{}, "n1")
	requestCancel := func(id string) {
		e.update(func(ctx context.Context, tx store.Tx) error {
			r, err := tx.Action(ctx, id)
			if err != nil {
				return err
			}
			r.CancelRequested = true
			return tx.UpdateAction(ctx, r)
		})
	}
	ag := client.NewAgent(e.agents["n1"].addr, nil)
	// Keep the agent's runner busy so that a delivered action stays NEW.
	blocker := e.create("n1", "muster.io/debug.sleep", `{"seconds":300}`)
	e.fullSyncUntil("the blocker to run", func() bool { return e.record(blocker).State == action.Running })

	never := e.create("n1", "muster.io/debug.ping", `{}`)
	delivered := e.create("n1", "muster.io/debug.ping", `{}`)
	// The push of "delivered" reached the agent but its answer was lost.
	rec := e.record(delivered)
	if _, st, err := ag.Push(context.Background(), &wire.PushRequest{ID: rec.ID, Kind: rec.Kind, Args: rec.Args,
		Origin: action.OriginCore, CreatedTS: &rec.CreatedTS}); err != nil || st != 201 {
		t.Fatalf("push: %d %v", st, err)
	}
	e.update(func(ctx context.Context, tx store.Tx) error { // as the full sync did before its push
		r, err := tx.Action(ctx, delivered)
		if err != nil {
			return err
		}
		r.PushedStoreID = storeID(t, ag)
		return tx.UpdateAction(ctx, r)
	})
	requestCancel(never)
	requestCancel(delivered)
	e.fullSyncUntil("both cancels settled", func() bool {
		return e.record(never).State == action.Cancelled && e.record(delivered).State == action.Cancelled
	})
	if _, err := ag.Get(context.Background(), never); client.StatusOf(err) != 404 {
		t.Fatalf("an action cancelled before delivery was pushed anyway: %v", err)
	}
	onAgent, err := ag.Get(context.Background(), delivered)
	if err != nil || onAgent.State != action.Cancelled {
		t.Fatalf("the delivered action on the agent: %+v %v", onAgent, err)
	}
}

func storeID(t *testing.T, ag *client.Agent) string {
	t.Helper()
	info, err := ag.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return info.StoreID
}

// A push that reached the agent but whose answer was lost, followed by the
// replacement of the agent's database: the action may have run on the old
// database, so it becomes LOST and is never pushed to the new one.
func TestRealAgentUnconfirmedPushToAReplacedDatabaseIsLost(t *testing.T) {
	t.Parallel()
	e := setup(t, orchestrate.Config{}, "n1")
	e.fullSync() // the node is known and UP
	id := e.create("n1", "muster.io/debug.ping", `{}`)
	ag := client.NewAgent(e.agents["n1"].addr, nil)
	rec := e.record(id)
	e.update(func(ctx context.Context, tx store.Tx) error { // the full sync records its push...
		r, err := tx.Action(ctx, id)
		if err != nil {
			return err
		}
		r.PushedStoreID = storeID(t, ag)
		return tx.UpdateAction(ctx, r)
	})
	// ...which reaches the agent, but the answer never comes back.
	if _, st, err := ag.Push(context.Background(), &wire.PushRequest{ID: id, Kind: rec.Kind, Args: rec.Args,
		Origin: action.OriginCore, CreatedTS: &rec.CreatedTS}); err != nil || st != 201 {
		t.Fatalf("push: %d %v", st, err)
	}
	old := e.agents["n1"]
	old.stop()
	e.agents["n1"] = runAgent(t, "n1", old.addr, t.TempDir())
	e.fullSync()
	got := e.record(id)
	if got.State != action.Lost || got.StateReason != actions.ReasonUnconfirmed {
		t.Fatalf("record %s %q, want LOST: %s", got.State, got.StateReason, actions.ReasonUnconfirmed)
	}
	e.fullSync()
	if _, err := client.NewAgent(e.agents["n1"].addr, nil).Get(context.Background(), id); client.StatusOf(err) != 404 {
		t.Fatalf("the action was pushed to the new database: %v", err)
	}
}

// TestAFullSyncUnderAStaleLeaseWritesAndPushesNothing: on PostgreSQL, a full sync
// whose fence names a lease this replica does not hold (another replica
// took it) fails with store.ErrFenced; the record of the pushes it was about
// to send is refused, so nothing reaches the agent and nothing is written.
// Under the current lease the same full sync pushes.
func TestAFullSyncUnderAStaleLeaseWritesAndPushesNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, err := postgres.Open(ctx, pgtest.NewDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	e := setupOn(t, st, orchestrate.Config{}, "n1")
	held, err := st.Coordinate(ctx, store.Replica{ID: "b"}, time.Minute, func(v store.LeaseView) []string { return v.Clusters })
	if err != nil || held[cluster] != 1 {
		t.Fatalf("replica b holds %v, %v", held, err)
	}
	id := e.create("n1", "muster.io/debug.ping", `{}`)
	rows := st.RowsWritten()
	stale := store.WithFence(ctx, store.Fence{ClusterID: cluster, Holder: "a", Epoch: 1})
	if _, err := e.o.FullSync(stale, cluster); !errors.Is(err, store.ErrFenced) {
		t.Fatalf("full sync under a stale lease: %v, want ErrFenced", err)
	}
	if n := st.RowsWritten() - rows; n != 0 {
		t.Fatalf("the fenced full sync wrote %d rows", n)
	}
	if rec := e.record(id); rec.State != action.PendingSchedule || rec.PushedStoreID != "" {
		t.Fatalf("record after the fenced full sync: %s, pushed to %q", rec.State, rec.PushedStoreID)
	}
	if _, err := client.NewAgent(e.agents["n1"].addr, nil).Get(ctx, id); client.StatusOf(err) != 404 {
		t.Fatalf("the agent got the action from a fenced full sync: %v", err)
	}
	current := store.WithFence(ctx, store.Fence{ClusterID: cluster, Holder: "b", Epoch: 1})
	if _, err := e.o.FullSync(current, cluster); err != nil {
		t.Fatalf("full sync under the current lease: %v", err)
	}
	if rec := e.record(id); rec.State == action.PendingSchedule {
		t.Fatalf("the full sync under the current lease did not push: %s", rec.State)
	}
}

// The secret names a real agent announces are kept with the node (never a
// value), a file added to its secrets directory is seen at the next sync,
// and an idle sync writes the node no more.
func TestRealAgentsSecretNamesAreStored(t *testing.T) {
	t.Parallel()
	e := setup(t, orchestrate.Config{}, "n1")
	old := e.agents["n1"]
	old.stop()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "db-password"), []byte("v4lue"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := agent.DefaultConfig()
	cfg.NodeID, cfg.ClusterID, cfg.DataDir, cfg.API.Addr, cfg.API.Insecure = "n1", cluster, t.TempDir(), old.addr, true
	cfg.Secrets = secret.Config{Dir: dir}
	r := agenttest.Start(t, cfg)
	e.agents["n1"] = &realAgent{addr: r.Addr, stop: r.Stop}
	e.fullSync()
	n := e.node("n1")
	if strings.Join(n.Secrets, ",") != "db-password" {
		t.Fatalf("stored node: secrets %v", n.Secrets)
	}
	e.fullSync()
	if again := e.node("n1"); !again.UpdatedTS.Equal(n.UpdatedTS) {
		t.Fatalf("an idle full sync rewrote the node (updated %s, then %s)", n.UpdatedTS, again.UpdatedTS)
	}
	if err := os.WriteFile(filepath.Join(dir, "api-token"), []byte("t"), 0o600); err != nil {
		t.Fatal(err)
	}
	e.fullSync()
	if n := e.node("n1"); strings.Join(n.Secrets, ",") != "api-token,db-password" {
		t.Fatalf("after a new file: secrets %v", n.Secrets)
	}
}
