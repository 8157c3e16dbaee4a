package approval

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"
)

// teams is an in-memory Directory: team → members.
type teams map[string][]string

func (d teams) TeamsOf(_ context.Context, person string, _ []string) ([]string, error) {
	var out []string
	for t, ms := range d {
		for _, m := range ms {
			if SamePerson(m, person) {
				out = append(out, t)
			}
		}
	}
	slices.Sort(out)
	return out, nil
}

func (d teams) TeamMembers(_ context.Context, team string) ([]string, error) { return d[team], nil }

var dir = teams{"db": {"dana", "pat"}, "sre": {"sam", "sue", "pat"}}

var dbThenSRE = []Level{{Teams: []string{"db"}, Min: 1}, {Teams: []string{"sre"}, Min: 1}}

// approve records person's approval in w where Place puts it, as the
// operations layer does.
func approve(t *testing.T, w *Work, person string) error {
	t.Helper()
	tl, err := Count(context.Background(), dir, *w)
	if err != nil {
		t.Fatal(err)
	}
	ts, _ := dir.TeamsOf(context.Background(), person, nil)
	i, err := Place(*w, tl, person, ts)
	if err != nil {
		return err
	}
	w.Approvals = append(w.Approvals, Recorded{Person: person, Level: w.Levels[i].Key(), Digest: w.Digest})
	return nil
}

func count(t *testing.T, w Work) Tally {
	t.Helper()
	tl, err := Count(context.Background(), dir, w)
	if err != nil {
		t.Fatal(err)
	}
	return tl
}

// TestTallyTwoLevels is scenario 1 of the access issue in the tally alone:
// one from db leaves "1 more from sre" and names who can; the second
// satisfies both levels.
func TestTallyTwoLevels(t *testing.T) {
	t.Parallel()
	w := Work{Levels: dbThenSRE, Digest: "d1", Requester: "rita"}
	tl := count(t, w)
	if tl.Satisfied || tl.Missing() != "1 more from db, 1 more from sre" {
		t.Fatalf("fresh: satisfied %v, missing %q", tl.Satisfied, tl.Missing())
	}
	if got := tl.Levels[1].CanApprove; !slices.Equal(got, []string{"pat", "sam", "sue"}) {
		t.Fatalf("sre can approve %q", got)
	}
	if err := approve(t, &w, "dana"); err != nil {
		t.Fatal(err)
	}
	tl = count(t, w)
	if tl.Satisfied || tl.Missing() != "1 more from sre" || !slices.Equal(tl.Levels[0].ApprovedBy, []string{"dana"}) {
		t.Fatalf("after dana: %+v, missing %q", tl, tl.Missing())
	}
	if tl.Levels[0].CanApprove != nil {
		t.Errorf("a met level still lists who can approve: %q", tl.Levels[0].CanApprove)
	}
	if got := tl.Line(1); got != "level 2 (sre): 0 of 1 — can approve: pat, sam, sue" {
		t.Errorf("line %q", got)
	}
	if err := approve(t, &w, "sam"); err != nil {
		t.Fatal(err)
	}
	if tl = count(t, w); !tl.Satisfied || tl.Missing() != "nothing more" {
		t.Fatalf("after sam: %+v", tl)
	}
}

// TestTallyRefusals: every person who may not count is refused with the
// reason, and counts for nothing when an approval of theirs is stored
// anyway.
func TestTallyRefusals(t *testing.T) {
	t.Parallel()
	base := Work{Levels: dbThenSRE, Digest: "d1", Requester: "pat", Applier: "sue"}
	for _, c := range []struct {
		name, person, why string
		prior             []string
	}{
		{"the requester", "Pat", "requested it", nil},
		{"the applier", "SUE", "applied the playbook version", nil},
		{"twice", "dana", "approved it already", []string{"dana"}},
		{"in no level", "olga", "may approve at no level: level 1 takes db, level 2 takes sre", nil},
	} {
		w := base
		for _, p := range c.prior {
			if err := approve(t, &w, p); err != nil {
				t.Fatal(err)
			}
		}
		if err := approve(t, &w, c.person); err == nil || !strings.Contains(err.Error(), c.why) {
			t.Errorf("%s: %v, want a refusal saying %q", c.name, err, c.why)
		}
	}
	// sam met sre; sam2, of sre alone, has no level left.
	met := Work{Levels: dbThenSRE, Digest: "d1", Approvals: []Recorded{{Person: "sam", Level: dbThenSRE[1].Key(), Digest: "d1"}}}
	tl0 := count(t, met)
	if _, err := Place(met, tl0, "sam2", []string{"sre"}); err == nil ||
		!strings.Contains(err.Error(), "the levels sam2 may approve are met: 1 more from db") {
		t.Errorf("only at a met level: %v", err)
	}
	// Stored anyway (a policy that allowed it then), they do not count.
	w := base
	w.Approvals = []Recorded{
		{Person: "pat", Level: dbThenSRE[0].Key(), Digest: "d1"},
		{Person: "Sue", Level: dbThenSRE[1].Key(), Digest: "d1"},
	}
	if tl := count(t, w); len(tl.Levels[0].ApprovedBy)+len(tl.Levels[1].ApprovedBy) != 0 {
		t.Errorf("requester and applier counted: %+v", tl.Levels)
	}
	// Neither is offered as one who can approve.
	tl := count(t, w)
	for _, lt := range tl.Levels {
		if slices.ContainsFunc(lt.CanApprove, func(p string) bool { return SamePerson(p, "pat") || SamePerson(p, "sue") }) {
			t.Errorf("can approve lists the requester or the applier: %q", lt.CanApprove)
		}
	}
}

