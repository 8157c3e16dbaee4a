package approval

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"unicode"

	"github.com/musterhq/muster/shared/config"
	"github.com/musterhq/muster/shared/names"
)

// Level is one level of a rule (docs/runs-and-playbooks.md, "Approval
// levels"): Min distinct people, each a member of one of Teams or one of
// Persons, must approve. A rule's levels are all required (AND).
type Level struct {
	Teams   []string `mapstructure:"teams" yaml:"teams" json:"teams,omitempty"`
	Persons []string `mapstructure:"persons" yaml:"persons" json:"persons,omitempty"`
	// Min is how many distinct people; 0 means 1.
	Min int `mapstructure:"min" yaml:"min" json:"min"`
}

// MaxLevels is the most levels a rule may ask for.
const MaxLevels = 8

// maxPerson is the longest person name a level may list (an e-mail
// address from single sign-on fits).
const maxPerson = 256

// AnyApprover is the level of a rule without levels, and of work no rule
// matches: one person holding Approve on the work's cluster (the meaning
// approval always had).
var AnyApprover = Level{Min: 1}

// Anyone reports whether l names nobody: anyone holding Approve on the
// work's cluster is eligible.
func (l Level) Anyone() bool { return len(l.Teams) == 0 && len(l.Persons) == 0 }

// Need is how many distinct people l needs.
func (l Level) Need() int { return max(l.Min, 1) }

// Key is l in one canonical line: an approval is recorded against the key
// of its level, so that a reload that changes a level counts none of the
// approvals made for the level it was.
func (l Level) Key() string {
	t, p := sortedFold(l.Teams), sortedFold(l.Persons)
	return fmt.Sprintf("teams=%s;persons=%s;min=%d", strings.Join(t, ","), strings.Join(p, ","), l.Need())
}

// Who names l's eligible people for a message: "sre", "db or sre",
// "alice or db", "any approver".
func (l Level) Who() string {
	if l.Anyone() {
		return "any approver"
	}
	return orJoin(append(slices.Clone(l.Teams), l.Persons...))
}

func orJoin(xs []string) string {
	if len(xs) < 2 {
		return strings.Join(xs, "")
	}
	return strings.Join(xs[:len(xs)-1], ", ") + " or " + xs[len(xs)-1]
}

