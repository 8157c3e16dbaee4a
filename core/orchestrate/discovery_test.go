package orchestrate

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/action"
)

// hold sets a node as discovery does when the gossip pool loses it.
func (h *harness) hold(node, cause string) {
	h.t.Helper()
	h.update(func(ctx context.Context, tx store.Tx) error {
		n, err := tx.Node(ctx, cluster, node)
		if err != nil {
			return err
		}
		n.Status, n.StatusReason, n.DownCause = store.NodeDown, store.CauseReason(cause), cause
		return tx.PutNode(ctx, n)
	})
}

func (f *fakeAgent) requestCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.requests)
}

func TestNodesHeldDownByDiscoveryAreNotContacted(t *testing.T) {
	t.Parallel()
	h := setup(t, Config{}, "n1", "n2")
	h.fullSync()
	h.events()
	h.hold("n2", store.CauseFailed)
	id := h.create("n2", nil)
	before := h.agents["n2"].requestCount()
	rep := h.fullSync()
	if got := h.agents["n2"].requestCount(); got != before {
		t.Fatalf("a node held DOWN by discovery got %d requests", got-before)
	}
	if rep.Down != 1 || rep.Pushed != 0 {
		t.Fatalf("report %+v", rep)
	}
	if n := h.node("n2"); n.Status != store.NodeDown || n.StatusReason != store.ReasonFailed {
		t.Fatalf("n2 = %+v", n)
	}
	if c := h.cluster(); c.Status != store.ClusterAlert || c.StatusReason != "down: n2" {
		t.Fatalf("cluster = %+v", c)
	}
	wantState(t, h.record(id), action.PendingSchedule)
	if got := h.events(); !slices.Equal(got, []string{"cluster.alert c1 by core"}) {
		t.Fatalf("events %v", got)
	}
	h.idle()

	// The pool sees it again: discovery makes it UNKNOWN, the full sync contacts it.
	h.update(func(ctx context.Context, tx store.Tx) error {
		n, err := tx.Node(ctx, cluster, "n2")
		if err != nil {
			return err
		}
		n.Status, n.StatusReason, n.DownCause = store.NodeUnknown, "", ""
		return tx.PutNode(ctx, n)
	})
	rep = h.fullSync()
	if n := h.node("n2"); n.Status != store.NodeUp || rep.Pushed != 1 {
		t.Fatalf("n2 = %+v, report %+v", n, rep)
	}
	wantState(t, h.record(id), action.New)
}

func TestDiscoveryDuringAFullSyncHasTheLastWord(t *testing.T) {
	t.Parallel()
	h := setup(t, Config{}, "n1", "n2")
	h.fullSync()
	// n1 leaves while the full sync talks to it.
	h.agents["n1"].set(func(f *fakeAgent) {
		f.infoHook = func(context.Context) { h.hold("n1", store.CauseLeft) }
	})
	h.fullSync()
	if n := h.node("n1"); n.Status != store.NodeDown || n.StatusReason != store.ReasonLeft {
		t.Fatalf("the full sync overwrote discovery: n1 = %+v", n)
	}
	if c := h.cluster(); c.Status != store.ClusterAlert || !strings.Contains(c.StatusReason, "n1") {
		t.Fatalf("cluster = %+v", c)
	}

	// n2 is held DOWN, and comes back while the full sync runs: the full sync leaves
	// it UNKNOWN for the next full sync to contact.
	h.agents["n1"].set(func(f *fakeAgent) { f.infoHook = nil })
	h.hold("n2", store.CauseFailed)
	h.hold("n1", store.CauseFailed)
	h.update(func(ctx context.Context, tx store.Tx) error {
		n, err := tx.Node(ctx, cluster, "n1")
		if err != nil {
			return err
		}
		n.Status, n.StatusReason, n.DownCause = store.NodeUnknown, "", ""
		return tx.PutNode(ctx, n)
	})
	h.agents["n1"].set(func(f *fakeAgent) {
		f.infoHook = func(context.Context) {
			h.update(func(ctx context.Context, tx store.Tx) error {
				n, err := tx.Node(ctx, cluster, "n2")
				if err != nil {
					return err
				}
				n.Status, n.StatusReason, n.DownCause = store.NodeUnknown, "", ""
				return tx.PutNode(ctx, n)
			})
		}
	})
	h.fullSync()
	if n := h.node("n2"); n.Status != store.NodeUnknown {
		t.Fatalf("the full sync put back what discovery lifted: n2 = %+v", n)
	}
	h.agents["n1"].set(func(f *fakeAgent) { f.infoHook = nil })
	h.fullSync()
	if n := h.node("n2"); n.Status != store.NodeUp {
		t.Fatalf("n2 = %+v", n)
	}
}

// Whether discovery holds a node is its stored cause, never the wording of
// the reason: a node DOWN with the text "failed" and no cause is contacted,
// and a held node stays held whatever its reason says.
func TestTheHoldIsTheStoredCauseNotTheReasonText(t *testing.T) {
	t.Parallel()
	h := setup(t, Config{}, "n1", "n2")
	h.fullSync()
	h.update(func(ctx context.Context, tx store.Tx) error {
		for id, set := range map[string]func(n *store.Node){
			"n1": func(n *store.Node) { n.Status, n.StatusReason, n.DownCause = store.NodeDown, store.ReasonFailed, "" },
			"n2": func(n *store.Node) {
				n.Status, n.StatusReason, n.DownCause = store.NodeDown, "lost by the pool", store.CauseFailed
			},
		} {
			n, err := tx.Node(ctx, cluster, id)
			if err != nil {
				return err
			}
			set(n)
			if err := tx.PutNode(ctx, n); err != nil {
				return err
			}
		}
		return nil
	})
	before := h.agents["n2"].requestCount()
	h.fullSync()
	if n := h.node("n1"); n.Status != store.NodeUp {
		t.Fatalf("a node DOWN with the text %q and no cause was not contacted: %+v", store.ReasonFailed, n)
	}
	if got := h.agents["n2"].requestCount(); got != before {
		t.Fatalf("a node held by discovery got %d requests", got-before)
	}
	if n := h.node("n2"); n.Status != store.NodeDown || n.DownCause != store.CauseFailed {
		t.Fatalf("n2 = %+v", n)
	}
}
