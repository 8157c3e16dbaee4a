package api

import (
	"net/http"
	"testing"

	"github.com/musterhq/muster/shared/wire"
)

// A retry takes {"from": "failed"} or nothing; any other place to start
// from is a 400 that makes no run.
func TestRetryRunTakesFromFailedOnly(t *testing.T) {
	t.Parallel()
	e := setup(t)
	r := e.createRun("op", oneStageRun(kindPing))
	e.call(http.MethodPost, "/api/v1/runs/"+r.ID+"/cancel", "op", nil, http.StatusOK, nil)
	d := e.fail(http.MethodPost, "/api/v1/runs/"+r.ID+"/retry", "op", wire.RetryRunRequest{From: "verify"}, http.StatusBadRequest)
	if d.Code == "" {
		t.Fatalf("a bad from answers %+v", d)
	}
	var out wire.Run
	e.call(http.MethodPost, "/api/v1/runs/"+r.ID+"/retry", "op", wire.RetryRunRequest{From: wire.RetryFromFailed},
		http.StatusCreated, &out)
	if out.RetryOf != r.ID || out.State != "PENDING_APPROVE" {
		t.Fatalf("the retry from failed: %+v", out)
	}
}
