package discovery

import (
	"context"
	"reflect"
	"slices"
	"testing"

	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/gossip"
)

func agentEvent(kind gossip.Kind, name, cluster, node, api string) gossip.Event {
	return gossip.Event{Kind: kind, Name: name, Addr: "127.0.0.1:7946",
		Meta: gossip.Meta{V: 1, Role: gossip.RoleAgent, Cluster: cluster, Node: node, API: api}}
}

func TestGossipSnapshot(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		events []gossip.Event
		want   []Node
	}{
		{"join", []gossip.Event{agentEvent(gossip.KindJoin, "m1", "db", "db-1", "10.0.0.1:7420")},
			[]Node{{ClusterID: "db", ID: "db-1", Addr: "10.0.0.1:7420", Source: store.SourceGossip}}},
		{"fail", []gossip.Event{
			agentEvent(gossip.KindJoin, "m1", "db", "db-1", "10.0.0.1:7420"),
			agentEvent(gossip.KindFail, "m1", "db", "db-1", "10.0.0.1:7420"),
		}, []Node{{ClusterID: "db", ID: "db-1", Addr: "10.0.0.1:7420", Source: store.SourceGossip, Down: store.ReasonFailed}}},
		{"leave", []gossip.Event{
			agentEvent(gossip.KindJoin, "m1", "db", "db-1", "10.0.0.1:7420"),
			agentEvent(gossip.KindLeave, "m1", "db", "db-1", "10.0.0.1:7420"),
		}, []Node{{ClusterID: "db", ID: "db-1", Addr: "10.0.0.1:7420", Source: store.SourceGossip, Down: store.ReasonLeft}}},
		{"rejoin", []gossip.Event{
			agentEvent(gossip.KindJoin, "m1", "db", "db-1", "10.0.0.1:7420"),
			agentEvent(gossip.KindFail, "m1", "db", "db-1", "10.0.0.1:7420"),
			agentEvent(gossip.KindJoin, "m1", "db", "db-1", "10.0.0.1:7420"),
		}, []Node{{ClusterID: "db", ID: "db-1", Addr: "10.0.0.1:7420", Source: store.SourceGossip}}},
		{"restarted elsewhere under another name", []gossip.Event{
			agentEvent(gossip.KindJoin, "m1", "db", "db-1", "10.0.0.1:7420"),
			agentEvent(gossip.KindFail, "m1", "db", "db-1", "10.0.0.1:7420"),
			agentEvent(gossip.KindJoin, "m2", "db", "db-1", "10.0.0.9:7420"),
		}, []Node{{ClusterID: "db", ID: "db-1", Addr: "10.0.0.9:7420", Source: store.SourceGossip}}},
		{"duplicate keeps the first address", []gossip.Event{
			agentEvent(gossip.KindJoin, "m1", "db", "db-1", "10.0.0.1:7420"),
			agentEvent(gossip.KindJoin, "m2", "db", "db-1", "10.0.0.2:7420"),
		}, []Node{{ClusterID: "db", ID: "db-1", Addr: "10.0.0.1:7420", Source: store.SourceGossip,
			Down: store.ReasonDuplicate, Detail: "10.0.0.1:7420 and 10.0.0.2:7420"}}},
		{"duplicate resolved when one fails", []gossip.Event{
			agentEvent(gossip.KindJoin, "m1", "db", "db-1", "10.0.0.1:7420"),
			agentEvent(gossip.KindJoin, "m2", "db", "db-1", "10.0.0.2:7420"),
			agentEvent(gossip.KindFail, "m1", "db", "db-1", "10.0.0.1:7420"),
		}, []Node{{ClusterID: "db", ID: "db-1", Addr: "10.0.0.2:7420", Source: store.SourceGossip}}},
		{"same node, same address, two names: not a duplicate", []gossip.Event{
			agentEvent(gossip.KindJoin, "m1", "db", "db-1", "10.0.0.1:7420"),
			agentEvent(gossip.KindJoin, "m2", "db", "db-1", "10.0.0.1:7420"),
		}, []Node{{ClusterID: "db", ID: "db-1", Addr: "10.0.0.1:7420", Source: store.SourceGossip}}},
		{"ignored: cores, bad names, no api, unknown members leaving", []gossip.Event{
			{Kind: gossip.KindJoin, Name: "core", Meta: gossip.Meta{V: 1, Role: gossip.RoleCore, API: "127.0.0.1:7410"}},
			agentEvent(gossip.KindJoin, "bad", "db", "db 1", "10.0.0.1:7420"),
			agentEvent(gossip.KindJoin, "noapi", "db", "db-2", ""),
			agentEvent(gossip.KindFail, "stranger", "db", "db-3", "10.0.0.3:7420"),
		}, []Node{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			g := NewGossipSource(nil)
			for _, ev := range tc.events {
				g.Handle(ev)
			}
			if got := g.Snapshot(); !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("Snapshot =\n%+v\nwant\n%+v", got, tc.want)
			}
		})
	}
}