// TestTallySelfApproval: with self_approval on, the requester and the
// applier count, as they always could.
func TestTallySelfApproval(t *testing.T) {
	t.Parallel()
	w := Work{Levels: []Level{AnyApprover}, Digest: "d1", Requester: "pat", Applier: "pat", SelfApproval: true}
	if err := approve(t, &w, "pat"); err != nil {
		t.Fatal(err)
	}
	if !count(t, w).Satisfied {
		t.Fatal("the requester's own approval did not count with self_approval on")
	}
	w.SelfApproval = false
	if count(t, w).Satisfied {
		t.Fatal("the requester's own approval counted with self_approval off")
	}
}

// TestTallyPersonInTwoTeamsCountsOnce: pat is in db and sre; their one
// approval goes to the first level not met they are eligible for, and
// never meets both.
func TestTallyPersonInTwoTeamsCountsOnce(t *testing.T) {
	t.Parallel()
	w := Work{Levels: dbThenSRE, Digest: "d1", Requester: "rita"}
	if err := approve(t, &w, "pat"); err != nil {
		t.Fatal(err)
	}
	tl := count(t, w)
	if tl.Satisfied || !slices.Equal(tl.Levels[0].ApprovedBy, []string{"pat"}) || tl.Missing() != "1 more from sre" {
		t.Fatalf("pat: %+v", tl.Levels)
	}
	if slices.Contains(tl.Levels[1].CanApprove, "pat") {
		t.Errorf("pat is offered for sre too: %q", tl.Levels[1].CanApprove)
	}
	if err := approve(t, &w, "pat"); err == nil {
		t.Fatal("pat approved twice")
	}
	// Even stored at both levels, pat counts at the first only.
	w.Approvals = append(w.Approvals, Recorded{Person: "PAT", Level: dbThenSRE[1].Key(), Digest: "d1"})
	if tl := count(t, w); tl.Satisfied || len(tl.Levels[1].ApprovedBy) != 0 {
		t.Fatalf("pat counted twice: %+v", tl.Levels)
	}
	// After db is met by dana, pat goes to sre.
	w = Work{Levels: dbThenSRE, Digest: "d1", Requester: "rita"}
	for _, p := range []string{"dana", "pat"} {
		if err := approve(t, &w, p); err != nil {
			t.Fatal(err)
		}
	}
	if tl := count(t, w); !tl.Satisfied || !slices.Equal(tl.Levels[1].ApprovedBy, []string{"pat"}) {
		t.Fatalf("dana then pat: %+v", tl.Levels)
	}
}

// TestTallyDigestVoids: approvals of another digest count for nothing, and
// their people may approve again.
func TestTallyDigestVoids(t *testing.T) {
	t.Parallel()
	w := Work{Levels: dbThenSRE, Digest: "d1", Requester: "rita"}
	for _, p := range []string{"dana", "sam"} {
		if err := approve(t, &w, p); err != nil {
			t.Fatal(err)
		}
	}
	if !count(t, w).Satisfied {
		t.Fatal("not satisfied at d1")
	}
	w.Digest = "d2"
	tl := count(t, w)
	if tl.Satisfied || tl.Void != 2 || tl.Missing() != "1 more from db, 1 more from sre" {
		t.Fatalf("at d2: %+v", tl)
	}
	if err := approve(t, &w, "dana"); err != nil {
		t.Fatalf("dana may not approve the new content: %v", err)
	}
}