func sortedFold(xs []string) []string {
	out := make([]string, len(xs))
	for i, x := range xs {
		out[i] = strings.ToLower(x)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// validateLevels returns one error per bad field of rule i's levels.
func validateLevels(errs *config.Errors, i int, r Rule) {
	if len(r.Levels) == 0 {
		return
	}
	at := fmt.Sprintf("approval.rules[%d].levels", i)
	if r.Approval == None {
		errs.Add(at, "a rule with approval %q asks for no approver: remove its levels or its approval", None)
	}
	if len(r.Levels) > MaxLevels {
		errs.Add(at, "%d levels, at most %d", len(r.Levels), MaxLevels)
	}
	seen := map[string]int{}
	for j, l := range r.Levels {
		lat := fmt.Sprintf("%s[%d]", at, j)
		if l.Anyone() {
			errs.Add(lat, "names no team and no person: list teams or persons (a rule without levels takes any approver)")
			continue
		}
		if l.Min < 0 {
			errs.Add(lat+".min", "must be at least 1, got %d", l.Min)
		}
		for k, t := range l.Teams {
			if err := names.CheckID(t); err != nil {
				errs.Add(fmt.Sprintf("%s.teams[%d]", lat, k), "%v", err)
			}
		}
		for k, p := range l.Persons {
			if err := checkPerson(p); err != nil {
				errs.Add(fmt.Sprintf("%s.persons[%d]", lat, k), "%v", err)
			}
		}
		if len(l.Teams) == 0 && l.Need() > len(sortedFold(l.Persons)) {
			errs.Add(lat+".min", "%d distinct people, but the level lists only %d persons and no team: it could never be met",
				l.Need(), len(sortedFold(l.Persons)))
		}
		if prev, ok := seen[l.Key()]; ok {
			errs.Add(lat, "is the same as level %d: ask for more people with min instead", prev)
		}
		seen[l.Key()] = j
	}
}

// checkPerson refuses what cannot be a person's name.
func checkPerson(p string) error {
	switch {
	case strings.TrimSpace(p) == "":
		return fmt.Errorf("a person's name is empty")
	case len(p) > maxPerson:
		return fmt.Errorf("a person's name is longer than %d bytes", maxPerson)
	case strings.ContainsFunc(p, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }):
		return fmt.Errorf("person %q contains spaces or control characters", p)
	}
	return nil
}

// Levels are the levels work of these kinds on cluster needs, all
// required: for each kind, the levels of the first rule that matches it
// (AnyApprover for a rule without levels, and for a kind no rule matches
// when Default requires approval). A run of several kinds needs the levels
// of all of them, each distinct level once. Kinds nil (a schedule, whose
// kinds are known at each occurrence) takes every rule that matches the
// cluster and asks for approval: the strictest reading. Work that needs no
// approval has no levels.
func (p Policy) Levels(kinds []string, cluster string) []Level {
	var out []Level
	add := func(ls []Level) {
		for _, l := range ls {
			if !slices.ContainsFunc(out, func(o Level) bool { return o.Key() == l.Key() }) {
				out = append(out, l)
			}
		}
	}
	ruleLevels := func(r Rule) []Level {
		if len(r.Levels) == 0 {
			return []Level{AnyApprover}
		}
		return r.Levels
	}
	if kinds == nil {
		for _, r := range p.Rules {
			if globMatch(r.Cluster, cluster) && r.Approval != None {
				add(ruleLevels(r))
			}
		}
		if p.Default != None || len(out) == 0 {
			add([]Level{AnyApprover})
		}
		return dropAnyone(out)
	}
	for _, k := range kinds {
		matched := false
		for _, r := range p.Rules {
			if globMatch(r.Kind, k) && globMatch(r.Cluster, cluster) {
				matched = true
				if r.Approval != None {
					add(ruleLevels(r))
				}
				break
			}
		}
		if !matched && p.Default != None {
			add([]Level{AnyApprover})
		}
	}
	return dropAnyone(out)
}

// dropAnyone removes AnyApprover from levels that name people: any
// approval counted by a named level is one by an approver on the cluster
// already, so AnyApprover adds no one. (Each person counts at one level,
// so keeping it would ask for one more person.)
func dropAnyone(ls []Level) []Level {
	if len(ls) < 2 {
		return ls
	}
	return slices.DeleteFunc(ls, Level.Anyone)
}

// Directory answers who belongs to which team: the store's teams, with
// membership by listed name or by a group claim mapped to the team
// (docs/security.md, "Approvals").
type Directory interface {
	// TeamsOf names the teams person belongs to, listed or through one of
	// groups (the group claims they signed in with; nil for a token).
	TeamsOf(ctx context.Context, person string, groups []string) ([]string, error)
	// TeamMembers names the people of team: those listed, and those known
	// to have signed in with one of its groups.
	TeamMembers(ctx context.Context, team string) ([]string, error)
}

// NoTeams is the Directory of a core that knows no team: a level naming
// teams can be met only by the persons it names.
type NoTeams struct{}

// TeamsOf is none.
func (NoTeams) TeamsOf(context.Context, string, []string) ([]string, error) { return nil, nil }

// TeamMembers is none.
func (NoTeams) TeamMembers(context.Context, string) ([]string, error) { return nil, nil }

var _ Directory = NoTeams{}

// Recorded is one stored approval: Person approved at the level of key
// Level what had digest Digest.
type Recorded struct {
	Person string
	Level  string
	Digest string
}

// Work is what a tally counts for: the levels required, the approvals
// recorded, and who may not count.
type Work struct {
	Levels    []Level
	Approvals []Recorded
	// Digest is the content now: an approval of another digest is void.
	Digest string
	// Requester asked for the work; Applier applied the playbook version
	// it comes from ("" when none). Neither counts unless SelfApproval.
	Requester, Applier string
	SelfApproval       bool
	// MayApproveOn, when set, says whether a person holds Approve on the
	// work's cluster: those who do not are left out of CanApprove.
	MayApproveOn func(ctx context.Context, person string) (bool, error)
}

// LevelTally is one level as a tally found it.
type LevelTally struct {
	Level
	// ApprovedBy are the people whose approval counts here, in the order
	// they approved.
	ApprovedBy []string
	// Remaining is how many more people it needs.
	Remaining int
	// CanApprove names who may still approve at this level, sorted: the
	// persons it lists and the members of its teams, less those who do not
	// count. Nil for an Anyone level (anyone holding Approve) and for a
	// level that is met.
	CanApprove []string
}

// Tally is what the approvals recorded for work amount to.
type Tally struct {
	Levels []LevelTally
	// Satisfied: every level is met.
	Satisfied bool
	// Void counts the approvals of another digest (content changed since).
	Void int
}

// excluded reports whether person may not count for w, and why.
func (w Work) excluded(person string) Refusal {
	switch {
	case w.SelfApproval:
		return MayDecide
	case SamePerson(w.Requester, person):
		return OwnRequest
	case w.Applier != "" && SamePerson(w.Applier, person):
		return AppliedPlaybook
	}
	return MayDecide
}

// Count tallies w: each approval of the current digest by a person who
// counts goes to the level it was recorded at (by key), each person once
// (their first approval in level order); approvals of another digest are
// void.
func Count(ctx context.Context, dir Directory, w Work) (Tally, error) {
	t := Tally{Levels: make([]LevelTally, len(w.Levels))}
	counted := map[string]bool{}
	for i, l := range w.Levels {
		t.Levels[i].Level = l
	}
	for _, a := range w.Approvals {
		if a.Digest != w.Digest {
			t.Void++
		}
	}
	for i, l := range w.Levels {
		key := l.Key()
		for _, a := range w.Approvals {
			p := strings.ToLower(a.Person)
			if a.Digest != w.Digest || a.Level != key || counted[p] || w.excluded(a.Person) != MayDecide {
				continue
			}
			if len(t.Levels[i].ApprovedBy) >= l.Need() {
				continue
			}
			counted[p] = true
			t.Levels[i].ApprovedBy = append(t.Levels[i].ApprovedBy, a.Person)
		}
	}
	t.Satisfied = true
	for i := range t.Levels {
		lt := &t.Levels[i]
		lt.Remaining = lt.Need() - len(lt.ApprovedBy)
		if lt.Remaining <= 0 {
			lt.Remaining = 0
			continue
		}
		t.Satisfied = false
		if lt.Anyone() {
			continue
		}
		can, err := candidates(ctx, dir, lt.Level)
		if err != nil {
			return Tally{}, err
		}
		for _, p := range can {
			if counted[strings.ToLower(p)] || w.excluded(p) != MayDecide {
				continue
			}
			if w.MayApproveOn != nil {
				ok, err := w.MayApproveOn(ctx, p)
				if err != nil {
					return Tally{}, err
				}
				if !ok {
					continue
				}
			}
			lt.CanApprove = append(lt.CanApprove, p)
		}
		if lt.CanApprove == nil {
			lt.CanApprove = []string{}
		}
	}
	return t, nil
}

// candidates are l's persons and its teams' members, each once (ignoring
// case), sorted.
func candidates(ctx context.Context, dir Directory, l Level) ([]string, error) {
	seen := map[string]bool{}
	var out []string
	add := func(p string) {
		if k := strings.ToLower(p); !seen[k] {
			seen[k] = true
			out = append(out, p)
		}
	}
	for _, p := range l.Persons {
		add(p)
	}
	for _, team := range l.Teams {
		ms, err := dir.TeamMembers(ctx, team)
		if err != nil {
			return nil, fmt.Errorf("members of team %s: %w", team, err)
		}
		for _, m := range ms {
			add(m)
		}
	}
	slices.SortFunc(out, func(a, b string) int { return strings.Compare(strings.ToLower(a), strings.ToLower(b)) })
	return out, nil
}

// Eligible reports whether person, a member of teams, may approve at l
// (the grant on the cluster aside, which the caller checks).
func (l Level) Eligible(person string, teams []string) bool {
	if l.Anyone() {
		return true
	}
	for _, p := range l.Persons {
		if SamePerson(p, person) {
			return true
		}
	}
	for _, t := range l.Teams {
		for _, m := range teams {
			if strings.EqualFold(t, m) {
				return true
			}
		}
	}
	return false
}

// Refused is an approval or a rejection a person may not make, with why
// (one line for the caller).
type Refused struct {
	Why string
}

func (e *Refused) Error() string { return e.Why }

// Place decides where an approval by person (a member of teams) goes in
// tally t of w: the index of the first level that is not met and that
// they are eligible for (the rule that makes a person in two eligible
// teams count once, at one level, whatever order they approve in). It
// refuses (a *Refused) the requester and the applier (unless
// SelfApproval), anyone who approved this digest already (at any level),
// anyone eligible for no level, and anyone eligible only for levels
// already met.
func Place(w Work, t Tally, person string, teams []string) (int, error) {
	switch w.excluded(person) {
	case OwnRequest:
		return 0, &Refused{Why: fmt.Sprintf("%s requested it and may not approve it too", person)}
	case AppliedPlaybook:
		return 0, &Refused{Why: fmt.Sprintf("%s applied the playbook version it comes from and may not approve it", person)}
	}
	for _, a := range w.Approvals {
		if a.Digest == w.Digest && SamePerson(a.Person, person) {
			return 0, &Refused{Why: fmt.Sprintf("%s approved it already: each person counts once", person)}
		}
	}
	eligible := false
	for i, lt := range t.Levels {
		if !lt.Eligible(person, teams) {
			continue
		}
		eligible = true
		if lt.Remaining > 0 {
			return i, nil
		}
	}
	if !eligible {
		return 0, &Refused{Why: fmt.Sprintf("%s may approve at no level: %s", person, t.Wanted())}
	}
	return 0, &Refused{Why: fmt.Sprintf("the levels %s may approve are met: %s", person, t.Missing())}
}

// MayReject reports whether person (a member of teams) is eligible at
// some level of w: any eligible reject rejects.
func MayReject(w Work, person string, teams []string) error {
	for _, l := range w.Levels {
		if l.Eligible(person, teams) {
			return nil
		}
	}
	t := Tally{}
	for _, l := range w.Levels {
		t.Levels = append(t.Levels, LevelTally{Level: l})
	}
	return &Refused{Why: fmt.Sprintf("%s may reject at no level: %s", person, t.Wanted())}
}

// Wanted says who each level takes: "level 1 takes db, level 2 takes sre".
func (t Tally) Wanted() string {
	parts := make([]string, len(t.Levels))
	for i, lt := range t.Levels {
		parts[i] = fmt.Sprintf("level %d takes %s", i+1, lt.Who())
	}
	return strings.Join(parts, ", ")
}

// Missing says what the unmet levels still need: "1 more from sre",
// "2 more from db, 1 more from sre"; "nothing more" when all are met.
func (t Tally) Missing() string {
	var parts []string
	for _, lt := range t.Levels {
		if lt.Remaining > 0 {
			parts = append(parts, fmt.Sprintf("%d more from %s", lt.Remaining, lt.Who()))
		}
	}
	if len(parts) == 0 {
		return "nothing more"
	}
	return strings.Join(parts, ", ")
}

// Line is level i of t for people: "level 2 (sre): 0 of 1 — can approve:
// sam, sue".
func (t Tally) Line(i int) string {
	lt := t.Levels[i]
	s := fmt.Sprintf("level %d (%s): %d of %d", i+1, lt.Who(), len(lt.ApprovedBy), lt.Need())
	if len(lt.ApprovedBy) > 0 {
		s += " — approved by " + strings.Join(lt.ApprovedBy, ", ")
	}
	switch {
	case lt.Remaining == 0:
	case lt.Anyone():
		s += " — can approve: any approver of the cluster"
	case len(lt.CanApprove) == 0:
		s += " — can approve: nobody"
	default:
		s += " — can approve: " + strings.Join(lt.CanApprove, ", ")
	}
	return s
}
