package ops_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/musterhq/muster/core/ops"
	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/wire"
)

func policyEvents(t *testing.T, st store.Store) []store.Event {
	t.Helper()
	var out []store.Event
	err := st.Read(context.Background(), func(r store.Reader) error {
		es, err := r.Events(context.Background(), 0, 10000)
		for _, e := range es {
			if strings.HasPrefix(e.Type, "policy.") || strings.HasPrefix(e.Type, "freeze.") {
				out = append(out, e)
			}
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func spec(v any) json.RawMessage {
	b, _ := json.Marshal(v)
	return b
}

var (
	otto = ops.Caller{Name: "otto", Roles: []string{store.RoleOperator}, Addr: "192.0.2.1"}
	ann  = ops.Caller{Name: "ann", Roles: []string{store.RoleApprover}, Addr: "192.0.2.2"}
	vera = ops.Caller{Name: "vera", Roles: []string{store.RoleViewer}}
	adam = ops.Caller{Name: "adam", Roles: []string{store.RoleAdmin}}
)

// Windows, budgets and approval rules are records changed through the
// operations: a change that only holds work (a first window, a narrower
// budget) is an operator's; one that may let held work go (another
// window, a deleted one, a wider budget) an approver's, as lifting a
// freeze; an approval rule an admin's. Each change is an event naming who
// and why, with its history; a refused change changes nothing.
func TestPolicyRecordsAreGatedLikeFreezes(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	w1 := wire.PutPolicyRequest{Spec: spec(wire.WindowSpec{Cluster: "prod", Cron: "0 2 * * *", Duration: "4h"}), Reason: "nights"}
	for name, req := range map[string]wire.PutPolicyRequest{
		"no reason":     {Spec: w1.Spec},
		"bad cron":      {Spec: spec(wire.WindowSpec{Cluster: "prod", Cron: "tea time", Duration: "4h"}), Reason: "x"},
		"bad duration":  {Spec: spec(wire.WindowSpec{Cluster: "prod", Cron: "0 2 * * *", Duration: "4"}), Reason: "x"},
		"unknown field": {Spec: json.RawMessage(`{"cluster":"prod","cron":"0 2 * * *","duration":"4h","color":1}`), Reason: "x"},
		"no cluster":    {Spec: spec(wire.WindowSpec{Cron: "0 2 * * *", Duration: "4h"}), Reason: "x"},
	} {
		if _, err := e.ops.PutPolicy(ctx, otto, store.PolicyWindow, "nightly", &req); !errors.Is(err, ops.ErrBadRequest) {
			t.Errorf("%s: %v, want a bad request", name, err)
		}
	}
	if _, err := e.ops.PutPolicy(ctx, otto, "color", "x", &w1); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("unknown kind: %v, want not found", err)
	}
	if _, err := e.ops.PutPolicy(ctx, vera, store.PolicyWindow, "nightly", &w1); !errors.Is(err, ops.ErrForbidden) {
		t.Errorf("a viewer makes a window: %v, want forbidden", err)
	}
	other := w1
	other.Spec = spec(wire.WindowSpec{Cluster: "nope", Cron: "0 2 * * *", Duration: "4h"})
	if _, err := e.ops.PutPolicy(ctx, otto, store.PolicyWindow, "nightly", &other); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("a window of an unknown cluster: %v, want not found", err)
	}
	if got := policyEvents(t, e.st); len(got) != 0 {
		t.Fatalf("refused changes made events: %+v", got)
	}
	// The first window only holds work: an operator's.
	w, err := e.ops.PutPolicy(ctx, otto, store.PolicyWindow, "nightly", &w1)
	if err != nil {
		t.Fatal(err)
	}
	if w.Version != 1 || w.CreatedBy != "otto" || w.Reason != "nights" || !strings.Contains(string(w.Spec), `"duration":"4h0m0s"`) {
		t.Errorf("window = %+v (%s)", w, w.Spec)
	}
	if n := e.syncs.Take(); len(n) == 0 {
		t.Errorf("a new window nudged nothing")
	}
	// A second window opens more time: an approver's.
	w2 := wire.PutPolicyRequest{Spec: spec(wire.WindowSpec{Cluster: "prod", Cron: "0 14 * * 6", Duration: "2h"}), Reason: "weekends"}
	if _, err := e.ops.PutPolicy(ctx, otto, store.PolicyWindow, "weekend", &w2); !errors.Is(err, ops.ErrForbidden) {
		t.Errorf("an operator adds a second window: %v, want forbidden", err)
	}
	if _, err := e.ops.PutPolicy(ctx, ann, store.PolicyWindow, "weekend", &w2); err != nil {
		t.Fatal(err)
	}
	// Deleting a window is an approver's, with a reason.
	if _, err := e.ops.DeletePolicy(ctx, otto, store.PolicyWindow, "weekend", "not needed"); !errors.Is(err, ops.ErrForbidden) {
		t.Errorf("an operator deletes a window: %v, want forbidden", err)
	}
	if _, err := e.ops.DeletePolicy(ctx, ann, store.PolicyWindow, "weekend", ""); !errors.Is(err, ops.ErrBadRequest) {
		t.Errorf("delete without a reason: %v, want a bad request", err)
	}
	d, err := e.ops.DeletePolicy(ctx, ann, store.PolicyWindow, "weekend", "not needed")
	if err != nil || d.DeletedTS == nil || d.DeletedBy != "ann" || d.DeleteReason != "not needed" {
		t.Fatalf("delete = %+v, %v", d, err)
	}
	if _, err := e.ops.DeletePolicy(ctx, ann, store.PolicyWindow, "weekend", "again"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("delete again: %v, want not found", err)
	}

	// A budget: set and narrowed by an operator, widened by an approver.
	b := func(m string) *wire.PutPolicyRequest {
		return &wire.PutPolicyRequest{Spec: spec(wire.BudgetSpec{Cluster: "prod", MaxUnavailable: m}), Reason: "budget " + m}
	}
	if _, err := e.ops.PutPolicy(ctx, otto, store.PolicyBudget, "prod", b("2")); err != nil {
		t.Fatal(err)
	}
	if _, err := e.ops.PutPolicy(ctx, otto, store.PolicyBudget, "prod", b("1")); err != nil {
		t.Errorf("an operator narrows the budget: %v", err)
	}
	if _, err := e.ops.PutPolicy(ctx, otto, store.PolicyBudget, "prod", b("3")); !errors.Is(err, ops.ErrForbidden) {
		t.Errorf("an operator widens the budget: %v, want forbidden", err)
	}
	if _, err := e.ops.PutPolicy(ctx, otto, store.PolicyBudget, "prod", b("10%")); !errors.Is(err, ops.ErrForbidden) {
		t.Errorf("an operator makes the budget a percentage: %v, want forbidden", err)
	}
	if _, err := e.ops.PutPolicy(ctx, otto, store.PolicyBudget, "other", b("1")); !errors.Is(err, ops.ErrBadRequest) {
		t.Errorf("a budget whose id is not its cluster: %v, want a bad request", err)
	}
	if _, err := e.ops.PutPolicy(ctx, ann, store.PolicyBudget, "prod", b("3")); err != nil {
		t.Errorf("an approver widens the budget: %v", err)
	}

	// An approval rule is an admin's.
	rule := &wire.PutPolicyRequest{Spec: spec(wire.ApprovalRuleSpec{Kind: "noop", Approval: "none"}), Reason: "noop is harmless"}
	if _, err := e.ops.PutPolicy(ctx, ann, store.PolicyApprovalRule, "noop", rule); !errors.Is(err, ops.ErrForbidden) {
		t.Errorf("an approver makes an approval rule: %v, want forbidden", err)
	}
	if _, err := e.ops.PutPolicy(ctx, adam, store.PolicyApprovalRule, "noop", rule); err != nil {
		t.Fatal(err)
	}

	got, err := e.ops.Policies(ctx, vera, "", "", false)
	if err != nil || len(got) != 3 {
		t.Fatalf("list = %+v, %v", got, err)
	}
	all, _ := e.ops.Policies(ctx, vera, store.PolicyWindow, "prod", true)
	if len(all) != 2 {
		t.Errorf("windows with the deleted = %+v", all)
	}
	h, err := e.ops.PolicyHistory(ctx, vera, store.PolicyBudget, "prod")
	if err != nil || len(h) != 3 || h[0].Actor != "otto" || h[2].Actor != "ann" || h[2].Reason != "budget 3" {
		t.Errorf("budget history = %+v, %v", h, err)
	}
	evs := policyEvents(t, e.st)
	if len(evs) != 7 {
		t.Fatalf("events: %d, want 7: %+v", len(evs), evs)
	}
	last := evs[len(evs)-1]
	if last.Type != store.EventPolicyCreated || last.Actor != "adam" || !strings.Contains(last.Message, "noop is harmless") {
		t.Errorf("last event = %+v", last)
	}
	if del := evs[2]; del.Type != store.EventPolicyDeleted || del.Actor != "ann" || del.ClientAddr != "192.0.2.2" ||
		!strings.Contains(del.Message, "not needed") {
		t.Errorf("delete event = %+v", del)
	}
}

func applyDoc(e *env, who ops.Caller, doc wire.PolicyDocument, dry bool) (wire.PolicyPlan, error) {
	return e.ops.ApplyPolicy(context.Background(), who, &wire.ApplyPolicyRequest{Source: "file:policy.yaml", DryRun: dry, Document: doc,
		Reason: "policy review"})
}

// ApplyPolicy makes the store hold a whole document: a dry run says what
// would change and changes nothing; apply changes exactly that, marked
// with the file; a second apply changes nothing; one window changed
// changes exactly that window; an entry removed is deleted; a bad entry or
// one change the caller may not make changes nothing at all.
func TestApplyPolicyIsADiffAllOrNone(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	until := time.Now().Add(48 * time.Hour).UTC().Truncate(time.Second)
	doc := wire.PolicyDocument{
		Freezes: []wire.PolicyFreeze{{Cluster: "prod", From: until.Add(-time.Hour), To: until, Reason: "year-end"}},
		Windows: []wire.PolicyWindow{{Name: "nightly", Cluster: "prod", Cron: "0 2 * * *", Duration: "4h"},
			{Name: "weekend", Cluster: "prod", Cron: "0 14 * * 6", Duration: "2h", Timezone: "Europe/Berlin"}},
		Budgets:       []wire.PolicyBudget{{Cluster: "prod", MaxUnavailable: "1"}},
		ApprovalRules: []wire.PolicyApprovalRule{{Name: "noop", Kind: "noop", Approval: "none"}},
	}
	dry, err := applyDoc(e, vera, doc, true)
	if err != nil || dry.Applied || len(dry.Changes) != 5 {
		t.Fatalf("dry run = %+v, %v", dry, err)
	}
	if got := policyEvents(t, e.st); len(got) != 0 {
		t.Fatalf("a dry run changed something: %+v", got)
	}
	// An approver may not make the approval rule: nothing is made.
	if _, err := applyDoc(e, ann, doc, false); !errors.Is(err, ops.ErrForbidden) {
		t.Fatalf("apply past the caller's grants = %v, want forbidden", err)
	}
	if got := policyEvents(t, e.st); len(got) != 0 {
		t.Fatalf("a refused apply changed something: %+v", got)
	}
	bad := doc
	bad.Windows = append([]wire.PolicyWindow{}, doc.Windows...)
	bad.Windows[1].Cron = "tea time"
	if _, err := applyDoc(e, adam, bad, false); !errors.Is(err, ops.ErrBadRequest) || !strings.Contains(err.Error(), "windows[1]") {
		t.Fatalf("apply of a bad window = %v, want a bad request naming it", err)
	}
	twice := doc
	twice.Windows = []wire.PolicyWindow{doc.Windows[0], doc.Windows[0]}
	if _, err := applyDoc(e, adam, twice, false); !errors.Is(err, ops.ErrBadRequest) {
		t.Fatalf("apply of a window declared twice = %v, want a bad request", err)
	}
	if _, err := e.ops.ApplyPolicy(ctx, adam, &wire.ApplyPolicyRequest{Source: "policy.yaml", Document: doc}); !errors.Is(err, ops.ErrBadRequest) {
		t.Fatalf("apply with a bad source = %v, want a bad request", err)
	}
	p, err := applyDoc(e, adam, doc, false)
	if err != nil || !p.Applied || len(p.Changes) != 5 {
		t.Fatalf("apply = %+v, %v", p, err)
	}
	recs, _ := e.ops.Policies(ctx, vera, "", "", false)
	for _, r := range recs {
		if r.Source != "file:policy.yaml" || r.CreatedBy != "adam" {
			t.Errorf("applied record %+v", r)
		}
	}
	n := len(policyEvents(t, e.st))
	for _, dry := range []bool{true, false} {
		if p, err := applyDoc(e, adam, doc, dry); err != nil || len(p.Changes) != 0 || p.Applied {
			t.Fatalf("apply again (dry %v) = %+v, %v", dry, p, err)
		}
	}
	if got := len(policyEvents(t, e.st)); got != n {
		t.Fatalf("a second apply made %d events", got-n)
	}
	// One window changed: exactly that one changes, and the diff shows it.
	doc.Windows[0].Cron = "0 3 * * *"
	p, err = applyDoc(e, adam, doc, false)
	if err != nil || len(p.Changes) != 1 || p.Changes[0].Op != "~" || p.Changes[0].ID != "nightly" ||
		!strings.Contains(p.Changes[0].Text, `"0 2 * * *"`) || !strings.Contains(p.Changes[0].Text, `"0 3 * * *"`) {
		t.Fatalf("apply with one window changed = %+v, %v", p, err)
	}
	// An entry removed from the file is deleted; the freeze lifted.
	doc.Windows, doc.Freezes = doc.Windows[:1], nil
	p, err = applyDoc(e, adam, doc, false)
	if err != nil || len(p.Changes) != 2 || p.Changes[0].Op != "-" || p.Changes[0].Kind != "freeze" || p.Changes[1].ID != "weekend" {
		t.Fatalf("apply with entries removed = %+v, %v", p, err)
	}
	if ws, _ := e.ops.Policies(ctx, vera, store.PolicyWindow, "", false); len(ws) != 1 || ws[0].ID != "nightly" {
		t.Errorf("windows after the removal = %+v", ws)
	}
}

// Teams and grants in a policy file: made and marked with the file by an
// admin; a second apply changes nothing; a member added changes that team;
// a grant removed is revoked; a team removed is deleted with its grants; a
// team made by hand is never taken over (409, nothing changed); an
// operator may apply none of it.
func TestApplyPolicyTeamsAndGrants(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	doc := wire.PolicyDocument{
		Teams: []wire.PolicyTeam{{Name: "db", Members: []string{"Dana"}, Groups: []string{"db-oncall"}}, {Name: "sre", Members: []string{"sam"}}},
		Grants: []wire.PolicyGrant{{Team: "db", Role: store.RoleApprover, Clusters: "prod"},
			{Team: "sre", Role: store.RoleOperator, Clusters: "*"}, {Person: "pat", Role: store.RoleViewer, Clusters: "prod"}},
	}
	if _, err := applyDoc(e, otto, doc, false); !errors.Is(err, ops.ErrForbidden) {
		t.Fatalf("an operator applies teams: %v, want forbidden", err)
	}
	p, err := applyDoc(e, adam, doc, false)
	if err != nil || len(p.Changes) != 5 {
		t.Fatalf("apply = %+v, %v", p, err)
	}
	teams, _ := e.ops.Teams(ctx, adam)
	grants, _ := e.ops.Grants(ctx, adam)
	if len(teams) != 2 || teams[0].Source != "file:policy.yaml" || len(grants) != 3 || grants[0].Source != "file:policy.yaml" {
		t.Fatalf("teams %+v, grants %+v", teams, grants)
	}
	if p, err := applyDoc(e, adam, doc, false); err != nil || len(p.Changes) != 0 {
		t.Fatalf("apply again = %+v, %v", p, err)
	}
	doc.Teams[0].Members = append(doc.Teams[0].Members, "dora")
	doc.Teams, doc.Grants = doc.Teams[:1], doc.Grants[:1]
	p, err = applyDoc(e, adam, doc, false)
	if err != nil || len(p.Changes) != 3 || p.Changes[0].Op != "~" || p.Changes[1].Text != "- grant person pat viewer on prod (revoked: no longer in the file)" ||
		p.Changes[2].Text != "- team sre (deleted with its grants: no longer in the file)" {
		t.Fatalf("apply with a member added, a grant and a team removed = %+v, %v", p, err)
	}
	if _, err := e.ops.CreateTeam(ctx, adam, &wire.CreateTeamRequest{Name: "web"}); err != nil {
		t.Fatal(err)
	}
	n := len(policyEvents(t, e.st))
	doc.Teams = append(doc.Teams, wire.PolicyTeam{Name: "web", Members: []string{"mallory"}})
	if _, err := applyDoc(e, adam, doc, false); !errors.Is(err, ops.ErrConflict) {
		t.Fatalf("apply over a team made by hand = %v, want a conflict", err)
	}
	if got, _ := e.ops.Team(ctx, adam, "web"); len(got.Members) != 0 || len(policyEvents(t, e.st)) != n {
		t.Fatalf("a refused apply changed the team: %+v", got)
	}
}

// A dry run shows the grants of a file only to who may grant: a viewer's
// diff of a file naming teams is refused, and of one naming none shows no
// grant.
func TestApplyPolicyDryRunKeepsGrantsFromReaders(t *testing.T) {
	t.Parallel()
	e := setup(t)
	doc := wire.PolicyDocument{Grants: []wire.PolicyGrant{{Person: "pat", Role: store.RoleViewer, Clusters: "prod"}}}
	if _, err := applyDoc(e, adam, doc, false); err != nil {
		t.Fatal(err)
	}
	if _, err := applyDoc(e, vera, doc, true); !errors.Is(err, ops.ErrForbidden) {
		t.Errorf("a viewer's diff of grants = %v, want forbidden", err)
	}
	if p, err := applyDoc(e, vera, wire.PolicyDocument{}, true); err != nil || len(p.Changes) != 0 {
		t.Errorf("a viewer's diff of an empty file = %+v, %v; want no grant shown", p, err)
	}
	if p, err := applyDoc(e, adam, wire.PolicyDocument{}, true); err != nil || len(p.Changes) != 1 || p.Changes[0].Kind != "grant" {
		t.Errorf("an admin's diff of an empty file = %+v, %v; want the grant revoked", p, err)
	}
}
