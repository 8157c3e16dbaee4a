package orchestrate

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/musterhq/muster/core/actions"
	"github.com/musterhq/muster/core/approval"
	"github.com/musterhq/muster/core/nodes"
	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/core/store/sqlite"
	"github.com/musterhq/muster/shared/action"
)

const cluster = "c1"

type harness struct {
	t       *testing.T
	st      *sqlite.Store
	o       *Orchestrator
	reg     *prometheus.Registry
	agents  map[string]*fakeAgent
	created time.Time
	seenEv  int64
}

// setup builds a store with cluster c1 and one node per name, each served by a
// fake agent, and an orchestrator on them. CompareIDsEvery defaults to a large
// number so that only the first full sync lists everything.
func setup(t *testing.T, cfg Config, nodes ...string) *harness {
	t.Helper()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	h := &harness{t: t, st: st, reg: prometheus.NewRegistry(), agents: map[string]*fakeAgent{},
		created: time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)}
	err = st.Update(ctx, func(tx store.Tx) error {
		if err := tx.PutCluster(ctx, &store.Cluster{ID: cluster, Status: store.ClusterHealthy}); err != nil {
			return err
		}
		for _, n := range nodes {
			a := newFakeAgent(t, cluster, n)
			h.agents[n] = a
			err := tx.PutNode(ctx, &store.Node{ClusterID: cluster, ID: n, Addr: a.addr(),
				Source: store.SourceStatic, Status: store.NodeUnknown})
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.CompareIDsEvery == 0 {
		cfg.CompareIDsEvery = 1000
	}
	if cfg.AgentTimeout == 0 {
		cfg.AgentTimeout = 5 * time.Second
	}
	h.o, err = New(cfg, st, nil, h.reg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.o.Stop)
	return h
}

// restart replaces the orchestrator with a new one on the same store, as a
// core restart does: nothing it kept in memory survives.
func (h *harness) restart() {
	h.t.Helper()
	h.o.Stop()
	o, err := New(Config{CompareIDsEvery: 1000, AgentTimeout: 5 * time.Second}, h.st, nil, nil)
	if err != nil {
		h.t.Fatal(err)
	}
	h.o = o
	h.t.Cleanup(o.Stop)
}

func (h *harness) fullSync() Report {
	h.t.Helper()
	rep, err := h.o.FullSync(context.Background(), cluster)
	if err != nil {
		h.t.Fatal(err)
	}
	return rep
}

// create stores an action as the API would, each one created after the last.
func (h *harness) create(node string, edit func(r *store.Record)) string {
	h.t.Helper()
	h.created = h.created.Add(time.Second)
	r := &store.Record{Action: action.Action{ID: action.NewID(), ClusterID: cluster, NodeID: node,
		Kind: "muster.io/debug.sleep", Args: json.RawMessage(`{"seconds":1}`), State: action.PendingSchedule,
		Origin: action.OriginCore, Requester: "alice", TimeoutS: 60, CreatedTS: h.created, UpdatedTS: h.created}}
	if edit != nil {
		edit(r)
	}
	h.update(func(ctx context.Context, tx store.Tx) error { return tx.InsertAction(ctx, r) })
	return r.ID
}

func (h *harness) update(fn func(ctx context.Context, tx store.Tx) error) {
	h.t.Helper()
	ctx := context.Background()
	if err := h.st.Update(ctx, func(tx store.Tx) error { return fn(ctx, tx) }); err != nil {
		h.t.Fatal(err)
	}
}

func (h *harness) record(id string) *store.Record {
	h.t.Helper()
	var rec *store.Record
	ctx := context.Background()
	err := h.st.Read(ctx, func(r store.Reader) error {
		var err error
		rec, err = r.Action(ctx, id)
		if err == nil {
			rec.History, err = r.History(ctx, id)
		}
		return err
	})
	if err != nil {
		h.t.Fatal(err)
	}
	return rec
}

func (h *harness) node(id string) *store.Node {
	h.t.Helper()
	var n *store.Node
	ctx := context.Background()
	err := h.st.Read(ctx, func(r store.Reader) error {
		var err error
		n, err = r.Node(ctx, cluster, id)
		return err
	})
	if err != nil {
		h.t.Fatal(err)
	}
	return n
}

func (h *harness) cluster() *store.Cluster {
	h.t.Helper()
	var c *store.Cluster
	ctx := context.Background()
	if err := h.st.Read(ctx, func(r store.Reader) error {
		var err error
		c, err = r.Cluster(ctx, cluster)
		return err
	}); err != nil {
		h.t.Fatal(err)
	}
	return c
}

// events returns the events appended since the last call, as "type subject".
func (h *harness) events() []string {
	h.t.Helper()
	var out []string
	ctx := context.Background()
	err := h.st.Read(ctx, func(r store.Reader) error {
		evs, err := r.Events(ctx, h.seenEv, 0)
		for _, e := range evs {
			subject := e.NodeID
			if e.ActionID != "" {
				subject = e.ActionID
			}
			if subject == "" {
				subject = e.ClusterID
			}
			out = append(out, e.Type+" "+subject+" by "+e.Actor)
			h.seenEv = e.Seq
		}
		return err
	})
	if err != nil {
		h.t.Fatal(err)
	}
	return out
}

func wantState(t *testing.T, rec *store.Record, want action.State) {
	t.Helper()
	if rec.State != want {
		t.Fatalf("action %s is %s (%s), want %s", rec.ID, rec.State, rec.StateReason, want)
	}
}

// idle checks that one more full sync changes nothing and writes no row.
func (h *harness) idle() {
	h.t.Helper()
	rows := h.st.RowsWritten()
	rep := h.fullSync()
	if rep.Changes != 0 || rep.Events != 0 || h.st.RowsWritten() != rows {
		h.t.Fatalf("idle full sync wrote: %+v, %d rows; events %v", rep, h.st.RowsWritten()-rows, h.events())
	}
}

func TestFullSyncMarksNodesUpAndDown(t *testing.T) {
	t.Parallel()
	h := setup(t, Config{}, "n1", "n2")
	h.agents["n2"].set(func(f *fakeAgent) { f.down = true })
	rep := h.fullSync()
	if rep.Nodes != 2 || rep.Down != 1 {
		t.Fatalf("report %+v", rep)
	}
	n1, n2 := h.node("n1"), h.node("n2")
	if n1.Status != store.NodeUp || n1.StoreID == "" || n1.Version != "test" || len(n1.Kinds) != 3 || n1.LastContact == nil {
		t.Fatalf("n1 = %+v", n1)
	}
	if !slices.IsSorted(n1.Kinds) {
		t.Fatalf("kinds not sorted: %v", n1.Kinds)
	}
	if n2.Status != store.NodeDown || n2.StatusReason != ReasonUnreachable {
		t.Fatalf("n2 = %+v", n2)
	}
	if c := h.cluster(); c.Status != store.ClusterAlert || !strings.Contains(c.StatusReason, "n2") {
		t.Fatalf("cluster = %+v", c)
	}
	want := []string{"node.up n1 by core", "node.down n2 by core", "cluster.alert c1 by core"}
	if got := h.events(); !slices.Equal(got, want) {
		t.Fatalf("events %v, want %v", got, want)
	}
	h.idle() // still down: no new event, no write

	h.agents["n2"].set(func(f *fakeAgent) { f.down = false })
	h.fullSync()
	if n2 := h.node("n2"); n2.Status != store.NodeUp || n2.StatusReason != "" {
		t.Fatalf("n2 back = %+v", n2)
	}
	if c := h.cluster(); c.Status != store.ClusterHealthy || c.StatusReason != "" {
		t.Fatalf("cluster back = %+v", c)
	}
	want = []string{"node.up n2 by core", "cluster.healthy c1 by core"}
	if got := h.events(); !slices.Equal(got, want) {
		t.Fatalf("events %v, want %v", got, want)
	}
	h.idle()
}

func TestAnAgentErrorMarksTheNodeDown(t *testing.T) {
	t.Parallel()
	h := setup(t, Config{}, "n1")
	// A listener that is closed: connection refused.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	h.update(func(ctx context.Context, tx store.Tx) error {
		n, err := tx.Node(ctx, cluster, "n1")
		if err != nil {
			return err
		}
		n.Addr = addr
		return tx.PutNode(ctx, n)
	})
	h.fullSync()
	if n := h.node("n1"); n.Status != store.NodeDown || n.StatusReason != ReasonUnreachable {
		t.Fatalf("node = %+v", n)
	}
	h.idle()
}

