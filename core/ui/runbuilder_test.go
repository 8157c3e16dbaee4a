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

// builderForm is a builder form of two stages over the labelled nodes:
// nap on db-1 with key=value args, then nap on role=db with JSON args.
func builderForm(csrf string) url.Values {
	return url.Values{"csrf": {csrf}, "builder": {"1"}, "cluster": {"prod"}, "run_name": {"adhoc"}, "stages": {"2"},
		"s0.name": {"first"}, "s0.target": {"nodes=db-1"}, "s0.steps": {"1"},
		"s0.p0.name": {"nap"}, "s0.p0.kind": {schemaKind}, "s0.p0.args": {"seconds=1"},
		"s1.name": {"rest"}, "s1.target": {"role=db"}, "s1.max_concurrency": {"50%"}, "s1.max_errors": {"1"}, "s1.steps": {"1"},
		"s1.p0.kind": {schemaKind}, "s1.p0.args": {`{"seconds": 2}`}}
}

var (
	documentTextRe   = regexp.MustCompile(`(?s)<textarea id="nr-document"[^>]*>(.*?)</textarea>`)
	startDocumentRe  = regexp.MustCompile(`name="document" value="([^"]*)"`)
	builderFieldIDRe = regexp.MustCompile(`id="rb-s(\d+)-name"`)
)

