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
func (h *harness) hold(node, reason string) {
	h.t.Helper()
	h.update(func(ctx context.Context, tx store.Tx) error {
		n, err := tx.Node(ctx, cluster, node)
		if err != nil {
			return err
		}
		n.Status, n.StatusReason = store.NodeDown, reason
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
	h.pass()
	h.events()
	h.hold("n2", store.ReasonFailed)
	id := h.create("n2", nil)
	before := h.agents["n2"].requestCount()
	rep := h.pass()
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

	// The pool sees it again: discovery makes it UNKNOWN, the pass contacts it.
	h.update(func(ctx context.Context, tx store.Tx) error {
		n, err := tx.Node(ctx, cluster, "n2")
		if err != nil {
			return err
		}
		n.Status, n.StatusReason = store.NodeUnknown, ""
		return tx.PutNode(ctx, n)
	})
	rep = h.pass()
	if n := h.node("n2"); n.Status != store.NodeUp || rep.Pushed != 1 {
		t.Fatalf("n2 = %+v, report %+v", n, rep)
	}
	wantState(t, h.record(id), action.New)
}

func TestDiscoveryDuringAPassHasTheLastWord(t *testing.T) {
	t.Parallel()
	h := setup(t, Config{}, "n1", "n2")
	h.pass()
	// n1 leaves while the pass talks to it.
	h.agents["n1"].set(func(f *fakeAgent) {
		f.infoHook = func(context.Context) { h.hold("n1", store.ReasonLeft) }
	})
	h.pass()
	if n := h.node("n1"); n.Status != store.NodeDown || n.StatusReason != store.ReasonLeft {
		t.Fatalf("the pass overwrote discovery: n1 = %+v", n)
	}
	if c := h.cluster(); c.Status != store.ClusterAlert || !strings.Contains(c.StatusReason, "n1") {
		t.Fatalf("cluster = %+v", c)
	}

	// n2 is held DOWN, and comes back while the pass runs: the pass leaves
	// it UNKNOWN for the next pass to contact.
	h.agents["n1"].set(func(f *fakeAgent) { f.infoHook = nil })
	h.hold("n2", store.ReasonFailed)
	h.hold("n1", store.ReasonFailed)
	h.update(func(ctx context.Context, tx store.Tx) error {
		n, err := tx.Node(ctx, cluster, "n1")
		if err != nil {
			return err
		}
		n.Status, n.StatusReason = store.NodeUnknown, ""
		return tx.PutNode(ctx, n)
	})
	h.agents["n1"].set(func(f *fakeAgent) {
		f.infoHook = func(context.Context) {
			h.update(func(ctx context.Context, tx store.Tx) error {
				n, err := tx.Node(ctx, cluster, "n2")
				if err != nil {
					return err
				}
				n.Status, n.StatusReason = store.NodeUnknown, ""
				return tx.PutNode(ctx, n)
			})
		}
	})
	h.pass()
	if n := h.node("n2"); n.Status != store.NodeUnknown {
		t.Fatalf("the pass put back what discovery lifted: n2 = %+v", n)
	}
	h.agents["n1"].set(func(f *fakeAgent) { f.infoHook = nil })
	h.pass()
	if n := h.node("n2"); n.Status != store.NodeUp {
		t.Fatalf("n2 = %+v", n)
	}
}