func TestIdentityMismatchPushesNothing(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		edit func(f *fakeAgent)
	}{
		{"other node", func(f *fakeAgent) { f.nodeID = "n9" }},
		{"other cluster", func(f *fakeAgent) { f.clusterID = "c9" }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			h := setup(t, Config{}, "n1")
			ag := h.agents["n1"]
			ag.set(c.edit)
			id := h.create("n1", nil)
			h.fullSync()
			if n := h.node("n1"); n.Status != store.NodeDown || n.StatusReason != ReasonIdentityMismatch || n.StoreID != "" {
				t.Fatalf("node = %+v", n)
			}
			if calls := ag.calls("GET /api/v1/actions"); len(calls) != 0 {
				t.Fatalf("pulled from an agent that is someone else: %v", calls)
			}
			if calls := ag.calls("POST"); len(calls) != 0 {
				t.Fatalf("pushed to an agent that is someone else: %v", calls)
			}
			wantState(t, h.record(id), action.PendingSchedule)
			h.idle()
		})
	}
}

func TestPushInCreationOrderWithinRoom(t *testing.T) {
	t.Parallel()
	h := setup(t, Config{MaxQueuedPerNode: 3}, "n1")
	ag := h.agents["n1"]
	ag.add("muster.io/debug.ping", action.Running) // takes one place
	var ids []string
	for range 4 {
		ids = append(ids, h.create("n1", nil))
	}
	// Inserted last but created first: creation order, not insertion order.
	first := h.create("n1", func(r *store.Record) { r.CreatedTS = r.CreatedTS.Add(-time.Hour) })
	ids = append([]string{first}, ids...)
	other := h.create("n2", nil) // another node's action is not this node's business
	ag.calls("")

	rep := h.fullSync()
	if rep.Pushed != 2 {
		t.Fatalf("pushed %d, want 2 (room 3 minus 1 running)", rep.Pushed)
	}
	posts := ag.calls("POST /api/v1/actions")
	if len(posts) != 2 {
		t.Fatalf("posts %v", posts)
	}
	for i, id := range ids {
		rec := h.record(id)
		if i < 2 {
			wantState(t, rec, action.New)
			if !rec.SeenOnAgent || rec.ScheduledTS == nil || string(rec.Progress) != "{}" {
				t.Fatalf("adopted record %+v", rec)
			}
			if len(rec.History) != 1 || rec.History[0].From != action.PendingSchedule || rec.History[0].To != action.New || rec.History[0].Actor != "n1" {
				t.Fatalf("history %+v", rec.History)
			}
			if a, ok := ag.get(id); !ok || !a.CreatedTS.Equal(rec.CreatedTS) || a.Requester != "alice" {
				t.Fatalf("agent record %+v", a)
			}
		} else {
			wantState(t, rec, action.PendingSchedule)
		}
	}
	wantState(t, h.record(other), action.PendingSchedule)

	// The agent finishes both: room for the rest.
	ag.run(t, ids[0], action.Done, nil)
	ag.run(t, ids[1], action.Done, nil)
	if rep := h.fullSync(); rep.Pushed != 2 {
		t.Fatalf("second full sync pushed %d, want 2", rep.Pushed)
	}
	wantState(t, h.record(ids[2]), action.New)
	wantState(t, h.record(ids[3]), action.New)
	wantState(t, h.record(ids[4]), action.PendingSchedule)
}

