package nodes

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/musterhq/muster/core/actions"
	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/labels"
)

// Reaping (docs/architecture.md, "Declared membership"): a node DOWN for
// longer than orchestrate.reap_after that its cluster does not declare is
// forgotten, as Nomad and Consul reap dead members.

// DefaultReapAfter is how long a node not declared may be DOWN before the
// core forgets it, when orchestrate.reap_after is not set.
const DefaultReapAfter = 72 * time.Hour

// MinReapAfter is the shortest reap_after taken (0 turns reaping off): a
// node briefly down for a reboot or a network cut is never forgotten.
const MinReapAfter = 10 * time.Minute

// Reapable returns the ids of the nodes of cluster clusterID (all: its
// nodes, or nodes of any cluster) to reap as of now, oldest DOWN first: DOWN
// for at least after since their record last changed (the change that made
// them DOWN), not listed in the core's configuration (static nodes come back
// at the next start), and not declared by the cluster: a node declared by
// id, or holding such a node's place (Replace), is never reaped; with a
// count and a selector, nodes matching the selector are reaped only while
// more than the count of them remain (the floor). after <= 0 reaps nothing.
func (m Membership) Reapable(clusterID string, all []store.Node, after time.Duration, now time.Time) []string {
	if after <= 0 {
		return nil
	}
	e, declares := m[clusterID]
	declares = declares && e.Declared()
	byID := map[string]bool{}
	matching := 0
	var mine []*store.Node
	for i := range all {
		n := &all[i]
		if n.ClusterID != clusterID {
			continue
		}
		mine = append(mine, n)
		if declares && e.Count > 0 && labels.Set(n.Labels).Matches(e.Selector) {
			matching++
		}
	}
	if declares {
		for _, id := range e.Nodes {
			byID[id] = true
		}
	}
	var due []*store.Node
	for _, n := range mine {
		if n.Status != store.NodeDown || n.Source == store.SourceStatic || now.Sub(n.UpdatedTS) < after {
			continue
		}
		if byID[n.ID] || (n.Replaces != "" && byID[n.Replaces]) {
			continue
		}
		due = append(due, n)
	}
	slices.SortFunc(due, func(a, b *store.Node) int {
		if c := a.UpdatedTS.Compare(b.UpdatedTS); c != 0 {
			return c
		}
		return cmp.Compare(a.ID, b.ID)
	})
	var out []string
	for _, n := range due {
		if declares && e.Count > 0 && labels.Set(n.Labels).Matches(e.Selector) {
			if matching <= e.Count {
				continue // the floor
			}
			matching--
		}
		out = append(out, n.ID)
	}
	return out
}

// Reap forgets node nodeID of cluster clusterID, DOWN for longer than after
// and not declared (Reapable says which): like Forget, its open actions end
// and its actions stay readable under its id, with a node.reaped event.
func Reap(ctx context.Context, tx store.Tx, clusterID, nodeID string, after time.Duration) error {
	ended, err := Remove(ctx, tx, clusterID, nodeID, actions.Core)
	if err != nil {
		return err
	}
	return tx.AppendEvent(ctx, &store.Event{Type: store.EventNodeReaped, Actor: actions.ActorCore,
		ClusterID: clusterID, NodeID: nodeID,
		Message: fmt.Sprintf("node %s reaped: down for more than %s and not declared by its cluster; %d open action(s) ended",
			nodeID, after, ended),
		Data: map[string]any{"reap_after": after.String(), "actions_ended": ended}})
}
