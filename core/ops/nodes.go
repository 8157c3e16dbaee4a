package ops

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"slices"
	"time"

	"github.com/musterhq/muster/core/actions"
	"github.com/musterhq/muster/core/auth"
	"github.com/musterhq/muster/core/enroll"
	"github.com/musterhq/muster/core/nodes"
	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/names"
	"github.com/musterhq/muster/shared/wire"
)

// DrainNode drains a node: nothing new starts on it. Its node is synced, so
// that what waits for it says why.
func (o *Ops) DrainNode(ctx context.Context, c Caller, clusterID, nodeID, reason string) (*store.Node, error) {
	if err := Authorize(c, auth.Drain); err != nil {
		return nil, err
	}
	if err := o.authorizeCluster(ctx, c, auth.Drain, clusterID); err != nil {
		return nil, err
	}
	if err := checkReason(reason, false); err != nil {
		return nil, err
	}
	var n *store.Node
	err := o.st.Update(ctx, func(tx store.Tx) error {
		var err error
		n, err = nodes.Drain(ctx, tx, clusterID, nodeID, reason, c.actor(""))
		return err
	})
	if err != nil {
		return nil, err
	}
	o.nudgeNode(n.ClusterID, n.ID)
	return n, nil
}

// UndrainNode lets a drained node take work again. Its cluster is synced:
// what waited for the node (a run's wave, the budget) may go now.
func (o *Ops) UndrainNode(ctx context.Context, c Caller, clusterID, nodeID string) (*store.Node, error) {
	if err := Authorize(c, auth.Drain); err != nil {
		return nil, err
	}
	if err := o.authorizeCluster(ctx, c, auth.Drain, clusterID); err != nil {
		return nil, err
	}
	var n *store.Node
	err := o.st.Update(ctx, func(tx store.Tx) error {
		var err error
		n, err = nodes.Undrain(ctx, tx, clusterID, nodeID, c.actor(""))
		return err
	})
	if err != nil {
		return nil, err
	}
	o.nudgeCluster(n.ClusterID)
	return n, nil
}

// ForgetNode removes a node for good and ends its open actions; it
// answers how many it ended. Its cluster is synced.
func (o *Ops) ForgetNode(ctx context.Context, c Caller, clusterID, nodeID string) (int, error) {
	if err := Authorize(c, auth.Forget); err != nil {
		return 0, err
	}
	if err := o.authorizeCluster(ctx, c, auth.Forget, clusterID); err != nil {
		return 0, err
	}
	var ended int
	err := o.st.Update(ctx, func(tx store.Tx) error {
		var err error
		ended, err = nodes.Forget(ctx, tx, clusterID, nodeID, c.actor(""))
		return err
	})
	if err != nil {
		return 0, err
	}
	o.nudgeCluster(clusterID)
	return ended, nil
}

// RevokeNode puts a node's certificates on the revocation list and syncs
// the node at once, so that it shows DOWN and revoked. It answers the
// serials revoked.
func (o *Ops) RevokeNode(ctx context.Context, c Caller, clusterID, nodeID, reason string) ([]string, error) {
	if err := Authorize(c, auth.Revoke); err != nil {
		return nil, err
	}
	if err := o.authorizeCluster(ctx, c, auth.Revoke, clusterID); err != nil {
		return nil, err
	}
	if o.cfg.Enroll == nil {
		return nil, enroll.ErrDisabled
	}
	if err := checkReason(reason, false); err != nil {
		return nil, err
	}
	serials, err := o.cfg.Enroll.Revoke(ctx, clusterID, nodeID, reason, c.Name, enroll.Caller{ClientAddr: c.Addr})
	if err != nil {
		return nil, err
	}
	o.nudgeNode(clusterID, nodeID)
	return serials, nil
}