func TestNodesWithSomethingToPushAreSyncedFirst(t *testing.T) {
	t.Parallel()
	nodes := []string{"n1", "n2", "n3", "n4", "n5"}
	h := setup(t, Config{NodeConcurrency: 1}, nodes...)
	h.fullSync() // every node UP
	var mu sync.Mutex
	var order []string
	for _, n := range nodes {
		h.agents[n].set(func(f *fakeAgent) {
			f.infoHook = func(context.Context) { mu.Lock(); order = append(order, n); mu.Unlock() }
		})
	}
	id := h.create("n4", nil)
	if rep := h.fullSync(); rep.Pushed != 1 {
		t.Fatalf("pushed %d, want 1", rep.Pushed)
	}
	wantState(t, h.record(id), action.New)
	if want := []string{"n4", "n1", "n2", "n3", "n5"}; !slices.Equal(order, want) {
		t.Fatalf("nodes synced in the order %v, want %v", order, want)
	}
}

func TestPullReconcilesAndTheAgentWins(t *testing.T) {
	t.Parallel()
	h := setup(t, Config{}, "n1")
	ag := h.agents["n1"]
	id := h.create("n1", nil)
	h.fullSync()
	h.events()
	wantState(t, h.record(id), action.New)

	// Between two full syncs the agent runs it to the end: NEW → RUNNING → DONE.
	ag.run(t, id, action.Running, nil)
	ag.run(t, id, action.Done, func(a *action.Action) {
		a.Output, a.Progress, a.StateReason = "slept", json.RawMessage(`{"deadline":"x"}`), "ok"
	})
	h.fullSync()
	rec := h.record(id)
	a, _ := ag.get(id)
	wantState(t, rec, action.Done)
	if rec.Output != "slept" || string(rec.Progress) != `{"deadline":"x"}` || rec.StateReason != "ok" ||
		!timeEq(rec.StartedTS, a.StartedTS) || !timeEq(rec.FinishedTS, a.FinishedTS) || !rec.UpdatedTS.Equal(a.UpdatedTS) {
		t.Fatalf("core record %+v\nagent record %+v", rec, a)
	}
	last := rec.History[len(rec.History)-1]
	if last.From != action.New || last.To != action.Done || last.Actor != "n1" {
		t.Fatalf("history %+v", rec.History)
	}
	if got := h.events(); !slices.Equal(got, []string{"action.state_changed " + id + " by n1"}) {
		t.Fatalf("events %v", got)
	}
	h.idle()
}

