package ops_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/musterhq/muster/core/ops"
	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/wire"
)

func sleepDoc(name, seconds string) string {
	return "name: " + name + "\ndescription: sleep a while\nstages:\n  - name: sleep\n    kind: " + kindSleep +
		"\n    args: {seconds: " + seconds + "}\n    target: {nodes: [db-1]}\n"
}

func (e *env) schedule(name string) *store.Schedule {
	e.t.Helper()
	var sc *store.Schedule
	if err := e.st.Read(context.Background(), func(r store.Reader) (err error) {
		sc, err = r.Schedule(context.Background(), name)
		return err
	}); err != nil {
		e.t.Fatal(err)
	}
	return sc
}

func (e *env) versions(name string) []store.Playbook {
	e.t.Helper()
	var out []store.Playbook
	if err := e.st.Read(context.Background(), func(r store.Reader) (err error) {
		out, err = r.PlaybookVersions(context.Background(), name)
		return err
	}); err != nil {
		e.t.Fatal(err)
	}
	return out
}

// Playbooks and schedules in a policy file: a dry run changes nothing;
// apply publishes each playbook and makes each schedule (waiting for
// approval), marked with the file; a second apply changes nothing; one
// schedule changed changes exactly it and sends it back to approval; one
// playbook's document changed makes exactly one new version of it; a
// schedule removed from the file is deleted, a playbook removed is kept
// and the plan says so; a bad entry changes nothing.
func TestApplyPolicyPlaybooksAndSchedules(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	doc := wire.PolicyDocument{
		Playbooks: []wire.PolicyPlaybook{{Name: "nightly", Document: sleepDoc("nightly", "1")},
			{Name: "weekly", Document: sleepDoc("weekly", "2")}},
		Schedules: []wire.PolicySchedule{
			{Name: "nightly-prod", Cluster: "prod", Playbook: "nightly", Cron: "0 2 * * *", Timezone: "Europe/Berlin"},
			{Name: "weekly-prod", Cluster: "prod", Playbook: "weekly", Version: 1, Cron: "0 3 * * 0", Concurrency: "forbid"}},
	}
	n := e.events()
	dry, err := applyDoc(e, adam, doc, true)
	if err != nil || dry.Applied || len(dry.Changes) != 4 {
		t.Fatalf("dry run = %+v, %v", dry, err)
	}
	if got := changesText(dry); !strings.Contains(got, "+ playbook nightly version 1: sleep a while") ||
		!strings.Contains(got, `+ schedule nightly-prod: playbook nightly latest on prod at "0 2 * * *" (Europe/Berlin) (waits for approval)`) {
		t.Fatalf("dry run says:\n%s", got)
	}
	if e.events() != n {
		t.Fatal("a dry run changed something")
	}
	// A bad schedule, or a document that names another playbook: nothing.
	bad := doc
	bad.Schedules = []wire.PolicySchedule{doc.Schedules[0], {Name: "x", Cluster: "prod", Playbook: "weekly", Cron: "tea time"}}
	if _, err := applyDoc(e, adam, bad, false); !errors.Is(err, ops.ErrBadRequest) || !strings.Contains(err.Error(), "schedules[1].cron") {
		t.Fatalf("apply of a bad schedule = %v", err)
	}
	bad = doc
	bad.Playbooks = []wire.PolicyPlaybook{{Name: "nightly", Document: sleepDoc("other", "1")}}
	if _, err := applyDoc(e, adam, bad, false); !errors.Is(err, ops.ErrBadRequest) || !strings.Contains(err.Error(), "playbooks[0]") {
		t.Fatalf("apply of a misnamed playbook = %v", err)
	}
	if e.events() != n {
		t.Fatal("a refused apply changed something")
	}
	p, err := applyDoc(e, adam, doc, false)
	if err != nil || !p.Applied || len(p.Changes) != 4 {
		t.Fatalf("apply = %+v, %v", p, err)
	}
	for _, name := range []string{"nightly", "weekly"} {
		if vs := e.versions(name); len(vs) != 1 || vs[0].Source != "file:policy.yaml" || vs[0].CreatedBy != "adam" {
			t.Fatalf("versions of %s = %+v", name, vs)
		}
	}
	for _, name := range []string{"nightly-prod", "weekly-prod"} {
		if sc := e.schedule(name); sc.Source != "file:policy.yaml" || sc.State != store.SchedulePendingApprove {
			t.Fatalf("schedule %s = %+v", name, sc)
		}
	}
	if _, err := e.ops.ApproveSchedule(ctx, ann, "nightly-prod", ""); err != nil {
		t.Fatal(err)
	}
	if _, err := e.ops.ApproveSchedule(ctx, ann, "weekly-prod", ""); err != nil {
		t.Fatal(err)
	}
	n = e.events()
	for _, dry := range []bool{true, false} {
		if p, err := applyDoc(e, adam, doc, dry); err != nil || len(p.Changes) != 0 || p.Applied || len(p.Kept) != 0 {
			t.Fatalf("apply again (dry %v) = %+v, %v", dry, p, err)
		}
	}
	if e.events() != n {
		t.Fatalf("a second apply made %d events", e.events()-n)
	}
	// One schedule changed: exactly it, back to approval; the other stays
	// approved.
	doc.Schedules[0].Cron = "0 4 * * *"
	p, err = applyDoc(e, adam, doc, false)
	if err != nil || len(p.Changes) != 1 || p.Changes[0].Op != "~" || p.Changes[0].ID != "nightly-prod" ||
		!strings.Contains(p.Changes[0].Text, `"0 2 * * *"`) || !strings.Contains(p.Changes[0].Text, `"0 4 * * *"`) ||
		!strings.Contains(p.Changes[0].Text, "waits for approval again") {
		t.Fatalf("apply with one schedule changed = %+v, %v", p, err)
	}
	if sc := e.schedule("nightly-prod"); sc.State != store.SchedulePendingApprove || sc.Cron != "0 4 * * *" {
		t.Fatalf("the changed schedule = %+v, want it waiting for approval again", sc)
	}
	if sc := e.schedule("weekly-prod"); sc.State != store.ScheduleActive {
		t.Fatalf("the unchanged schedule = %+v, want it active", sc)
	}
	// One playbook changed: exactly one new version of it.
	doc.Playbooks[1].Document = sleepDoc("weekly", "3")
	p, err = applyDoc(e, adam, doc, false)
	if err != nil || len(p.Changes) != 1 || p.Changes[0].ID != "weekly" ||
		!strings.Contains(p.Changes[0].Text, "~ playbook weekly: version 2") {
		t.Fatalf("apply with one playbook changed = %+v, %v", p, err)
	}
	if vs := e.versions("weekly"); len(vs) != 2 {
		t.Fatalf("versions of weekly = %d, want 2", len(vs))
	}
	if vs := e.versions("nightly"); len(vs) != 1 {
		t.Fatalf("versions of nightly = %d, want 1", len(vs))
	}
	// Removed from the file: the schedule deleted, the playbook kept.
	doc.Playbooks, doc.Schedules = doc.Playbooks[:1], doc.Schedules[:1]
	p, err = applyDoc(e, adam, doc, false)
	if err != nil || len(p.Changes) != 1 || p.Changes[0].Op != "-" || p.Changes[0].ID != "weekly-prod" ||
		len(p.Kept) != 1 || p.Kept[0].ID != "weekly" || !strings.Contains(p.Kept[0].Text, "kept") {
		t.Fatalf("apply with entries removed = %+v, %v", p, err)
	}
	if vs := e.versions("weekly"); len(vs) != 2 {
		t.Fatalf("versions of weekly after its removal from the file = %d, want 2", len(vs))
	}
	err = e.st.Read(ctx, func(r store.Reader) error { _, err := r.Schedule(ctx, "weekly-prod"); return err })
	if !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("the removed schedule: %v, want it deleted", err)
	}
	// A schedule made by hand is changed only when the file names it.
	if _, err := e.ops.ApplySchedule(ctx, operator, &wire.CreateScheduleRequest{Name: "by-hand", Cluster: "prod", Playbook: "nightly",
		Cron: "0 5 * * *"}); err != nil {
		t.Fatal(err)
	}
	if p, err := applyDoc(e, adam, doc, false); err != nil || len(p.Changes) != 0 {
		t.Fatalf("apply beside a schedule made by hand = %+v, %v", p, err)
	}
}

