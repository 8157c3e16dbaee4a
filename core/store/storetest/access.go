package storetest

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/action"
)

// testTeamsAndMembership: a team keeps its members (lowercase) and groups;
// TeamsOf finds a person's teams by membership or by a mapped group;
// TeamMembers adds the people whose last groups map to the team; changes
// report whether they changed anything, and name an unknown team
// ErrNotFound.
func testTeamsAndMembership(t *testing.T, db NewDB) {
	s := setup(t, db)
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		if err := tx.InsertTeam(ctx, &store.Team{Name: "db", Members: []string{"Dana"}, Groups: []string{"db-oncall"},
			Source: store.SourceConfig, CreatedBy: "admin", CreatedTS: t0}); err != nil {
			return err
		}
		if err := tx.InsertTeam(ctx, &store.Team{Name: "sre", CreatedTS: t0}); err != nil {
			return err
		}
		if err := tx.InsertTeam(ctx, &store.Team{Name: "db"}); !errors.Is(err, store.ErrExists) {
			t.Errorf("second team db = %v, want ErrExists", err)
		}
		if changed, err := tx.AddTeamMember(ctx, "sre", "sam"); err != nil || !changed {
			t.Errorf("add sam = %v, %v, want a change", changed, err)
		}
		if changed, err := tx.AddTeamMember(ctx, "sre", "SAM"); err != nil || changed {
			t.Errorf("add SAM again = %v, %v, want no change", changed, err)
		}
		if _, err := tx.AddTeamMember(ctx, "nope", "sam"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("add to an unknown team = %v, want ErrNotFound", err)
		}
		if _, err := tx.RemoveTeamGroup(ctx, "nope", "g"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("remove from an unknown team = %v, want ErrNotFound", err)
		}
		return tx.UpsertPerson(ctx, &store.Person{Name: "Olga", Source: "oidc", Groups: []string{"db-oncall", "x"}, LastSeenTS: t0})
	})
	read(t, s, func(ctx context.Context, r store.Reader) error {
		tm, err := r.Team(ctx, "db")
		if err != nil {
			return err
		}
		if !slices.Equal(tm.Members, []string{"dana"}) || !slices.Equal(tm.Groups, []string{"db-oncall"}) ||
			tm.Source != store.SourceConfig || tm.CreatedBy != "admin" || !tm.CreatedTS.Equal(t0) {
			t.Errorf("team db = %+v", tm)
		}
		for _, tc := range []struct {
			person string
			groups []string
			want   []string
		}{
			{"DANA", nil, []string{"db"}},
			{"sam", nil, []string{"sre"}},
			{"olga", []string{"db-oncall"}, []string{"db"}},
			{"olga", nil, []string{}},
			{"nobody", []string{"other"}, []string{}},
		} {
			got, err := r.TeamsOf(ctx, tc.person, tc.groups)
			if err != nil {
				return err
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("TeamsOf(%s, %v) = %v, want %v", tc.person, tc.groups, got, tc.want)
			}
		}
		members, err := r.TeamMembers(ctx, "db")
		if err != nil {
			return err
		}
		if !slices.Equal(members, []string{"dana", "olga"}) {
			t.Errorf("members of db = %v, want dana (listed) and olga (by group)", members)
		}
		if _, err := r.TeamMembers(ctx, "nope"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("members of an unknown team = %v, want ErrNotFound", err)
		}
		people, err := r.People(ctx)
		if err != nil {
			return err
		}
		if len(people) != 1 || people[0].Name != "olga" || !slices.Equal(people[0].Groups, []string{"db-oncall", "x"}) {
			t.Errorf("people = %+v", people)
		}
		return nil
	})
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		return tx.UpsertPerson(ctx, &store.Person{Name: "olga", Source: "oidc", Groups: nil, LastSeenTS: t0})
	})
	read(t, s, func(ctx context.Context, r store.Reader) error {
		members, err := r.TeamMembers(ctx, "db")
		if err != nil {
			return err
		}
		if !slices.Equal(members, []string{"dana"}) {
			t.Errorf("members of db after olga left the group = %v, want dana", members)
		}
		return nil
	})
}

