package wire

import (
	"errors"
	"fmt"

	"github.com/musterhq/muster/shared/action"
)

// Bounds on what an agent's info may hold, as the core reads it: an agent
// (or a gossip member posing as one) cannot make the core keep more.
const (
	MaxInfoKinds  = 512 // kinds an agent announces
	MaxInfoString = 256 // bytes of node_id, cluster_id, version and store_id
	MaxInfoQueue  = 16  // states in the queue counts
)

// ErrInfoOutOfBounds: an agent's info passes one of the bounds above.
var ErrInfoOutOfBounds = errors.New("agent info out of bounds")

// Check reports whether the info stays within the bounds above.
func (i *AgentInfo) Check() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrInfoOutOfBounds, fmt.Sprintf(format, args...))
	}
	for name, s := range map[string]string{"node_id": i.NodeID, "cluster_id": i.ClusterID, "version": i.Version, "store_id": i.StoreID} {
		if len(s) > MaxInfoString {
			return bad("%s is %d bytes, the limit is %d", name, len(s), MaxInfoString)
		}
	}
	if len(i.Kinds) > MaxInfoKinds {
		return bad("%d kinds, the limit is %d", len(i.Kinds), MaxInfoKinds)
	}
	for _, k := range i.Kinds {
		if len(k) > action.MaxKindLength {
			return bad("a kind of %d bytes, the limit is %d", len(k), action.MaxKindLength)
		}
	}
	if len(i.Queue) > MaxInfoQueue {
		return bad("%d queue states, the limit is %d", len(i.Queue), MaxInfoQueue)
	}
	return nil
}
