package ui

import (
	"context"
	"html"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/musterhq/muster/core/store"
)

// adhocDoc is the New run form's document in these tests: one stage on
// the nodes with role=db.
const adhocDoc = `name: adhoc
params:
  - {name: seconds, type: int, default: 1}
stages:
  - name: nap
    kind: muster.io/debug.sleep
    args: {seconds: "{{ .seconds }}"}
    target: {labels: {role: db}}
    max_concurrency: 1
`

var planDigestRe = regexp.MustCompile(`name="digest" value="([0-9a-f]{64})"`)

// TestNewRunPlansThenStartsTheDigestShown: the New run page plans a
// document with the plan function a playbook's plan uses (each stage's
// nodes, the digest), starts exactly that plan with its digest as an
// ad-hoc run waiting for approval, and refuses with the error next to the
// YAML (nothing made) a broken document, a target matching nothing, a
// start without a plan and a start whose digest is not the plan's.
func TestNewRunPlansThenStartsTheDigestShown(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.withLabelledNodes()
	b := e.browser().signIn("op")
	if _, _, body := b.get("/ui/runs"); !strings.Contains(body, `href="/ui/runs/new"`) {
		t.Fatal("the Runs page offers no New run link to an operator")
	}
	if status, _, body := b.get("/ui/runs/new"); status != http.StatusOK || !strings.Contains(body, `id="nr-document"`) {
		t.Fatalf("New run: %d", status)
	}
	base := url.Values{"csrf": {b.csrf}, "cluster": {"prod"}, "do": {"plan"}}
	for name, tc := range map[string]struct {
		set   map[string]string
		field string
		says  string
	}{
		"not YAML":        {map[string]string{"document": "stages: [:"}, "nr-document-error", "did not find expected"},
		"no stage":        {map[string]string{"document": "name: adhoc\n"}, "nr-document-error", "stage"},
		"matches nothing": {map[string]string{"document": strings.Replace(adhocDoc, "role: db", "role: cache", 1)}, "nr-document-error", "role=cache"},
		"a bad param":     {map[string]string{"document": adhocDoc, "params": "seconds=soon"}, "nr-", "seconds"},
		"start unplanned": {map[string]string{"document": adhocDoc, "do": "start"}, "new-run-error", "plan the run first"},
		"start moved": {map[string]string{"document": adhocDoc, "do": "start", "digest": strings.Repeat("0", 64)},
			"new-run-error", "plan it again"},
	} {
		form := url.Values{}
		for k, v := range base {
			form[k] = v
		}
		for k, v := range tc.set {
			form.Set(k, v)
		}
		status, _, body := b.post("/ui/runs/new", form)
		i := strings.Index(body, `id="`+tc.field)
		if status < 400 || status >= 500 || i < 0 || !strings.Contains(strings.ToLower(html.UnescapeString(body[i:min(len(body), i+400)])), strings.ToLower(tc.says)) {
			t.Errorf("%s: %d, want a 4xx saying %q at %s\n%s", name, status, tc.says, tc.field, body)
		}
		if n := e.runCount(); n != 0 {
			t.Fatalf("%s: a refused form made %d runs", name, n)
		}
	}
	form := url.Values{"csrf": {b.csrf}, "cluster": {"prod"}, "do": {"plan"}, "document": {adhocDoc}, "params": {"seconds=2"}}
	status, _, body := b.post("/ui/runs/new", form)
	m := planDigestRe.FindStringSubmatch(body)
	if status != http.StatusOK || m == nil || !strings.Contains(body, "2 nodes") || !strings.Contains(body, "db-1, db-2") {
		t.Fatalf("plan: %d, want the stage's two nodes and a digest\n%s", status, body)
	}
	if n := e.runCount(); n != 0 {
		t.Fatalf("a plan made %d runs", n)
	}
	form.Set("do", "start")
	form.Set("digest", m[1])
	status, loc, _ := b.post("/ui/runs/new", form)
	if status != http.StatusSeeOther || !strings.HasPrefix(loc, "/ui/runs/") {
		t.Fatalf("start: %d to %q", status, loc)
	}
	var runs []store.Run
	_ = e.st.Read(context.Background(), func(rd store.Reader) error {
		var err error
		runs, _, err = store.RunPage(context.Background(), rd, store.RunQuery{Limit: 10})
		return err
	})
	if len(runs) != 1 || runs[0].Digest != m[1] || runs[0].Playbook != "" || runs[0].State != store.RunPendingApprove ||
		runs[0].Requester != "op" || !strings.Contains(loc, runs[0].ID) {
		t.Fatalf("started %+v, want op's ad-hoc run of digest %s waiting for approval", runs, m[1])
	}
	// A viewer may neither see the form nor plan.
	v := e.browser().signIn("viewer")
	if status, _, _ := v.get("/ui/runs/new"); status != http.StatusForbidden {
		t.Fatalf("a viewer's New run: %d, want 403", status)
	}
}