func TestAgentActionsAreImported(t *testing.T) {
	t.Parallel()
	h := setup(t, Config{}, "n1")
	ag := h.agents["n1"]
	id := ag.add("muster.io/debug.ping", action.Running)
	h.fullSync()
	rec := h.record(id)
	wantState(t, rec, action.Running)
	if rec.Origin != action.OriginAgent || rec.ClusterID != cluster || rec.NodeID != "n1" || !rec.SeenOnAgent || rec.Requester != "n1/local" {
		t.Fatalf("imported record %+v", rec)
	}
	if len(rec.History) != 1 || rec.History[0].To != action.Running || rec.History[0].Reason != actions.ReasonImported {
		t.Fatalf("history %+v", rec.History)
	}
	ev := h.events()
	if !slices.Contains(ev, "action.created "+id+" by n1") {
		t.Fatalf("events %v", ev)
	}
	h.idle()
}

func TestConflictingContentTheAgentWins(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		state action.State // the core's state before the full sync
	}{
		{"push answered 409", action.PendingSchedule},
		{"pulled record differs", action.New},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			h := setup(t, Config{}, "n1")
			ag := h.agents["n1"]
			h.fullSync() // first contact: the agent's store id is known from now on
			id := h.create("n1", func(r *store.Record) { r.State, r.SeenOnAgent = c.state, c.state == action.New })
			now := action.UTC(time.Now())
			ag.put(action.Action{ID: id, ClusterID: cluster, NodeID: "n1", Kind: "muster.io/debug.ping",
				Args: json.RawMessage(`{"other":true}`), State: action.Running, Progress: json.RawMessage(`{}`),
				Origin: action.OriginCore, CreatedTS: now, StartedTS: &now, UpdatedTS: now})
			h.events()
			h.fullSync()
			rec := h.record(id)
			wantState(t, rec, action.Running)
			if rec.Kind != "muster.io/debug.ping" || string(rec.Args) != `{"other":true}` {
				t.Fatalf("core kept its content: %s %s", rec.Kind, rec.Args)
			}
			var kept bool
			for _, tr := range rec.History {
				if strings.Contains(tr.Reason, "muster.io/debug.sleep") && strings.Contains(tr.Reason, `{"seconds":1}`) {
					kept = true
				}
			}
			if !kept {
				t.Fatalf("old kind and args not in history: %+v", rec.History)
			}
			ev := h.events()
			if !slices.Contains(ev, "action.conflict "+id+" by n1") || !slices.Contains(ev, "action.state_changed "+id+" by n1") {
				t.Fatalf("events %v", ev)
			}
			h.idle()
		})
	}
}

func TestPushAnswers(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		prep   func(h *harness, ag *fakeAgent, id string)
		edit   func(r *store.Record)
		state  action.State
		reason string
		event  string
	}{
		{
			name:  "410 makes it LOST",
			prep:  func(h *harness, ag *fakeAgent, id string) { ag.set(func(f *fakeAgent) { f.tombs[id] = true }) },
			state: action.Lost, reason: actions.ReasonGone, event: "action.lost",
		},
		{
			name:  "422 makes it FAILED with the agent's message",
			edit:  func(r *store.Record) { r.Kind = "example.com/unknown" },
			state: action.Failed, reason: "unknown kind example.com/unknown", event: "action.state_changed",
		},
		{
			name:  "201 adopts the agent's record",
			state: action.New, event: "action.state_changed",
		},
		{
			name: "200 adopts the agent's record",
			prep: func(h *harness, ag *fakeAgent, id string) {
				now := action.UTC(time.Now())
				ag.put(action.Action{ID: id, Kind: "muster.io/debug.sleep", Args: json.RawMessage(`{"seconds":1}`),
					State: action.Done, Progress: json.RawMessage(`{}`), CreatedTS: now, FinishedTS: &now, UpdatedTS: now})
				ag.set(func(f *fakeAgent) { f.recs[id].seq = 0 }) // not in the pull: only the push sees it
			},
			state: action.Done, event: "action.state_changed",
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			h := setup(t, Config{}, "n1")
			ag := h.agents["n1"]
			h.fullSync()
			id := h.create("n1", c.edit)
			if c.prep != nil {
				c.prep(h, ag, id)
			}
			h.events()
			h.fullSync()
			rec := h.record(id)
			wantState(t, rec, c.state)
			if rec.StateReason != c.reason {
				t.Fatalf("reason %q, want %q", rec.StateReason, c.reason)
			}
			if c.state.Final() && rec.FinishedTS == nil {
				t.Fatal("final without finished_ts")
			}
			if ev := h.events(); !slices.Contains(ev, c.event+" "+id+" by "+map[bool]string{true: "core", false: "n1"}[c.state == action.Lost]) {
				t.Fatalf("events %v", ev)
			}
			h.fullSync() // a LOST action puts the cluster in ALERT for the full sync that found it
			h.idle()
		})
	}
}

