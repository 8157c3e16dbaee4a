package nodes

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/musterhq/muster/core/actions"
	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/labels"
)

// ErrReplaceSelf is a replace of a node by itself (a 400).
var ErrReplaceSelf = errors.New("a node cannot replace itself")

// ErrReplacing is a replace whose new node already took the place of
// another, or whose place another node already took (a 409).
var ErrReplacing = errors.New("already replacing another node")

// Labels is a node's labels: those of the core's configuration (static),
// the agent's own laid over them, then those the core holds for the node
// (core: inherited by a replace) over both, key by key; nil when there
// are none. The core's hold on a key wins over the agent because it is a
// person's decision the declared membership counts on (a count with a
// selector); the agent's other keys are kept.
func Labels(static, own, core map[string]string) map[string]string {
	if len(static)+len(own)+len(core) == 0 {
		return nil
	}
	return labels.Merge(labels.Merge(static, own), core)
}

// Replacement is what a replace did.
type Replacement struct {
	// New is the new node as it is after the replace.
	New *store.Node
	// Place is the declared place New took: Old, or the place Old had
	// itself taken by an earlier replace.
	Place string
	// Forgotten says whether Old was a stored node (now removed); a
	// declared node never seen has no row.
	Forgotten bool
	// Ended is how many open actions of Old ended.
	Ended int
	// Requested is the node New asked to replace at its enrollment, the
	// request this replace answered ("" when it had made none).
	Requested string
}

// Replace makes node newID take the declared place and the labels of node
// oldID in cluster clusterID: newID holds oldID's labels over its agent's
// own (Labels) and counts for oldID in the cluster's declared membership;
// oldID is forgotten (its open actions end; its actions and their history
// stay readable under its id), with a node.replaced event naming who. The
// caller revokes oldID's certificates in the same transaction.
//
// declared says whether the cluster declares oldID by id: such a node may
// be replaced before it was ever seen. Refused: newID == oldID
// (ErrReplaceSelf); newID not a node of the cluster, or oldID neither a
// node nor declared (store.ErrNotFound); oldID listed in the core's
// configuration (ErrConfigured); newID already holding another place, or
// oldID's place already held by another node (ErrReplacing).
func Replace(ctx context.Context, tx store.Tx, clusterID, oldID, newID string, declared bool, by actions.Actor) (*Replacement, error) {
	if oldID == newID {
		return nil, fmt.Errorf("node %s: %w", oldID, ErrReplaceSelf)
	}
	nn, err := load(ctx, tx, clusterID, newID)
	if err != nil {
		return nil, err
	}
	old, err := tx.Node(ctx, clusterID, oldID)
	switch {
	case errors.Is(err, store.ErrNotFound) && declared:
		old = nil
	case errors.Is(err, store.ErrNotFound):
		return nil, fmt.Errorf("node %q of cluster %q (neither a node nor declared by it): %w", oldID, clusterID, store.ErrNotFound)
	case err != nil:
		return nil, err
	}
	if old != nil && old.Source == store.SourceStatic {
		return nil, fmt.Errorf("node %s of cluster %s is %w: remove it from there (core.yaml) to replace it", oldID, clusterID, ErrConfigured)
	}
	place := oldID
	if old != nil && old.Replaces != "" {
		place = old.Replaces
	}
	if nn.Replaces != "" && nn.Replaces != place {
		return nil, fmt.Errorf("node %s already took the place of %s: %w", newID, nn.Replaces, ErrReplacing)
	}
	all, err := tx.Nodes(ctx, clusterID)
	if err != nil {
		return nil, err
	}
	for _, n := range all {
		if n.ID != newID && n.ID != oldID && n.Replaces == place {
			return nil, fmt.Errorf("the place of %s is taken by node %s: %w", place, n.ID, ErrReplacing)
		}
	}
	var inherited map[string]string
	if old != nil {
		inherited = maps.Clone(old.Labels)
	}
	nn, _, err = Update(ctx, tx, clusterID, newID, func(n *store.Node) {
		n.Replaces = place
		if len(inherited) > 0 {
			n.CoreLabels = labels.Merge(n.CoreLabels, inherited)
		}
		n.Labels = Labels(nil, n.Labels, n.CoreLabels)
	})
	if err != nil {
		return nil, err
	}
	rep := &Replacement{New: nn, Place: place}
	if old != nil {
		if rep.Ended, err = Remove(ctx, tx, clusterID, oldID, by); err != nil {
			return nil, err
		}
		rep.Forgotten = true
	}
	// A request newID made at its enrollment (replaces: oldID) is
	// answered by this replace: approved when it named oldID, overruled
	// otherwise.
	if rep.Requested, err = tx.DeleteReplaceRequest(ctx, clusterID, newID); err != nil {
		return nil, err
	}
	msg := fmt.Sprintf("%s replaced node %s with %s", by.Name, oldID, newID)
	if len(inherited) > 0 {
		msg += ", which takes its labels " + labels.Set(inherited).String()
	}
	if rep.Forgotten {
		msg += fmt.Sprintf("; %d open action(s) of %s ended", rep.Ended, oldID)
	}
	switch rep.Requested {
	case "":
	case oldID:
		msg += fmt.Sprintf(", approving the request %s made at its enrollment", newID)
	default:
		msg += fmt.Sprintf(" (%s had asked to replace %s at its enrollment)", newID, rep.Requested)
	}
	data := map[string]any{"with": newID, "place": place, "actions_ended": rep.Ended}
	if rep.Requested != "" {
		data["requested"] = rep.Requested
	}
	if len(inherited) > 0 {
		data["labels"] = inherited
	}
	return rep, tx.AppendEvent(ctx, &store.Event{Type: store.EventNodeReplaced, Actor: by.Name, ClientAddr: by.Addr,
		ClusterID: clusterID, NodeID: oldID, Message: msg, Data: data})
}

// takes says which node holds each declared place taken by a replace, by
// place, among all (nodes of one cluster).
func takes(all map[string]*store.Node) map[string]string {
	out := map[string]string{}
	for _, id := range slices.Sorted(maps.Keys(all)) {
		if p := all[id].Replaces; p != "" {
			if _, ok := out[p]; !ok {
				out[p] = id
			}
		}
	}
	return out
}
