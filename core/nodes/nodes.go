// Package nodes is the one home of node state in the core. Save is the
// only writer of a node row: discovery (a node joins, moves, is relabelled,
// goes down or comes back), a sync's commit and the changes people ask for
// (drain with who and why, undrain, forget) all go through it. Each
// function works in the caller's store.Tx and appends its events there.
// Status is how a node's state is shown (DRAINED over UP), by the API, the
// CLI and the web UI alike.
package nodes

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/musterhq/muster/core/actions"
	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/wire"
)

// ErrConfigured is a forget of a node listed in the core's configuration
// (its static nodes): it would come back at the next start, so it is
// refused (a 409); the node leaves once it is removed from the configuration.
var ErrConfigured = errors.New("listed in the static nodes of the core's configuration")

// Save stores n, a new node or a changed one: the one place the core
// writes a node row. A zero UpdatedTS is set to now.
func Save(ctx context.Context, tx store.Tx, n *store.Node) error {
	return tx.PutNode(ctx, n)
}

// Update applies change to the stored node clusterID/nodeID and saves it,
// unless change left it as it was (then nothing is written). It returns
// the node as it is after the change and whether it changed.
func Update(ctx context.Context, tx store.Tx, clusterID, nodeID string, change func(n *store.Node)) (*store.Node, bool, error) {
	n, err := load(ctx, tx, clusterID, nodeID)
	if err != nil {
		return nil, false, err
	}
	before := *n
	before.Kinds, before.Labels, before.ArgsSchemas, before.Secrets = slices.Clone(n.Kinds), maps.Clone(n.Labels), maps.Clone(n.ArgsSchemas), slices.Clone(n.Secrets)
	change(n)
	if reflect.DeepEqual(before, *n) {
		return n, false, nil
	}
	n.UpdatedTS = time.Time{}
	return n, true, Save(ctx, tx, n)
}

// Status is the status a node is shown with: DRAINED for a drained node
// that is not DOWN, its stored status otherwise.
func Status(n *store.Node) string {
	if n.Drained && n.Status != store.NodeDown {
		return wire.NodeDrained
	}
	return n.Status
}

// Counts counts the nodes of cluster clusterID ("" for all) by the status
// they are shown with (Status): a drained node counts as drained, not up.
func Counts(all []store.Node, clusterID string) wire.NodeCounts {
	var c wire.NodeCounts
	for i := range all {
		n := &all[i]
		if clusterID != "" && n.ClusterID != clusterID {
			continue
		}
		c.Total++
		switch Status(n) {
		case store.NodeUp:
			c.Up++
		case wire.NodeDrained:
			c.Drained++
		case store.NodeDown:
			c.Down++
		default:
			c.Unknown++
		}
	}
	return c
}

func load(ctx context.Context, tx store.Tx, clusterID, nodeID string) (*store.Node, error) {
	n, err := tx.Node(ctx, clusterID, nodeID)
	if errors.Is(err, store.ErrNotFound) {
		return nil, fmt.Errorf("node %q of cluster %q: %w", nodeID, clusterID, store.ErrNotFound)
	}
	return n, err
}

// Drain drains a node (no new pushes; what it holds finishes), recording
// who drained it and why (reason, "" for none), with a node.drained event.
// Draining a drained node again with another reason records the new one;
// asking for what is already stored records nothing.
func Drain(ctx context.Context, tx store.Tx, clusterID, nodeID, reason string, by actions.Actor) (*store.Node, error) {
	reason = strings.TrimSpace(reason)
	n, changed, err := Update(ctx, tx, clusterID, nodeID, func(n *store.Node) {
		if n.Drained && n.DrainReason == reason {
			return // who drained it stays
		}
		n.Drained, n.DrainedBy, n.DrainReason = true, by.Name, reason
	})
	if err != nil || !changed {
		return n, err
	}
	msg := fmt.Sprintf("%s drained node %s: no new pushes", by.Name, nodeID)
	data := map[string]any{}
	if reason != "" {
		msg += ": " + reason
		data["reason"] = reason
	}
	return n, tx.AppendEvent(ctx, &store.Event{Type: store.EventNodeDrained, Actor: by.Name, ClientAddr: by.Addr,
		ClusterID: clusterID, NodeID: nodeID, Message: msg, Data: data})
}

// Undrain sends actions to a drained node again, with a node.undrained
// event; who drained it and why are cleared. Undraining a node that is not
// drained records nothing.
func Undrain(ctx context.Context, tx store.Tx, clusterID, nodeID string, by actions.Actor) (*store.Node, error) {
	n, changed, err := Update(ctx, tx, clusterID, nodeID, func(n *store.Node) {
		n.Drained, n.DrainedBy, n.DrainReason = false, "", ""
	})
	if err != nil || !changed {
		return n, err
	}
	return n, tx.AppendEvent(ctx, &store.Event{Type: store.EventNodeUndrained, Actor: by.Name, ClientAddr: by.Addr,
		ClusterID: clusterID, NodeID: nodeID, Message: fmt.Sprintf("%s undrained node %s", by.Name, nodeID)})
}

// Forget removes a node that is gone for good: it leaves the passes, and
// its open actions end (actions.ForgetNode), so that nothing is left
// waiting for it. It appends a node.forgotten event and returns how many
// actions it ended. A node still announced by gossip comes back as a new
// node at the next discovery sync; a node listed in the core's
// configuration (static) is refused with ErrConfigured, as it would come
// back at the next start: it leaves once removed from the configuration.
func Forget(ctx context.Context, tx store.Tx, clusterID, nodeID string, by actions.Actor) (int, error) {
	n, err := load(ctx, tx, clusterID, nodeID)
	if err != nil {
		return 0, err
	}
	if n.Source == store.SourceStatic {
		return 0, fmt.Errorf("node %s of cluster %s is %w: remove it from there (core.yaml) and restart the core, "+
			"which then forgets it", nodeID, clusterID, ErrConfigured)
	}
	ended, err := Remove(ctx, tx, clusterID, nodeID, by)
	if err != nil {
		return 0, err
	}
	return ended, tx.AppendEvent(ctx, &store.Event{Type: store.EventNodeForgotten, Actor: by.Name, ClientAddr: by.Addr,
		ClusterID: clusterID, NodeID: nodeID,
		Message: fmt.Sprintf("%s forgot node %s: %d open action(s) ended", by.Name, nodeID, ended),
		Data:    map[string]any{"actions_ended": ended}})
}

// Remove deletes a node, its request to replace another (if any), and
// ends its open actions (actions.ForgetNode),
// without an event of its own: discovery uses it for a node its source no
// longer lists, and records node.left.
func Remove(ctx context.Context, tx store.Tx, clusterID, nodeID string, by actions.Actor) (int, error) {
	ended, err := actions.ForgetNode(ctx, tx, clusterID, nodeID, by, time.Now())
	if err != nil {
		return 0, err
	}
	if err := tx.DeleteNode(ctx, clusterID, nodeID); err != nil {
		return 0, err
	}
	// Its request to replace another node goes with it.
	if _, err := tx.DeleteReplaceRequest(ctx, clusterID, nodeID); err != nil {
		return 0, err
	}
	return len(ended), nil
}
