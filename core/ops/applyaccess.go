package ops

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/musterhq/muster/core/auth"
	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/action"
	"github.com/musterhq/muster/shared/wire"
	"github.com/musterhq/muster/shared/words"
)

// Teams and grants in a policy file (ApplyPolicy): a team is the declared
// one by name, a grant by grantee, role and scope. Apply makes what is
// missing (marked with the file), sets the members and groups of a team of
// that file, revokes the grants and deletes the teams of that file that it
// no longer declares. A team of another source (the API, the
// configuration, another file) is refused (409) rather than taken over:
// its grants would reach the file's members. Who may: who may make each
// change by hand (admin on a scope containing every grant touched).

// checkAccess checks the teams and grants of d.
func checkAccess(d *wire.PolicyDocument) ([]store.Team, []store.Grant, error) {
	var teams []store.Team
	seen := map[string]bool{}
	for i, t := range d.Teams {
		at := fmt.Sprintf("teams[%d]", i)
		if err := checkTeamName(t.Name); err != nil {
			return nil, nil, BadRequest("%s: %v", at, err)
		}
		if seen[strings.ToLower(t.Name)] {
			return nil, nil, BadRequest("%s: team %s is declared twice", at, t.Name)
		}
		seen[strings.ToLower(t.Name)] = true
		st := store.Team{Name: t.Name}
		for _, m := range t.Members {
			if err := checkPerson(m); err != nil {
				return nil, nil, BadRequest("%s.members: %v", at, err)
			}
			if k := store.PersonKey(m); !slices.Contains(st.Members, k) {
				st.Members = append(st.Members, k)
			}
		}
		for _, g := range t.Groups {
			if err := checkGroup(g); err != nil {
				return nil, nil, BadRequest("%s.groups: %v", at, err)
			}
			if !slices.Contains(st.Groups, g) {
				st.Groups = append(st.Groups, g)
			}
		}
		teams = append(teams, st)
	}
	var grants []store.Grant
	keys := map[string]bool{}
	for i, g := range d.Grants {
		at := fmt.Sprintf("grants[%d]", i)
		scope := auth.Scope{Clusters: g.Clusters, Labels: g.Labels}
		if err := auth.CheckGrant(g.Role, scope); err != nil {
			return nil, nil, BadRequest("%s: %v", at, err)
		}
		switch {
		case (g.Team == "") == (g.Person == ""):
			return nil, nil, BadRequest("%s: a grant names a team or a person (one of them)", at)
		case g.Team != "":
			if err := checkTeamName(g.Team); err != nil {
				return nil, nil, BadRequest("%s: %v", at, err)
			}
		default:
			if err := checkPerson(g.Person); err != nil {
				return nil, nil, BadRequest("%s: %v", at, err)
			}
		}
		sg := store.Grant{Team: g.Team, Person: store.PersonKey(g.Person), Role: g.Role, Clusters: g.Clusters, Labels: g.Labels}
		if g.Person == "" {
			sg.Person = ""
		}
		k := grantKey(sg)
		if keys[k] {
			return nil, nil, BadRequest("%s: %s is declared twice", at, k)
		}
		keys[k] = true
		grants = append(grants, sg)
	}
	return teams, grants, nil
}

// grantKey is what a declared grant is matched by.
func grantKey(g store.Grant) string {
	who := "team " + strings.ToLower(g.Team)
	if g.Team == "" {
		who = "person " + store.PersonKey(g.Person)
	}
	return who + " " + g.Role + " on " + auth.FromStore(g).Scope.String()
}

func sameSet(a, b []string) bool {
	x, y := slices.Clone(a), slices.Clone(b)
	slices.Sort(x)
	slices.Sort(y)
	return slices.Equal(slices.Compact(x), slices.Compact(y))
}

