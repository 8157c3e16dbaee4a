package api

import (
	"net/http"
	"strings"
	"testing"

	"github.com/musterhq/muster/shared/wire"
)

// A document not stored, planned, starts as an ad-hoc run with the digest
// its plan showed (201, no playbook recorded, waiting for approval); a
// start of a document without a digest is a 400, with another digest a
// 409, under another name a 400, and none of them makes a run.
func TestStartADocumentAsPlanned(t *testing.T) {
	t.Parallel()
	e := setup(t)
	doc := testPlaybook("hotfix", "")
	req := wire.PlanRequest{ClusterID: "prod", Document: doc, Params: map[string]string{"msg": "hi"}}
	var plan wire.Plan
	e.call(http.MethodPost, "/api/v1/playbooks/hotfix/plan", "op", req, http.StatusOK, &plan)
	if plan.Digest == "" || plan.Version != 0 {
		t.Fatalf("plan of a document: %+v", plan)
	}
	for name, tc := range map[string]struct {
		path   string
		digest string
		want   int
		says   string
	}{
		"no digest":      {"/api/v1/playbooks/hotfix/runs", "", http.StatusBadRequest, "digest"},
		"another digest": {"/api/v1/playbooks/hotfix/runs", strings.Repeat("0", 64), http.StatusConflict, "plan it again"},
		"another name":   {"/api/v1/playbooks/other/runs", plan.Digest, http.StatusBadRequest, `"hotfix"`},
	} {
		r := req
		r.Digest = tc.digest
		if d := e.fail(http.MethodPost, tc.path, "op", r, tc.want); !strings.Contains(d.Message, tc.says) {
			t.Errorf("%s: %+v, want it to say %q", name, d, tc.says)
		}
	}
	e.fail(http.MethodPost, "/api/v1/playbooks/hotfix/runs", "viewer", req, http.StatusForbidden)
	var runs wire.RunList
	e.call(http.MethodGet, "/api/v1/runs", "viewer", nil, http.StatusOK, &runs)
	if len(runs.Runs) != 0 {
		t.Fatalf("refused starts made %d runs", len(runs.Runs))
	}
	req.Digest = plan.Digest
	var run wire.Run
	e.call(http.MethodPost, "/api/v1/playbooks/hotfix/runs", "op", req, http.StatusCreated, &run)
	if run.Playbook != "" || run.Digest != plan.Digest || run.State != "PENDING_APPROVE" || run.Requester != "op" {
		t.Fatalf("started %+v, want op's ad-hoc run of digest %s waiting for approval", run, plan.Digest)
	}
}
