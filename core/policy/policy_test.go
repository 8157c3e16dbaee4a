package policy_test

import (
	"encoding/json"
	"errors"
	"testing"

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
