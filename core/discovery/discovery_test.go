package discovery

import (
	"context"
	"maps"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/musterhq/muster/core/actions"
	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/core/store/sqlite"
	"github.com/musterhq/muster/shared/action"
	"github.com/musterhq/muster/shared/testgoroutine"
	"github.com/musterhq/muster/shared/testwait"
)

func setup(t *testing.T) store.Store {
	t.Helper()
	st, err := sqlite.Open(context.Background(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func nodes(t *testing.T, st store.Store) map[string]store.Node {
	t.Helper()
	out := map[string]store.Node{}
	err := st.Read(context.Background(), func(r store.Reader) error {
		ns, err := r.Nodes(context.Background(), "")
		for _, n := range ns {
			out[n.ClusterID+"/"+n.ID] = n
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func eventTypes(t *testing.T, st store.Store) []string {
	t.Helper()
	var out []string
	err := st.Read(context.Background(), func(r store.Reader) error {
		evs, err := r.Events(context.Background(), 0, 0)
		for _, e := range evs {
			out = append(out, e.Type+" "+e.ClusterID+"/"+e.NodeID)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

var specs = []ClusterSpec{
	{ID: "db", Nodes: []NodeSpec{{ID: "db-1", Addr: "10.0.0.1:7420"}, {ID: "db-2", Addr: "10.0.0.2:7420"}}},
	{ID: "web", Nodes: []NodeSpec{{ID: "web-1", Addr: "10.0.1.1:7420"}}},
	{ID: "empty"},
}

func TestStaticSnapshot(t *testing.T) {
	t.Parallel()
	s := Static(specs)
	want := []Node{
		{ClusterID: "db", ID: "db-1", Addr: "10.0.0.1:7420", Source: store.SourceStatic},
		{ClusterID: "db", ID: "db-2", Addr: "10.0.0.2:7420", Source: store.SourceStatic},
		{ClusterID: "web", ID: "web-1", Addr: "10.0.1.1:7420", Source: store.SourceStatic},
	}
	if got := s.Snapshot(); !reflect.DeepEqual(got, want) {
		t.Fatalf("Snapshot = %+v", got)
	}
	if got := s.Clusters(); !slices.Equal(got, []string{"db", "web", "empty"}) {
		t.Fatalf("Clusters = %v", got)
	}
	if s.Changes() != nil || s.Name() != store.SourceStatic {
		t.Fatal("a static source reports changes or has the wrong name")
	}
}

func TestSyncAddsNodesOnceAsUnknown(t *testing.T) {
	t.Parallel()
	st := setup(t)
	ctx := context.Background()
	src := Static(specs)
	res, err := Sync(ctx, st, src.Clusters(), src)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Joined) != 3 || !slices.Equal(res.Clusters(), []string{"db", "web"}) {
		t.Fatalf("result %+v", res)
	}
	got := nodes(t, st)
	if len(got) != 3 {
		t.Fatalf("nodes %+v", got)
	}
	for k, n := range got {
		if n.Status != store.NodeUnknown || n.Source != store.SourceStatic || n.Addr == "" {
			t.Errorf("%s = %+v", k, n)
		}
	}
	err = st.Read(ctx, func(r store.Reader) error {
		cs, err := r.Clusters(ctx)
		if len(cs) != 3 {
			t.Errorf("clusters %+v (the empty cluster must exist too)", cs)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if ev := eventTypes(t, st); len(ev) != 3 || ev[0] != "node.joined db/db-1" {
		t.Fatalf("events %v", ev)
	}

	rows := st.RowsWritten()
	res, err = Sync(ctx, st, src.Clusters(), src)
	if err != nil || !res.Empty() {
		t.Fatalf("second sync: %+v, %v", res, err)
	}
	if st.RowsWritten() != rows {
		t.Fatalf("a sync with nothing new wrote %d rows", st.RowsWritten()-rows)
	}
}

func TestSyncKeepsWhatTheOrchestratorLearnt(t *testing.T) {
	t.Parallel()
	st := setup(t)
	ctx := context.Background()
	if _, err := Sync(ctx, st, nil, Static(specs)); err != nil {
		t.Fatal(err)
	}
	err := st.Update(ctx, func(tx store.Tx) error {
		n, err := tx.Node(ctx, "db", "db-1")
		if err != nil {
			return err
		}
		n.Status, n.Cursor, n.StoreID = store.NodeUp, 42, "sid"
		return tx.PutNode(ctx, n)
	})
	if err != nil {
		t.Fatal(err)
	}
	moved := []ClusterSpec{{ID: "db", Nodes: []NodeSpec{{ID: "db-1", Addr: "10.9.9.9:7420"}}}}
	res, err := Sync(ctx, st, nil, Static(moved))
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Moved) != 1 || len(res.Left) != 2 || len(res.Joined) != 0 {
		t.Fatalf("result %+v", res)
	}
	got := nodes(t, st)
	n := got["db/db-1"]
	if n.Addr != "10.9.9.9:7420" || n.Cursor != 42 || n.StoreID != "sid" || n.Status != store.NodeUp {
		t.Fatalf("moved node lost its state: %+v", n)
	}
	if _, ok := got["db/db-2"]; ok || len(got) != 1 {
		t.Fatalf("removed nodes still stored: %+v", got)
	}
	ev := eventTypes(t, st)
	if !slices.Contains(ev, "node.left db/db-2") || !slices.Contains(ev, "node.left web/web-1") {
		t.Fatalf("events %v", ev)
	}
}

// fakeSource is a changing source, like the gossip pool.
type fakeSource struct {
	name string
	mu   sync.Mutex
	list []Node
	ch   chan struct{}
}

func (f *fakeSource) Name() string { return f.name }
func (f *fakeSource) Snapshot() []Node {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.list)
}
func (f *fakeSource) Changes() <-chan struct{} { return f.ch }
func (f *fakeSource) set(list ...Node) {
	f.mu.Lock()
	f.list = list
	f.mu.Unlock()
	select {
	case f.ch <- struct{}{}:
	default:
	}
}

func TestSyncMergesSources(t *testing.T) {
	t.Parallel()
	st := setup(t)
	ctx := context.Background()
	gossip := &fakeSource{name: store.SourceGossip, list: []Node{
		{ClusterID: "db", ID: "db-1", Addr: "gossip-addr:7420"}, // also static: static wins
		{ClusterID: "db", ID: "db-3", Addr: "10.0.0.3:7420"},
	}}
	if _, err := Sync(ctx, st, nil, Static(specs), gossip); err != nil {
		t.Fatal(err)
	}
	got := nodes(t, st)
	if got["db/db-1"].Addr != "10.0.0.1:7420" || got["db/db-1"].Source != store.SourceStatic {
		t.Fatalf("the first source does not win: %+v", got["db/db-1"])
	}
	if got["db/db-3"].Source != store.SourceGossip {
		t.Fatalf("gossip node: %+v", got["db/db-3"])
	}
	// A sync of the static source alone leaves gossip nodes alone.
	res, err := Sync(ctx, st, nil, Static(specs))
	if err != nil || !res.Empty() {
		t.Fatalf("static-only sync: %+v, %v", res, err)
	}
	if _, ok := nodes(t, st)["db/db-3"]; !ok {
		t.Fatal("a static sync removed a gossip node")
	}
}

func TestWatchSyncsAndNudgesOnChange(t *testing.T) {
	t.Parallel()
	st := setup(t)
	ctx, cancel := context.WithCancel(context.Background())
	gossip := &fakeSource{name: store.SourceGossip, ch: make(chan struct{}, 1)}
	nudged := make(chan string, 10)
	done := make(chan error, 1)
	go func() {
		done <- Watch(ctx, st, nil, func(c string) { nudged <- c }, nil, Static(specs), gossip)
	}()
	gossip.set(Node{ClusterID: "web", ID: "web-9", Addr: "10.0.1.9:7420"})
	select {
	case c := <-nudged:
		// The first sync also adds the static nodes: db or web comes first.
		if c != "db" && c != "web" {
			t.Fatalf("nudged %q", c)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no nudge after a source change")
	}
	if _, ok := nodes(t, st)["web/web-9"]; !ok {
		t.Fatal("the changed source was not synced")
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Watch did not return when its context ended")
	}
}

// A node removed from the static configuration is handled like a forgotten
// one: its open actions end ("node forgotten"), so nothing waits for it
// forever; its finished ones stay.
func TestANodeRemovedFromTheConfigurationEndsItsOpenActions(t *testing.T) {
	t.Parallel()
	st := setup(t)
	ctx := context.Background()
	if _, err := Sync(ctx, st, nil, Static(specs)); err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	states := map[string]action.State{"a-running": action.Running, "a-scheduled": action.PendingSchedule, "a-done": action.Done}
	err := st.Update(ctx, func(tx store.Tx) error {
		for id, s := range states {
			if err := tx.InsertAction(ctx, &store.Record{Action: action.Action{ID: id, ClusterID: "db", NodeID: "db-2",
				Kind: "a/b", State: s, Origin: action.OriginCore, CreatedTS: t0}}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	removed := []ClusterSpec{{ID: "db", Nodes: []NodeSpec{specs[0].Nodes[0]}}, specs[1], specs[2]}
	if _, err := Sync(ctx, st, nil, Static(removed)); err != nil {
		t.Fatal(err)
	}
	want := map[string]action.State{"a-running": action.Lost, "a-scheduled": action.Lost, "a-done": action.Done}
	err = st.Read(ctx, func(r store.Reader) error {
		for id, s := range want {
			rec, err := r.Action(ctx, id)
			if err != nil {
				return err
			}
			if rec.State != s || (s == action.Lost && rec.StateReason != actions.ReasonNodeForgotten) {
				t.Errorf("%s is %s (%s), want %s", id, rec.State, rec.StateReason, s)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := nodes(t, st)["db/db-2"]; ok {
		t.Fatal("the removed node is still stored")
	}
}

// TestSyncLabels: a new node takes the static labels with the agent's own
// (from gossip) laid over them key by key; a node not contacted yet follows
// its sources; a contacted one keeps what the orchestrator wrote.
func TestSyncLabels(t *testing.T) {
	t.Parallel()
	st := setup(t)
	ctx := context.Background()
	spec := []ClusterSpec{{ID: "db", Nodes: []NodeSpec{
		{ID: "db-1", Addr: "10.0.0.1:7420", Labels: map[string]string{"role": "replica", "dc": "a"}},
		{ID: "db-2", Addr: "10.0.0.2:7420", Labels: map[string]string{"role": "primary"}},
	}}}
	pool := &fakeSource{name: store.SourceGossip, list: []Node{
		{ClusterID: "db", ID: "db-1", Addr: "10.0.0.1:7420", Labels: map[string]string{"role": "primary", "zone": "eu-1"}},
		{ClusterID: "db", ID: "db-3", Addr: "10.0.0.3:7420", Labels: map[string]string{"role": "replica"}},
	}}
	if _, err := Sync(ctx, st, nil, Static(spec), pool); err != nil {
		t.Fatal(err)
	}
	got := nodes(t, st)
	for id, want := range map[string]map[string]string{
		"db/db-1": {"role": "primary", "dc": "a", "zone": "eu-1"}, // the agent's role wins
		"db/db-2": {"role": "primary"},
		"db/db-3": {"role": "replica"},
	} {
		if !maps.Equal(got[id].Labels, want) {
			t.Errorf("%s labels %v, want %v", id, got[id].Labels, want)
		}
	}
	if res, err := Sync(ctx, st, nil, Static(spec), pool); err != nil || !res.Empty() {
		t.Fatalf("a second sync changed %+v, %v", res, err)
	}

	// db-2 was contacted (the orchestrator wrote its store id and labels);
	// db-3 was not. The pool now announces other labels for both.
	err := st.Update(ctx, func(tx store.Tx) error {
		n, err := tx.Node(ctx, "db", "db-2")
		if err != nil {
			return err
		}
		n.StoreID, n.Labels = "sid", map[string]string{"role": "primary", "from": "info"}
		return tx.PutNode(ctx, n)
	})
	if err != nil {
		t.Fatal(err)
	}
	pool.set(
		Node{ClusterID: "db", ID: "db-1", Addr: "10.0.0.1:7420", Labels: map[string]string{"role": "primary", "zone": "eu-1"}},
		Node{ClusterID: "db", ID: "db-2", Addr: "10.0.0.2:7420", Labels: map[string]string{"role": "other"}},
		Node{ClusterID: "db", ID: "db-3", Addr: "10.0.0.3:7420", Labels: map[string]string{"role": "primary"}},
	)
	res, err := Sync(ctx, st, nil, Static(spec), pool)
	if err != nil || len(res.Relabelled) != 1 || res.Relabelled[0].ID != "db-3" {
		t.Fatalf("result %+v, %v", res, err)
	}
	got = nodes(t, st)
	if !maps.Equal(got["db/db-3"].Labels, map[string]string{"role": "primary"}) {
		t.Errorf("db-3 labels %v", got["db/db-3"].Labels)
	}
	if !maps.Equal(got["db/db-2"].Labels, map[string]string{"role": "primary", "from": "info"}) {
		t.Errorf("a contacted node's labels were rewritten by discovery: %v", got["db/db-2"].Labels)
	}
}

// TestWatcherFollowsStartStop: NewWatcher starts nothing; Stop of a watcher
// never started returns at once; a started one syncs on a change and leaves
// no goroutine once stopped. Not parallel: it looks at every goroutine.
func TestWatcherFollowsStartStop(t *testing.T) {
	st := setup(t)
	src := &fakeSource{name: store.SourceGossip, ch: make(chan struct{}, 1)}
	nudged := make(chan string, 10)
	never := NewWatcher(st, nil, func(c string) { nudged <- c }, nil, src)
	testgoroutine.None(t, "core/discovery.NewWatcher")
	testgoroutine.None(t, "core/discovery.Watch")
	testgoroutine.Returns(t, 5*time.Second, "Stop before Start", never.Stop)

	w := NewWatcher(st, nil, func(c string) { nudged <- c }, nil, src)
	if err := w.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	src.set(Node{ClusterID: "web", ID: "web-9", Addr: "10.0.1.9:7420"})
	select {
	case c := <-nudged:
		if c != "web" {
			t.Fatalf("nudged %q, want web", c)
		}
	case <-time.After(testwait.Timeout):
		t.Fatal("no nudge after a source change")
	}
	w.Stop()
	testgoroutine.None(t, "core/discovery.NewWatcher")
	testgoroutine.None(t, "core/discovery.Watch")
}

// TestAJoiningNodeHoldsItsJoinTokensLabels: a node the gossip pool
// announces for the first time, enrolled with a join token that carries
// labels (its newest certificate records them), holds them as labels the
// core holds for it, over those its agent announces; a node enrolled with
// a plain token holds none, whatever its agent says.
func TestAJoiningNodeHoldsItsJoinTokensLabels(t *testing.T) {
	t.Parallel()
	st := setup(t)
	ctx := context.Background()
	t0 := time.Now().UTC().Truncate(time.Second)
	cert := func(serial, node string, issued time.Time, l map[string]string) store.AgentCert {
		return store.AgentCert{Serial: serial, ClusterID: "web", NodeID: node, NotBefore: issued, NotAfter: issued.Add(time.Hour),
			IssuedTS: issued, IssuedBy: "join", Labels: l}
	}
	err := st.Update(ctx, func(tx store.Tx) error {
		for _, c := range []store.AgentCert{
			cert("01", "web-5", t0, map[string]string{"role": "db"}),
			cert("02", "web-5", t0.Add(time.Minute), map[string]string{"role": "web", "zone": "a"}),
			cert("03", "web-6", t0, nil),
			cert("04", "web-7", t0, map[string]string{"role": "web"}),
		} {
			if err := tx.InsertAgentCert(ctx, &c); err != nil {
				return err
			}
		}
		// web-7's certificate was revoked (not renewed): its token's
		// labels went with it.
		_, err := tx.RevokeAgentCerts(ctx, "web", "web-7", t0.Add(time.Minute), "compromised", "admin")
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	pool := &fakeSource{name: store.SourceGossip, list: []Node{
		{ClusterID: "web", ID: "web-5", Addr: "10.0.0.5:7420", Labels: map[string]string{"role": "cache", "os": "linux"}},
		{ClusterID: "web", ID: "web-6", Addr: "10.0.0.6:7420", Labels: map[string]string{"role": "web"}},
		{ClusterID: "web", ID: "web-7", Addr: "10.0.0.7:7420", Labels: map[string]string{"os": "linux"}},
	}}
	if _, err := Sync(ctx, st, nil, pool); err != nil {
		t.Fatal(err)
	}
	got := nodes(t, st)
	if n := got["web/web-5"]; !maps.Equal(n.CoreLabels, map[string]string{"role": "web", "zone": "a"}) ||
		!maps.Equal(n.Labels, map[string]string{"role": "web", "zone": "a", "os": "linux"}) {
		t.Errorf("web-5: core labels %v, labels %v", n.CoreLabels, n.Labels)
	}
	if n := got["web/web-6"]; n.CoreLabels != nil || !maps.Equal(n.Labels, map[string]string{"role": "web"}) {
		t.Errorf("web-6: core labels %v, labels %v", n.CoreLabels, n.Labels)
	}
	if n := got["web/web-7"]; n.CoreLabels != nil || !maps.Equal(n.Labels, map[string]string{"os": "linux"}) {
		t.Errorf("web-7, whose certificate was revoked: core labels %v, labels %v", n.CoreLabels, n.Labels)
	}
	if res, err := Sync(ctx, st, nil, pool); err != nil || !res.Empty() {
		t.Fatalf("a second sync changed %+v, %v", res, err)
	}
}
