package ops

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode"

	"github.com/musterhq/muster/core/approval"
	"github.com/musterhq/muster/core/auth"
	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/action"
	"github.com/musterhq/muster/shared/names"
	"github.com/musterhq/muster/shared/wire"
	"github.com/musterhq/muster/shared/words"
)

// Teams and grants (docs/architecture.md, "Access: people, teams and
// grants"). Nobody grants more than they hold: a grant is made or revoked
// by an admin whose grant's scope contains it (auth.MayGrant), and a team
// is changed by one who may grant every grant the team holds (a member
// added gets them all); a team an approval level names, by one who holds
// the grants permission on every cluster (its members count at that
// level). Every change is an event naming who made it.

// maxGroup is the longest group claim a team maps.
const maxGroup = 256

// TeamView is a stored team as the API shows it.
func TeamView(t store.Team) wire.Team {
	return wire.Team{Name: t.Name, Members: t.Members, Groups: t.Groups, Source: t.Source, CreatedBy: t.CreatedBy,
		CreatedTS: t.CreatedTS}
}

// GrantView is a stored grant as the API shows it.
func GrantView(g store.Grant) wire.Grant {
	return wire.Grant{ID: g.ID, Team: g.Team, Person: g.Person, Role: g.Role, Clusters: g.Clusters, Labels: g.Labels,
		Source: g.Source, CreatedBy: g.CreatedBy, CreatedTS: g.CreatedTS}
}

func checkPerson(p string) error {
	if err := names.CheckToken(p); err != nil {
		return BadRequest("person: %v", err)
	}
	return nil
}

func checkGroup(g string) error {
	if g == "" || len(g) > maxGroup || strings.ContainsFunc(g, unicode.IsControl) {
		return BadRequest("group %q: a group claim is 1 to %d bytes without control characters", g, maxGroup)
	}
	return nil
}

func checkTeamName(name string) error {
	if err := names.CheckID(name); err != nil {
		return BadRequest("team: %v", err)
	}
	return nil
}

// mayChangeTeam refuses a caller who may not grant every grant of team.
func mayChangeTeam(ctx context.Context, r store.Reader, c Caller, team string) error {
	gs, err := r.GrantsOf(ctx, "", []string{team})
	if err != nil {
		return err
	}
	for _, g := range gs {
		if g.Team == team && !auth.MayGrant(c.grants(), auth.FromStore(g).Scope) {
			return refuseGrant(c, auth.FromStore(g).Scope, "change team "+team+", which holds "+g.Role+" on "+
				auth.FromStore(g).Scope.String())
		}
	}
	return nil
}

// mayChangeLevelTeam refuses a caller without the grants permission on
// every cluster when a level of the approval policy names team (ignoring
// case): its members count at that level, whatever grants the team holds,
// so who may change it is who may grant everywhere.
func (o *Ops) mayChangeLevelTeam(c Caller, team string) error {
	if !levelsName(o.cfg.Policy.Load(), team) {
		return nil
	}
	if auth.HoldsEverywhere(c.grants(), auth.Grants) {
		return nil
	}
	allowed := auth.Granting(auth.Grants)
	for i, r := range allowed {
		allowed[i] = r + " on every cluster"
	}
	return &ForbiddenError{Caller: c.Name, Roles: c.held(), Perm: auth.Grants, Allowed: allowed,
		Doing: "change team " + team + ", which approval levels name"}
}

// levelsName reports whether a level of one of p's rules names team.
func levelsName(p approval.Policy, team string) bool {
	for _, r := range p.Rules {
		for _, l := range r.Levels {
			if slices.ContainsFunc(l.Teams, func(t string) bool { return strings.EqualFold(t, team) }) {
				return true
			}
		}
	}
	return false
}

func refuseGrant(c Caller, s auth.Scope, doing string) error {
	return &ForbiddenError{Caller: c.Name, Roles: c.held(), Perm: auth.Grants,
		Allowed: []string{store.RoleAdmin + " on a scope that contains " + s.String()}, Doing: doing}
}

// CreateTeam makes a team with its members and mapped groups.
func (o *Ops) CreateTeam(ctx context.Context, c Caller, req *wire.CreateTeamRequest) (wire.Team, error) {
	if err := Authorize(c, auth.Grants); err != nil {
		return wire.Team{}, err
	}
	if err := checkTeamName(req.Name); err != nil {
		return wire.Team{}, err
	}
	if err := o.mayChangeLevelTeam(c, req.Name); err != nil {
		return wire.Team{}, err
	}
	for _, m := range req.Members {
		if err := checkPerson(m); err != nil {
			return wire.Team{}, err
		}
	}
	for _, g := range req.Groups {
		if err := checkGroup(g); err != nil {
			return wire.Team{}, err
		}
	}
	var out wire.Team
	err := o.st.Update(ctx, func(tx store.Tx) error {
		t := &store.Team{Name: req.Name, Members: req.Members, Groups: req.Groups, CreatedBy: c.Name, CreatedTS: o.now()}
		return o.insertTeam(ctx, tx, t, c.Name, c.Addr, &out)
	})
	return out, err
}