func TestGossipSourceSignalsChanges(t *testing.T) {
	t.Parallel()
	g := NewGossipSource(nil)
	if !g.Partial() || g.Name() != store.SourceGossip {
		t.Fatal("the gossip source is not partial or misnamed")
	}
	g.Handle(agentEvent(gossip.KindJoin, "m1", "db", "db-1", "10.0.0.1:7420"))
	g.Handle(agentEvent(gossip.KindFail, "m1", "db", "db-1", "10.0.0.1:7420"))
	select {
	case <-g.Changes():
	default:
		t.Fatal("no change signalled")
	}
	select {
	case <-g.Changes():
		t.Fatal("changes are not coalesced")
	default:
	}
}

func TestSyncFollowsTheGossipPool(t *testing.T) {
	t.Parallel()
	st := setup(t)
	ctx := context.Background()
	g := NewGossipSource(nil)
	sync := func(want Result) {
		t.Helper()
		res, err := Sync(ctx, st, nil, Static(specs), g)
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Joined) != len(want.Joined) || len(res.Left) != len(want.Left) || len(res.Down) != len(want.Down) ||
			len(res.Back) != len(want.Back) || len(res.Moved) != len(want.Moved) {
			t.Fatalf("Sync = %+v, want the shape of %+v", res, want)
		}
	}
	one := []Node{{}}
	node := func(id string) store.Node { t.Helper(); return nodes(t, st)["web/"+id] }

	sync(Result{Joined: make([]Node, 3)}) // the static nodes
	g.Handle(agentEvent(gossip.KindJoin, "a", "web", "web-2", "10.0.1.2:7420"))
	g.Handle(agentEvent(gossip.KindJoin, "b", "web", "web-3", "10.0.1.3:7420"))
	sync(Result{Joined: make([]Node, 2)})
	if n := node("web-2"); n.Status != store.NodeUnknown || n.Source != store.SourceGossip || n.Addr != "10.0.1.2:7420" {
		t.Fatalf("joined node %+v", n)
	}
	// The orchestrator finds them UP.
	err := st.Update(ctx, func(tx store.Tx) error {
		for _, id := range []string{"web-2", "web-3"} {
			n, err := tx.Node(ctx, "web", id)
			if err != nil {
				return err
			}
			n.Status, n.Cursor = store.NodeUp, 7
			if err := tx.PutNode(ctx, n); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}

	g.Handle(agentEvent(gossip.KindFail, "a", "web", "web-2", "10.0.1.2:7420"))
	g.Handle(agentEvent(gossip.KindLeave, "b", "web", "web-3", "10.0.1.3:7420"))
	sync(Result{Down: make([]Node, 2)})
	if n := node("web-2"); n.Status != store.NodeDown || n.StatusReason != store.ReasonFailed || n.Cursor != 7 {
		t.Fatalf("failed node %+v", n)
	}
	if n := node("web-3"); n.Status != store.NodeDown || n.StatusReason != store.ReasonLeft {
		t.Fatalf("left node %+v", n)
	}
	rows := st.RowsWritten()
	sync(Result{})
	if st.RowsWritten() != rows {
		t.Fatal("a sync with nothing new wrote rows")
	}

	g.Handle(agentEvent(gossip.KindJoin, "a", "web", "web-2", "10.0.1.2:7420"))
	sync(Result{Back: one})
	if n := node("web-2"); n.Status != store.NodeUnknown || n.StatusReason != "" || n.Cursor != 7 {
		t.Fatalf("rejoined node %+v", n)
	}

	// Another process announces web-2 from elsewhere.
	g.Handle(agentEvent(gossip.KindJoin, "impostor", "web", "web-2", "10.6.6.6:7420"))
	sync(Result{Down: one})
	if n := node("web-2"); n.Status != store.NodeDown || n.StatusReason != store.ReasonDuplicate || n.Addr != "10.0.1.2:7420" {
		t.Fatalf("duplicate node %+v", n)
	}

	// A core restart: the pool has not heard of anyone yet. Nothing is deleted.
	res, err := Sync(ctx, st, nil, Static(specs), NewGossipSource(nil))
	if err != nil || !res.Empty() {
		t.Fatalf("sync with an empty pool: %+v, %v", res, err)
	}
	if len(nodes(t, st)) != 5 {
		t.Fatalf("nodes %+v", nodes(t, st))
	}

	want := []string{
		"node.joined web/web-2", "node.joined web/web-3",
		"node.down web/web-2", "node.left web/web-3",
		"node.joined web/web-2",
		"node.down web/web-2",
	}
	if ev := eventTypes(t, st); !slices.Equal(ev[3:], want) {
		t.Fatalf("events %v", ev[3:])
	}
}
