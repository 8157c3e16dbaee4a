package nodes

import (
	"context"
	"errors"
	"maps"

	"github.com/musterhq/muster/core/enroll"
	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/labels"
)

// Enrolled gives the stored node clusterID/nodeID, enrolled (again) with
// a join token whose labels are next, those labels as labels the core
// holds for it (Node.CoreLabels; core/enroll's Config.HoldLabels), in
// place of prev, those of the join token that enrolled it before: the
// pairs of prev it still holds go, and next lies under the rest, so that
// what a replace gave it stays over the token's (the configuration's
// static labels are not stored here and are not touched). The node's
// labels follow; an agent's own label for a key the core let go comes
// back with its next announcement. A node not stored yet is left alone:
// it takes its certificate's labels when it joins (Joined).
func Enrolled(ctx context.Context, tx store.Tx, clusterID, nodeID string, prev, next map[string]string) error {
	_, _, err := Update(ctx, tx, clusterID, nodeID, func(n *store.Node) {
		held := maps.Clone(n.CoreLabels)
		for k, v := range prev {
			if held[k] == v {
				delete(held, k)
				if n.Labels[k] == v {
					delete(n.Labels, k)
				}
			}
		}
		n.CoreLabels = labels.Merge(next, held)
		if len(n.CoreLabels) == 0 {
			n.CoreLabels = nil
		}
		n.Labels = Labels(nil, n.Labels, n.CoreLabels)
	})
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	return err
}

// Joined returns the labels the core holds for a node that joins cluster
// clusterID and is not stored: those its newest certificate from
// enrollment there was issued with (its join token's; nil for none). A
// newest certificate revoked for anything but its renewal gives none: the
// labels went with it (a node revoked, then seen again some other way,
// holds no token's labels).
func Joined(ctx context.Context, r store.Reader, clusterID, nodeID string) (map[string]string, error) {
	certs, err := r.AgentCerts(ctx, clusterID, nodeID)
	if err != nil {
		return nil, err
	}
	for _, c := range certs {
		if c.ClusterID != clusterID {
			continue
		}
		if c.RevokedTS != nil && c.RevokeReason != enroll.ReasonRenewed {
			return nil, nil
		}
		break
	}
	return store.EnrolledLabels(certs, clusterID), nil
}
