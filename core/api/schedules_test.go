package api

import (
	"net/http"
	"strings"
	"testing"

	"github.com/musterhq/muster/shared/wire"
)

// scheduleFixture applies playbook sched-pb (once) and returns a request
// for a schedule of it named name.
func (e *env) scheduleFixture(name string) wire.CreateScheduleRequest {
	e.t.Helper()
	status, b := e.do(http.MethodPost, "/api/v1/playbooks", "op", wire.ApplyPlaybookRequest{Document: testPlaybook("sched-pb", "")})
	if status != http.StatusCreated && status != http.StatusOK {
		e.t.Fatalf("apply sched-pb: %d %s", status, b)
	}
	return wire.CreateScheduleRequest{Name: name, Cluster: "prod", Playbook: "sched-pb", Cron: "0 2 * * *",
		Timezone: "Europe/Berlin", Params: map[string]string{"msg": "hi"}}
}

func TestScheduleBadInputIs400NamingTheFieldAndStoresNothing(t *testing.T) {
	t.Parallel()
	e := setup(t)
	for name, c := range map[string]struct {
		mod   func(r *wire.CreateScheduleRequest)
		field string
	}{
		"cron":        {func(r *wire.CreateScheduleRequest) { r.Cron = "* * *" }, "cron"},
		"timezone":    {func(r *wire.CreateScheduleRequest) { r.Timezone = "Nowhere/Land" }, "timezone"},
		"playbook":    {func(r *wire.CreateScheduleRequest) { r.Playbook = "missing" }, "playbook"},
		"version":     {func(r *wire.CreateScheduleRequest) { r.Version = 9 }, "version"},
		"cluster":     {func(r *wire.CreateScheduleRequest) { r.Cluster = "staging" }, "cluster"},
		"params":      {func(r *wire.CreateScheduleRequest) { r.Params = map[string]string{"undeclared": "x"} }, "params"},
		"concurrency": {func(r *wire.CreateScheduleRequest) { r.Concurrency = "replace" }, "concurrency"},
		// Issue 30, item 6: a cron that never fires, and @every below
		// the minimum.
		"cron never fires":  {func(r *wire.CreateScheduleRequest) { r.Cron = "0 0 30 2 *" }, "cron"},
		"cron @every 1ns":   {func(r *wire.CreateScheduleRequest) { r.Cron = "@every 1ns" }, "cron"},
		"cron @every 59s":   {func(r *wire.CreateScheduleRequest) { r.Cron = "@every 59s" }, "cron"},
		"cron never, in tz": {func(r *wire.CreateScheduleRequest) { r.Cron = "0 3 31 4,6,9,11 *" }, "cron"},
	} {
		r := e.scheduleFixture("bad")
		c.mod(&r)
		var out wire.ErrorBody
		e.call(http.MethodPost, "/api/v1/schedules", "op", r, http.StatusBadRequest, &out)
		if out.Error.Field != c.field || !strings.HasPrefix(out.Error.Message, c.field+":") {
			t.Errorf("%s: error %+v, want one naming %s", name, out.Error, c.field)
		}
	}
	status, b := e.do(http.MethodPost, "/api/v1/schedules", "op", map[string]any{"name": "bad", "cluster": "prod",
		"playbook": "sched-pb", "cron": "@daily", "version": "newest"})
	if status != http.StatusBadRequest || !strings.Contains(string(b), "version") {
		t.Errorf("version \"newest\": %d %s, want a 400 naming version", status, b)
	}
	var list wire.ScheduleList
	e.call(http.MethodGet, "/api/v1/schedules", "viewer", nil, http.StatusOK, &list)
	if len(list.Schedules) != 0 {
		t.Errorf("bad input stored %d schedule(s)", len(list.Schedules))
	}
}

