// Package nodes makes the changes people ask for on a node: drain it (no
// new pushes; what it holds finishes), undrain it, and forget it (it leaves
// the passes and its open actions end, through core/actions). Each works in
// the caller's store.Tx and appends its event there.
package nodes

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/musterhq/muster/core/actions"
	"github.com/musterhq/muster/core/store"
)

func load(ctx context.Context, tx store.Tx, clusterID, nodeID string) (*store.Node, error) {
	n, err := tx.Node(ctx, clusterID, nodeID)
	if errors.Is(err, store.ErrNotFound) {
		return nil, fmt.Errorf("node %q of cluster %q: %w", nodeID, clusterID, store.ErrNotFound)
	}
	return n, err
}

// SetDrained drains (drained true) or undrains a node, with a node.drained
// or node.undrained event. Asking for the state the node is in records
// nothing.
func SetDrained(ctx context.Context, tx store.Tx, clusterID, nodeID string, drained bool, by actions.Actor) (*store.Node, error) {
	n, err := load(ctx, tx, clusterID, nodeID)
	if err != nil || n.Drained == drained {
		return n, err
	}
	n.Drained, n.UpdatedTS = drained, time.Time{}
	if err := tx.PutNode(ctx, n); err != nil {
		return nil, err
	}
	typ, msg := store.EventNodeDrained, fmt.Sprintf("%s drained node %s: no new pushes", by.Name, nodeID)
	if !drained {
		typ, msg = store.EventNodeUndrained, fmt.Sprintf("%s undrained node %s", by.Name, nodeID)
	}
	return n, tx.AppendEvent(ctx, &store.Event{Type: typ, Actor: by.Name, ClientAddr: by.Addr,
		ClusterID: clusterID, NodeID: nodeID, Message: msg})
}

// Forget removes a node that is gone for good: it leaves the passes, and
// its open actions end (actions.ForgetNode), so that nothing is left
// waiting for it. It appends a node.forgotten event and returns how many
// actions it ended. A node still announced by discovery comes back as a new
// node at the next discovery sync.
func Forget(ctx context.Context, tx store.Tx, clusterID, nodeID string, by actions.Actor) (int, error) {
	if _, err := load(ctx, tx, clusterID, nodeID); err != nil {
		return 0, err
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

// Remove deletes a node and ends its open actions (actions.ForgetNode),
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
	return len(ended), nil
}

// Apply stores what a sync of the node with its agent found: its status,
// its agent's database and cursor, kinds, version, labels and last contact
// (core/orchestrate, which decides them). It appends no event: the caller
// records node.up and node.down.
func Apply(ctx context.Context, tx store.Tx, n *store.Node) error {
	return tx.PutNode(ctx, n)
}
