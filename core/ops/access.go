package ops

import (
	"context"
	"fmt"
	"slices"

	"github.com/musterhq/muster/core/auth"
	"github.com/musterhq/muster/core/store"
)

// Access (docs/architecture.md, "Access: people, teams and grants"): who a
// caller is, what each of its grants lets it do on a cluster, and which
// clusters it may see at all.

// Identify resolves a caller: a token's roles (grants on every cluster),
// and from the store the person's own grants, the teams it belongs to (by
// membership, or by a team's mapped group among groups) and their grants.
// Called on every request, so a removal from a team or a group applies on
// the next one.
func (o *Ops) Identify(ctx context.Context, name string, roles []string, groups []string, addr string) (Caller, error) {
	c := Caller{Name: name, Roles: roles, Addr: addr, Groups: groups}
	err := o.st.Read(ctx, func(r store.Reader) error {
		teams, err := r.TeamsOf(ctx, name, groups)
		if err != nil {
			return err
		}
		gs, err := r.GrantsOf(ctx, name, teams)
		if err != nil {
			return err
		}
		c.Grants = make([]auth.Grant, 0, len(gs))
		for _, g := range gs {
			c.Grants = append(c.Grants, auth.FromStore(g))
		}
		return c.loadLabels(ctx, r)
	})
	if err != nil {
		return Caller{}, fmt.Errorf("identify %s: %w", name, err)
	}
	return c, nil
}

// grants are the caller's token roles as grants on every cluster, and its
// other grants.
func (c Caller) grants() []auth.Grant {
	if len(c.Roles) == 0 {
		return c.Grants
	}
	return append(auth.TokenGrants(c.Roles), c.Grants...)
}

// held names the caller's roles for a refusal: a token's roles, and each
// grant's role on its scope.
func (c Caller) held() []string {
	out := slices.Clone(c.Roles)
	for _, g := range c.Grants {
		out = append(out, g.Role+" on "+g.Scope.String())
	}
	return out
}

// byLabels reports whether one of the caller's grants has a label selector.
func (c Caller) byLabels() bool {
	return slices.ContainsFunc(c.Grants, func(g auth.Grant) bool { return len(g.Scope.Labels) > 0 })
}

// loadLabels reads the clusters' labels when a grant needs them.
func (c *Caller) loadLabels(ctx context.Context, r store.Reader) error {
	if !c.byLabels() || c.labels != nil {
		return nil
	}
	cs, err := r.Clusters(ctx)
	if err != nil {
		return err
	}
	c.labels = make(map[string]map[string]string, len(cs))
	for _, cl := range cs {
		c.labels[cl.ID] = cl.Labels
	}
	return nil
}

// AuthorizeOn refuses a caller none of whose grants gives p on the cluster
// clusterID. A cluster it may not read at all does not exist for it:
// store.ErrNotFound (404), never a 403 that would confirm it exists.
func AuthorizeOn(c Caller, p auth.Permission, clusterID string) error {
	gs := c.grants()
	cl := auth.Cluster{ID: clusterID, Labels: c.labels[clusterID]}
	if !auth.HoldsOn(gs, auth.Read, cl) {
		return fmt.Errorf("cluster %q: %w", clusterID, store.ErrNotFound)
	}
	if auth.HoldsOn(gs, p, cl) {
		return nil
	}
	return &ForbiddenError{Caller: c.Name, Roles: c.held(), Perm: p, Allowed: auth.Granting(p),
		Doing: fmt.Sprintf("%s on cluster %s", p, clusterID)}
}

// authorizeIn is AuthorizeOn with the clusters' labels read from r when a
// grant needs them (a caller not made by Identify has none loaded).
func authorizeIn(ctx context.Context, r store.Reader, c Caller, p auth.Permission, clusterID string) error {
	if err := c.loadLabels(ctx, r); err != nil {
		return err
	}
	return AuthorizeOn(c, p, clusterID)
}

// authorizeCluster is AuthorizeOn in a read of its own.
func (o *Ops) authorizeCluster(ctx context.Context, c Caller, p auth.Permission, clusterID string) error {
	if !c.byLabels() || c.labels != nil {
		return AuthorizeOn(c, p, clusterID)
	}
	return o.st.Read(ctx, func(r store.Reader) error { return authorizeIn(ctx, r, c, p, clusterID) })
}

// AuthorizeEverywhere refuses a caller without a grant of p on every
// cluster: what is global (tokens, notification destinations, teams'
// membership seen whole) needs it.
func AuthorizeEverywhere(c Caller, p auth.Permission) error {
	if auth.HoldsEverywhere(c.grants(), p) {
		return nil
	}
	e := &ForbiddenError{Caller: c.Name, Roles: c.held(), Perm: p, Allowed: auth.Granting(p)}
	if c.Can(p) { // on some clusters only
		e.Doing = fmt.Sprintf("%s (on every cluster)", p)
	}
	return e
}

// Visible is the set of clusters a caller may read, computed once per
// request (Visibility): every list, read, count and stream keeps what it
// holds, and the store lists filter by In.
type Visible struct {
	all    bool
	ids    map[string]bool
	known  map[string]bool
	grants []auth.Grant
}

// Visibility computes the clusters c may read, from the cluster list of r
// (not read when a grant gives read on every cluster).
func Visibility(ctx context.Context, r store.Reader, c Caller) (Visible, error) {
	gs := c.grants()
	if auth.HoldsEverywhere(gs, auth.Read) {
		return Visible{all: true}, nil
	}
	cs, err := r.Clusters(ctx)
	if err != nil {
		return Visible{}, err
	}
	v := Visible{ids: map[string]bool{}, known: make(map[string]bool, len(cs)), grants: gs}
	for _, cl := range cs {
		v.known[cl.ID] = true
		if auth.HoldsOn(gs, auth.Read, auth.Cluster{ID: cl.ID, Labels: cl.Labels}) {
			v.ids[cl.ID] = true
		}
	}
	return v, nil
}

// Visibility is the package's Visibility in a read of its own.
func (o *Ops) Visibility(ctx context.Context, c Caller) (Visible, error) {
	var v Visible
	err := o.st.Read(ctx, func(r store.Reader) error {
		var err error
		v, err = Visibility(ctx, r, c)
		return err
	})
	return v, err
}

// All reports whether every cluster is visible.
func (v Visible) All() bool { return v.all }

// Has reports whether the cluster clusterID is visible. One the cluster
// list did not hold (made since) is visible when a grant's glob takes its
// id.
func (v Visible) Has(clusterID string) bool {
	if v.all {
		return true
	}
	if v.ids[clusterID] {
		return true
	}
	return !v.known[clusterID] && auth.HoldsOn(v.grants, auth.Read, auth.Cluster{ID: clusterID})
}

// In lists the visible clusters for a store filter (store.ListQuery's
// ClusterIn): nil when every cluster is.
func (v Visible) In() []string {
	if v.all {
		return nil
	}
	out := make([]string, 0, len(v.ids))
	for id := range v.ids {
		out = append(out, id)
	}
	slices.Sort(out)
	return out
}

// Event reports whether an event is visible: one of a visible cluster, or
// one of no cluster (tokens, teams, grants) for a caller who reads every
// cluster.
func (v Visible) Event(e *store.Event) bool {
	if e.ClusterID == "" {
		return v.all
	}
	return v.Has(e.ClusterID)
}

// Check answers store.ErrNotFound for an object of a cluster the caller
// may not read: it does not exist for them.
func (v Visible) Check(what, clusterID string) error {
	if !v.Has(clusterID) {
		return fmt.Errorf("%s: %w", what, store.ErrNotFound)
	}
	return nil
}
