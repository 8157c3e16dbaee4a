package auth

import (
	"testing"

	"github.com/musterhq/muster/core/store"
)

func TestScopeCovers(t *testing.T) {
	t.Parallel()
	prod := Cluster{ID: "prod-db-1", Labels: map[string]string{"tier": "prod", "team": "db"}}
	staging := Cluster{ID: "staging-1", Labels: map[string]string{"tier": "staging"}}
	for _, tc := range []struct {
		name  string
		scope Scope
		c     Cluster
		want  bool
	}{
		{"everywhere", Everywhere, prod, true},
		{"glob", Scope{Clusters: "prod-*"}, prod, true},
		{"glob other", Scope{Clusters: "staging-*"}, prod, false},
		{"exact", Scope{Clusters: "staging-1"}, staging, true},
		{"labels subset", Scope{Labels: map[string]string{"tier": "prod"}}, prod, true},
		{"labels all must match", Scope{Labels: map[string]string{"tier": "prod", "team": "web"}}, prod, false},
		{"labels missing", Scope{Labels: map[string]string{"team": "db"}}, staging, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := tc.scope.Covers(tc.c); got != tc.want {
				t.Errorf("%v covers %v = %v, want %v", tc.scope, tc.c, got, tc.want)
			}
		})
	}
}

// TestEachGrantOnItsOwn: an operator grant on staging and a viewer grant
// on prod never add up to operating prod.
func TestEachGrantOnItsOwn(t *testing.T) {
	t.Parallel()
	gs := []Grant{
		{Role: store.RoleOperator, Scope: Scope{Clusters: "staging-*"}, Via: "team:web"},
		{Role: store.RoleViewer, Scope: Scope{Labels: map[string]string{"tier": "prod"}}, Via: "person:dana"},
	}
	prod := Cluster{ID: "prod-1", Labels: map[string]string{"tier": "prod"}}
	staging := Cluster{ID: "staging-1"}
	if !HoldsOn(gs, Read, prod) || HoldsOn(gs, Create, prod) {
		t.Errorf("on prod: read %v create %v, want read only", HoldsOn(gs, Read, prod), HoldsOn(gs, Create, prod))
	}
	if !HoldsOn(gs, Create, staging) || HoldsOn(gs, Approve, staging) {
		t.Error("on staging: want create, not approve")
	}
	if HoldsOn(gs, Read, Cluster{ID: "dev-1"}) {
		t.Error("dev-1 is outside every scope")
	}
	if !Holds(gs, Create) || Holds(gs, Approve) || HoldsEverywhere(gs, Read) {
		t.Error("holds somewhere: create yes, approve no; read everywhere no")
	}
	if tok := TokenGrants([]string{store.RoleViewer}); !HoldsEverywhere(tok, Read) || !HoldsOn(tok, Read, prod) || Holds(tok, Create) {
		t.Error("a token's viewer role is viewer on every cluster")
	}
}

func TestScopeContains(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		a, s Scope
		want bool
	}{
		{"everywhere holds a glob", Everywhere, Scope{Clusters: "prod-*"}, true},
		{"everywhere holds labels", Everywhere, Scope{Labels: map[string]string{"tier": "prod"}}, true},
		{"equal globs", Scope{Clusters: "prod-db-?"}, Scope{Clusters: "prod-db-?"}, true},
		{"prefix holds a narrower prefix", Scope{Clusters: "prod-*"}, Scope{Clusters: "prod-db-*"}, true},
		{"prefix holds a name", Scope{Clusters: "prod-*"}, Scope{Clusters: "prod-db-1"}, true},
		{"prefix does not hold a wider one", Scope{Clusters: "prod-db-*"}, Scope{Clusters: "prod-*"}, false},
		{"prefix does not hold everywhere", Scope{Clusters: "prod-*"}, Everywhere, false},
		{"prefix does not hold another", Scope{Clusters: "prod-*"}, Scope{Clusters: "staging-*"}, false},
		{"inner wildcard refused", Scope{Clusters: "prod-*-db*"}, Scope{Clusters: "prod-x-db1"}, false},
		{"labels subset", Scope{Labels: map[string]string{"tier": "prod"}},
			Scope{Labels: map[string]string{"tier": "prod", "team": "db"}}, true},
		{"labels superset refused", Scope{Labels: map[string]string{"tier": "prod", "team": "db"}},
			Scope{Labels: map[string]string{"tier": "prod"}}, false},
		{"labels do not hold a glob", Scope{Labels: map[string]string{"tier": "prod"}}, Scope{Clusters: "prod-1"}, false},
		{"a glob does not hold labels", Scope{Clusters: "prod-*"}, Scope{Labels: map[string]string{"tier": "prod"}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := tc.a.Contains(tc.s); got != tc.want {
				t.Errorf("%v contains %v = %v, want %v", tc.a, tc.s, got, tc.want)
			}
		})
	}
}

func TestMayGrantOnlyWithAdminOnAContainingScope(t *testing.T) {
	t.Parallel()
	gs := []Grant{{Role: store.RoleAdmin, Scope: Scope{Clusters: "prod-*"}}, {Role: store.RoleOperator, Scope: Everywhere}}
	if !MayGrant(gs, Scope{Clusters: "prod-db-*"}) {
		t.Error("admin on prod-* may grant on prod-db-*")
	}
	if MayGrant(gs, Everywhere) || MayGrant(gs, Scope{Clusters: "staging-*"}) {
		t.Error("an operator on * may not grant; admin on prod-* may not grant on * nor staging-*")
	}
}

func TestCheckGrant(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		role string
		s    Scope
		ok   bool
	}{
		{store.RoleViewer, Scope{Clusters: "staging-*"}, true},
		{store.RoleAdmin, Scope{Labels: map[string]string{"tier": "prod"}}, true},
		{store.RoleEnroll, Everywhere, false},
		{"root", Everywhere, false},
		{store.RoleViewer, Scope{}, false},
		{store.RoleViewer, Scope{Clusters: "a", Labels: map[string]string{"x": "y"}}, false},
		{store.RoleViewer, Scope{Clusters: "[a"}, false},
		{store.RoleViewer, Scope{Labels: map[string]string{"": "y"}}, false},
	} {
		if err := CheckGrant(tc.role, tc.s); (err == nil) != tc.ok {
			t.Errorf("CheckGrant(%s, %v) = %v, want ok %v", tc.role, tc.s, err, tc.ok)
		}
	}
}