// TestNewRunBuilderPlansTheYAMLItShows: the New run page's form builder
// offers the kinds the cluster's nodes offer; Add stage and Add step show
// it again with one more row and everything typed kept; Show as YAML
// gives, in the YAML tab, exactly the document its Plan plans (the Start
// carries it, with the digest, to the YAML path's start); and a run without
// a stage, a kind no node offers, args that are not key=value or JSON, args
// the kind's args_schema refuses and a bad target are refused next to their
// field, escaped, and make nothing.
func TestNewRunBuilderPlansTheYAMLItShows(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.withLabelledNodes()
	b := e.browser().signIn("op")
	status, _, body := b.get("/ui/runs/new?tab=form")
	if status != http.StatusOK || !strings.Contains(body, `id="rb-s0-name"`) || !strings.Contains(body, `<option value="`+schemaKind+`"`) {
		t.Fatalf("the form tab: %d, want a stage row and the kind the nodes offer\n%s", status, body)
	}

	// Add stage and Add step keep what was typed.
	form := builderForm(b.csrf)
	form.Set("do", "add_stage")
	status, _, body = b.post("/ui/runs/new", form)
	if ids := builderFieldIDRe.FindAllStringSubmatch(body, -1); status != http.StatusOK || len(ids) != 3 ||
		!strings.Contains(body, `value="nodes=db-1"`) || !strings.Contains(body, `value="50%"`) || !strings.Contains(body, "{&#34;seconds&#34;: 2}") {
		t.Fatalf("add stage: %d with %d stage rows, want 3 and the typed values\n%s", status, len(ids), body)
	}
	form.Set("do", "add_step.1")
	status, _, body = b.post("/ui/runs/new", form)
	if status != http.StatusOK || !strings.Contains(body, `id="rb-s1-p1-kind"`) || strings.Contains(body, `id="rb-s0-p1-kind"`) ||
		!strings.Contains(body, `value="rest"`) {
		t.Fatalf("add step: %d, want a second step in the second stage only\n%s", status, body)
	}

	// Refusals, next to the field, escaped.
	for name, tc := range map[string]struct {
		set   map[string]string
		field string
		says  string
	}{
		"no stage": {map[string]string{"stages": "1", "s0.name": "", "s0.target": "", "s0.p0.name": "", "s0.p0.kind": "", "s0.p0.args": ""},
			"rb-stages-error", "add a stage"},
		"unknown kind": {map[string]string{"s1.p0.kind": "example.com/<b>nope</b>"}, "rb-s1-p0-kind-error", "example.com/<b>nope</b>"},
		"bad args":     {map[string]string{"s0.p0.args": "seconds"}, "rb-s0-p0-args-error", "key=value"},
		"bad JSON":     {map[string]string{"s1.p0.args": "{seconds: 2"}, "rb-s1-p0-args-error", "JSON object"},
		"schema":       {map[string]string{"s1.p0.args": "seconds=9"}, "rb-s1-p0-args-error", "db-2"},
		"bad target":   {map[string]string{"s1.target": "role=<i>"}, "rb-s1-target-error", "role=<i>"},
		"no name":      {map[string]string{"s1.name": ""}, "rb-s1-name-error", "name the stage"},
		"bad limit":    {map[string]string{"s1.max_concurrency": "lots"}, "rb-s1-max-concurrency-error", "count"},
		"matches none": {map[string]string{"s1.target": "role=cache"}, "rb-stages-error", "role=cache"},
	} {
		form := builderForm(b.csrf)
		form.Set("do", "plan")
		for k, v := range tc.set {
			form.Set(k, v)
		}
		status, _, body := b.post("/ui/runs/new", form)
		i := strings.Index(body, `id="`+tc.field+`"`)
		if status < 400 || status >= 500 || i < 0 {
			t.Errorf("%s: %d, want a 4xx with %s\n%s", name, status, tc.field, body)
			continue
		}
		shown := body[i:min(len(body), i+500)]
		if strings.Contains(shown, "<b>nope") || strings.Contains(shown, "<i>") ||
			!strings.Contains(strings.ToLower(html.UnescapeString(shown)), strings.ToLower(tc.says)) {
			t.Errorf("%s: says %q, want %q escaped", name, shown, tc.says)
		}
		keeps := tc.set["stages"] == "" && name != "no name"
		if !strings.Contains(body, `id="run-builder-form"`) || keeps && !strings.Contains(body, `value="rest"`) {
			t.Errorf("%s: the form is not shown again as typed", name)
		}
		if n := e.runCount(); n != 0 {
			t.Fatalf("%s: a refused form made %d runs", name, n)
		}
	}

	// Show as YAML, then Plan: one document.
	form = builderForm(b.csrf)
	form.Set("do", "yaml")
	status, _, body = b.post("/ui/runs/new", form)
	m := documentTextRe.FindStringSubmatch(body)
	if status != http.StatusOK || m == nil {
		t.Fatalf("show as YAML: %d\n%s", status, body)
	}
	shownYAML := html.UnescapeString(m[1])
	// The YAML tab takes the form back as typed.
	for _, kept := range []string{`name="s0.target" value="nodes=db-1"`, `name="s1.p0.args" value="{&#34;seconds&#34;: 2}"`, `name="stages" value="2"`} {
		if !strings.Contains(body, kept) || !strings.Contains(body, `id="nr-edit-form"`) {
			t.Fatalf("the YAML tab cannot go back to the form as typed: no %s\n%s", kept, body)
		}
	}
	for _, want := range []string{"name: adhoc", "- name: first", "- db-1", "role: db", "max_concurrency: 50%", "max_errors: 1", "- name: step-1", "seconds: 2", "kind: " + schemaKind} {
		if !strings.Contains(shownYAML, want) {
			t.Errorf("the YAML lacks %q:\n%s", want, shownYAML)
		}
	}
	form.Set("do", "plan")
	status, _, body = b.post("/ui/runs/new", form)
	dm, sm := planDigestRe.FindStringSubmatch(body), startDocumentRe.FindStringSubmatch(body)
	if status != http.StatusOK || dm == nil || sm == nil || !strings.Contains(body, "first</strong>: 1 node") ||
		!strings.Contains(body, "rest</strong>: 2 nodes") || !strings.Contains(body, `id="run-builder-form"`) {
		t.Fatalf("plan: %d, want both stages, a digest and the form kept\n%s", status, body)
	}
	planned := html.UnescapeString(sm[1])
	if planned != shownYAML {
		t.Fatalf("the plan used\n%s\nbut Show as YAML gave\n%s", planned, shownYAML)
	}
	// The YAML tab plans the same document to the same digest.
	yform := url.Values{"csrf": {b.csrf}, "cluster": {"prod"}, "do": {"plan"}, "document": {shownYAML}}
	if _, _, ybody := b.post("/ui/runs/new", yform); !strings.Contains(ybody, `name="digest" value="`+dm[1]+`"`) {
		t.Fatalf("the YAML tab plans another digest than %s", dm[1])
	}
	if n := e.runCount(); n != 0 {
		t.Fatalf("plans made %d runs", n)
	}
	yform.Set("do", "start")
	yform.Set("digest", dm[1])
	status, loc, _ := b.post("/ui/runs/new", yform)
	if status != http.StatusSeeOther {
		t.Fatalf("start: %d", status)
	}
	var runs []store.Run
	_ = e.st.Read(context.Background(), func(rd store.Reader) error {
		var err error
		runs, _, err = store.RunPage(context.Background(), rd, store.RunQuery{Limit: 10})
		return err
	})
	if len(runs) != 1 || runs[0].Digest != dm[1] || runs[0].State != store.RunPendingApprove || !strings.Contains(loc, runs[0].ID) {
		t.Fatalf("started %+v, want the run of digest %s waiting for approval", runs, dm[1])
	}

	// A viewer may not use the builder; a cluster one may not create on is
	// none, as in the YAML tab.
	vb := e.browser().signIn("viewer")
	if status, _, _ := vb.get("/ui/runs/new?tab=form"); status != http.StatusForbidden {
		t.Fatalf("a viewer's form tab: %d, want 403", status)
	}
	vform := builderForm(vb.csrf)
	vform.Set("do", "yaml")
	if status, _, _ := vb.post("/ui/runs/new", vform); status != http.StatusForbidden {
		t.Fatalf("a viewer's Show as YAML: %d, want 403", status)
	}
	form.Set("cluster", "nowhere")
	if status, _, body := b.post("/ui/runs/new", form); status != http.StatusNotFound || !strings.Contains(body, `id="rb-cluster-error"`) {
		t.Fatalf("a plan on no cluster: %d, want 404 next to the cluster\n%s", status, body)
	}
}
