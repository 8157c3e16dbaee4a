package orchestrate

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/musterhq/muster/core/nodes"
	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/live"
)

// clock is a clock a test moves by hand.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// Issue 33, item 3: the full sync forgets a node not declared once it has
// been DOWN for reap_after, with one node.reaped event, and keeps a
// declared one however long it is DOWN; the reaped node's actions stay
// readable, and it no longer counts as DOWN for the cluster.
func TestFullSyncReapsNodesNotDeclaredPastReapAfter(t *testing.T) {
	t.Parallel()
	clk := &clock{now: time.Now().UTC().Truncate(time.Second)}
	members := live.New(nodes.Membership{cluster: {Nodes: []string{"n1", "n3"}}})
	h := setup(t, Config{ReapAfter: time.Hour, Now: clk.Now, Members: members}, "n1", "n2", "n3")
	h.fullSync()
	id := h.create("n2", nil)
	h.update(func(ctx context.Context, tx store.Tx) error {
		for _, id := range []string{"n2", "n3"} {
			n, err := tx.Node(ctx, cluster, id)
			if err != nil {
				return err
			}
			n.Source, n.Status, n.StatusReason, n.DownCause = store.SourceGossip, store.NodeDown, "failed", store.CauseFailed
			n.UpdatedTS = clk.Now()
			if err := tx.PutNode(ctx, n); err != nil {
				return err
			}
		}
		return nil
	})
	h.events()

	clk.advance(59 * time.Minute)
	h.fullSync()
	if got := h.events(); slices.ContainsFunc(got, func(e string) bool { return strings.HasPrefix(e, "node.reaped") }) {
		t.Fatalf("reaped before reap_after: %v", got)
	}
	if c := h.cluster(); !strings.Contains(c.StatusReason, "down: n2, n3") {
		t.Fatalf("cluster before the reap: %+v", c)
	}

	clk.advance(2 * time.Minute)
	h.fullSync()
	got := h.events()
	if !slices.Contains(got, "node.reaped n2 by core") || slices.Contains(got, "node.reaped n3 by core") {
		t.Fatalf("events %v", got)
	}
	err := h.st.Read(context.Background(), func(r store.Reader) error {
		_, err := r.Node(context.Background(), cluster, "n2")
		return err
	})
	if err == nil {
		t.Fatal("n2 is still a node")
	}
	h.node("n3")
	if rec := h.record(id); rec.NodeID != "n2" {
		t.Fatalf("n2's action after the reap: %+v", rec)
	}
	if c := h.cluster(); strings.Contains(c.StatusReason, "n2") {
		t.Fatalf("cluster after the reap: %+v", c)
	}
	h.idle()
}

// reap_after 0 never reaps.
func TestFullSyncWithoutReapAfterReapsNothing(t *testing.T) {
	t.Parallel()
	clk := &clock{now: time.Now().UTC()}
	h := setup(t, Config{Now: clk.Now}, "n1", "n2")
	h.fullSync()
	h.update(func(ctx context.Context, tx store.Tx) error {
		n, err := tx.Node(ctx, cluster, "n2")
		if err != nil {
			return err
		}
		n.Source, n.Status, n.DownCause, n.UpdatedTS = store.SourceGossip, store.NodeDown, store.CauseFailed, clk.Now()
		return tx.PutNode(ctx, n)
	})
	clk.advance(1000 * time.Hour)
	h.fullSync()
	h.node("n2")
}
