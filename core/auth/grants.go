package auth

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/musterhq/muster/core/glob"
	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/labels"
)

// Grant is one role on one scope, and where it came from
// (docs/architecture.md, "Access: people, teams and grants"). Each grant is
// evaluated on its own: scopes never combine into more than one grant
// gives.
type Grant struct {
	Role  string // viewer | operator | approver | admin
	Scope Scope
	// Via is where it came from: "token" (a global role), "person:NAME" or "team:NAME".
	Via string
}

// Scope is the clusters a grant applies to.
type Scope struct {
	Clusters string            // a cluster glob (core/glob); "*" is every cluster
	Labels   map[string]string // or a cluster label selector (all must match); exactly one of the two is set
}

// Everywhere is the scope of every cluster: a token's global roles.
var Everywhere = Scope{Clusters: "*"}

// ViaToken is the Via of a token's global roles.
const ViaToken = "token"

// ErrScope: a scope is not acceptable.
var ErrScope = errors.New("invalid scope")

// Cluster is what a grant's scope is matched against.
type Cluster struct {
	ID     string
	Labels map[string]string
}

// String is the scope as people read it: the glob, or key=value pairs.
func (s Scope) String() string {
	if len(s.Labels) == 0 {
		return s.Clusters
	}
	pairs := make([]string, 0, len(s.Labels))
	for _, k := range slices.Sorted(maps.Keys(s.Labels)) {
		pairs = append(pairs, k+"="+s.Labels[k])
	}
	return strings.Join(pairs, ",")
}

// Check refuses a scope without exactly one of a valid glob and a valid
// label selector.
func (s Scope) Check() error {
	switch {
	case s.Clusters != "" && len(s.Labels) > 0:
		return fmt.Errorf("%w: a scope is clusters or labels, not both", ErrScope)
	case s.Clusters == "" && len(s.Labels) == 0:
		return fmt.Errorf("%w: a scope needs clusters (a glob) or labels", ErrScope)
	case s.Clusters != "" && !glob.Valid(s.Clusters):
		return fmt.Errorf("%w: clusters %q is not a valid glob", ErrScope, s.Clusters)
	case len(s.Labels) > 0:
		if err := labels.Set(s.Labels).Validate(); err != nil {
			return fmt.Errorf("%w: labels: %w", ErrScope, err)
		}
	}
	return nil
}

// Covers reports whether the scope applies to cluster c.
func (s Scope) Covers(c Cluster) bool {
	if len(s.Labels) > 0 {
		for k, v := range s.Labels {
			if got, ok := c.Labels[k]; !ok || got != v {
				return false
			}
		}
		return true
	}
	return s.Clusters == "*" || glob.Match(s.Clusters, c.ID)
}

// Everywhere reports whether the scope is every cluster.
func (s Scope) Everywhere() bool { return len(s.Labels) == 0 && s.Clusters == "*" }

// Contains reports whether scope a holds every cluster scope s may ever
// hold, decided from the two scopes alone (conservative: a false answer
// may be wrong, a true one never is). a contains s when a is "*", or s
// equals a, or a is a prefix glob "p*" (no other wildcard) and s is a glob
// that starts with p, or both are label selectors and a's pairs are a
// subset of s's. Anything else (a glob against labels, globs with inner
// wildcards) is refused: who may grant it is an admin on "*".
func (a Scope) Contains(s Scope) bool {
	switch {
	case a.Everywhere():
		return true
	case len(a.Labels) > 0 || len(s.Labels) > 0:
		if len(a.Labels) == 0 || len(s.Labels) == 0 {
			return false
		}
		for k, v := range a.Labels {
			if got, ok := s.Labels[k]; !ok || got != v {
				return false
			}
		}
		return true
	case a.Clusters == s.Clusters:
		return true
	}
	p, ok := strings.CutSuffix(a.Clusters, "*")
	return ok && !strings.ContainsAny(p, `*?[]{}\`) && strings.HasPrefix(s.Clusters, p)
}

// TokenGrants are a token's global roles as grants on every cluster.
func TokenGrants(roles []string) []Grant {
	out := make([]Grant, len(roles))
	for i, r := range roles {
		out[i] = Grant{Role: r, Scope: Everywhere, Via: ViaToken}
	}
	return out
}

// FromStore is a stored grant as the evaluation sees it.
func FromStore(g store.Grant) Grant {
	via := "person:" + g.Person
	if g.Team != "" {
		via = "team:" + g.Team
	}
	return Grant{Role: g.Role, Scope: Scope{Clusters: g.Clusters, Labels: g.Labels}, Via: via}
}

// Holds reports whether one grant gives p somewhere (the route check).
func Holds(grants []Grant, p Permission) bool {
	return slices.ContainsFunc(grants, func(g Grant) bool { return slices.Contains(roleGrants[g.Role], p) })
}

// HoldsOn reports whether one grant gives p on cluster c.
func HoldsOn(grants []Grant, p Permission, c Cluster) bool {
	return slices.ContainsFunc(grants, func(g Grant) bool {
		return slices.Contains(roleGrants[g.Role], p) && g.Scope.Covers(c)
	})
}

// HoldsEverywhere reports whether one grant gives p on every cluster.
func HoldsEverywhere(grants []Grant, p Permission) bool {
	return slices.ContainsFunc(grants, func(g Grant) bool {
		return slices.Contains(roleGrants[g.Role], p) && g.Scope.Everywhere()
	})
}

// MayGrant reports whether grants let their holder make (or revoke) a
// grant of role on scope s: one admin grant whose scope contains s. Nobody
// grants more than they hold: the role granted is at most admin, which the
// admin grant holds on s already.
func MayGrant(grants []Grant, s Scope) bool {
	return slices.ContainsFunc(grants, func(g Grant) bool { return g.Role == store.RoleAdmin && g.Scope.Contains(s) })
}

// Global reports whether p is over what belongs to no cluster (tokens,
// notification destinations): only a grant of it on every cluster gives
// it.
func Global(p Permission) bool { return p == Tokens || p == Notify }

// GrantRoles are the roles a grant may give (enroll is for join tokens
// alone).
var GrantRoles = []string{store.RoleViewer, store.RoleOperator, store.RoleApprover, store.RoleAdmin}

// CheckGrant refuses a grant whose role or scope is not acceptable.
func CheckGrant(role string, s Scope) error {
	if !slices.Contains(GrantRoles, role) {
		return fmt.Errorf("%w: unknown role %q (want one of %s)", ErrScope, role, strings.Join(GrantRoles, ", "))
	}
	return s.Check()
}