// An operator scoped to one cluster applies a schedule there, and cannot
// apply one on another cluster (nothing changes), nor a playbook (which
// runs on every cluster); the file's schedule on the other cluster is
// neither shown nor deleted by that operator's apply.
func TestApplyPolicySchedulesAreScoped(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	olga := scoped(t, e, "olga", store.RoleOperator)
	if _, _, err := e.ops.ApplyPlaybook(ctx, adam, sleepDoc("nightly", "1")); err != nil {
		t.Fatal(err)
	}
	onStage := wire.PolicySchedule{Name: "nightly-stage", Cluster: "stage", Playbook: "nightly", Cron: "0 2 * * *"}
	onProd := wire.PolicySchedule{Name: "nightly-prod", Cluster: "prod", Playbook: "nightly", Cron: "0 2 * * *"}
	n := e.events()
	if _, err := applyDoc(e, olga, wire.PolicyDocument{Schedules: []wire.PolicySchedule{onProd, onStage}}, false); !errors.Is(err, store.ErrNotFound) &&
		!errors.Is(err, ops.ErrForbidden) {
		t.Fatalf("a schedule on another cluster = %v, want refused", err)
	}
	if _, err := applyDoc(e, olga, wire.PolicyDocument{Playbooks: []wire.PolicyPlaybook{{Name: "x", Document: sleepDoc("x", "1")}}}, false); !errors.Is(err, ops.ErrForbidden) {
		t.Fatalf("a playbook by an operator of one cluster = %v, want forbidden", err)
	}
	if e.events() != n {
		t.Fatal("a refused apply changed something")
	}
	// The admin's apply makes both; olga's of the file with prod's only
	// leaves stage's alone.
	if _, err := applyDoc(e, adam, wire.PolicyDocument{Schedules: []wire.PolicySchedule{onProd, onStage}}, false); err != nil {
		t.Fatal(err)
	}
	p, err := applyDoc(e, olga, wire.PolicyDocument{Schedules: []wire.PolicySchedule{onProd}}, false)
	if err != nil || len(p.Changes) != 0 {
		t.Fatalf("olga's apply = %+v, %v", p, err)
	}
	if sc := e.schedule("nightly-stage"); sc.Source != "file:policy.yaml" {
		t.Fatalf("stage's schedule = %+v", sc)
	}
	// A change on prod by olga is hers to make.
	onProd.Cron = "0 3 * * *"
	if p, err := applyDoc(e, olga, wire.PolicyDocument{Schedules: []wire.PolicySchedule{onProd}}, false); err != nil || len(p.Changes) != 1 {
		t.Fatalf("olga's change on prod = %+v, %v", p, err)
	}
}