func TestPushWithoutAnswerIsSentAgain(t *testing.T) {
	t.Parallel()
	h := setup(t, Config{}, "n1")
	ag := h.agents["n1"]
	h.fullSync()
	id := h.create("n1", nil)
	second := h.create("n1", nil)
	ag.set(func(f *fakeAgent) { f.dropPush = true }) // the agent stores it, the answer is lost
	ag.calls("")
	h.fullSync()
	wantState(t, h.record(id), action.PendingSchedule)
	wantState(t, h.record(second), action.PendingSchedule)
	if posts := ag.calls("POST"); len(posts) != 1 {
		t.Fatalf("pushes after a lost answer: %v (want to stop at the first)", posts)
	}

	ag.set(func(f *fakeAgent) { f.dropPush = false })
	h.fullSync()
	// The first one came back through the pull, the second was pushed.
	wantState(t, h.record(id), action.New)
	wantState(t, h.record(second), action.New)
	if posts := ag.calls("POST"); len(posts) != 1 {
		t.Fatalf("pushes: %v (the pulled one must not be pushed again)", posts)
	}
	h.idle()
}

func TestAckSendsTheCommittedCursor(t *testing.T) {
	t.Parallel()
	h := setup(t, Config{PageSize: 2}, "n1")
	ag := h.agents["n1"]
	for range 5 {
		ag.add("muster.io/debug.ping", action.Done)
	}
	ag.calls("")
	h.fullSync()
	// First contact: a full listing, in pages, without ack.
	pulls := ag.calls("GET /api/v1/actions")
	if len(pulls) != 3 || strings.Contains(strings.Join(pulls, " "), "ack") || ag.acks() != 0 {
		t.Fatalf("first pulls %v, %d acks", pulls, ag.acks())
	}
	cursor := h.node("n1").Cursor
	if cursor != 5 {
		t.Fatalf("cursor %d, want 5", cursor)
	}
	for range 3 {
		ag.add("muster.io/debug.ping", action.Done)
	}
	h.fullSync()
	// The acknowledgement is a POST before the first page; no GET carries one.
	pulls = ag.calls("GET /api/v1/actions")
	if ag.acks() != 1 || len(pulls) != 2 || !strings.Contains(pulls[0], "since=5") || strings.Contains(strings.Join(pulls, " "), "ack") {
		t.Fatalf("%d acks, pulls %v: one ack of cursor 5 (a POST), then two pages without ack", ag.acks(), pulls)
	}
	ag.set(func(f *fakeAgent) {
		if f.acked != 5 {
			t.Errorf("agent acked %d, want 5", f.acked)
		}
	})
	if n := h.node("n1"); n.Cursor != 8 {
		t.Fatalf("cursor %d, want 8", n.Cursor)
	}
	h.idle()
	ag.set(func(f *fakeAgent) {
		if f.acked != 8 {
			t.Errorf("agent acked %d, want 8", f.acked)
		}
	})
}

// An idle sync is two requests, info and one page of changes: the cursor
// the agent already acknowledged is not acknowledged again, until it moves
// or the agent's database is replaced.
func TestAnAcknowledgedCursorIsNotSentAgain(t *testing.T) {
	t.Parallel()
	h := setup(t, Config{}, "n1")
	ag := h.agents["n1"]
	ag.add("muster.io/debug.ping", action.Done)
	h.fullSync() // first contact: a full listing, no ack
	h.fullSync() // acknowledges cursor 1
	if n := ag.acks(); n != 1 {
		t.Fatalf("%d acks after the second full sync, want 1", n)
	}
	ag.calls("")
	for range 3 {
		h.idle()
	}
	if n := ag.acks(); n != 0 {
		t.Fatalf("%d acks in three idle full syncs, want 0", n)
	}
	if calls := ag.calls(""); len(calls) != 6 {
		t.Fatalf("three idle full syncs made %d requests %v, want 6 (info and changes each)", len(calls), calls)
	}
	ag.add("muster.io/debug.ping", action.Done)
	h.fullSync() // imports cursor 2
	h.fullSync() // acknowledges it
	if n := ag.acks(); n != 1 {
		t.Fatalf("%d acks once the cursor moved, want 1", n)
	}
	ag.set(func(f *fakeAgent) {
		if f.acked != 2 {
			t.Errorf("agent acked %d, want 2", f.acked)
		}
	})
	// A replaced database: listed in full without ack, then its cursor is
	// acknowledged once.
	ag.replaceStore()
	ag.add("muster.io/debug.ping", action.Done)
	h.fullSync()
	h.fullSync()
	h.fullSync()
	if n := ag.acks(); n != 1 {
		t.Fatalf("%d acks after the database was replaced, want 1", n)
	}
}

