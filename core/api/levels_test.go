package api

import (
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/musterhq/muster/core/approval"
	"github.com/musterhq/muster/shared/action"
	"github.com/musterhq/muster/shared/live"
	"github.com/musterhq/muster/shared/wire"
)

// TestActionShowsItsApprovalLevels: with two levels (appr, then admin), an
// action shows each level, who approved and who can; an approver of no
// level is refused with a 403 that says why; appr's approval leaves it
// waiting with "1 more from admin", and admin's approves it.
func TestActionShowsItsApprovalLevels(t *testing.T) {
	t.Parallel()
	e := setup(t, func(c *Config) {
		pol := approval.DefaultPolicy()
		pol.Rules = []approval.Rule{{Kind: "*", Cluster: "prod", Levels: []approval.Level{
			{Persons: []string{"appr"}}, {Persons: []string{"admin"}}}}}
		c.Policy = live.New(pol)
	})
	a := e.create("op", wire.CreateActionRequest{})
	var got wire.ActionView
	e.call(http.MethodGet, "/api/v1/actions/"+a.ID, "viewer", nil, http.StatusOK, &got)
	if got.Approval == nil || len(got.Approval.Levels) != 2 || got.Approval.Satisfied ||
		!slices.Equal(got.Approval.Levels[0].CanApprove, []string{"appr"}) ||
		got.Approval.Lines[1] != "level 2 (admin): 0 of 1 — can approve: admin" {
		t.Fatalf("approval %+v", got.Approval)
	}
	if ed := e.fail(http.MethodPost, "/api/v1/actions/"+a.ID+"/approve", "self", nil, http.StatusForbidden); !strings.Contains(ed.Message,
		"self may approve at no level: level 1 takes appr, level 2 takes admin") {
		t.Fatalf("self: %+v", ed)
	}
	e.call(http.MethodPost, "/api/v1/actions/"+a.ID+"/approve", "appr", nil, http.StatusOK, &got)
	if got.State != action.PendingApprove || got.Approval == nil || got.Approval.Levels[1].Remaining != 1 ||
		!slices.Equal(got.Approval.Levels[0].ApprovedBy, []string{"appr"}) {
		t.Fatalf("after appr: %s %+v", got.State, got.Approval)
	}
	if evs := e.eventsOf(a.ID, "action.approval_recorded"); len(evs) != 1 || !strings.Contains(evs[0].Message, "1 more from admin") {
		t.Fatalf("events %+v", evs)
	}
	var done wire.ActionView
	e.call(http.MethodPost, "/api/v1/actions/"+a.ID+"/approve", "admin", nil, http.StatusOK, &done)
	if got = done; got.State != action.PendingSchedule || got.Approval != nil {
		t.Fatalf("after admin: %s %+v", got.State, got.Approval)
	}
}
