package discovery

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

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
		}, []Node{{ClusterID: "db", ID: "db-1", Addr: "10.0.0.1:7420", Source: store.SourceGossip, Down: store.CauseFailed}}},
		{"leave", []gossip.Event{
			agentEvent(gossip.KindJoin, "m1", "db", "db-1", "10.0.0.1:7420"),
			agentEvent(gossip.KindLeave, "m1", "db", "db-1", "10.0.0.1:7420"),
		}, []Node{{ClusterID: "db", ID: "db-1", Addr: "10.0.0.1:7420", Source: store.SourceGossip, Down: store.CauseLeft}}},
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
			Down: store.CauseDuplicate, Detail: "10.0.0.1:7420 and 10.0.0.2:7420"}}},
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
	if n := node("web-2"); n.Status != store.NodeDown || n.StatusReason != store.ReasonFailed || n.DownCause != store.CauseFailed || n.Cursor != 7 {
		t.Fatalf("failed node %+v", n)
	}
	if n := node("web-3"); n.Status != store.NodeDown || n.StatusReason != store.ReasonLeft || n.DownCause != store.CauseLeft {
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
	if n := node("web-2"); n.Status != store.NodeDown || n.StatusReason != store.ReasonDuplicate || n.DownCause != store.CauseDuplicate || n.Addr != "10.0.1.2:7420" {
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

// A key holder cannot aim the core at its own host's services (issue 9,
// item 6): agents announcing loopback, link-local or unspecified addresses
// are ignored, unless the core is on loopback itself (AllowLoopback).
func TestGossipRefusesLoopbackAddrs(t *testing.T) {
	t.Parallel()
	internal := []string{"127.0.0.1:18080", "127.9.9.9:7420", "[::1]:7420", "169.254.169.254:80", "[fe80::1]:7420",
		"0.0.0.0:7420", "[::]:7420", "localhost:7420", "LOCALHOST.:7420", "db.localhost:7420"}
	g := NewGossipSource(nil)
	for i, api := range internal {
		g.Handle(agentEvent(gossip.KindJoin, fmt.Sprintf("m%d", i), "db", fmt.Sprintf("db-%d", i), api))
	}
	g.Handle(agentEvent(gossip.KindJoin, "ok", "db", "ok", "10.0.0.1:7420"))
	want := []Node{{ClusterID: "db", ID: "ok", Addr: "10.0.0.1:7420", Source: store.SourceGossip}}
	if got := g.Snapshot(); !reflect.DeepEqual(got, want) {
		t.Fatalf("Snapshot = %+v, want only %+v", got, want)
	}
	// An announcement that moves a node to loopback is ignored too: the
	// node keeps the address it had.
	g.Handle(agentEvent(gossip.KindUpdate, "ok", "db", "ok", "127.0.0.1:18080"))
	if got := g.Snapshot(); !reflect.DeepEqual(got, want) {
		t.Fatalf("after a move to loopback, Snapshot = %+v, want %+v", got, want)
	}

	open := NewGossipSource(nil, AllowLoopback())
	for i, api := range internal {
		open.Handle(agentEvent(gossip.KindJoin, fmt.Sprintf("m%d", i), "db", fmt.Sprintf("db-%d", i), api))
	}
	if got := open.Snapshot(); len(got) != len(internal) {
		t.Fatalf("with AllowLoopback, Snapshot = %+v, want %d nodes", got, len(internal))
	}
}

// With agents_tls, when two members claim one node, the address whose
// agent proves the node's identity wins; the other claim is a
// node.claim_refused event, reported once, and the node is not DOWN (issue
// 9, item 7).
func TestGossipClaimVerifiedAddressWins(t *testing.T) {
	t.Parallel()
	st := setup(t)
	ctx := context.Background()
	var mu sync.Mutex
	asked := map[string]int{}
	g := NewGossipSource(nil, VerifyClaims(func(_ context.Context, _, node, addr string) error {
		mu.Lock()
		defer mu.Unlock()
		asked[addr]++
		switch addr {
		case "10.0.1.2:7420":
			return nil // the real web-2
		case "10.6.6.6:7420":
			return &ClaimError{Reason: "identity mismatch: the peer's certificate is no muster identity, want spiffe://muster/agent/" + node}
		}
		return errors.New("dial tcp " + addr + ": connection refused")
	}))
	resync := func() Result {
		t.Helper()
		res, err := Sync(ctx, st, nil, g)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	g.Handle(agentEvent(gossip.KindJoin, "real", "web", "web-2", "10.0.1.2:7420"))
	resync()
	// The rogue claims web-2 from its own address, before or after the real one.
	g.Handle(agentEvent(gossip.KindJoin, "rogue", "web", "web-2", "10.6.6.6:7420"))
	res := resync()
	if len(res.Down)+len(res.Moved) != 0 || len(res.Refused) != 1 || res.Refused[0].Addr != "10.6.6.6:7420" {
		t.Fatalf("Sync = %+v, want one refused claim and no change", res)
	}
	if n := nodes(t, st)["web/web-2"]; n.Status == store.NodeDown || n.Addr != "10.0.1.2:7420" {
		t.Fatalf("web-2 = %+v, want it at the real address and not DOWN", n)
	}
	if res := resync(); !res.Empty() {
		t.Fatalf("a second sync = %+v, want nothing (the refusal is reported once)", res)
	}
	ev := eventTypes(t, st)
	if want := []string{"node.joined web/web-2", "node.claim_refused web/web-2"}; !slices.Equal(ev, want) {
		t.Fatalf("events %v, want %v", ev, want)
	}
	mu.Lock()
	if asked["10.0.1.2:7420"] != 1 || asked["10.6.6.6:7420"] != 1 {
		t.Fatalf("verifications %v, want one per claim", asked)
	}
	mu.Unlock()

	// A claim whose address does not answer is neither refused nor
	// verified: the proven address still wins, without an event.
	g.Handle(agentEvent(gossip.KindJoin, "blackhole", "web", "web-2", "10.0.9.2:7420"))
	if res := resync(); !res.Empty() {
		t.Fatalf("an unanswered claim: Sync = %+v, want nothing", res)
	}
	// With none of two addresses proven, the node is a duplicate; an
	// unanswered address is tried again only after retryUnanswered, so
	// that it does not cost every sync a timeout.
	now := time.Now()
	g.now = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	g.Handle(agentEvent(gossip.KindJoin, "a", "web", "web-3", "10.0.1.3:7420"))
	g.Handle(agentEvent(gossip.KindJoin, "b", "web", "web-3", "10.0.9.3:7420"))
	resync()
	if n := nodes(t, st)["web/web-3"]; n.Status != store.NodeDown || n.StatusReason != store.ReasonDuplicate {
		t.Fatalf("web-3 = %+v, want DOWN duplicate", n)
	}
	g.Handle(agentEvent(gossip.KindUpdate, "b", "web", "web-3", "10.9.9.9:7420"))
	resync()
	verified := func(addr string) int { mu.Lock(); defer mu.Unlock(); return asked[addr] }
	if n := verified("10.0.1.3:7420"); n != 1 {
		t.Fatalf("an unanswered claim was verified %d times within retryUnanswered, want once", n)
	}
	mu.Lock()
	now = now.Add(retryUnanswered + time.Second)
	mu.Unlock()
	resync()
	if n := verified("10.0.1.3:7420"); n != 2 {
		t.Fatalf("an unanswered claim was verified %d times after retryUnanswered, want twice", n)
	}
}

// TestGossipRefusesRevokedNodes: a revoked node's claim is refused (one
// node.claim_refused event) and the node is DOWN "certificate revoked";
// after Recheck with the node enrolled again, its claim stands and it is
// back.
func TestGossipRefusesRevokedNodes(t *testing.T) {
	t.Parallel()
	st := setup(t)
	ctx := context.Background()
	var mu sync.Mutex
	revoked := map[string]string{}
	g := NewGossipSource(nil, RefuseRevoked(func(cluster, node string) (string, bool) {
		mu.Lock()
		defer mu.Unlock()
		r, ok := revoked[cluster+"/"+node]
		return r, ok
	}))
	resync := func() Result {
		t.Helper()
		res, err := Sync(ctx, st, nil, g)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	g.Handle(agentEvent(gossip.KindJoin, "m1", "web", "web-1", "10.0.1.1:7420"))
	resync()
	if n := nodes(t, st)["web/web-1"]; n.Status == store.NodeDown {
		t.Fatalf("web-1 = %+v before any revocation", n)
	}
	mu.Lock()
	revoked["web/web-1"] = "stolen"
	mu.Unlock()
	g.Recheck()
	<-g.Changes() // Recheck asks for a sync
	res := resync()
	if len(res.Refused) != 1 || res.Refused[0].Member != "m1" {
		t.Fatalf("Sync = %+v, want m1's claim refused", res)
	}
	if n := nodes(t, st)["web/web-1"]; n.Status != store.NodeDown || n.StatusReason != store.ReasonRevoked {
		t.Fatalf("web-1 = %+v, want DOWN %q", n, store.ReasonRevoked)
	}
	if res := resync(); len(res.Refused) != 0 {
		t.Fatalf("the refusal was reported again: %+v", res)
	}
	mu.Lock()
	delete(revoked, "web/web-1")
	mu.Unlock()
	g.Recheck()
	resync()
	if n := nodes(t, st)["web/web-1"]; n.Status == store.NodeDown {
		t.Fatalf("web-1 = %+v after it enrolled again, want it back", n)
	}
}

// Issue 33, items 3 and 4: a gossip node forgotten while its member is
// gone (reaped, replaced, forgotten) does not come back at the next sync;
// it comes back when a member announces it alive again. The labels the
// core holds for a node go over those gossip announces.
func TestSyncDoesNotBringBackAForgottenGoneNode(t *testing.T) {
	t.Parallel()
	st := setup(t)
	ctx := context.Background()
	g := NewGossipSource(nil)
	sync := func() Result {
		t.Helper()
		res, err := Sync(ctx, st, nil, Static(specs), g)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	sync()
	g.Handle(agentEvent(gossip.KindJoin, "a", "web", "web-2", "10.0.1.2:7420"))
	sync()
	g.Handle(agentEvent(gossip.KindFail, "a", "web", "web-2", "10.0.1.2:7420"))
	sync()
	if err := st.Update(ctx, func(tx store.Tx) error { return tx.DeleteNode(ctx, "web", "web-2") }); err != nil {
		t.Fatal(err)
	}
	g.Handle(agentEvent(gossip.KindJoin, "b", "web", "web-3", "10.0.1.3:7420")) // another change
	if res := sync(); len(res.Joined) != 1 || res.Joined[0].ID != "web-3" {
		t.Fatalf("sync after the forget: %+v", res)
	}
	if _, ok := nodes(t, st)["web/web-2"]; ok {
		t.Fatal("the forgotten gone node came back")
	}
	g.Handle(agentEvent(gossip.KindJoin, "a", "web", "web-2", "10.0.1.2:7420"))
	if res := sync(); len(res.Joined) != 1 || res.Joined[0].ID != "web-2" {
		t.Fatalf("sync after the return: %+v", res)
	}

	// web-3, never contacted, holds role=db from a replace: a relabel by
	// gossip keeps it.
	if err := st.Update(ctx, func(tx store.Tx) error {
		n, err := tx.Node(ctx, "web", "web-3")
		if err != nil {
			return err
		}
		n.CoreLabels, n.Labels = map[string]string{"role": "db"}, map[string]string{"role": "db"}
		return tx.PutNode(ctx, n)
	}); err != nil {
		t.Fatal(err)
	}
	ev := agentEvent(gossip.KindUpdate, "b", "web", "web-3", "10.0.1.3:7420")
	ev.Meta.Labels = map[string]string{"role": "web", "zone": "a"}
	g.Handle(ev)
	sync()
	if got := nodes(t, st)["web/web-3"].Labels; got["role"] != "db" || got["zone"] != "a" {
		t.Fatalf("web-3 labels %v", got)
	}
}