func TestReplacedAgentDatabase(t *testing.T) {
	t.Parallel()
	h := setup(t, Config{}, "n1")
	ag := h.agents["n1"]
	a, b := h.create("n1", nil), h.create("n1", nil)
	done := h.create("n1", nil)
	h.fullSync()
	ag.run(t, done, action.Done, nil)
	h.fullSync()
	wantState(t, h.record(a), action.New)
	oldStore := h.node("n1").StoreID
	h.events()

	ag.replaceStore()
	fresh := ag.add("muster.io/debug.ping", action.New)
	ag.calls("")
	h.fullSync()
	pulls := ag.calls("GET /api/v1/actions")
	if len(pulls) == 0 || !strings.Contains(pulls[0], "since=0") || strings.Contains(pulls[0], "ack") {
		t.Fatalf("pulls after a store change %v: want a full listing without ack", pulls)
	}
	for _, id := range []string{a, b} {
		rec := h.record(id)
		wantState(t, rec, action.Lost)
		if rec.StateReason != actions.ReasonMissing {
			t.Fatalf("reason %q", rec.StateReason)
		}
	}
	wantState(t, h.record(done), action.Done) // final: untouched
	wantState(t, h.record(fresh), action.New)
	n := h.node("n1")
	if n.StoreID == oldStore || n.Cursor != 1 {
		t.Fatalf("node after store change %+v", n)
	}
	ev := h.events()
	for _, want := range []string{"action.lost " + a + " by core", "action.lost " + b + " by core", "cluster.alert c1 by core"} {
		if !slices.Contains(ev, want) {
			t.Fatalf("events %v lack %q", ev, want)
		}
	}
	if c := h.cluster(); c.Status != store.ClusterAlert {
		t.Fatalf("cluster %+v", c)
	}
	// The next full sync finds no drift: healthy again, then idle.
	h.fullSync()
	if c := h.cluster(); c.Status != store.ClusterHealthy {
		t.Fatalf("cluster %+v", c)
	}
	h.idle()
}

func TestPeriodicFullSyncFindsLostActions(t *testing.T) {
	t.Parallel()
	// Full syncs a period (10 s for one node) apart: each one gives the
	// node its turn, every third one lists everything.
	clock := newFakeClock()
	h := setup(t, Config{CompareIDsEvery: 3, Now: clock.now}, "n1")
	ag := h.agents["n1"]
	id := h.create("n1", nil)
	pending := h.create("n1", func(r *store.Record) { r.State = action.PendingApprove })
	h.fullSync() // full sync 0 (lists everything): pushes
	wantState(t, h.record(id), action.New)
	ag.forget(id) // gone without a change the cursor could show
	clock.add(11 * time.Second)
	h.fullSync() // full sync 1
	clock.add(11 * time.Second)
	h.fullSync() // full sync 2
	wantState(t, h.record(id), action.New)
	clock.add(11 * time.Second)
	h.fullSync() // full sync 3: lists everything
	wantState(t, h.record(id), action.Lost)
	wantState(t, h.record(pending), action.PendingApprove) // never on the agent: not lost
}

func TestApprovalDigestIsCheckedBeforePush(t *testing.T) {
	t.Parallel()
	h := setup(t, Config{}, "n1")
	ag := h.agents["n1"]
	approve := func(r *store.Record) {
		r.ApprovedBy = "bob"
		r.ApprovalDigest = approval.Digest(&r.Action)
	}
	ok := h.create("n1", approve)
	changed := h.create("n1", func(r *store.Record) {
		approve(r)
		r.Args = json.RawMessage(`{"seconds":999}`) // content changed after approval
	})
	none := h.create("n1", nil) // needed no approval
	h.fullSync()
	wantState(t, h.record(ok), action.New)
	wantState(t, h.record(none), action.New)
	rec := h.record(changed)
	wantState(t, rec, action.PendingApprove)
	if rec.ApprovedBy != "" || rec.ApprovalDigest != "" || rec.StateReason != actions.ReasonReapprove {
		t.Fatalf("re-approval record %+v", rec)
	}
	if _, pushed := ag.get(changed); pushed {
		t.Fatal("an action whose approval no longer matches was pushed")
	}
}

func TestCancelRequestsAreSent(t *testing.T) {
	t.Parallel()
	h := setup(t, Config{}, "n1")
	ag := h.agents["n1"]
	queued, running, done := h.create("n1", nil), h.create("n1", nil), h.create("n1", nil)
	h.fullSync()
	ag.run(t, running, action.Running, nil)
	ag.run(t, done, action.Done, nil)
	h.fullSync()
	h.update(func(ctx context.Context, tx store.Tx) error {
		for _, id := range []string{queued, running} {
			r, err := tx.Action(ctx, id)
			if err != nil {
				return err
			}
			r.CancelRequested = true
			if err := tx.UpdateAction(ctx, r); err != nil {
				return err
			}
		}
		return nil
	})
	ag.calls("")
	h.fullSync()
	cancels := ag.calls("POST /api/v1/actions/")
	if len(cancels) != 2 {
		t.Fatalf("cancels %v", cancels)
	}
	for _, id := range []string{queued, running} {
		if a, _ := ag.get(id); a.State != action.Cancelled {
			t.Fatalf("agent still holds %s %s", id, a.State)
		}
		rec := h.record(id)
		wantState(t, rec, action.Cancelled)
		if rec.CancelRequested {
			t.Fatalf("cancel still requested on a final action")
		}
	}
	wantState(t, h.record(done), action.Done)
	h.idle()
	if cancels := ag.calls("POST"); len(cancels) != 0 {
		t.Fatalf("cancels sent again: %v", cancels)
	}
}

