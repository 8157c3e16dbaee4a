package ui

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/action"
)

// The page of a failed run of steps offers both retries to an operator; a
// retry from the failed step opens the new run's page, which says where
// each failed node starts and what it reuses.
func TestARunPageRetriesFromTheFailedStep(t *testing.T) {
	t.Parallel()
	e := setup(t)
	r := procedureRun("someone", store.RunFailed, "stage upgrade failed", "db-1", "db-2")
	r.Stages[0].State, r.Stages[0].Failed, r.Stages[0].Rollback = store.StageFailed, []string{"db-1"}, nil
	r.Stages[0].Canary = 0
	e.storeRun(r, child(r, "db-1", "drain", 1, action.Done, `{}`, `{"was":"in-lb"}`),
		child(r, "db-1", "upgrade", 3, action.Failed, `{}`, ""), child(r, "db-1", "undrain", 1, action.Done, `{}`, ""))
	b := e.browser().signIn("op")
	_, _, page := b.get("/ui/runs/" + r.ID)
	for _, want := range []string{`id="run-retry"`, `id="run-retry-failed"`, "Retry from the failed step"} {
		if !strings.Contains(page, want) {
			t.Fatalf("the failed run's page lacks %q", want)
		}
	}
	status, loc, body := b.post("/ui/runs/"+r.ID+"/retry", url.Values{"csrf": {b.csrf}, "from": {"failed"}})
	if status != http.StatusSeeOther || !strings.HasPrefix(loc, "/ui/runs/") || strings.HasPrefix(loc, "/ui/runs/"+r.ID) {
		t.Fatalf("retry: %d to %q: %s", status, loc, body)
	}
	_, _, page = b.get(loc)
	if !strings.Contains(page, "node db-1 starts at upgrade, reusing drain") || !strings.Contains(page, "waits for approval") {
		t.Fatalf("the retry's page does not say where db-1 starts:\n%s", page)
	}
	status, _, body = b.post("/ui/runs/"+r.ID+"/retry", url.Values{"csrf": {b.csrf}, "from": {"upgrade"}})
	if status != http.StatusBadRequest || !strings.Contains(body, "not &#34;upgrade&#34;") {
		t.Fatalf("a retry from upgrade: %d\n%s", status, body)
	}
}