func (o *Ops) insertTeam(ctx context.Context, tx store.Tx, t *store.Team, actor, addr string, out *wire.Team) error {
	if err := tx.InsertTeam(ctx, t); err != nil {
		if errors.Is(err, store.ErrExists) {
			return fmt.Errorf("team %q: %w", t.Name, store.ErrExists)
		}
		return err
	}
	got, err := tx.Team(ctx, t.Name)
	if err != nil {
		return err
	}
	*out = TeamView(*got)
	return tx.AppendEvent(ctx, &store.Event{Type: store.EventTeamCreated, Actor: actor, ClientAddr: addr,
		Message: fmt.Sprintf("team %s created (members %s; groups %s)", t.Name, words.List(got.Members),
			words.List(got.Groups)),
		Data: map[string]any{"team": t.Name, "members": got.Members, "groups": got.Groups, "source": t.Source}})
}

// Teams lists the teams.
func (o *Ops) Teams(ctx context.Context, c Caller) ([]wire.Team, error) {
	if err := Authorize(c, auth.Read); err != nil {
		return nil, err
	}
	out := []wire.Team{}
	err := o.st.Read(ctx, func(r store.Reader) error {
		ts, err := r.Teams(ctx)
		for _, t := range ts {
			out = append(out, TeamView(t))
		}
		return err
	})
	return out, err
}

// Team shows one team.
func (o *Ops) Team(ctx context.Context, c Caller, name string) (wire.Team, error) {
	if err := Authorize(c, auth.Read); err != nil {
		return wire.Team{}, err
	}
	var out wire.Team
	err := o.st.Read(ctx, func(r store.Reader) error {
		t, err := r.Team(ctx, name)
		if err == nil {
			out = TeamView(*t)
		}
		return err
	})
	return out, err
}

// DeleteTeam removes a team with its grants.
func (o *Ops) DeleteTeam(ctx context.Context, c Caller, name string) error {
	if err := Authorize(c, auth.Grants); err != nil {
		return err
	}
	return o.st.Update(ctx, func(tx store.Tx) error {
		if _, err := tx.Team(ctx, name); err != nil {
			return err
		}
		if err := o.mayChangeLevelTeam(c, name); err != nil {
			return err
		}
		if err := mayChangeTeam(ctx, tx, c, name); err != nil {
			return err
		}
		if err := tx.DeleteTeam(ctx, name); err != nil {
			return err
		}
		return tx.AppendEvent(ctx, &store.Event{Type: store.EventTeamDeleted, Actor: c.Name, ClientAddr: c.Addr,
			Message: fmt.Sprintf("team %s deleted with its grants", name), Data: map[string]any{"team": name}})
	})
}

// Team changes (ChangeTeam).
const (
	AddMember    = "add-member"
	RemoveMember = "remove-member"
	MapGroup     = "map-group"
	UnmapGroup   = "unmap-group"
)

// ChangeTeam adds or removes one member or mapped group of a team; a
// change that changes nothing appends no event.
func (o *Ops) ChangeTeam(ctx context.Context, c Caller, name, change, value string) (wire.Team, error) {
	if err := Authorize(c, auth.Grants); err != nil {
		return wire.Team{}, err
	}
	var err error
	switch change {
	case AddMember, RemoveMember:
		err = checkPerson(value)
	case MapGroup, UnmapGroup:
		err = checkGroup(value)
	default:
		err = BadRequest("unknown team change %q", change)
	}
	if err != nil {
		return wire.Team{}, err
	}
	var out wire.Team
	err = o.st.Update(ctx, func(tx store.Tx) error {
		if _, err := tx.Team(ctx, name); err != nil {
			return err
		}
		if err := o.mayChangeLevelTeam(c, name); err != nil {
			return err
		}
		if err := mayChangeTeam(ctx, tx, c, name); err != nil {
			return err
		}
		var changed bool
		var err error
		switch change {
		case AddMember:
			changed, err = tx.AddTeamMember(ctx, name, value)
		case RemoveMember:
			changed, err = tx.RemoveTeamMember(ctx, name, value)
		case MapGroup:
			changed, err = tx.AddTeamGroup(ctx, name, value)
		case UnmapGroup:
			changed, err = tx.RemoveTeamGroup(ctx, name, value)
		}
		if err != nil {
			return err
		}
		t, err := tx.Team(ctx, name)
		if err != nil {
			return err
		}
		out = TeamView(*t)
		if !changed {
			return nil
		}
		return tx.AppendEvent(ctx, &store.Event{Type: store.EventTeamChanged, Actor: c.Name, ClientAddr: c.Addr,
			Message: fmt.Sprintf("team %s: %s %s", name, change, value),
			Data:    map[string]any{"team": name, "change": change, "value": value}})
	})
	return out, err
}

