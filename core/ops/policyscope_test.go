package ops_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/musterhq/muster/core/ops"
	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/wire"
)

// scoped adds the cluster stage to e and returns a caller granted role on
// prod only.
func scoped(t *testing.T, e *env, name, role string) ops.Caller {
	t.Helper()
	ctx := context.Background()
	if err := e.st.Update(ctx, func(tx store.Tx) error {
		return tx.PutCluster(ctx, &store.Cluster{ID: "stage", Status: store.ClusterHealthy, UpdatedTS: time.Now().UTC()})
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.ops.CreateGrant(ctx, admin, &wire.CreateGrantRequest{Person: name, Role: role, Clusters: "prod"}); err != nil {
		t.Fatal(err)
	}
	c, err := e.ops.Identify(ctx, name, nil, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func changesText(p wire.PolicyPlan) string {
	var b strings.Builder
	for _, c := range p.Changes {
		b.WriteString(c.Text + "\n")
	}
	return b.String()
}

// Apply by a caller who reads prod only plans prod only: the same file's
// windows and freezes of stage are neither shown nor deleted, and a
// refusal never quotes them.
func TestApplyPolicyLeavesClustersOutOfScopeAlone(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	pia := scoped(t, e, "pia", store.RoleApprover)
	until := time.Now().Add(48 * time.Hour).UTC().Truncate(time.Second)
	full := wire.PolicyDocument{
		Freezes: []wire.PolicyFreeze{{Cluster: "stage", From: until.Add(-time.Hour), To: until, Reason: "stage year-end"}},
		Windows: []wire.PolicyWindow{{Name: "stage-nightly", Cluster: "stage", Cron: "0 5 * * *", Duration: "1h"},
			{Name: "prod-nightly", Cluster: "prod", Cron: "0 2 * * *", Duration: "4h"}},
	}
	if _, err := applyDoc(e, adam, full, false); err != nil {
		t.Fatal(err)
	}
	// The lists: pia reads prod's records, and stage's do not exist for her.
	if rs, err := e.ops.Policies(ctx, pia, "", "", true); err != nil || len(rs) != 1 || rs[0].ClusterID != "prod" {
		t.Errorf("pia's records = %+v, %v; want prod's window only", rs, err)
	}
	if _, err := e.ops.Policies(ctx, pia, store.PolicyWindow, "stage", false); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("pia lists stage's windows: %v, want not found", err)
	}
	if _, err := e.ops.PolicyHistory(ctx, pia, store.PolicyWindow, "stage-nightly"); !errors.Is(err, store.ErrNotFound) ||
		strings.Contains(err.Error(), "stage\"") {
		t.Errorf("pia reads the history of stage's window: %v, want not found", err)
	}
	mine := wire.PolicyDocument{Windows: []wire.PolicyWindow{{Name: "prod-nightly", Cluster: "prod", Cron: "0 3 * * *", Duration: "4h"}}}
	p, err := applyDoc(e, pia, mine, true)
	if err != nil || len(p.Changes) != 1 || strings.Contains(changesText(p), "stage") {
		t.Fatalf("pia's dry run = %q, %v; want the prod window only", changesText(p), err)
	}
	if p, err = applyDoc(e, pia, mine, false); err != nil || len(p.Changes) != 1 {
		t.Fatalf("pia's apply = %q, %v", changesText(p), err)
	}
	if ws, _ := e.ops.Policies(ctx, adam, store.PolicyWindow, "stage", false); len(ws) != 1 {
		t.Errorf("stage's windows after pia's apply: %+v", ws)
	}
	if fs, _ := e.ops.Freezes(ctx, adam, "stage", false); len(fs) != 1 {
		t.Errorf("stage's freezes after pia's apply: %+v", fs)
	}
	// A window of pia's file under the name of stage's: refused, without
	// stage's window in the message.
	clash := wire.PolicyDocument{Windows: []wire.PolicyWindow{{Name: "stage-nightly", Cluster: "prod", Cron: "0 4 * * *", Duration: "1h"}}}
	for _, dry := range []bool{true, false} {
		p, err := applyDoc(e, pia, clash, dry)
		if strings.Contains(changesText(p), "stage") || (err != nil && (strings.Contains(err.Error(), "0 5 * * *") || strings.Contains(err.Error(), "cluster stage"))) {
			t.Errorf("dry %v: %q, %v: shows stage's window", dry, changesText(p), err)
		}
		if !dry && err == nil {
			t.Errorf("pia took stage's window over")
		}
	}
}

// A deleted window's name reused in another cluster keeps its history:
// a caller who reads prod only sees the rows of prod, and may not bring
// back a name whose last cluster they may not change.
func TestPolicyHistoryKeepsOtherClustersRows(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	pia := scoped(t, e, "pia", store.RoleApprover)
	put := func(who ops.Caller, cluster, cron string) error {
		_, err := e.ops.PutPolicy(ctx, who, store.PolicyWindow, "w", &wire.PutPolicyRequest{
			Spec: spec(wire.WindowSpec{Cluster: cluster, Cron: cron, Duration: "1h"}), Reason: "x"})
		return err
	}
	if err := put(adam, "stage", "0 5 * * *"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.ops.DeletePolicy(ctx, adam, store.PolicyWindow, "w", "gone"); err != nil {
		t.Fatal(err)
	}
	if err := put(pia, "prod", "0 2 * * *"); err == nil {
		t.Errorf("pia brought back stage's deleted window in prod")
	}
	for _, dry := range []bool{true, false} {
		if _, err := applyDoc(e, pia, wire.PolicyDocument{Windows: []wire.PolicyWindow{{Name: "w", Cluster: "prod", Cron: "0 2 * * *",
			Duration: "1h"}}}, dry); err == nil && !dry {
			t.Errorf("pia's apply brought back stage's deleted window in prod")
		}
	}
	if err := put(adam, "prod", "0 2 * * *"); err != nil {
		t.Fatal(err)
	}
	hs, err := e.ops.PolicyHistory(ctx, pia, store.PolicyWindow, "w")
	if err != nil || len(hs) != 1 {
		t.Fatalf("pia's history = %+v, %v; want prod's one row", hs, err)
	}
	for _, h := range hs {
		if strings.Contains(string(h.Spec), "stage") {
			t.Errorf("pia sees stage's row %+v", h)
		}
	}
	if hs, _ := e.ops.PolicyHistory(ctx, adam, store.PolicyWindow, "w"); len(hs) != 3 {
		t.Errorf("adam's history = %+v, want 3 rows", hs)
	}
}

// Taking a record over by naming it in a file (only its source changes)
// takes what changing it by hand takes: an operator may not re-source an
// admin's approval rule, nor one who only reads prod its window.
func TestApplyPolicyTakeoverNeedsTheChangeGrant(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	scoped(t, e, "olga", store.RoleViewer)
	if _, err := e.ops.CreateGrant(ctx, admin, &wire.CreateGrantRequest{Person: "olga", Role: store.RoleOperator, Clusters: "stage"}); err != nil {
		t.Fatal(err)
	}
	olga, err := e.ops.Identify(ctx, "olga", nil, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.ops.PutPolicy(ctx, adam, store.PolicyApprovalRule, "gate", &wire.PutPolicyRequest{
		Spec: spec(wire.ApprovalRuleSpec{Kind: "noop", Approval: "required"}), Reason: "x"}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.ops.PutPolicy(ctx, adam, store.PolicyWindow, "nightly", &wire.PutPolicyRequest{
		Spec: spec(wire.WindowSpec{Cluster: "prod", Cron: "0 2 * * *", Duration: "4h"}), Reason: "x"}); err != nil {
		t.Fatal(err)
	}
	n := len(policyEvents(t, e.st))
	rule := wire.PolicyDocument{ApprovalRules: []wire.PolicyApprovalRule{{Name: "gate", Kind: "noop", Approval: "required"}}}
	if _, err := applyDoc(e, otto, rule, false); !errors.Is(err, ops.ErrForbidden) {
		t.Errorf("an operator takes over an approval rule: %v, want forbidden", err)
	}
	win := wire.PolicyDocument{Windows: []wire.PolicyWindow{{Name: "nightly", Cluster: "prod", Cron: "0 2 * * *", Duration: "4h"}}}
	if _, err := applyDoc(e, olga, win, false); !errors.Is(err, ops.ErrForbidden) {
		t.Errorf("a reader of prod takes over its window: %v, want forbidden", err)
	}
	if got := len(policyEvents(t, e.st)); got != n {
		t.Errorf("refused takeovers made %d events", got-n)
	}
	if _, err := applyDoc(e, adam, rule, false); err != nil {
		t.Errorf("an admin takes over the rule: %v", err)
	}
}

// An admin of prod only neither sees nor revokes the file's grants on
// other clusters: a dry run of the file without them shows prod's revoke
// only, and apply leaves stage's grant.
func TestApplyPolicyGrantsOutOfScopeAreLeftAlone(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	dana := scoped(t, e, "dana", store.RoleAdmin)
	doc := wire.PolicyDocument{Grants: []wire.PolicyGrant{{Person: "pat", Role: store.RoleViewer, Clusters: "prod"},
		{Person: "pat", Role: store.RoleViewer, Clusters: "stage"}}}
	if _, err := applyDoc(e, adam, doc, false); err != nil {
		t.Fatal(err)
	}
	p, err := applyDoc(e, dana, wire.PolicyDocument{}, true)
	if err != nil || len(p.Changes) != 1 || strings.Contains(changesText(p), "stage") {
		t.Fatalf("dana's dry run = %q, %v; want prod's grant revoked only", changesText(p), err)
	}
	if _, err := applyDoc(e, dana, wire.PolicyDocument{}, false); err != nil {
		t.Fatalf("dana's apply: %v", err)
	}
	gs, _ := e.ops.Grants(ctx, adam)
	var pats []string
	for _, g := range gs {
		if g.Person == "pat" {
			pats = append(pats, g.Clusters)
		}
	}
	if len(pats) != 1 || pats[0] != "stage" {
		t.Errorf("pat's grants after dana's apply: %v, want stage's", pats)
	}
}

// An apply that loosens the policy (a rule, a window moved, a budget
// widened, a record deleted, a freeze lifted) needs a reason of its own;
// one that only holds work does not. The diff needs none.
func TestApplyPolicyLooseningNeedsAReason(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	apply := func(doc wire.PolicyDocument, dry bool, reason string) (wire.PolicyPlan, error) {
		return e.ops.ApplyPolicy(ctx, adam, &wire.ApplyPolicyRequest{Source: "file:policy.yaml", DryRun: dry, Document: doc, Reason: reason})
	}
	until := time.Now().Add(48 * time.Hour).UTC().Truncate(time.Second)
	hold := wire.PolicyDocument{Windows: []wire.PolicyWindow{{Name: "nightly", Cluster: "prod", Cron: "0 2 * * *", Duration: "4h"}},
		Budgets: []wire.PolicyBudget{{Cluster: "prod", MaxUnavailable: "1"}},
		Freezes: []wire.PolicyFreeze{{Cluster: "prod", From: until.Add(-time.Hour), To: until, Reason: "year-end"}}}
	if _, err := apply(hold, false, ""); err != nil {
		t.Fatalf("an apply that only holds work, without a reason: %v", err)
	}
	moved := hold
	moved.Windows = []wire.PolicyWindow{{Name: "nightly", Cluster: "prod", Cron: "0 3 * * *", Duration: "4h"}}
	wider := hold
	wider.Budgets = []wire.PolicyBudget{{Cluster: "prod", MaxUnavailable: "3"}}
	rule := hold
	rule.ApprovalRules = []wire.PolicyApprovalRule{{Name: "free", Kind: "noop", Approval: "none"}}
	lifted := hold
	lifted.Freezes = nil
	deleted := hold
	deleted.Budgets = nil
	n := len(policyEvents(t, e.st))
	for name, doc := range map[string]wire.PolicyDocument{"window moved": moved, "budget widened": wider, "rule": rule,
		"freeze lifted": lifted, "budget deleted": deleted} {
		if _, err := apply(doc, false, " "); !errors.Is(err, ops.ErrBadRequest) || !strings.Contains(err.Error(), "reason") {
			t.Errorf("%s without a reason: %v, want a bad request asking for one", name, err)
		}
		if p, err := apply(doc, true, ""); err != nil || len(p.Changes) == 0 {
			t.Errorf("%s: diff without a reason = %+v, %v", name, p, err)
		}
	}
	if got := len(policyEvents(t, e.st)); got != n {
		t.Fatalf("refused applies made %d events", got-n)
	}
	if _, err := apply(moved, false, "nights moved"); err != nil {
		t.Fatal(err)
	}
	if ws, _ := e.ops.Policies(ctx, adam, store.PolicyWindow, "prod", false); len(ws) != 1 || ws[0].Reason != "nights moved" {
		t.Errorf("windows = %+v, want the reason given", ws)
	}
}
