package core

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/musterhq/muster/core/approval"
	"github.com/musterhq/muster/core/discovery"
	"github.com/musterhq/muster/core/policy"
	"github.com/musterhq/muster/core/schedule"
	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/core/store/sqlite"
	"github.com/musterhq/muster/shared/wire"
)

func countEvents(t *testing.T, st store.Store, typ string) []store.Event {
	t.Helper()
	var out []store.Event
	err := st.Read(context.Background(), func(r store.Reader) error {
		es, err := r.Events(context.Background(), 0, 1000)
		for _, e := range es {
			if e.Type == typ {
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

// The configuration's freezes seed the store once (however often a
// replica starts); a file that disagrees with the store (a configured
// freeze lifted there, a config freeze the file lost) is drift, told once
// by an event, and the store is followed; a reload that removes a freeze
// from the file lifts it.
func TestConfigFreezesSeedTheStoreAndDriftIsTold(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	now := time.Now().UTC()
	spec := schedule.FreezeSpec{From: now.Add(-time.Hour).Format(time.RFC3339), To: now.Add(time.Hour).Format(time.RFC3339), Reason: "year-end"}
	past := schedule.FreezeSpec{From: now.Add(-3 * time.Hour).Format(time.RFC3339), To: now.Add(-2 * time.Hour).Format(time.RFC3339), Reason: "over"}
	withFreeze := Config{Clusters: []discovery.ClusterSpec{{ID: "prod", Freezes: []schedule.FreezeSpec{spec, past}}}}
	without := Config{Clusters: []discovery.ClusterSpec{{ID: "prod"}}}
	id := schedule.ConfigFreezeID("prod", spec)

	for range 2 {
		drift, err := seedPolicy(ctx, st, nil, withFreeze, nil)
		if err != nil || len(drift) != 0 {
			t.Fatalf("seed: %v, %v", drift, err)
		}
	}
	fs, err := schedule.LoadFreezes(ctx, st, now)
	if err != nil || len(fs) != 1 || fs[0].ID != id || fs[0].Source != store.SourceConfig || fs[0].CreatedBy != "config" {
		t.Fatalf("stored freezes after two seeds: %+v, %v", fs, err)
	}
	if evs := countEvents(t, st, store.EventFreezeCreated); len(evs) != 1 || evs[0].ClusterID != "prod" {
		t.Fatalf("freeze.created events: %+v", evs)
	}

	// Another replica's file lacks it: drift, told once; nothing lifted.
	drift, err := seedPolicy(ctx, st, nil, without, nil)
	if err != nil || len(drift) != 1 || !strings.Contains(drift[0], id) || !strings.Contains(drift[0], "not in this file") {
		t.Fatalf("drift of a file without the freeze: %v, %v", drift, err)
	}
	if again, _ := seedPolicy(ctx, st, nil, without, drift); len(again) != 1 {
		t.Fatalf("drift again: %v", again)
	}
	if evs := countEvents(t, st, store.EventCorePolicyDrift); len(evs) != 1 {
		t.Fatalf("policy drift events: %+v, want one", evs)
	}
	if fs, _ := schedule.LoadFreezes(ctx, st, now); len(fs) != 1 {
		t.Fatalf("a start with another file changed the store: %+v", fs)
	}

	// A reload that removes it from this replica's file lifts it; the file
	// that still declares it then disagrees.
	if err := liftRemovedFreezes(ctx, st, withFreeze, without); err != nil {
		t.Fatal(err)
	}
	if fs, _ := schedule.LoadFreezes(ctx, st, now); len(fs) != 0 {
		t.Fatalf("freezes in force after the reload removed it: %+v", fs)
	}
	if evs := countEvents(t, st, store.EventFreezeLifted); len(evs) != 1 || evs[0].Actor != "config" {
		t.Fatalf("freeze.lifted events: %+v", evs)
	}
	drift, err = seedPolicy(ctx, st, nil, withFreeze, nil)
	if err != nil || len(drift) != 1 || !strings.Contains(drift[0], "was lifted by config") {
		t.Fatalf("drift of a file declaring a lifted freeze: %v, %v", drift, err)
	}
	if fs, _ := schedule.LoadFreezes(ctx, st, now); len(fs) != 0 {
		t.Fatalf("a seed brought back a lifted freeze: %+v", fs)
	}
}

// The configuration's windows, budgets and approval rules seed the store
// once as records (source config); the policies every decision reads are
// composed from the records, not the file; a record changed through the
// store is followed and the file that disagrees is drift (told once); a
// reload that changes the file changes the records it seeded.
func TestConfigPolicySeedsRecordsAndTheStoreIsFollowed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	cfg := Config{Clusters: []discovery.ClusterSpec{{ID: "prod", Budget: discovery.BudgetSpec{MaxUnavailable: "1"},
		Windows: []schedule.WindowSpec{{Cron: "0 2 * * *", Duration: 4 * time.Hour, Timezone: "UTC"}}}},
		Approval: approval.Policy{Default: approval.Required, TTL: time.Hour, Rules: []approval.Rule{{Kind: "noop", Approval: approval.None}}}}
	for range 2 {
		if drift, err := seedPolicy(ctx, st, nil, cfg, nil); err != nil || len(drift) != 0 {
			t.Fatalf("seed: %v, %v", drift, err)
		}
	}
	recs, err := policy.Load(ctx, st)
	if err != nil || len(recs) != 3 {
		t.Fatalf("records after two seeds: %+v, %v", recs, err)
	}
	for _, r := range recs {
		if r.Source != store.SourceConfig || r.CreatedBy != "config" || r.Version != 1 {
			t.Errorf("seeded record %+v", r)
		}
	}
	if evs := countEvents(t, st, store.EventPolicyCreated); len(evs) != 3 {
		t.Fatalf("policy.created events: %d, want 3", len(evs))
	}
	h := policy.NewHolder(cfg.policySettings(), schedule.NewHolder(nil), nil)
	h.SetRecords(recs)
	if got := h.Budget().Load().MaxUnavailable["prod"]; got.String() != "1" {
		t.Errorf("budget of prod from the records = %v", got)
	}
	if rules := h.Approval().Load().Rules; len(rules) != 1 || rules[0].Kind != "noop" {
		t.Errorf("approval rules from the records = %+v", rules)
	}

	// Someone widens the budget in the store: the file now disagrees; the
	// store is followed, and the drift is told once.
	if err := st.Update(ctx, func(tx store.Tx) error {
		r, err := policy.CheckBudget(wire.BudgetSpec{Cluster: "prod", MaxUnavailable: "3"})
		if err != nil {
			return err
		}
		_, err = policy.Put(ctx, tx, &store.PolicyRecord{Kind: store.PolicyBudget, ID: "prod", ClusterID: "prod", Spec: r.Spec,
			Reason: "more room"}, "ann", "")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	drift, err := seedPolicy(ctx, st, nil, cfg, nil)
	if err != nil || len(drift) != 1 || !strings.Contains(drift[0], "budget prod") || !strings.Contains(drift[0], "by ann") {
		t.Fatalf("drift: %v, %v", drift, err)
	}
	if again, _ := seedPolicy(ctx, st, nil, cfg, drift); len(again) != 1 {
		t.Fatalf("drift again: %v", again)
	}
	if evs := countEvents(t, st, store.EventCorePolicyDrift); len(evs) != 1 {
		t.Fatalf("policy drift events: %d, want 1", len(evs))
	}
	recs, _ = policy.Load(ctx, st)
	h.SetRecords(recs)
	if got := h.Budget().Load().MaxUnavailable["prod"]; got.String() != "3" {
		t.Errorf("budget of prod followed = %v, want the store's 3", got)
	}

	// A reload that moves the window changes the one the file seeded.
	next := cfg
	next.Clusters = []discovery.ClusterSpec{{ID: "prod", Budget: discovery.BudgetSpec{MaxUnavailable: "1"},
		Windows: []schedule.WindowSpec{{Cron: "0 3 * * *", Duration: 4 * time.Hour, Timezone: "UTC"}}}}
	if _, err := seedPolicy(ctx, st, &cfg, next, drift); err != nil {
		t.Fatal(err)
	}
	var ws []store.PolicyRecord
	_ = st.Read(ctx, func(r store.Reader) error {
		ws, err = r.Policies(ctx, store.PolicyQuery{Kind: store.PolicyWindow, Live: true})
		return err
	})
	if len(ws) != 1 || !strings.Contains(ws[0].Spec, "0 3 * * *") {
		t.Fatalf("windows after the reload: %+v", ws)
	}

	// A reload that reverts the file (A -> B -> A) brings back what the
	// configuration deleted at the first: the window and the approval
	// rule are live again, not left deleted (always open, no approval).
	bare := next
	bare.Approval.Rules = nil
	if _, err := seedPolicy(ctx, st, &next, bare, drift); err != nil {
		t.Fatal(err)
	}
	if _, err := seedPolicy(ctx, st, &bare, cfg, drift); err != nil {
		t.Fatal(err)
	}
	recs, _ = policy.Load(ctx, st)
	kinds := map[string][]string{}
	for _, r := range recs {
		kinds[r.Kind] = append(kinds[r.Kind], r.Spec)
	}
	if ws := kinds[store.PolicyWindow]; len(ws) != 1 || !strings.Contains(ws[0], "0 2 * * *") {
		t.Errorf("windows after the revert: %v, want the file's 0 2 * * * live", ws)
	}
	if rs := kinds[store.PolicyApprovalRule]; len(rs) != 1 || !strings.Contains(rs[0], "noop") {
		t.Errorf("approval rules after the revert: %v, want noop live", rs)
	}
	// What a person deleted stays deleted: drift, not undone by a reload.
	if err := st.Update(ctx, func(tx store.Tx) error {
		for _, r := range recs {
			if r.Kind == store.PolicyApprovalRule {
				if _, err := policy.Delete(ctx, tx, r.Kind, r.ID, time.Now(), "ann", "", "not wanted"); err != nil {
					return err
				}
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	drift, err = seedPolicy(ctx, st, &cfg, cfg, nil)
	if err != nil || !slices.ContainsFunc(drift, func(d string) bool { return strings.Contains(d, "deleted by ann") }) {
		t.Errorf("drift after a person's delete: %v, %v", drift, err)
	}
	if recs, _ = policy.Load(ctx, st); slices.ContainsFunc(recs, func(r store.PolicyRecord) bool { return r.Kind == store.PolicyApprovalRule }) {
		t.Errorf("a reload brought back the rule a person deleted")
	}
}
