package nodes_test

import (
	"context"
	"errors"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/musterhq/muster/core/actions"
	"github.com/musterhq/muster/core/nodes"
	"github.com/musterhq/muster/core/store"
)

// Issue 33, item 4: a replace moves the old node's declared place and
// labels to the new one, forgets the old one (its actions stay under its
// id) with one node.replaced event naming who; each refusal changes
// nothing.
func TestReplaceMovesThePlaceAndTheLabels(t *testing.T) {
	t.Parallel()
	e := setup(t)
	alice := actions.Actor{Name: "alice", Addr: "10.0.0.1"}
	e.update(func(ctx context.Context, tx store.Tx) error {
		return nodes.Save(ctx, tx, &store.Node{ClusterID: "c", ID: "n4", Addr: "127.0.0.1:4", Source: store.SourceGossip,
			Status: store.NodeUp, Labels: map[string]string{"role": "spare", "disk": "ssd"}})
	})
	e.update(func(ctx context.Context, tx store.Tx) error {
		_, _, err := nodes.Update(ctx, tx, "c", "n3", func(n *store.Node) { n.Labels = map[string]string{"role": "db", "zone": "a"} })
		return err
	})
	replace := func(old, nw string, declared bool) (*nodes.Replacement, error) {
		var rep *nodes.Replacement
		err := e.st.Update(context.Background(), func(tx store.Tx) error {
			var err error
			rep, err = nodes.Replace(context.Background(), tx, "c", old, nw, declared, alice)
			return err
		})
		return rep, err
	}
	for _, tc := range []struct {
		name, old, nw string
		declared      bool
		want          error
	}{
		{"itself", "n3", "n3", false, nodes.ErrReplaceSelf},
		{"an unknown new node", "n3", "n9", false, store.ErrNotFound},
		{"an unknown old node", "n8", "n4", false, store.ErrNotFound},
		{"a node of the configuration", "n1", "n4", false, nodes.ErrConfigured},
	} {
		if _, err := replace(tc.old, tc.nw, tc.declared); !errors.Is(err, tc.want) {
			t.Fatalf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
	if got := e.events(store.EventNodeReplaced); len(got) != 0 {
		t.Fatalf("refused replaces recorded %v", got)
	}

	rep, err := replace("n3", "n4", true)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Place != "n3" || !rep.Forgotten {
		t.Fatalf("replacement %+v", rep)
	}
	n4 := e.node("n4")
	want := map[string]string{"role": "db", "zone": "a", "disk": "ssd"}
	if n4.Replaces != "n3" || !maps.Equal(n4.Labels, want) || !maps.Equal(n4.CoreLabels, map[string]string{"role": "db", "zone": "a"}) {
		t.Fatalf("n4 after the replace: %+v", n4)
	}
	err = e.st.Read(context.Background(), func(r store.Reader) error {
		_, err := r.Node(context.Background(), "c", "n3")
		return err
	})
	if !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("n3 after the replace: %v", err)
	}
	evs := e.events(store.EventNodeReplaced)
	if len(evs) != 1 || evs[0].Actor != "alice" || evs[0].NodeID != "n3" || evs[0].Data["with"] != "n4" {
		t.Fatalf("events %+v", evs)
	}

	// n4 holds n3's place: n2 cannot take it (n3 is declared, never seen
	// now), and n4 cannot take n2's.
	if _, err := replace("n3", "n2", true); !errors.Is(err, nodes.ErrReplacing) {
		t.Fatalf("a taken place: %v", err)
	}
	if _, err := replace("n2", "n4", false); !errors.Is(err, nodes.ErrReplacing) {
		t.Fatalf("a node already replacing: %v", err)
	}
	// Replacing n4 in turn hands on n3's place.
	e.update(func(ctx context.Context, tx store.Tx) error {
		return nodes.Save(ctx, tx, &store.Node{ClusterID: "c", ID: "n5", Source: store.SourceGossip, Status: store.NodeUp})
	})
	if rep, err := replace("n4", "n5", false); err != nil || rep.Place != "n3" || e.node("n5").Replaces != "n3" {
		t.Fatalf("replace n4 with n5: %+v, %v", rep, err)
	}
}

// A node's labels: configured, the agent's own over them, the core's
// over both.
func TestLabelsLayTheCoresOverTheAgents(t *testing.T) {
	t.Parallel()
	got := nodes.Labels(map[string]string{"a": "static", "b": "static"}, map[string]string{"b": "own", "c": "own"},
		map[string]string{"c": "core"})
	if want := map[string]string{"a": "static", "b": "own", "c": "core"}; !maps.Equal(got, want) {
		t.Fatalf("labels %v, want %v", got, want)
	}
	if nodes.Labels(nil, nil, nil) != nil {
		t.Fatal("no labels is not nil")
	}
}

// A declared place held by a replacement is not missing, and the
// replacement is not unexpected.
func TestMembershipCountsTheReplacement(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	seen := now.Add(-time.Hour)
	m := nodes.Membership{"c": {Nodes: []string{"n1", "n3"}}}
	all := []store.Node{
		{ClusterID: "c", ID: "n1", Status: store.NodeUp, LastContact: &seen},
		{ClusterID: "c", ID: "n4", Status: store.NodeUp, LastContact: &seen, Replaces: "n3"},
	}
	got, _ := m.Of("c", all, now)
	if len(got.Missing) != 0 || len(got.Unexpected) != 0 {
		t.Fatalf("members %+v", got)
	}
	all[1].Status, all[1].UpdatedTS = store.NodeDown, now.Add(-time.Hour)
	got, _ = m.Of("c", all, now)
	if len(got.Missing) != 1 || got.Missing[0].ID != "n3" {
		t.Fatalf("members with the replacement down %+v", got)
	}
}

// Reaping: only DOWN nodes past reap_after, never a static or declared
// one (nor the node holding a declared place), never below a count's
// floor, oldest first; 0 reaps nothing.
func TestReapableKeepsDeclaredNodesAndTheFloor(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	after := time.Hour
	down := func(id string, ago time.Duration, lbl map[string]string) store.Node {
		return store.Node{ClusterID: "c", ID: id, Source: store.SourceGossip, Status: store.NodeDown, UpdatedTS: now.Add(-ago), Labels: lbl}
	}
	web := map[string]string{"role": "web"}
	all := []store.Node{
		down("old", 2*time.Hour, nil),
		down("recent", 59*time.Minute, nil),
		{ClusterID: "c", ID: "static", Source: store.SourceStatic, Status: store.NodeDown, UpdatedTS: now.Add(-5 * time.Hour)},
		{ClusterID: "c", ID: "up", Source: store.SourceGossip, Status: store.NodeUp, UpdatedTS: now.Add(-5 * time.Hour)},
		down("declared", 3*time.Hour, nil),
		{ClusterID: "c", ID: "taker", Source: store.SourceGossip, Status: store.NodeDown, UpdatedTS: now.Add(-3 * time.Hour), Replaces: "declared2"},
		{ClusterID: "other", ID: "elsewhere", Source: store.SourceGossip, Status: store.NodeDown, UpdatedTS: now.Add(-5 * time.Hour)},
	}
	for _, tc := range []struct {
		name  string
		m     nodes.Membership
		after time.Duration
		want  []string
	}{
		{"nothing declared", nodes.Membership{}, after, []string{"declared", "taker", "old"}},
		{"declared by id", nodes.Membership{"c": {Nodes: []string{"declared", "declared2"}}}, after, []string{"old"}},
		{"off", nodes.Membership{}, 0, nil},
	} {
		got := tc.m.Reapable("c", all, tc.after, now)
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: reapable %v, want %v", tc.name, got, tc.want)
		}
	}
	// A count of 2 role=web nodes: of three web nodes, two DOWN long
	// enough, only the oldest goes.
	fleet := []store.Node{down("w1", 3*time.Hour, web), down("w2", 2*time.Hour, web),
		{ClusterID: "c", ID: "w3", Source: store.SourceGossip, Status: store.NodeUp, Labels: web}, down("db", 2*time.Hour, nil)}
	got := nodes.Membership{"c": {Count: 2, Selector: web}}.Reapable("c", fleet, after, now)
	if want := []string{"w1", "db"}; !slices.Equal(got, want) {
		t.Fatalf("with a floor: reapable %v, want %v", got, want)
	}
}

// Reap forgets the node with a node.reaped event; its actions stay.
func TestReapForgetsWithAnEvent(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.update(func(ctx context.Context, tx store.Tx) error { return nodes.Reap(ctx, tx, "c", "n3", time.Hour) })
	evs := e.events(store.EventNodeReaped)
	if len(evs) != 1 || evs[0].NodeID != "n3" || evs[0].Actor != store.ActorCore {
		t.Fatalf("events %+v", evs)
	}
	err := e.st.Read(context.Background(), func(r store.Reader) error {
		_, err := r.Node(context.Background(), "c", "n3")
		return err
	})
	if !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("n3 after the reap: %v", err)
	}
}
