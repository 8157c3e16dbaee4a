package ops_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/musterhq/muster/core/approval"
	"github.com/musterhq/muster/core/auth"
	"github.com/musterhq/muster/core/ops"
	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/live"
	"github.com/musterhq/muster/shared/wire"
)

var admin = ops.Caller{Name: "root", Roles: []string{store.RoleAdmin}, Addr: "192.0.2.9"}

// Identify resolves a person's grants: its own, its teams' by membership
// and by a mapped group claim; a cluster it may not read is 404 on every
// verb, one it reads but may not change 403; label selectors match the
// cluster's labels.
func TestIdentifyAndAuthorizeOn(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	err := e.st.Update(ctx, func(tx store.Tx) error {
		if err := tx.PutClusterLabels(ctx, "prod", map[string]string{"tier": "prod"}); err != nil {
			return err
		}
		return tx.PutClusterLabels(ctx, "staging-1", nil)
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.ops.CreateTeam(ctx, admin, &wire.CreateTeamRequest{Name: "web", Members: []string{"Wes"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.ops.CreateTeam(ctx, admin, &wire.CreateTeamRequest{Name: "db", Groups: []string{"db-oncall"}}); err != nil {
		t.Fatal(err)
	}
	for _, g := range []wire.CreateGrantRequest{
		{Team: "web", Role: store.RoleOperator, Clusters: "staging-*"},
		{Team: "db", Role: store.RoleViewer, Labels: map[string]string{"tier": "prod"}},
	} {
		if _, err := e.ops.CreateGrant(ctx, admin, &g); err != nil {
			t.Fatal(err)
		}
	}
	wes, err := e.ops.Identify(ctx, "wes", nil, nil, "192.0.2.10")
	if err != nil {
		t.Fatal(err)
	}
	if len(wes.Grants) != 1 || wes.Grants[0].Via != "team:web" {
		t.Fatalf("wes's grants = %+v, want operator on staging-* through team web", wes.Grants)
	}
	if _, err := e.ops.DrainNode(ctx, wes, "prod", "db-1", ""); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("wes drains a prod node: %v, want ErrNotFound (404)", err)
	}
	if err := ops.AuthorizeOn(wes, auth.Create, "staging-1"); err != nil {
		t.Errorf("wes creates on staging-1: %v", err)
	}
	dana, err := e.ops.Identify(ctx, "dana", nil, []string{"db-oncall"}, "")
	if err != nil {
		t.Fatal(err)
	}
	if err := ops.AuthorizeOn(dana, auth.Read, "prod"); err != nil {
		t.Errorf("dana (db by group, viewer on tier=prod) reads prod: %v", err)
	}
	if _, err := e.ops.DrainNode(ctx, dana, "prod", "db-1", ""); !errors.Is(err, ops.ErrForbidden) {
		t.Errorf("dana drains a prod node: %v, want forbidden (403)", err)
	}
	if err := ops.AuthorizeOn(dana, auth.Read, "staging-1"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("dana reads staging-1: %v, want ErrNotFound", err)
	}
	// Without the group claim, dana holds nothing.
	if dana, _ = e.ops.Identify(ctx, "dana", nil, nil, ""); dana.Can(auth.Read) {
		t.Errorf("dana without the group still reads: %+v", dana.Grants)
	}
	v, err := e.ops.Visibility(ctx, wes)
	if err != nil {
		t.Fatal(err)
	}
	if v.All() || v.Has("prod") || !v.Has("staging-1") || !v.Has("staging-new") || v.Event(&store.Event{}) {
		t.Errorf("wes's visibility: all %v prod %v staging-1 %v", v.All(), v.Has("prod"), v.Has("staging-1"))
	}
}

// Seed makes the configuration's teams and grants once: the same
// configuration again changes nothing and appends no event; a grant gone
// from it is revoked; teams and grants made through the API stay.
func TestSeedIsIdempotent(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	if _, err := e.ops.CreateTeam(ctx, admin, &wire.CreateTeamRequest{Name: "api-team"}); err != nil {
		t.Fatal(err)
	}
	teams := []store.Team{{Name: "db", Members: []string{"dana"}, Groups: []string{"db-oncall"}}}
	grants := []store.Grant{{ID: "config-1", Team: "db", Role: store.RoleApprover, Clusters: "prod-db-*"},
		{ID: "config-2", Person: "dana", Role: store.RoleViewer, Clusters: "*"}}
	count := func() int {
		var n int64
		_ = e.st.Read(ctx, func(r store.Reader) error {
			var err error
			n, err = r.LatestSeq(ctx)
			return err
		})
		return int(n)
	}
	if err := e.ops.Seed(ctx, teams, grants); err != nil {
		t.Fatal(err)
	}
	before := count()
	if err := e.ops.Seed(ctx, teams, grants); err != nil {
		t.Fatal(err)
	}
	if after := count(); after != before {
		t.Errorf("the same configuration again appended %d events", after-before)
	}
	teams[0].Members = []string{"olga"}
	if err := e.ops.Seed(ctx, teams, grants[:1]); err != nil {
		t.Fatal(err)
	}
	err := e.st.Read(ctx, func(r store.Reader) error {
		gs, err := r.Grants(ctx)
		if err != nil {
			return err
		}
		if len(gs) != 1 || gs[0].ID != "config-1" || gs[0].Source != store.SourceConfig {
			t.Errorf("grants = %+v, want config-1 alone", gs)
		}
		m, err := r.TeamMembers(ctx, "db")
		if err != nil {
			return err
		}
		if len(m) != 1 || m[0] != "olga" {
			t.Errorf("members of db = %v, want olga", m)
		}
		_, err = r.Team(ctx, "api-team")
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// A team an approval level names decides who counts at that level, so
// only a caller holding the grants permission on every cluster may make,
// delete or change it, whatever grants the team holds.
func TestLevelTeamTakesAdminEverywhere(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	pol := approval.DefaultPolicy()
	pol.Rules = []approval.Rule{{Kind: "*", Cluster: "prod", Levels: []approval.Level{{Teams: []string{"DBA"}, Min: 1}}}}
	e.ops = ops.New(ops.Config{Store: e.st, Policy: live.New(pol), Nudge: e.syncs})
	ada := ops.Caller{Name: "ada", Grants: []auth.Grant{
		{Role: store.RoleAdmin, Scope: auth.Scope{Clusters: "dev-*"}, Via: "person:ada"},
		{Role: store.RoleApprover, Scope: auth.Scope{Clusters: "*"}, Via: "person:ada"}}}
	forbidden := func(what string, err error) {
		t.Helper()
		var fe *ops.ForbiddenError
		if !errors.As(err, &fe) || !strings.Contains(fe.Doing, "change team dba, which approval levels name") {
			t.Errorf("ada %s: %v, want 403 naming the approval levels", what, err)
		}
	}
	_, err := e.ops.CreateTeam(ctx, ada, &wire.CreateTeamRequest{Name: "dba", Members: []string{"ada"}})
	forbidden("creates dba", err)
	// A team no level names is ada's to make.
	if _, err := e.ops.CreateTeam(ctx, ada, &wire.CreateTeamRequest{Name: "devs", Members: []string{"ada"}}); err != nil {
		t.Errorf("ada creates devs: %v", err)
	}
	if _, err := e.ops.CreateTeam(ctx, admin, &wire.CreateTeamRequest{Name: "dba", Members: []string{"dana"}}); err != nil {
		t.Fatal(err)
	}
	for _, ch := range [][2]string{{ops.AddMember, "ada"}, {ops.RemoveMember, "dana"}, {ops.MapGroup, "everyone"}} {
		_, err := e.ops.ChangeTeam(ctx, ada, "dba", ch[0], ch[1])
		forbidden(ch[0]+" "+ch[1]+" on dba", err)
	}
	forbidden("deletes dba", e.ops.DeleteTeam(ctx, ada, "dba"))
	err = e.st.Read(ctx, func(r store.Reader) error {
		m, err := r.TeamMembers(ctx, "dba")
		if err == nil && !slices.Equal(m, []string{"dana"}) {
			t.Errorf("members of dba = %v, want dana alone", m)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	// A global admin may.
	if _, err := e.ops.ChangeTeam(ctx, admin, "dba", ops.AddMember, "ada"); err != nil {
		t.Errorf("admin adds ada to dba: %v", err)
	}
	if err := e.ops.DeleteTeam(ctx, admin, "dba"); err != nil {
		t.Errorf("admin deletes dba: %v", err)
	}
}

// A configuration team named like a team made through the API fails the
// seed and changes nothing: the configuration's grants never reach the
// members added through the API.
func TestSeedRefusesATeamMadeThroughTheAPI(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	if _, err := e.ops.CreateTeam(ctx, admin, &wire.CreateTeamRequest{Name: "t", Members: []string{"mallory"}}); err != nil {
		t.Fatal(err)
	}
	err := e.ops.Seed(ctx, []store.Team{{Name: "t", Members: []string{"alice"}}},
		[]store.Grant{{ID: "config-1", Team: "t", Role: store.RoleAdmin, Clusters: "*"}})
	if err == nil || !strings.Contains(err.Error(), "configuration team t") {
		t.Errorf("seed over an API team: %v, want an error naming team t", err)
	}
	mallory, err := e.ops.Identify(ctx, "mallory", nil, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	if mallory.Can(auth.Grants) || len(mallory.Grants) != 0 {
		t.Errorf("mallory holds %+v after the seed, want nothing", mallory.Grants)
	}
	err = e.st.Read(ctx, func(r store.Reader) error {
		gs, err := r.Grants(ctx)
		if err == nil && len(gs) != 0 {
			t.Errorf("grants = %+v, want none", gs)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}
