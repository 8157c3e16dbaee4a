package policy_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/musterhq/muster/core/approval"
	"github.com/musterhq/muster/core/policy"
	"github.com/musterhq/muster/core/schedule"
	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/wire"
)

func js(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}

// Check gives one canonical form to specs that mean the same, and refuses
// a bad one with ErrInvalid.
func TestCheckIsCanonicalAndStrict(t *testing.T) {
	t.Parallel()
	a, err := policy.Check(store.PolicyWindow, "w", js(wire.WindowSpec{Cluster: "prod", Cron: "0 2 * * *", Duration: "240m"}), 0)
	if err != nil {
		t.Fatal(err)
	}
	b, err := policy.Check(store.PolicyWindow, "w", js(wire.WindowSpec{Cluster: "prod", Cron: "0 2 * * *", Duration: "4h"}), 0)
	if err != nil || a != b || a.ClusterID != "prod" {
		t.Fatalf("240m and 4h: %+v, %+v, %v", a, b, err)
	}
	x, _ := policy.Check(store.PolicyBudget, "prod", []byte(`{"max_unavailable":" 2"}`), 0)
	y, _ := policy.Check(store.PolicyBudget, "prod", []byte(`{"cluster":"prod","max_unavailable":"2"}`), 0)
	if x.Spec == "" || x != y {
		t.Fatalf("budgets: %+v, %+v", x, y)
	}
	for name, tc := range map[string]struct {
		kind, id, spec string
	}{
		"unknown kind":     {"color", "x", `{}`},
		"bad id":           {store.PolicyWindow, "a b", `{"cluster":"prod","cron":"0 2 * * *","duration":"4h"}`},
		"unknown field":    {store.PolicyBudget, "prod", `{"max_unavailable":"1","x":1}`},
		"two objects":      {store.PolicyBudget, "prod", `{"max_unavailable":"1"}{}`},
		"budget elsewhere": {store.PolicyBudget, "prod", `{"cluster":"stage","max_unavailable":"1"}`},
		"percent > 100":    {store.PolicyBudget, "prod", `{"max_unavailable":"101%"}`},
		"short window":     {store.PolicyWindow, "w", `{"cluster":"prod","cron":"0 2 * * *","duration":"1s"}`},
		"bad zone":         {store.PolicyWindow, "w", `{"cluster":"prod","cron":"0 2 * * *","duration":"4h","timezone":"Mars/Olympus"}`},
		"rule, no verdict": {store.PolicyApprovalRule, "r", `{"kind":"x"}`},
		"rule, bad glob":   {store.PolicyApprovalRule, "r", `{"kind":"[","approval":"none"}`},
		"rule, bad min":    {store.PolicyApprovalRule, "r", `{"levels":[{"teams":["db"],"min":-1}]}`},
	} {
		if _, err := policy.Check(tc.kind, tc.id, []byte(tc.spec), 0); !errors.Is(err, policy.ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
	}
}

// Loosens is the gate of a change: what may let held work go.
func TestLoosens(t *testing.T) {
	t.Parallel()
	rec := func(kind, id string, v any) *policy.Record {
		r, err := policy.Check(kind, id, js(v), 0)
		if err != nil {
			t.Fatal(err)
		}
		return &r
	}
	b := func(m string) *policy.Record {
		return rec(store.PolicyBudget, "prod", wire.BudgetSpec{Cluster: "prod", MaxUnavailable: m})
	}
	w := func(c string) *policy.Record {
		return rec(store.PolicyWindow, "w", wire.WindowSpec{Cluster: "prod", Cron: c, Duration: "4h"})
	}
	for _, tc := range []struct {
		name      string
		kind      string
		cur, next *policy.Record
		others    int
		want      bool
	}{
		{"first budget", store.PolicyBudget, nil, b("1"), 0, false},
		{"narrower budget", store.PolicyBudget, b("2"), b("1"), 0, false},
		{"same budget", store.PolicyBudget, b("2"), b("2"), 0, false},
		{"wider budget", store.PolicyBudget, b("1"), b("2"), 0, true},
		{"count to percent", store.PolicyBudget, b("1"), b("1%"), 0, true},
		{"budget removed", store.PolicyBudget, b("1"), nil, 0, true},
		{"first window", store.PolicyWindow, nil, w("0 2 * * *"), 0, false},
		{"another window", store.PolicyWindow, nil, w("0 2 * * *"), 1, true},
		{"window moved", store.PolicyWindow, w("0 2 * * *"), w("0 3 * * *"), 0, true},
		{"window deleted", store.PolicyWindow, w("0 2 * * *"), nil, 0, true},
		{"approval rule", store.PolicyApprovalRule, nil, rec(store.PolicyApprovalRule, "r", wire.ApprovalRuleSpec{Approval: "required"}), 0, true},
	} {
		if got := policy.Loosens(tc.kind, tc.cur, tc.next, tc.others); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

// The holder composes the live policies from the records: approval rules
// by position then id after the configuration's settings, budgets by
// cluster, windows into the calendars; deleted records are left out; it
// names the clusters whose windows or budget changed.
func TestHolderComposesTheRecords(t *testing.T) {
	t.Parallel()
	cals := schedule.NewHolder(nil)
	h := policy.NewHolder(policy.Settings{Approval: approval.Policy{Default: approval.None, TTL: 1}}, cals, nil)
	put := func(kind, id string, v any) store.PolicyRecord {
		r, err := policy.Check(kind, id, js(v), 0)
		if err != nil {
			t.Fatal(err)
		}
		return store.PolicyRecord{Kind: kind, ID: id, ClusterID: r.ClusterID, Spec: r.Spec}
	}
	deleted := put(store.PolicyWindow, "old", wire.WindowSpec{Cluster: "stage", Cron: "0 1 * * *", Duration: "1h"})
	deleted.DeletedTS = new(store.Now())
	recs := []store.PolicyRecord{
		put(store.PolicyApprovalRule, "b", wire.ApprovalRuleSpec{Position: 1, Kind: "second", Approval: "none"}),
		put(store.PolicyApprovalRule, "a", wire.ApprovalRuleSpec{Position: 1, Kind: "first", Approval: "none"}),
		put(store.PolicyApprovalRule, "z", wire.ApprovalRuleSpec{Position: 0, Kind: "zeroth", Approval: "required"}),
		put(store.PolicyBudget, "prod", wire.BudgetSpec{Cluster: "prod", MaxUnavailable: "10%"}),
		put(store.PolicyWindow, "w", wire.WindowSpec{Cluster: "prod", Cron: "0 2 * * *", Duration: "4h"}),
		deleted,
	}
	if got := h.SetRecords(recs); len(got) != 1 || got[0] != "prod" {
		t.Errorf("changed clusters = %v, want [prod]", got)
	}
	ap := h.Approval().Load()
	if ap.Default != approval.None || len(ap.Rules) != 3 || ap.Rules[0].Kind != "zeroth" || ap.Rules[1].Kind != "first" ||
		ap.Rules[2].Kind != "second" {
		t.Errorf("approval = %+v", ap)
	}
	if l := h.Budget().Load().MaxUnavailable["prod"]; l.String() != "10%" {
		t.Errorf("budget of prod = %v", l)
	}
	c := cals.Value().Load()
	if c.Of("prod") == nil || len(c.Of("prod").Windows) != 1 || c.Of("stage") != nil {
		t.Errorf("calendars = %+v", c)
	}
	if got := h.SetRecords(recs); len(got) != 0 {
		t.Errorf("the same records again changed %v", got)
	}
	if got := h.SetRecords(recs[:3]); len(got) != 1 {
		t.Errorf("records without prod's changed %v, want [prod]", got)
	}
}

// A stored record that does not read (a window shorter than a raised
// least window, a spec of another version) is never dropped silently: the
// cluster's other windows stay, a cluster none of whose windows reads is
// kept closed, a budget or rule keeps its last good version, and each is
// reported.
func TestHolderKeepsWhatReadsAndFailsClosed(t *testing.T) {
	t.Parallel()
	cals := schedule.NewHolder(nil)
	var reported [][]string
	h := policy.NewHolder(policy.Settings{Approval: approval.Policy{Default: approval.None, TTL: 1}}, cals, nil)
	h.OnUnreadable(func(p []string) { reported = append(reported, p) })
	put := func(kind, id string, v any) store.PolicyRecord {
		r, err := policy.Check(kind, id, js(v), 0)
		if err != nil {
			t.Fatal(err)
		}
		return store.PolicyRecord{Kind: kind, ID: id, ClusterID: r.ClusterID, Spec: r.Spec}
	}
	rule := put(store.PolicyApprovalRule, "gate", wire.ApprovalRuleSpec{Kind: "noop", Approval: "required"})
	bud := put(store.PolicyBudget, "prod", wire.BudgetSpec{Cluster: "prod", MaxUnavailable: "1"})
	long := put(store.PolicyWindow, "long", wire.WindowSpec{Cluster: "prod", Cron: "0 2 * * *", Duration: "4h"})
	short := put(store.PolicyWindow, "short", wire.WindowSpec{Cluster: "prod", Cron: "0 9 * * *", Duration: "10m"})
	stage := put(store.PolicyWindow, "stage", wire.WindowSpec{Cluster: "stage", Cron: "0 9 * * *", Duration: "10m"})
	h.SetRecords([]store.PolicyRecord{rule, bud, long, short, stage})
	if len(reported) != 0 {
		t.Fatalf("reported with every record readable: %v", reported)
	}
	// The least window is raised to 1h: short and stage no longer read.
	h.SetSettings(policy.Settings{Approval: approval.Policy{Default: approval.None, TTL: 1}, MinWindow: time.Hour})
	c := cals.Value().Load()
	if p := c.Of("prod"); p == nil || len(p.Windows) != 1 {
		t.Errorf("prod's calendar = %+v, want its one window that reads", p)
	}
	if s := c.Of("stage"); s == nil || s.At(time.Now()).InWindow && s.At(time.Now()).Frozen == nil {
		t.Errorf("stage, none of whose windows reads, is open: %+v", s)
	}
	if len(reported) != 1 || !strings.Contains(strings.Join(reported[0], "\n"), "short") ||
		!strings.Contains(strings.Join(reported[0], "\n"), "stage") {
		t.Fatalf("reported %v, want short and stage", reported)
	}
	// A rule and a budget that no longer read keep their last good version.
	badRule, badBud := rule, bud
	badRule.Spec, badBud.Spec = `{"position":"x"}`, `{"max_unavailable":"lots"}`
	h.SetRecords([]store.PolicyRecord{badRule, badBud, long})
	if rs := h.Approval().Load().Rules; len(rs) != 1 || rs[0].Approval != approval.Required {
		t.Errorf("rules = %+v, want the last good gate", rs)
	}
	if l := h.Budget().Load().MaxUnavailable["prod"]; l.String() != "1" {
		t.Errorf("budget of prod = %v, want the last good 1", l)
	}
	if last := strings.Join(reported[len(reported)-1], "\n"); !strings.Contains(last, "gate") || !strings.Contains(last, "budget prod") {
		t.Errorf("reported %q, want the rule and the budget", last)
	}
}

// Approval rules of core.yaml and of a policy file both take positions
// 0, 1, ...: at the same position the configuration's comes first,
// whatever the ids, so a file's rule cannot shadow it by its name.
func TestHolderOrdersConfigRulesFirstAtAPosition(t *testing.T) {
	t.Parallel()
	h := policy.NewHolder(policy.Settings{Approval: approval.Policy{Default: approval.None, TTL: 1}}, nil, nil)
	rec := func(id, source string, s wire.ApprovalRuleSpec) store.PolicyRecord {
		r, err := policy.Check(store.PolicyApprovalRule, id, js(s), 0)
		if err != nil {
			t.Fatal(err)
		}
		return store.PolicyRecord{Kind: store.PolicyApprovalRule, ID: id, Spec: r.Spec, Source: source}
	}
	h.SetRecords([]store.PolicyRecord{
		rec("aaa-free", "file:policy.yaml", wire.ApprovalRuleSpec{Position: 0, Kind: "file", Approval: "none"}),
		rec("cfg-r-0123456789ab", store.SourceConfig, wire.ApprovalRuleSpec{Position: 0, Kind: "config", Approval: "required"}),
		rec("by-hand", "", wire.ApprovalRuleSpec{Position: 0, Kind: "hand", Approval: "none"}),
		rec("cfg-r-ba9876543210", store.SourceConfig, wire.ApprovalRuleSpec{Position: 1, Kind: "config1", Approval: "required"}),
	})
	var kinds []string
	for _, r := range h.Approval().Load().Rules {
		kinds = append(kinds, r.Kind)
	}
	if got := strings.Join(kinds, ","); got != "config,hand,file,config1" {
		t.Errorf("rules in order %s, want config,hand,file,config1", got)
	}
}