// A cancel that commits after the full sync marked the push (actions.MarkSending)
// and before the agent answers cannot be settled in the core: the push may
// have arrived. It is a request; the agent's answer (NEW) is adopted, and
// the next full sync sends the cancel, once.
func TestCancelWhileThePushIsOnItsWayIsSentToTheAgent(t *testing.T) {
	t.Parallel()
	h := setup(t, Config{}, "n1")
	ag := h.agents["n1"]
	id := h.create("n1", nil)
	rules := &actions.Rules{}
	var outcome actions.CancelOutcome
	ag.set(func(f *fakeAgent) {
		f.pushHook = func(string) {
			h.update(func(ctx context.Context, tx store.Tx) error {
				var err error
				_, outcome, err = rules.Cancel(ctx, tx, id, actions.Actor{Name: "alice"})
				return err
			})
		}
	})
	h.fullSync()
	if outcome != actions.Requested {
		t.Fatalf("cancel of a push on its way: outcome %v, want a request", outcome)
	}
	if rec := h.record(id); rec.State != action.New || !rec.CancelRequested {
		t.Fatalf("core record %s, cancel requested %v; want the agent's NEW with the request standing", rec.State, rec.CancelRequested)
	}
	ag.set(func(f *fakeAgent) { f.pushHook = nil })
	ag.calls("")
	h.fullSync()
	if cancels := ag.calls("POST /api/v1/actions/" + id + "/cancel"); len(cancels) != 1 {
		t.Fatalf("cancels sent: %v, want one", cancels)
	}
	if a, _ := ag.get(id); a.State != action.Cancelled {
		t.Fatalf("agent state %s", a.State)
	}
	if rec := h.record(id); rec.State != action.Cancelled || rec.CancelRequested {
		t.Fatalf("core record %+v", rec)
	}
	h.idle()
	if cancels := ag.calls("POST"); len(cancels) != 0 {
		t.Fatalf("cancels sent again: %v", cancels)
	}
}

// An action the core rejected, that someone had pushed straight to the
// agent with other args: the agent's record wins over the core's CANCELLED,
// an action.conflict says what the core had decided, and the core's cancel
// stands: it is stored with the record, so an orchestrator that starts
// afresh (a core restart) still sends it.
func TestARejectedActionFoundOnTheAgentIsCancelledThereEvenAfterARestart(t *testing.T) {
	t.Parallel()
	h := setup(t, Config{}, "n1")
	ag := h.agents["n1"]
	h.fullSync()
	id := h.create("n1", func(r *store.Record) { r.State = action.PendingApprove })
	now := action.UTC(time.Now())
	ag.put(action.Action{ID: id, ClusterID: cluster, NodeID: "n1", Kind: "muster.io/debug.sleep",
		Args: json.RawMessage(`{"seconds":2}`), State: action.New, Progress: json.RawMessage(`{}`),
		Origin: action.OriginAgent, Requester: "root", CreatedTS: now, UpdatedTS: now})
	h.update(func(ctx context.Context, tx store.Tx) error {
		_, err := (&actions.Rules{}).Reject(ctx, tx, id, actions.Actor{Name: "bob"})
		return err
	})
	h.events()
	h.restart() // the core restarts: a new orchestrator, nothing kept in memory
	h.fullSync()
	rec := h.record(id)
	if rec.State != action.New || !rec.CancelRequested || string(rec.Args) != `{"seconds":2}` {
		t.Fatalf("core record %s args %s cancel requested %v; want the agent's NEW and args, cancel standing",
			rec.State, rec.Args, rec.CancelRequested)
	}
	if got := h.events(); !slices.Contains(got, "action.conflict "+id+" by n1") {
		t.Fatalf("events %v, want an action.conflict", got)
	}
	h.restart() // and once more: the request is in the store
	ag.calls("")
	h.fullSync()
	if cancels := ag.calls("POST /api/v1/actions/" + id + "/cancel"); len(cancels) != 1 {
		t.Fatalf("cancels sent: %v, want one", cancels)
	}
	if a, _ := ag.get(id); a.State != action.Cancelled {
		t.Fatalf("agent state %s", a.State)
	}
	if rec := h.record(id); rec.State != action.Cancelled || rec.CancelRequested {
		t.Fatalf("core record %s cancel requested %v", rec.State, rec.CancelRequested)
	}
	h.idle()
}

