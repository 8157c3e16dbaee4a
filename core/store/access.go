package store

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Access: teams, their members and mapped groups, grants and the people
// seen at sign-in, in both stores (docs/architecture.md, "Access: people,
// teams and grants"). Person names are kept lowercase (PersonKey): names
// compare ignoring case.

// Sources of a team or a grant: made through the API (""), or seeded from
// the configuration.
const (
	SourceAPI    = ""
	SourceConfig = "config"
)

// Events of access changes.
const (
	EventTeamCreated  = "team.created"
	EventTeamChanged  = "team.changed"
	EventTeamDeleted  = "team.deleted"
	EventGrantCreated = "grant.created"
	EventGrantRevoked = "grant.revoked"
)

// Team is a named set of people: listed members, and the people whose
// identity provider's group claims include one of Groups.
type Team struct {
	Name      string    `json:"name"`
	Members   []string  `json:"members"`
	Groups    []string  `json:"groups"`
	Source    string    `json:"source,omitempty"`
	CreatedBy string    `json:"created_by,omitempty"`
	CreatedTS time.Time `json:"created_ts"`
}

// Grant binds a team or a person (exactly one is set) to one role on a
// scope: a cluster glob, or a label selector (exactly one is set).
type Grant struct {
	ID        string            `json:"id"`
	Team      string            `json:"team,omitempty"`
	Person    string            `json:"person,omitempty"`
	Role      string            `json:"role"`
	Clusters  string            `json:"clusters,omitempty"`
	Labels    map[string]string `json:"labels,omitempty"`
	Source    string            `json:"source,omitempty"`
	CreatedBy string            `json:"created_by,omitempty"`
	CreatedTS time.Time         `json:"created_ts"`
}

// Person is someone seen at sign-in, with the groups they last signed in
// with (single sign-on writes it).
type Person struct {
	Name       string    `json:"name"`
	Source     string    `json:"source"`
	Groups     []string  `json:"groups"`
	LastSeenTS time.Time `json:"last_seen_ts"`
}

// PersonKey is how a person's name is kept: lowercase.
func PersonKey(name string) string { return strings.ToLower(strings.TrimSpace(name)) }

// Teams is Reader.Teams of both stores.
func (r Reads) Teams(ctx context.Context) ([]Team, error) {
	return r.teams(ctx, "")
}

// Team is Reader.Team of both stores.
func (r Reads) Team(ctx context.Context, name string) (*Team, error) {
	ts, err := r.teams(ctx, name)
	if err != nil {
		return nil, err
	}
	if len(ts) == 0 {
		return nil, fmt.Errorf("team %q: %w", name, ErrNotFound)
	}
	return &ts[0], nil
}