func TestScheduleIsApprovedOnceByAnotherPersonAndShowsItsNextOccurrences(t *testing.T) {
	t.Parallel()
	e := setup(t)
	var created wire.Schedule
	e.call(http.MethodPost, "/api/v1/schedules", "op", e.scheduleFixture("nightly"), http.StatusCreated, &created)
	if created.State != "PENDING_APPROVE" || created.Outcome != "created" || created.Version != wire.Latest || len(created.Next) != 0 {
		t.Fatalf("created: %+v", created)
	}
	e.call(http.MethodPost, "/api/v1/schedules", "op", e.scheduleFixture("nightly"), http.StatusOK, nil)
	// admin also holds the operator role: approving what op created is fine,
	// approving what admin created is not.
	e.call(http.MethodPost, "/api/v1/schedules/nightly/approve", "appr", wire.ApproveScheduleRequest{Digest: "feed"}, http.StatusConflict, nil)
	var approved wire.Schedule
	e.call(http.MethodPost, "/api/v1/schedules/nightly/approve", "appr", wire.ApproveScheduleRequest{Digest: created.Digest}, http.StatusOK, &approved)
	if approved.State != "ACTIVE" || approved.ApprovedBy != "appr" || len(approved.Next) != NextOccurrences {
		t.Fatalf("approved: %+v", approved)
	}
	var shown wire.Schedule
	e.call(http.MethodGet, "/api/v1/schedules/nightly", "viewer", nil, http.StatusOK, &shown)
	if shown.Digest != created.Digest || shown.Next[0].Hour() != 1 || shown.Next[0].Minute() != 0 {
		t.Errorf("shown: digest %s, next %v; want the created digest and 02:00 Berlin (01:00 UTC)", shown.Digest, shown.Next)
	}
	self := e.scheduleFixture("mine")
	e.call(http.MethodPost, "/api/v1/schedules", "admin", self, http.StatusCreated, nil)
	e.call(http.MethodPost, "/api/v1/schedules/mine/approve", "admin", nil, http.StatusForbidden, nil)
	e.call(http.MethodDelete, "/api/v1/schedules/mine", "op", nil, http.StatusNoContent, nil)
	e.call(http.MethodGet, "/api/v1/schedules/mine", "viewer", nil, http.StatusNotFound, nil)
}

func TestRevokingTheApproversTokenSendsTheScheduleBackToApproval(t *testing.T) {
	t.Parallel()
	e := setup(t)
	var created wire.Schedule
	e.call(http.MethodPost, "/api/v1/schedules", "op", e.scheduleFixture("nightly"), http.StatusCreated, &created)
	e.call(http.MethodPost, "/api/v1/schedules/nightly/approve", "appr", wire.ApproveScheduleRequest{Digest: created.Digest}, http.StatusOK, nil)
	e.call(http.MethodDelete, "/api/v1/tokens/appr", "admin", nil, http.StatusNoContent, nil)
	var shown wire.Schedule
	e.call(http.MethodGet, "/api/v1/schedules/nightly", "viewer", nil, http.StatusOK, &shown)
	if shown.State != "PENDING_APPROVE" || !strings.Contains(shown.StateReason, "appr") || len(shown.Next) != 0 {
		t.Errorf("after revoking its approver: %s (%q), next %v; want PENDING_APPROVE naming appr, no next occurrence",
			shown.State, shown.StateReason, shown.Next)
	}
}

func TestScheduleListPagesAndFilters(t *testing.T) {
	t.Parallel()
	e := setup(t)
	for _, n := range []string{"a-sched", "b-sched", "c-sched"} {
		e.call(http.MethodPost, "/api/v1/schedules", "op", e.scheduleFixture(n), http.StatusCreated, nil)
	}
	var created wire.Schedule
	e.call(http.MethodGet, "/api/v1/schedules/b-sched", "viewer", nil, http.StatusOK, &created)
	e.call(http.MethodPost, "/api/v1/schedules/b-sched/approve", "appr", wire.ApproveScheduleRequest{Digest: created.Digest}, http.StatusOK, nil)
	var page wire.ScheduleList
	e.call(http.MethodGet, "/api/v1/schedules?limit=2", "viewer", nil, http.StatusOK, &page)
	if len(page.Schedules) != 2 || page.Schedules[0].Name != "a-sched" || page.NextMarker != "b-sched" {
		t.Fatalf("first page %+v, want a-sched, b-sched and next b-sched", page)
	}
	e.call(http.MethodGet, "/api/v1/schedules?limit=2&marker="+page.NextMarker, "viewer", nil, http.StatusOK, &page)
	if len(page.Schedules) != 1 || page.Schedules[0].Name != "c-sched" || page.NextMarker != "" {
		t.Fatalf("second page %+v, want c-sched alone and no next", page)
	}
	e.call(http.MethodGet, "/api/v1/schedules?state=active&cluster=prod", "viewer", nil, http.StatusOK, &page)
	if len(page.Schedules) != 1 || page.Schedules[0].Name != "b-sched" {
		t.Errorf("state=active: %+v, want b-sched alone", page.Schedules)
	}
	e.call(http.MethodGet, "/api/v1/schedules?cluster=staging", "viewer", nil, http.StatusOK, &page)
	if len(page.Schedules) != 0 {
		t.Errorf("cluster=staging: %+v, want none", page.Schedules)
	}
	for q, field := range map[string]string{"colour=red": "colour", "state=DONE": "state", "limit=0": "limit",
		"marker=zzz-none": "marker", "cluster=Bad%20Name": "cluster"} {
		status, b := e.do(http.MethodGet, "/api/v1/schedules?"+q, "viewer", nil)
		if status != http.StatusBadRequest || !strings.Contains(string(b), field) {
			t.Errorf("?%s: %d %s, want 400 naming %s", q, status, b, field)
		}
	}
}