// The agent's record wins even over a state the core thinks final (LOST
// here): the core takes it, the history keeps what the core had, and an
// action.conflict event says both.
func TestTheAgentWinsOverAFinalStateOfTheCore(t *testing.T) {
	t.Parallel()
	h := setup(t, Config{}, "n1")
	ag := h.agents["n1"]
	id := h.create("n1", nil)
	h.fullSync()
	h.update(func(ctx context.Context, tx store.Tx) error {
		r, err := tx.Action(ctx, id)
		if err != nil {
			return err
		}
		r.State, r.StateReason = action.Lost, "test"
		return tx.UpdateAction(ctx, r)
	})
	h.events()
	ag.run(t, id, action.Done, nil)
	h.fullSync()
	rec := h.record(id)
	wantState(t, rec, action.Done)
	last := rec.History[len(rec.History)-1]
	if last.From != action.Lost || last.To != action.Done || !strings.Contains(last.Reason, "LOST (test)") {
		t.Fatalf("history %+v", rec.History)
	}
	if got := h.events(); !slices.Equal(got, []string{"action.conflict " + id + " by n1"}) {
		t.Fatalf("events %v", got)
	}
	h.idle()
}

func TestIdleFullSyncWritesNothing(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		cfg  Config
	}{
		{"incremental", Config{}},
		{"every full sync lists everything", Config{CompareIDsEvery: 1}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			h := setup(t, c.cfg, "n1", "n2", "n3")
			for n, ag := range h.agents {
				id := h.create(n, nil)
				ag.add("muster.io/debug.ping", action.Done)
				h.fullSync()
				ag.run(t, id, action.Running, nil)
			}
			h.create("n1", func(r *store.Record) { r.State = action.PendingApprove })
			h.fullSync()
			for range 3 {
				h.idle()
			}
		})
	}
}

func TestActionOfAnotherNodeIsNotTouched(t *testing.T) {
	t.Parallel()
	h := setup(t, Config{}, "n1", "n2")
	id := h.create("n1", nil)
	h.fullSync()
	// n2's agent reports an action with n1's action id.
	now := action.UTC(time.Now())
	h.agents["n2"].put(action.Action{ID: id, Kind: "muster.io/debug.sleep", Args: json.RawMessage(`{"seconds":1}`),
		State: action.Done, Progress: json.RawMessage(`{}`), CreatedTS: now, UpdatedTS: now})
	h.fullSync()
	if rec := h.record(id); rec.NodeID != "n1" || rec.State != action.New {
		t.Fatalf("record moved by another node's agent: %+v", rec)
	}
}

func TestMetricsAreRegistered(t *testing.T) {
	t.Parallel()
	h := setup(t, Config{}, "n1")
	h.fullSync()
	h.fullSync()
	mfs, err := h.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			key := mf.GetName()
			for _, l := range m.GetLabel() {
				key += fmt.Sprintf(",%s=%s", l.GetName(), l.GetValue())
			}
			switch {
			case m.GetCounter() != nil:
				got[key] = m.GetCounter().GetValue()
			case m.GetHistogram() != nil:
				got[key] = float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	want := map[string]float64{
		"muster_core_orchestrate_passes_total,result=wrote":  1,
		"muster_core_orchestrate_passes_total,result=idle":   1,
		"muster_core_orchestrate_pass_duration_seconds":      2,
		"muster_core_orchestrate_node_syncs_total,status=UP": 2,
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %v, want %v (all: %v)", k, got[k], v, got)
		}
	}
	if got["muster_core_store_rows_written_total"] != float64(h.st.RowsWritten()) || h.st.RowsWritten() == 0 {
		t.Errorf("rows written metric %v, store says %d", got["muster_core_store_rows_written_total"], h.st.RowsWritten())
	}
}

func timeEq(a, b *time.Time) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Equal(*b)
}

// A drained node gets no new pushes, while what it holds runs to its end
// and is mirrored; undrained, it takes its waiting actions.
func TestADrainedNodeGetsNoNewPushes(t *testing.T) {
	t.Parallel()
	h := setup(t, Config{}, "n1")
	ag := h.agents["n1"]
	held := h.create("n1", nil)
	h.fullSync()
	wantState(t, h.record(held), action.New)
	h.update(func(ctx context.Context, tx store.Tx) error {
		_, err := nodes.Drain(ctx, tx, cluster, "n1", "", actions.Actor{Name: "alice"})
		return err
	})
	waiting := h.create("n1", nil)
	ag.run(t, held, action.Done, nil)
	ag.calls("")
	h.fullSync()
	if pushes := ag.calls("POST /api/v1/actions"); len(pushes) != 0 {
		t.Fatalf("pushed to a drained node: %v", pushes)
	}
	wantState(t, h.record(held), action.Done)
	wantState(t, h.record(waiting), action.PendingSchedule)
	if n := h.node("n1"); !n.Drained || n.Status != store.NodeUp {
		t.Fatalf("a full sync changed the drain: %+v", n)
	}
	h.update(func(ctx context.Context, tx store.Tx) error {
		_, err := nodes.Undrain(ctx, tx, cluster, "n1", actions.Actor{Name: "alice"})
		return err
	})
	h.fullSync()
	wantState(t, h.record(waiting), action.New)
}
