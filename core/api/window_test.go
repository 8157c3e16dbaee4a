package api

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/musterhq/muster/core/schedule"
	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/action"
	"github.com/musterhq/muster/shared/live"
	"github.com/musterhq/muster/shared/wire"
)

// A not_before in the past (beyond a minute of clock skew) or more than
// 90 days ahead is a 400 naming the field, on actions, runs and playbook
// starts, and nothing is stored.
func TestNotBeforeOutOfBoundsIsRefused(t *testing.T) {
	t.Parallel()
	e := setup(t)
	past, far := time.Now().Add(-2*time.Minute), time.Now().Add(91*24*time.Hour)
	for _, nb := range []time.Time{past, far} {
		d := e.fail(http.MethodPost, "/api/v1/actions", "op",
			wire.CreateActionRequest{ClusterID: "prod", NodeID: "db-1", Kind: kindPing, NotBefore: &nb}, http.StatusBadRequest)
		if !strings.Contains(d.Message, "not_before") {
			t.Errorf("action: %+v does not name not_before", d)
		}
		req := oneStageRun(kindPing)
		req.NotBefore = &nb
		if d := e.fail(http.MethodPost, "/api/v1/runs", "op", req, http.StatusBadRequest); !strings.Contains(d.Message, "not_before") {
			t.Errorf("run: %+v does not name not_before", d)
		}
	}
	var list wire.ActionList
	e.call(http.MethodGet, "/api/v1/actions", "viewer", nil, http.StatusOK, &list)
	if len(list.Actions) != 0 {
		t.Fatalf("a refused create stored %d action(s)", len(list.Actions))
	}
}

// An action created with a not_before keeps it, shows it, and its
// approval's digest covers it; its approval window counts from it.
func TestNotBeforeIsStoredAndApproved(t *testing.T) {
	t.Parallel()
	e := setup(t)
	nb := action.UTC(time.Now().Add(time.Hour))
	a := e.create("op", wire.CreateActionRequest{NotBefore: &nb})
	if a.NotBefore == nil || !a.NotBefore.Equal(nb) {
		t.Fatalf("not_before %v, want %v", a.NotBefore, nb)
	}
	var approved action.Action
	e.call(http.MethodPost, "/api/v1/actions/"+a.ID+"/approve", "appr", nil, http.StatusOK, &approved)
	if approved.State != action.PendingSchedule || approved.NotBefore == nil || !approved.NotBefore.Equal(nb) {
		t.Fatalf("approved: %+v", approved)
	}
}

// Marking urgent takes an approver who is not the requester and a reason;
// it is kept in the record, its history and an action.urgent event.
func TestUrgentNeedsAnotherApproverAndAReason(t *testing.T) {
	t.Parallel()
	e := setup(t)
	a := e.create("self", wire.CreateActionRequest{})
	e.fail(http.MethodPost, "/api/v1/actions/"+a.ID+"/urgent", "self", wire.ReasonRequest{Reason: "x"}, http.StatusForbidden)
	e.fail(http.MethodPost, "/api/v1/actions/"+a.ID+"/urgent", "appr", nil, http.StatusBadRequest)
	e.fail(http.MethodPost, "/api/v1/actions/"+a.ID+"/urgent", "op", wire.ReasonRequest{Reason: "x"}, http.StatusForbidden)
	if rec := e.record(a.ID); rec.Urgent != "" {
		t.Fatalf("a refused mark stored %q", rec.Urgent)
	}
	var got action.Action
	e.call(http.MethodPost, "/api/v1/actions/"+a.ID+"/urgent", "appr", wire.ReasonRequest{Reason: "disk <full>"}, http.StatusOK, &got)
	if got.Urgent != "disk <full>" {
		t.Fatalf("urgent %q", got.Urgent)
	}
	var evs wire.EventList
	e.call(http.MethodGet, "/api/v1/events?type=action.urgent", "viewer", nil, http.StatusOK, &evs)
	if len(evs.Events) != 1 || evs.Events[0].Actor != "appr" || evs.Events[0].ActionID != a.ID {
		t.Fatalf("events %+v, want one action.urgent by appr", evs.Events)
	}
	r := e.createRun("self", oneStageRun(kindPing))
	e.fail(http.MethodPost, "/api/v1/runs/"+r.ID+"/urgent", "self", wire.ReasonRequest{Reason: "x"}, http.StatusForbidden)
	var run wire.Run
	e.call(http.MethodPost, "/api/v1/runs/"+r.ID+"/urgent", "appr", wire.ReasonRequest{Reason: "security fix"}, http.StatusOK, &run)
	if run.Urgent != "security fix" {
		t.Fatalf("run urgent %q", run.Urgent)
	}
}

// GET /api/v1/clusters/{c} carries the cluster's calendar: its windows,
// whether it is open, frozen until when and why, and what waits.
func TestClusterShowsItsCalendar(t *testing.T) {
	t.Parallel()
	now := time.Now()
	cal := &schedule.Calendar{Freezes: []schedule.Freeze{{From: now.Add(-time.Hour), To: now.Add(time.Hour), Reason: "year-end"}}}
	e := setup(t, func(c *Config) { c.Calendars = live.New(schedule.Calendars{"prod": cal}) })
	a := e.create("op", wire.CreateActionRequest{})
	e.edit(a.ID, func(r *store.Record) { r.State, r.StateReason = action.PendingSchedule, "frozen until x: year-end" })
	var cl wire.Cluster
	e.call(http.MethodGet, "/api/v1/clusters/prod", "viewer", nil, http.StatusOK, &cl)
	c := cl.Calendar
	if c == nil || c.Open || c.Frozen == nil || c.Frozen.Reason != "year-end" || !c.InWindow || c.Waiting != 1 {
		t.Fatalf("calendar %+v", c)
	}
}