// ReplaceNode makes node newID take the declared place and the labels of
// node oldID in cluster clusterID (nodes.Replace): oldID is forgotten, its
// actions stay readable under its id, and its certificates from
// enrollment are revoked, all in one transaction with a node.replaced
// event naming the caller. Admins only (forget and revoke). Refused with
// nothing changed: newID == oldID (400), newID not a node of the cluster
// or oldID neither a node nor declared by it (404), oldID in the core's
// configuration, newID already replacing another node or oldID's place
// taken (409). The cluster is synced.
func (o *Ops) ReplaceNode(ctx context.Context, c Caller, clusterID, oldID, newID string) (*nodes.Replacement, []string, error) {
	for _, p := range []auth.Permission{auth.Forget, auth.Revoke} {
		if err := Authorize(c, p); err != nil {
			return nil, nil, err
		}
		if err := o.authorizeCluster(ctx, c, p, clusterID); err != nil {
			return nil, nil, err
		}
	}
	if err := names.CheckID(newID); err != nil {
		return nil, nil, BadRequest("with: %v", err)
	}
	declared := slices.Contains(o.cfg.Members.Load()[clusterID].Nodes, oldID)
	now := time.Now()
	if o.cfg.Enroll != nil {
		now = o.cfg.Enroll.Now()
	}
	by := c.actor("")
	var (
		rep     *nodes.Replacement
		serials []string
	)
	err := o.st.Update(ctx, func(tx store.Tx) error {
		if _, err := tx.Cluster(ctx, clusterID); err != nil {
			return err
		}
		var err error
		if rep, err = nodes.Replace(ctx, tx, clusterID, oldID, newID, declared, by); err != nil {
			return err
		}
		serials, err = enroll.RevokeIn(ctx, tx, clusterID, oldID, "replaced by "+newID, c.Name, enroll.Caller{ClientAddr: c.Addr}, now.UTC())
		return err
	})
	if err != nil {
		return nil, nil, err
	}
	if len(serials) > 0 && o.cfg.Enroll != nil {
		o.cfg.Enroll.Reload(ctx)
	}
	o.nudgeCluster(clusterID)
	return rep, serials, nil
}

// SyncCluster asks for a full sync of a cluster now; it runs later.
func (o *Ops) SyncCluster(ctx context.Context, c Caller, clusterID string) error {
	if err := Authorize(c, auth.Orchestrate); err != nil {
		return err
	}
	if err := o.authorizeCluster(ctx, c, auth.Orchestrate, clusterID); err != nil {
		return err
	}
	err := o.st.Read(ctx, func(r store.Reader) error {
		_, err := r.Cluster(ctx, clusterID)
		return err
	})
	if err != nil {
		return err
	}
	o.nudgeCluster(clusterID)
	return nil
}

// RefusedSchemas returns, by kind, why the core refuses the args_schema a
// node announced (actions.RefusedSchemas): nil when it takes them all.
func RefusedSchemas(announced map[string]json.RawMessage) map[string]string {
	return actions.RefusedSchemas(announced)
}

// enrollment is the enrollment service, or enroll.ErrDisabled when the
// core does not sign agent certificates.
func (o *Ops) enrollment() (*enroll.Service, error) {
	if o.cfg.Enroll == nil || !o.cfg.Enroll.Enabled() {
		return nil, enroll.ErrDisabled
	}
	return o.cfg.Enroll, nil
}

// EnrollCA is the CA bundle enrolling agents check against their pin.
func (o *Ops) EnrollCA() ([]byte, error) {
	e, err := o.enrollment()
	if err != nil {
		return nil, err
	}
	return e.Bundle(), nil
}

// EnrollAgent signs an agent's CSR for a join token, which it
// authenticates itself so that an expired, used-up or wrong-cluster token
// is refused with its reason and an event.
func (o *Ops) EnrollAgent(ctx context.Context, secret string, req wire.EnrollRequest, addr string) (*wire.EnrollResponse, error) {
	e, err := o.enrollment()
	if err != nil {
		return nil, err
	}
	return e.Enroll(ctx, secret, req, enroll.Caller{ClientAddr: addr})
}

// RenewAgent signs a new CSR for the agent whose verified client
// certificate (peer) the connection carries.
func (o *Ops) RenewAgent(ctx context.Context, peer []*x509.Certificate, req wire.RenewRequest, addr string) (*wire.EnrollResponse, error) {
	e, err := o.enrollment()
	if err != nil {
		return nil, err
	}
	return e.Renew(ctx, peer, req, enroll.Caller{ClientAddr: addr})
}

// MembersOf is cluster clusterID's declared membership against all (nodes
// of any cluster) as of now, as the API and the web UI show it; nil when
// the cluster declares none.
func MembersOf(m nodes.Membership, clusterID string, all []store.Node, now time.Time) *wire.Members {
	got, ok := m.Of(clusterID, all, now)
	if !ok {
		return nil
	}
	out := &wire.Members{Missing: []wire.MissingNode{}, Unexpected: []string{}}
	for _, x := range got.Missing {
		out.Missing = append(out.Missing, wire.MissingNode{ID: x.ID, Reason: x.Reason})
	}
	out.Unexpected = append(out.Unexpected, got.Unexpected...)
	return out
}