// CreateGrant grants a team or a person one role on a scope. The caller
// must hold admin on a scope that contains it (403 otherwise).
func (o *Ops) CreateGrant(ctx context.Context, c Caller, req *wire.CreateGrantRequest) (wire.Grant, error) {
	if err := Authorize(c, auth.Grants); err != nil {
		return wire.Grant{}, err
	}
	scope := auth.Scope{Clusters: req.Clusters, Labels: req.Labels}
	if err := auth.CheckGrant(req.Role, scope); err != nil {
		return wire.Grant{}, BadRequest("%v", err)
	}
	switch {
	case (req.Team == "") == (req.Person == ""):
		return wire.Grant{}, BadRequest("a grant names a team or a person (one of them)")
	case req.Team != "":
		if err := checkTeamName(req.Team); err != nil {
			return wire.Grant{}, err
		}
	default:
		if err := checkPerson(req.Person); err != nil {
			return wire.Grant{}, err
		}
	}
	if !auth.MayGrant(c.grants(), scope) {
		return wire.Grant{}, refuseGrant(c, scope, "grant "+req.Role+" on "+scope.String())
	}
	g := &store.Grant{ID: action.NewID(), Team: req.Team, Person: req.Person, Role: req.Role, Clusters: req.Clusters,
		Labels: req.Labels, CreatedBy: c.Name, CreatedTS: o.now()}
	err := o.st.Update(ctx, func(tx store.Tx) error {
		if g.Team != "" {
			if _, err := tx.Team(ctx, g.Team); err != nil {
				return err
			}
		}
		return insertGrant(ctx, tx, g, c.Name, c.Addr)
	})
	if err != nil {
		return wire.Grant{}, err
	}
	return GrantView(*g), nil
}

func grantee(g *store.Grant) string {
	if g.Team != "" {
		return "team " + g.Team
	}
	return "person " + g.Person
}

func insertGrant(ctx context.Context, tx store.Tx, g *store.Grant, actor, addr string) error {
	if err := tx.InsertGrant(ctx, g); err != nil {
		return err
	}
	scope := auth.FromStore(*g).Scope
	return tx.AppendEvent(ctx, &store.Event{Type: store.EventGrantCreated, Actor: actor, ClientAddr: addr,
		Message: fmt.Sprintf("%s granted %s on %s", grantee(g), g.Role, scope),
		Data: map[string]any{"grant": g.ID, "team": g.Team, "person": g.Person, "role": g.Role, "scope": scope.String(),
			"source": g.Source}})
}

func deleteGrant(ctx context.Context, tx store.Tx, g *store.Grant, actor, addr string) error {
	if err := tx.DeleteGrant(ctx, g.ID); err != nil {
		return err
	}
	scope := auth.FromStore(*g).Scope
	return tx.AppendEvent(ctx, &store.Event{Type: store.EventGrantRevoked, Actor: actor, ClientAddr: addr,
		Message: fmt.Sprintf("%s no longer holds %s on %s", grantee(g), g.Role, scope),
		Data:    map[string]any{"grant": g.ID, "team": g.Team, "person": g.Person, "role": g.Role, "scope": scope.String()}})
}

// RevokeGrant removes a grant; the caller must hold admin on a scope that
// contains it.
func (o *Ops) RevokeGrant(ctx context.Context, c Caller, id string) error {
	if err := Authorize(c, auth.Grants); err != nil {
		return err
	}
	return o.st.Update(ctx, func(tx store.Tx) error {
		g, err := tx.Grant(ctx, id)
		if err != nil {
			return err
		}
		scope := auth.FromStore(*g).Scope
		if !auth.MayGrant(c.grants(), scope) {
			return refuseGrant(c, scope, "revoke a grant on "+scope.String())
		}
		return deleteGrant(ctx, tx, g, c.Name, c.Addr)
	})
}

// Grants lists the grants the caller may grant itself (within its admin
// scopes), oldest first.
func (o *Ops) Grants(ctx context.Context, c Caller) ([]wire.Grant, error) {
	if err := Authorize(c, auth.Grants); err != nil {
		return nil, err
	}
	out := []wire.Grant{}
	err := o.st.Read(ctx, func(r store.Reader) error {
		gs, err := r.Grants(ctx)
		for _, g := range gs {
			if auth.MayGrant(c.grants(), auth.FromStore(g).Scope) {
				out = append(out, GrantView(g))
			}
		}
		return err
	})
	return out, err
}