// teams reads every team, or the one named name, with its members and
// groups.
func (r Reads) teams(ctx context.Context, name string) ([]Team, error) {
	d := r.Dialect
	where, args := "", []any{}
	if name != "" {
		where, args = ` WHERE name = `+d.Placeholder(1), []any{name}
	}
	var out []Team
	idx := map[string]int{}
	err := r.Query(ctx, `SELECT name, source, created_by, created_ts FROM teams`+where+` ORDER BY name`, args,
		func(row Row) error {
			var t Team
			if err := row.Scan(&t.Name, &t.Source, &t.CreatedBy, d.timeInto(&t.CreatedTS)); err != nil {
				return err
			}
			t.Members, t.Groups = []string{}, []string{}
			idx[t.Name] = len(out)
			out = append(out, t)
			return nil
		})
	if err != nil {
		return nil, fmt.Errorf("teams: %w", err)
	}
	where = ""
	if name != "" {
		where = ` WHERE team = ` + d.Placeholder(1)
	}
	for _, part := range []struct {
		stmt string
		add  func(t *Team, v string)
	}{
		{`SELECT team, person FROM team_members` + where + ` ORDER BY team, person`,
			func(t *Team, v string) { t.Members = append(t.Members, v) }},
		{`SELECT team, group_name FROM team_groups` + where + ` ORDER BY team, group_name`,
			func(t *Team, v string) { t.Groups = append(t.Groups, v) }},
	} {
		err := r.Query(ctx, part.stmt, args, func(row Row) error {
			var team, v string
			if err := row.Scan(&team, &v); err != nil {
				return err
			}
			if i, ok := idx[team]; ok {
				part.add(&out[i], v)
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("teams: %w", err)
		}
	}
	return out, nil
}

// TeamsOf is Reader.TeamsOf of both stores: the teams person belongs to,
// by membership or by one of groups mapped to the team, sorted.
func (r Reads) TeamsOf(ctx context.Context, person string, groups []string) ([]string, error) {
	d := r.Dialect
	stmt := `SELECT team FROM team_members WHERE person = ` + d.Placeholder(1)
	args := []any{PersonKey(person)}
	if len(groups) > 0 {
		b := &listSQL{ph: d.Placeholder, args: args}
		b.in("group_name", groups)
		stmt += ` UNION SELECT team FROM team_groups WHERE ` + b.where[0]
		args = b.args
	}
	out, err := strs(ctx, r.Query, `SELECT DISTINCT team FROM (`+stmt+`) AS t ORDER BY team`, args...)
	if err != nil {
		return nil, fmt.Errorf("teams of %q: %w", person, err)
	}
	return out, nil
}

// TeamMembers is Reader.TeamMembers of both stores: the team's listed
// members and the people whose last groups (People) include one mapped to
// the team, sorted, each once (ErrNotFound when there is no such team).
func (r Reads) TeamMembers(ctx context.Context, team string) ([]string, error) {
	t, err := r.Team(ctx, team)
	if err != nil {
		return nil, err
	}
	out := slices.Clone(t.Members)
	if len(t.Groups) > 0 {
		people, err := r.People(ctx)
		if err != nil {
			return nil, err
		}
		for _, p := range people {
			if slices.ContainsFunc(p.Groups, func(g string) bool { return slices.Contains(t.Groups, g) }) {
				out = append(out, p.Name)
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// People is Reader.People of both stores, by name.
func (r Reads) People(ctx context.Context) ([]Person, error) {
	d := r.Dialect
	var out []Person
	err := r.Query(ctx, `SELECT name, source, groups, last_seen_ts FROM people ORDER BY name`, nil, func(row Row) error {
		var p Person
		if err := row.Scan(&p.Name, &p.Source, d.ListInto(&p.Groups), d.timeInto(&p.LastSeenTS)); err != nil {
			return err
		}
		out = append(out, p)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("people: %w", err)
	}
	return out, nil
}

const grantColumns = `id, team, person, role, clusters, labels, source, created_by, created_ts`

func (d Dialect) scanGrant(row Row) (Grant, error) {
	var g Grant
	var labels string
	if err := row.Scan(&g.ID, &g.Team, &g.Person, &g.Role, &g.Clusters, &labels, &g.Source, &g.CreatedBy,
		d.timeInto(&g.CreatedTS)); err != nil {
		return g, err
	}
	if labels != "" && labels != "{}" {
		if err := json.Unmarshal([]byte(labels), &g.Labels); err != nil {
			return g, fmt.Errorf("grant %s: labels: %w", g.ID, err)
		}
	}
	return g, nil
}

func (r Reads) grants(ctx context.Context, where string, args ...any) ([]Grant, error) {
	var out []Grant
	err := r.Query(ctx, `SELECT `+grantColumns+` FROM grants`+where+` ORDER BY created_ts, id`, args, func(row Row) error {
		g, err := r.Dialect.scanGrant(row)
		if err != nil {
			return err
		}
		out = append(out, g)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("grants: %w", err)
	}
	return out, nil
}

// Grants is Reader.Grants of both stores: every grant, oldest first.
func (r Reads) Grants(ctx context.Context) ([]Grant, error) { return r.grants(ctx, "") }

// GrantsOf is Reader.GrantsOf of both stores: the grants of person and of
// teams, oldest first.
func (r Reads) GrantsOf(ctx context.Context, person string, teams []string) ([]Grant, error) {
	b := &listSQL{ph: r.Dialect.Placeholder}
	var conds []string
	if PersonKey(person) != "" {
		conds = append(conds, "person = "+b.arg(PersonKey(person)))
	}
	if len(teams) > 0 {
		b.in("team", teams)
		conds = append(conds, b.where[0])
	}
	if len(conds) == 0 {
		return nil, nil
	}
	return r.grants(ctx, " WHERE "+strings.Join(conds, " OR "), b.args...)
}

// Grant is Reader.Grant of both stores.
func (r Reads) Grant(ctx context.Context, id string) (*Grant, error) {
	gs, err := r.grants(ctx, " WHERE id = "+r.Dialect.Placeholder(1), id)
	if err != nil {
		return nil, err
	}
	if len(gs) == 0 {
		return nil, fmt.Errorf("grant %q: %w", id, ErrNotFound)
	}
	return &gs[0], nil
}

// InsertTeam is Tx.InsertTeam of both stores: the team with its members
// and groups (ErrExists when the name is taken). A zero CreatedTS is now.
func (w Writes) InsertTeam(ctx context.Context, t *Team) error {
	d := w.Dialect
	if t.CreatedTS.IsZero() {
		t.CreatedTS = Now()
	}
	what := fmt.Sprintf("insert team %q", t.Name)
	ps, args := d.values(1, t.Name, t.Source, t.CreatedBy, d.Time(t.CreatedTS))
	n, err := w.Exec(ctx, what, `INSERT INTO teams (name, source, created_by, created_ts) VALUES (`+ps+`) ON CONFLICT DO NOTHING`, args...)
	if err == nil && n == 0 {
		err = fmt.Errorf("%s: %w", what, ErrExists)
	}
	if err != nil {
		return err
	}
	for _, m := range t.Members {
		if _, err := w.AddTeamMember(ctx, t.Name, m); err != nil {
			return err
		}
	}
	for _, g := range t.Groups {
		if _, err := w.AddTeamGroup(ctx, t.Name, g); err != nil {
			return err
		}
	}
	return nil
}

// DeleteTeam is Tx.DeleteTeam of both stores: the team, its members, its
// groups and its grants (ErrNotFound when there is no such team).
func (w Writes) DeleteTeam(ctx context.Context, name string) error {
	what := fmt.Sprintf("delete team %q", name)
	ph := w.Dialect.Placeholder(1)
	for _, stmt := range []string{`DELETE FROM team_members WHERE team = ` + ph, `DELETE FROM team_groups WHERE team = ` + ph,
		`DELETE FROM grants WHERE team = ` + ph} {
		if _, err := w.Exec(ctx, what, stmt, name); err != nil {
			return err
		}
	}
	n, err := w.Exec(ctx, what, `DELETE FROM teams WHERE name = `+ph, name)
	if err == nil && n == 0 {
		err = fmt.Errorf("%s: %w", what, ErrNotFound)
	}
	return err
}

// teamRow adds or removes one row of a team's members or groups, and
// reports whether it changed anything (ErrNotFound: no such team).
func (w Writes) teamRow(ctx context.Context, add bool, table, col, team, v string) (bool, error) {
	d := w.Dialect
	what := fmt.Sprintf("team %q: %s %q", team, col, v)
	var n int64
	var err error
	if add {
		n, err = w.Exec(ctx, what, `INSERT INTO `+table+` (team, `+col+`) SELECT `+d.Placeholder(1)+`, `+d.Placeholder(2)+
			` WHERE EXISTS (SELECT 1 FROM teams WHERE name = `+d.Placeholder(3)+`) ON CONFLICT DO NOTHING`, team, v, team)
	} else {
		n, err = w.Exec(ctx, what, `DELETE FROM `+table+` WHERE team = `+d.Placeholder(1)+` AND `+col+` = `+d.Placeholder(2), team, v)
	}
	if err != nil {
		return false, err
	}
	if n == 0 {
		found := false
		if _, err := w.reads().one(ctx, `SELECT 1 FROM teams WHERE name = `+d.Placeholder(1), []any{team}, func(Row) error {
			found = true
			return nil
		}); err != nil {
			return false, err
		}
		if !found {
			return false, fmt.Errorf("team %q: %w", team, ErrNotFound)
		}
	}
	return n > 0, nil
}

// reads are the reads of the writer's transaction.
func (w Writes) reads() Reads { return Reads{Dialect: w.Dialect, Query: w.Query} }

// AddTeamMember is Tx.AddTeamMember of both stores.
func (w Writes) AddTeamMember(ctx context.Context, team, person string) (bool, error) {
	return w.teamRow(ctx, true, "team_members", "person", team, PersonKey(person))
}

// RemoveTeamMember is Tx.RemoveTeamMember of both stores.
func (w Writes) RemoveTeamMember(ctx context.Context, team, person string) (bool, error) {
	return w.teamRow(ctx, false, "team_members", "person", team, PersonKey(person))
}

// AddTeamGroup is Tx.AddTeamGroup of both stores.
func (w Writes) AddTeamGroup(ctx context.Context, team, group string) (bool, error) {
	return w.teamRow(ctx, true, "team_groups", "group_name", team, group)
}

// RemoveTeamGroup is Tx.RemoveTeamGroup of both stores.
func (w Writes) RemoveTeamGroup(ctx context.Context, team, group string) (bool, error) {
	return w.teamRow(ctx, false, "team_groups", "group_name", team, group)
}

// InsertGrant is Tx.InsertGrant of both stores (ErrExists when the id is
// taken). A zero CreatedTS is now; the person is kept lowercase.
func (w Writes) InsertGrant(ctx context.Context, g *Grant) error {
	d := w.Dialect
	if g.CreatedTS.IsZero() {
		g.CreatedTS = Now()
	}
	g.Person = PersonKey(g.Person)
	labels := "{}"
	if len(g.Labels) > 0 {
		b, err := json.Marshal(g.Labels)
		if err != nil {
			return fmt.Errorf("grant %s: labels: %w", g.ID, err)
		}
		labels = string(b)
	}
	what := fmt.Sprintf("insert grant %q", g.ID)
	ps, args := d.values(1, g.ID, g.Team, g.Person, g.Role, g.Clusters, labels, g.Source, g.CreatedBy, d.Time(g.CreatedTS))
	n, err := w.Exec(ctx, what, `INSERT INTO grants (`+grantColumns+`) VALUES (`+ps+`) ON CONFLICT DO NOTHING`, args...)
	if err == nil && n == 0 {
		err = fmt.Errorf("%s: %w", what, ErrExists)
	}
	return err
}

// DeleteGrant is Tx.DeleteGrant of both stores (ErrNotFound when there is
// no such grant).
func (w Writes) DeleteGrant(ctx context.Context, id string) error {
	what := fmt.Sprintf("delete grant %q", id)
	n, err := w.Exec(ctx, what, `DELETE FROM grants WHERE id = `+w.Dialect.Placeholder(1), id)
	if err == nil && n == 0 {
		err = fmt.Errorf("%s: %w", what, ErrNotFound)
	}
	return err
}

// UpsertPerson is Tx.UpsertPerson of both stores: it records a person's
// source, groups and last sign-in (a zero LastSeenTS is now).
func (w Writes) UpsertPerson(ctx context.Context, p *Person) error {
	d := w.Dialect
	if p.LastSeenTS.IsZero() {
		p.LastSeenTS = Now()
	}
	p.Name = PersonKey(p.Name)
	groups := p.Groups
	if groups == nil {
		groups = []string{}
	}
	list, err := d.List(groups)
	if err != nil {
		return fmt.Errorf("person %q: groups: %w", p.Name, err)
	}
	ps, args := d.values(1, p.Name, p.Source, list, d.Time(p.LastSeenTS))
	_, err = w.Exec(ctx, fmt.Sprintf("upsert person %q", p.Name),
		`INSERT INTO people (name, source, groups, last_seen_ts) VALUES (`+ps+`)
		ON CONFLICT (name) DO UPDATE SET source = excluded.source, groups = excluded.groups,
			last_seen_ts = excluded.last_seen_ts`, args...)
	return err
}

// PutClusterLabels is Tx.PutClusterLabels of both stores: it sets a
// cluster's labels, making the cluster (healthy) when there is none.
func (w Writes) PutClusterLabels(ctx context.Context, id string, labels map[string]string) error {
	d := w.Dialect
	b := []byte("{}")
	if len(labels) > 0 {
		var err error
		if b, err = json.Marshal(labels); err != nil {
			return fmt.Errorf("cluster %q: labels: %w", id, err)
		}
	}
	ps, args := d.values(1, id, ClusterHealthy, d.Time(Now()), string(b))
	_, err := w.Exec(ctx, fmt.Sprintf("cluster %q labels", id),
		`INSERT INTO clusters (id, status, updated_ts, labels) VALUES (`+ps+`)
		ON CONFLICT (id) DO UPDATE SET labels = excluded.labels`, args...)
	return err
}
