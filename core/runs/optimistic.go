package runs

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/musterhq/muster/core/store"
)

// Planning outside the write transaction (docs/architecture.md, "Runs and
// playbooks"): resolving a run renders its templates and checks its args
// against every node's args_schema, the costly part of making it. It is
// done against the cluster's nodes read in a short read, with no
// transaction held; the write transaction then checks that the nodes are
// those the plan was made on (NodesDigest) and stores it, or the run is
// planned again.

// ErrReplan is a plan whose cluster's nodes changed before it was stored.
var ErrReplan = errors.New("the cluster's nodes changed while the run was planned")

// MaxReplans is how many times a run is planned before ErrReplan is given
// up on.
const MaxReplans = 3

// Planned is a run's stages resolved against the cluster's nodes, outside
// any transaction.
type Planned struct {
	Cluster string
	Stages  []store.RunStage
	// Nodes is the NodesDigest of the nodes it was planned on.
	Nodes string
}

// ReadNodes reads the nodes of cluster, which must exist.
func ReadNodes(ctx context.Context, r store.Reader, cluster string) ([]store.Node, error) {
	if _, err := r.Cluster(ctx, cluster); err != nil {
		return nil, err
	}
	return r.Nodes(ctx, cluster)
}

// NodesDigest fingerprints what a plan reads of a cluster's nodes: each
// one's id, labels, kinds, args schemas and secret names. An error (a schema that is not
// JSON) is returned, never a digest that would match any other.
func NodesDigest(nodes []store.Node) (string, error) {
	type node struct {
		ID      string
		Labels  map[string]string          `json:",omitempty"`
		Kinds   []string                   `json:",omitempty"`
		Schemas map[string]json.RawMessage `json:",omitempty"`
		Secrets []string                   `json:",omitempty"`
	}
	out := make([]node, len(nodes))
	for i, n := range nodes {
		out[i] = node{n.ID, n.Labels, n.Kinds, n.ArgsSchemas, n.Secrets}
	}
	slices.SortFunc(out, func(a, b node) int { return strings.Compare(a.ID, b.ID) })
	b, err := json.Marshal(out)
	if err != nil {
		return "", fmt.Errorf("digest of the cluster's nodes: %w", err)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), nil
}

// Recheck reports ErrReplan when the cluster's nodes, read in r (the write
// transaction), are not those p was planned on.
func (p *Planned) Recheck(ctx context.Context, r store.Reader) error {
	nodes, err := ReadNodes(ctx, r, p.Cluster)
	if err != nil {
		return err
	}
	d, err := NodesDigest(nodes)
	if err != nil {
		return err
	}
	if d != p.Nodes {
		return fmt.Errorf("%w: cluster %s", ErrReplan, p.Cluster)
	}
	return nil
}

// Replanning plans with plan, outside any transaction, then commits the
// plan with commit in a write transaction of st, planning again when
// commit finds the plan's inputs changed (ErrReplan), at most MaxReplans
// times.
func Replanning[P, R any](ctx context.Context, st store.Store, plan func() (P, error),
	commit func(tx store.Tx, p P) (R, error)) (R, error) {
	var zero R
	for attempt := 1; ; attempt++ {
		p, err := plan()
		if err != nil {
			return zero, err
		}
		var out R
		err = st.Update(ctx, func(tx store.Tx) error {
			var err error
			out, err = commit(tx, p)
			return err
		})
		if err == nil {
			return out, nil
		}
		if !errors.Is(err, ErrReplan) || attempt == MaxReplans {
			return zero, err
		}
	}
}