// planAccess plans the teams and grants of a file: teams made or changed,
// grants made, grants revoked, teams deleted, in that order.
func (o *Ops) planAccess(ctx context.Context, r store.Reader, c Caller, source string, teams []store.Team, grants []store.Grant) ([]planStep, error) {
	var steps []planStep
	have, err := r.Teams(ctx)
	if err != nil {
		return nil, err
	}
	byName := map[string]store.Team{}
	for _, t := range have {
		byName[strings.ToLower(t.Name)] = t
	}
	declared := map[string]bool{}
	now := o.now()
	for _, t := range teams {
		declared[strings.ToLower(t.Name)] = true
		cur, ok := byName[strings.ToLower(t.Name)]
		switch {
		case ok && cur.Source != source:
			return nil, fmt.Errorf("%w: team %s was made %s; the file cannot take it over (delete it, or rename the file's team)",
				ErrConflict, cur.Name, sourceName(cur.Source))
		case ok && sameSet(cur.Members, t.Members) && sameSet(cur.Groups, t.Groups):
			continue
		}
		t.Source, t.CreatedBy, t.CreatedTS = source, c.Name, now
		ch := wire.PolicyPlanChange{Op: "+", Kind: "team", ID: t.Name, Text: fmt.Sprintf("+ team %s: members %s; groups %s", t.Name,
			words.List(t.Members), words.List(t.Groups))}
		if ok {
			ch.Op, ch.Text = "~", fmt.Sprintf("~ team %s: members %s; groups %s -> members %s; groups %s", t.Name,
				words.List(cur.Members), words.List(cur.Groups), words.List(t.Members), words.List(t.Groups))
		}
		steps = append(steps, planStep{change: ch,
			authorize: func(ctx context.Context, tx store.Reader) error {
				if err := Authorize(c, auth.Grants); err != nil {
					return err
				}
				if err := o.mayChangeLevelTeam(c, t.Name); err != nil {
					return err
				}
				if ok {
					return mayChangeTeam(ctx, tx, c, cur.Name)
				}
				return nil
			},
			apply: func(ctx context.Context, tx store.Tx) error {
				if ok {
					return syncTeam(ctx, tx, cur, t, c.Name, c.Addr, source)
				}
				var out wire.Team
				return o.insertTeam(ctx, tx, &t, c.Name, c.Addr, &out)
			}})
	}
	cur, err := r.Grants(ctx)
	if err != nil {
		return nil, err
	}
	mine := map[string]bool{}
	for _, g := range cur {
		if g.Source == source {
			mine[grantKey(g)] = true
		}
	}
	wanted := map[string]bool{}
	for _, g := range grants {
		k := grantKey(g)
		wanted[k] = true
		if mine[k] {
			continue
		}
		g.ID, g.Source, g.CreatedBy, g.CreatedTS = action.NewID(), source, c.Name, now
		scope := auth.FromStore(g).Scope
		steps = append(steps, planStep{change: wire.PolicyPlanChange{Op: "+", Kind: "grant", Text: "+ grant " + k},
			authorize: func(ctx context.Context, tx store.Reader) error {
				if err := Authorize(c, auth.Grants); err != nil {
					return err
				}
				if !auth.MayGrant(c.grants(), scope) {
					return refuseGrant(c, scope, "grant "+g.Role+" on "+scope.String())
				}
				if g.Team != "" {
					_, err := tx.Team(ctx, g.Team)
					return err
				}
				return nil
			},
			apply: func(ctx context.Context, tx store.Tx) error { return insertGrant(ctx, tx, &g, c.Name, c.Addr) }})
	}
	for _, g := range cur {
		k := grantKey(g)
		if g.Source != source || wanted[k] || (g.Team != "" && !declared[strings.ToLower(g.Team)] && byName[strings.ToLower(g.Team)].Source == source) {
			continue // a grant of a team this file deletes goes with the team
		}
		scope := auth.FromStore(g).Scope
		if !auth.MayGrant(c.grants(), scope) {
			continue // outside the caller's scope: neither shown nor revoked, as Grants
		}
		steps = append(steps, planStep{change: wire.PolicyPlanChange{Op: "-", Kind: "grant", ID: g.ID,
			Text: "- grant " + k + " (revoked: no longer in the file)"},
			authorize: func(ctx context.Context, tx store.Reader) error {
				if err := Authorize(c, auth.Grants); err != nil {
					return err
				}
				if !auth.MayGrant(c.grants(), scope) {
					return refuseGrant(c, scope, "revoke a grant on "+scope.String())
				}
				return nil
			},
			apply: func(ctx context.Context, tx store.Tx) error { return deleteGrant(ctx, tx, &g, c.Name, c.Addr) }})
	}
	for _, t := range have {
		if t.Source != source || declared[strings.ToLower(t.Name)] {
			continue
		}
		name := t.Name
		steps = append(steps, planStep{change: wire.PolicyPlanChange{Op: "-", Kind: "team", ID: name,
			Text: fmt.Sprintf("- team %s (deleted with its grants: no longer in the file)", name)},
			authorize: func(ctx context.Context, tx store.Reader) error {
				if err := Authorize(c, auth.Grants); err != nil {
					return err
				}
				if err := o.mayChangeLevelTeam(c, name); err != nil {
					return err
				}
				return mayChangeTeam(ctx, tx, c, name)
			},
			apply: func(ctx context.Context, tx store.Tx) error {
				if err := tx.DeleteTeam(ctx, name); err != nil {
					return err
				}
				return tx.AppendEvent(ctx, &store.Event{Type: store.EventTeamDeleted, Actor: c.Name, ClientAddr: c.Addr,
					Message: fmt.Sprintf("team %s deleted with its grants: no longer in %s", name, source),
					Data:    map[string]any{"team": name, "source": source}})
			}})
	}
	return steps, nil
}
