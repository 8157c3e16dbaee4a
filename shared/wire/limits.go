package wire

import (
	"errors"
	"fmt"
	"slices"

	"github.com/musterhq/muster/shared/action"
	"github.com/musterhq/muster/shared/argschema"
	"github.com/musterhq/muster/shared/secret"
)

// Bounds on what an agent's info may hold, as the core reads it: an agent
// (or a gossip member posing as one) cannot make the core keep more.
const (
	MaxInfoKinds  = 512 // kinds an agent announces
	MaxInfoString = 256 // bytes of node_id, cluster_id, version and store_id
	MaxInfoQueue  = 16  // states in the queue counts
	// MaxInfoSchemas bounds the args schemas of one node, in all.
	MaxInfoSchemas = 64 << 10
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
	if len(i.ArgsSchemas) > len(i.Kinds) {
		return bad("%d args schemas for %d kinds", len(i.ArgsSchemas), len(i.Kinds))
	}
	total := 0
	for k, s := range i.ArgsSchemas {
		if !slices.Contains(i.Kinds, k) {
			return bad("an args schema for kind %.100q, which it does not announce", k)
		}
		if len(s) > argschema.MaxBytes {
			return bad("the args schema of %s is %d bytes, the limit is %d", k, len(s), argschema.MaxBytes)
		}
		total += len(s)
	}
	if total > MaxInfoSchemas {
		return bad("args schemas of %d bytes in all, the limit is %d", total, MaxInfoSchemas)
	}
	if len(i.Secrets) > secret.MaxNames {
		return bad("%d secrets, the limit is %d", len(i.Secrets), secret.MaxNames)
	}
	for _, n := range i.Secrets {
		if !secret.ValidName(n) {
			return bad("secret name %.100q is not a plain name", n)
		}
	}
	if len(i.Queue) > MaxInfoQueue {
		return bad("%d queue states, the limit is %d", len(i.Queue), MaxInfoQueue)
	}
	if i.Changes != nil {
		if err := i.Changes.Check(); err != nil {
			return err
		}
	}
	return nil
}

// Check reports whether the change counter stays within bounds: an epoch
// of at most MaxInfoString bytes, never empty.
func (c *ChangeCounter) Check() error {
	if c.Epoch == "" || len(c.Epoch) > MaxInfoString {
		return fmt.Errorf("%w: a change epoch of %d bytes, want 1 to %d", ErrInfoOutOfBounds, len(c.Epoch), MaxInfoString)
	}
	return nil
}
