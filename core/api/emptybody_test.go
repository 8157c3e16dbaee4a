package api

import (
	"net/http"
	"strings"
	"testing"
)

// Issue 31, item 6: a client library that sends {} with every write is
// answered as if it sent no body, on every call that takes none (a run's
// retry, a schedule's delete, an undrain...) or an optional one. Anything
// else in a call that takes no body is still a 400.
func TestEveryCallThatTakesNoBodyAcceptsAnEmptyObject(t *testing.T) {
	t.Parallel()
	e := setup(t)
	n := 0
	for route, want := range roleTable {
		method, _, _ := strings.Cut(route, " ")
		if method == http.MethodGet {
			continue
		}
		n++
		path, body := e.fixture(route, 10_000+n)
		if body != nil || route == "POST /api/v1/enroll/renew" {
			continue // the call takes a body of its own
		}
		t.Run(route, func(t *testing.T) {
			if status, b := e.do(method, path, "admin", " {} \n"); status != want[4] {
				t.Fatalf("with {}: status %d (%s), want %d as without a body", status, b, want[4])
			}
		})
	}
	for _, route := range []string{"POST /api/v1/runs/:id/retry",
		"POST /api/v1/clusters/:cluster/nodes/:node/undrain", "POST /api/v1/clusters/:cluster/orchestrate",
		"DELETE /api/v1/tokens/:name"} {
		n++
		path, _ := e.fixture(route, 10_000+n)
		method, _, _ := strings.Cut(route, " ")
		if status, b := e.do(method, path, "admin", `{"reason":"x"}`); status != http.StatusBadRequest {
			t.Errorf("%s with a body: status %d (%s), want 400", route, status, b)
		}
	}
}