// TestTallyMinTwo: min counts distinct people.
func TestTallyMinTwo(t *testing.T) {
	t.Parallel()
	w := Work{Levels: []Level{{Teams: []string{"sre"}, Persons: []string{"olga"}, Min: 2}}, Digest: "d", Requester: "rita"}
	for i, p := range []string{"sam", "olga"} {
		if err := approve(t, &w, p); err != nil {
			t.Fatal(err)
		}
		if got := count(t, w).Satisfied; got != (i == 1) {
			t.Fatalf("after %s: satisfied %v", p, got)
		}
	}
}

// TestTallyLevelChangedByReload: an approval made for a level the rules no
// longer have counts for nothing.
func TestTallyLevelChangedByReload(t *testing.T) {
	t.Parallel()
	w := Work{Levels: dbThenSRE, Digest: "d", Requester: "rita"}
	if err := approve(t, &w, "sam"); err != nil {
		t.Fatal(err)
	}
	w.Levels = []Level{dbThenSRE[0], {Teams: []string{"sre"}, Min: 2}}
	if tl := count(t, w); len(tl.Levels[1].ApprovedBy) != 0 {
		t.Fatalf("an approval of the old level counted: %+v", tl.Levels)
	}
}

// TestMayReject: any eligible person may reject; others may not.
func TestMayReject(t *testing.T) {
	t.Parallel()
	w := Work{Levels: dbThenSRE, Digest: "d", Requester: "rita"}
	if err := MayReject(w, "sam", []string{"sre"}); err != nil {
		t.Fatal(err)
	}
	if err := MayReject(w, "olga", nil); err == nil || !strings.Contains(err.Error(), "level 1 takes db") {
		t.Fatalf("olga: %v", err)
	}
	if err := MayReject(Work{Levels: []Level{AnyApprover}}, "olga", nil); err != nil {
		t.Fatalf("any approver: %v", err)
	}
}

// TestLevelsOfPolicy: the first matching rule's levels; a rule without
// levels and the default are AnyApprover; a run of several kinds needs
// each distinct level once; a schedule (kinds nil) every rule of its
// cluster.
func TestLevelsOfPolicy(t *testing.T) {
	t.Parallel()
	p := Policy{Default: Required, TTL: time.Hour, Rules: []Rule{
		{Kind: "debug/*", Approval: None},
		{Kind: "db/*", Cluster: "prod-db-*", Levels: dbThenSRE},
		{Kind: "os/*", Cluster: "prod-*", Approval: Required, Levels: []Level{{Teams: []string{"sre"}}}},
		{Kind: "app/*", Cluster: "prod-*", Approval: Required},
	}}
	if errs := p.Validate(); len(errs) != 0 {
		t.Fatal(errs)
	}
	keys := func(ls []Level) string {
		var out []string
		for _, l := range ls {
			out = append(out, l.Who())
		}
		return strings.Join(out, "; ")
	}
	for _, c := range []struct {
		kinds   []string
		cluster string
		want    string
	}{
		{[]string{"debug/x"}, "prod-db-1", ""},
		{[]string{"db/x"}, "prod-db-1", "db; sre"},
		{[]string{"db/x", "os/y"}, "prod-db-1", "db; sre"},
		{[]string{"app/x"}, "prod-1", "any approver"},
		{[]string{"app/x", "os/y"}, "prod-1", "sre"},
		{[]string{"other/x"}, "dev", "any approver"},
		{nil, "prod-db-1", "db; sre"},
		{nil, "dev", "any approver"},
	} {
		if got := keys(p.Levels(c.kinds, c.cluster)); got != c.want {
			t.Errorf("%v on %s: %q, want %q", c.kinds, c.cluster, got, c.want)
		}
	}
	if !p.NeedsApproval("db/x", "prod-db-1") {
		t.Error("a rule with levels and no approval field needs no approval")
	}
}

// TestValidateLevels: one error per bad field, with its path.
func TestValidateLevels(t *testing.T) {
	t.Parallel()
	p := Policy{Default: Required, TTL: time.Hour, Rules: []Rule{
		{Kind: "*", Approval: None, Levels: []Level{{Teams: []string{"db"}}}},
		{Kind: "*", Levels: []Level{
			{},
			{Teams: []string{"bad team"}, Min: -1},
			{Persons: []string{"alice", ""}, Min: 3},
			{Teams: []string{"db"}},
			{Teams: []string{"DB"}, Min: 1},
		}},
	}}
	want := []string{
		"approval.rules[0].levels",
		"approval.rules[1].levels[0]",
		"approval.rules[1].levels[1].min",
		"approval.rules[1].levels[1].teams[0]",
		"approval.rules[1].levels[2].persons[1]",
		"approval.rules[1].levels[2].min",
		"approval.rules[1].levels[4]",
	}
	if got := p.Validate().Fields(); !slices.Equal(got, want) {
		t.Fatalf("fields\n%q\nwant\n%q", got, want)
	}
}
