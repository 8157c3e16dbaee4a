package api

import (
	"net/http"
	"testing"
	"time"

	"github.com/musterhq/muster/core/approval"
	"github.com/musterhq/muster/shared/action"
	"github.com/musterhq/muster/shared/live"
	"github.com/musterhq/muster/shared/wire"
)

// Issue 30, item 5: self_approval reloaded from true to false binds at
// once. Whoever applied a playbook may not approve a run made from it
// through the API, nor their own action (one requested before the reload
// included), though they could at start.
func TestAReloadThatTurnsSelfApprovalOffBindsTheAPI(t *testing.T) {
	t.Parallel()
	pol := live.New(approval.Policy{Default: approval.Required, SelfApproval: true, TTL: 24 * time.Hour})
	e := setup(t, func(c *Config) { c.Policy = pol })
	e.call(http.MethodPost, "/api/v1/playbooks", "self", wire.ApplyPlaybookRequest{Document: testPlaybook("pb", "")}, http.StatusCreated, nil)
	run := func() wire.Run {
		var r wire.Run
		e.call(http.MethodPost, "/api/v1/playbooks/pb/runs", "op", wire.PlanRequest{ClusterID: "prod", Version: 1,
			Params: map[string]string{"msg": "hi", "n": "3"}}, http.StatusCreated, &r)
		return r
	}
	before := run()
	e.call(http.MethodPost, "/api/v1/runs/"+before.ID+"/approve", "self", nil, http.StatusOK, nil)
	own := e.create("self", wire.CreateActionRequest{})
	e.call(http.MethodPost, "/api/v1/actions/"+own.ID+"/approve", "self", nil, http.StatusOK, nil)
	pending := e.create("self", wire.CreateActionRequest{})

	pol.Store(approval.Policy{Default: approval.Required, SelfApproval: false, TTL: 24 * time.Hour})
	after := run()
	e.call(http.MethodPost, "/api/v1/runs/"+after.ID+"/approve", "self", nil, http.StatusForbidden, nil)
	var shown wire.Run
	e.call(http.MethodGet, "/api/v1/runs/"+after.ID, "viewer", nil, http.StatusOK, &shown)
	if shown.State != "PENDING_APPROVE" {
		t.Errorf("the applier's refused approval left the run %s", shown.State)
	}
	e.call(http.MethodPost, "/api/v1/runs/"+after.ID+"/approve", "appr", nil, http.StatusOK, nil)

	for _, a := range []action.Action{pending, e.create("self", wire.CreateActionRequest{})} {
		e.call(http.MethodPost, "/api/v1/actions/"+a.ID+"/approve", "self", nil, http.StatusForbidden, nil)
		if rec := e.record(a.ID); rec.State != action.PendingApprove || rec.ApprovedBy != "" {
			t.Errorf("the requester's refused approval changed the action: %s approved by %q", rec.State, rec.ApprovedBy)
		}
		e.call(http.MethodPost, "/api/v1/actions/"+a.ID+"/approve", "appr", nil, http.StatusOK, nil)
	}
}