// testGrants: grants round trip with a glob or labels; GrantsOf finds a
// person's own and their teams'; deleting a team deletes its grants.
func testGrants(t *testing.T, db NewDB) {
	s := setup(t, db)
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		if err := tx.InsertTeam(ctx, &store.Team{Name: "db"}); err != nil {
			return err
		}
		for _, g := range []store.Grant{
			{ID: "g1", Team: "db", Role: store.RoleApprover, Clusters: "prod-db-*", CreatedTS: t0},
			{ID: "g2", Person: "Dana", Role: store.RoleViewer, Labels: map[string]string{"tier": "prod"}, CreatedBy: "root",
				Source: store.SourceConfig, CreatedTS: t0.Add(1)},
			{ID: "g3", Person: "eve", Role: store.RoleAdmin, Clusters: "*", CreatedTS: t0.Add(2)},
		} {
			if err := tx.InsertGrant(ctx, &g); err != nil {
				return err
			}
		}
		if err := tx.InsertGrant(ctx, &store.Grant{ID: "g1", Person: "x", Role: "viewer", Clusters: "*"}); !errors.Is(err, store.ErrExists) {
			t.Errorf("grant g1 again = %v, want ErrExists", err)
		}
		return nil
	})
	read(t, s, func(ctx context.Context, r store.Reader) error {
		gs, err := r.GrantsOf(ctx, "DANA", []string{"db"})
		if err != nil {
			return err
		}
		if len(gs) != 2 || gs[0].ID != "g1" || gs[1].ID != "g2" || gs[1].Person != "dana" ||
			gs[1].Labels["tier"] != "prod" || gs[1].Source != store.SourceConfig || gs[1].CreatedBy != "root" {
			t.Errorf("grants of dana and db = %+v", gs)
		}
		g, err := r.Grant(ctx, "g1")
		if err != nil {
			return err
		}
		if g.Team != "db" || g.Role != store.RoleApprover || g.Clusters != "prod-db-*" || g.Labels != nil {
			t.Errorf("grant g1 = %+v", g)
		}
		if _, err := r.Grant(ctx, "nope"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("unknown grant = %v, want ErrNotFound", err)
		}
		return nil
	})
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		if err := tx.DeleteGrant(ctx, "g3"); err != nil {
			return err
		}
		if err := tx.DeleteGrant(ctx, "g3"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("delete g3 twice = %v, want ErrNotFound", err)
		}
		if err := tx.DeleteTeam(ctx, "nope"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("delete an unknown team = %v, want ErrNotFound", err)
		}
		return tx.DeleteTeam(ctx, "db")
	})
	read(t, s, func(ctx context.Context, r store.Reader) error {
		gs, err := r.Grants(ctx)
		if err != nil {
			return err
		}
		if len(gs) != 1 || gs[0].ID != "g2" {
			t.Errorf("grants after deleting g3 and team db = %+v, want g2 alone", gs)
		}
		return nil
	})
}

// testClusterLabelsAndScopedLists: a cluster's labels survive the
// orchestrator's PutCluster; ClusterIn keeps the actions and runs of the
// clusters listed (none when empty).
func testClusterLabelsAndScopedLists(t *testing.T, db NewDB) {
	s := setup(t, db)
	putClusterNode(t, s, "c1", "n1")
	putClusterNode(t, s, "c2", "n1")
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		if err := tx.PutClusterLabels(ctx, "c1", map[string]string{"tier": "prod"}); err != nil {
			return err
		}
		if err := tx.PutClusterLabels(ctx, "c3", map[string]string{"tier": "dev"}); err != nil {
			return err
		}
		if err := tx.PutCluster(ctx, &store.Cluster{ID: "c1", Status: store.ClusterAlert, StatusReason: "x"}); err != nil {
			return err
		}
		for i, c := range []string{"c1", "c2", "c1"} {
			rec := record(action.NewID())
			rec.ClusterID = c
			rec.CreatedTS = t0.Add(time.Duration(i))
			if err := tx.InsertAction(ctx, rec); err != nil {
				return err
			}
		}
		return nil
	})
	read(t, s, func(ctx context.Context, r store.Reader) error {
		c, err := r.Cluster(ctx, "c1")
		if err != nil {
			return err
		}
		if c.Labels["tier"] != "prod" || c.Status != store.ClusterAlert {
			t.Errorf("cluster c1 = %+v, want labels kept through PutCluster", c)
		}
		cs, err := r.Clusters(ctx)
		if err != nil {
			return err
		}
		if len(cs) != 3 || cs[2].ID != "c3" || cs[2].Labels["tier"] != "dev" || cs[1].Labels != nil {
			t.Errorf("clusters = %+v", cs)
		}
		for _, tc := range []struct {
			in   []string
			want int
		}{{nil, 3}, {[]string{}, 0}, {[]string{"c1"}, 2}, {[]string{"c2", "c3"}, 1}} {
			recs, err := r.ListActions(ctx, store.ListQuery{ClusterIn: tc.in})
			if err != nil {
				return err
			}
			if len(recs) != tc.want {
				t.Errorf("actions within %v = %d, want %d", tc.in, len(recs), tc.want)
			}
			runs, err := r.ListRuns(ctx, store.RunQuery{ClusterIn: tc.in})
			if err != nil {
				return err
			}
			if len(runs) != 0 {
				t.Errorf("runs = %d, want none", len(runs))
			}
		}
		return nil
	})
}