// ActorConfig is the actor of the changes the configuration's teams and
// grants make at start.
const ActorConfig = "config"

// Seed makes the store's configuration-sourced teams and grants those of
// the configuration (source "config"): teams are made or set to their
// members and groups, grants made or revoked, each change an event by
// ActorConfig. Teams and grants made through the API are left alone, but
// a configuration team named like a team made through the API is an error
// that changes nothing (its grants would reach that team's members).
func (o *Ops) Seed(ctx context.Context, teams []store.Team, grants []store.Grant) error {
	return o.st.Update(ctx, func(tx store.Tx) error {
		have, err := tx.Teams(ctx)
		if err != nil {
			return err
		}
		byName := map[string]store.Team{}
		for _, t := range have {
			byName[t.Name] = t
		}
		want := map[string]bool{}
		for _, t := range teams {
			want[t.Name] = true
			cur, ok := byName[t.Name]
			if !ok {
				t.Source, t.CreatedBy, t.CreatedTS = store.SourceConfig, ActorConfig, o.now()
				var out wire.Team
				if err := o.insertTeam(ctx, tx, &t, ActorConfig, "", &out); err != nil {
					return err
				}
				continue
			}
			if cur.Source != store.SourceConfig {
				// The configuration's grants to this name would reach the
				// members made through the API: refuse to start rather than
				// take over a team someone else keeps.
				return fmt.Errorf("configuration team %s: a team of that name was made through the API by %s; "+
					"delete it (muster team delete %s) or rename the configuration's team", t.Name, cur.CreatedBy, t.Name)
			}
			if err := syncTeam(ctx, tx, cur, t, ActorConfig, "", "configuration"); err != nil {
				return err
			}
		}
		for _, t := range have {
			if t.Source == store.SourceConfig && !want[t.Name] {
				if err := tx.DeleteTeam(ctx, t.Name); err != nil {
					return err
				}
				if err := tx.AppendEvent(ctx, &store.Event{Type: store.EventTeamDeleted, Actor: ActorConfig,
					Message: fmt.Sprintf("team %s deleted: no longer in the configuration", t.Name),
					Data:    map[string]any{"team": t.Name}}); err != nil {
					return err
				}
			}
		}
		cur, err := tx.Grants(ctx)
		if err != nil {
			return err
		}
		wantGrant := map[string]bool{}
		for _, g := range grants {
			wantGrant[g.ID] = true
		}
		haveGrant := map[string]bool{}
		for _, g := range cur {
			haveGrant[g.ID] = true
			if g.Source == store.SourceConfig && !wantGrant[g.ID] {
				if err := deleteGrant(ctx, tx, &g, ActorConfig, ""); err != nil {
					return err
				}
			}
		}
		for _, g := range grants {
			if haveGrant[g.ID] {
				continue
			}
			g.Source, g.CreatedBy, g.CreatedTS = store.SourceConfig, ActorConfig, o.now()
			if err := insertGrant(ctx, tx, &g, ActorConfig, ""); err != nil {
				return err
			}
		}
		return nil
	})
}

// syncTeam sets a team's members and groups to want's, by actor from addr
// (why says where from: "configuration", "file:NAME").
func syncTeam(ctx context.Context, tx store.Tx, cur, want store.Team, actor, addr, why string) error {
	wantMembers := make([]string, len(want.Members))
	for i, m := range want.Members {
		wantMembers[i] = store.PersonKey(m)
	}
	var changes []string
	apply := func(have, want []string, add, remove func(ctx context.Context, team, v string) (bool, error), what string) error {
		for _, v := range want {
			if !slices.Contains(have, v) {
				if _, err := add(ctx, cur.Name, v); err != nil {
					return err
				}
				changes = append(changes, "+"+what+" "+v)
			}
		}
		for _, v := range have {
			if !slices.Contains(want, v) {
				if _, err := remove(ctx, cur.Name, v); err != nil {
					return err
				}
				changes = append(changes, "-"+what+" "+v)
			}
		}
		return nil
	}
	if err := apply(cur.Members, wantMembers, tx.AddTeamMember, tx.RemoveTeamMember, "member"); err != nil {
		return err
	}
	if err := apply(cur.Groups, want.Groups, tx.AddTeamGroup, tx.RemoveTeamGroup, "group"); err != nil {
		return err
	}
	if len(changes) == 0 {
		return nil
	}
	return tx.AppendEvent(ctx, &store.Event{Type: store.EventTeamChanged, Actor: actor, ClientAddr: addr,
		Message: fmt.Sprintf("team %s: %s (%s)", cur.Name, strings.Join(changes, ", "), why),
		Data:    map[string]any{"team": cur.Name, "changes": changes}})
}
