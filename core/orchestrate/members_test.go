package orchestrate

import (
	"slices"
	"testing"

	"github.com/musterhq/muster/core/nodes"
	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/live"
)

// Issue 33, item 3: a cluster is ALERT while a declared node is missing,
// HEALTHY again when none is, with one event per change, not per pass.
func TestDeclaredMembershipAlertsOncePerChange(t *testing.T) {
	t.Parallel()
	members := live.New(nodes.Membership{cluster: {Nodes: []string{"n1", "n2", "n3"}}})
	h := setup(t, Config{Members: members}, "n1", "n2")
	h.fullSync()
	if c := h.cluster(); c.Status != store.ClusterAlert || c.StatusReason != "missing: n3" {
		t.Fatalf("cluster = %+v", c)
	}
	if got := h.events(); !slices.Contains(got, "cluster.alert c1 by core") {
		t.Fatalf("events %v", got)
	}
	h.fullSync()
	if got := h.events(); len(got) != 0 {
		t.Fatalf("a second pass raised %v", got)
	}

	members.Store(nodes.Membership{cluster: {Nodes: []string{"n1", "n2"}}})
	h.fullSync()
	if c := h.cluster(); c.Status != store.ClusterHealthy || c.StatusReason != "" {
		t.Fatalf("cluster = %+v", c)
	}
	if got := h.events(); !slices.Equal(got, []string{"cluster.healthy c1 by core"}) {
		t.Fatalf("events %v", got)
	}
	h.idle()

	members.Store(nodes.Membership{cluster: {Count: 3}})
	h.fullSync()
	if c := h.cluster(); c.Status != store.ClusterAlert || c.StatusReason != "missing: 1 of 3 nodes" {
		t.Fatalf("cluster = %+v", c)
	}
	if got := h.events(); !slices.Equal(got, []string{"cluster.alert c1 by core"}) {
		t.Fatalf("events %v", got)
	}
	h.idle()
}
