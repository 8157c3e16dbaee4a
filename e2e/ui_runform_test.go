package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/musterhq/muster/shared/client"
	"github.com/musterhq/muster/shared/testwait"
)

// TestWebUINewRunFormPlansTheYAMLItShows: alice, an operator, builds a
// two-stage run with the New run page's form, at 1280×800 and at 390×844,
// without writing YAML: drain on node-1, then an upgrade on role=db one
// node at a time, whose version=2.10 stays the string the kind's
// args_schema wants. Add stage keeps what she typed; args the schema
// refuses are refused next to their field (nothing made); Plan shows both
// stages and the digest. On the desktop, Show as YAML gives exactly the
// document the plan used, and the YAML tab plans it to the same digest and
// starts it; on the phone she starts from the form's plan. Either way the
// run page shows the run waiting for approval with that digest. No page
// scrolls sideways, and no cell of the plan breaks inside a word.
func TestWebUINewRunFormPlansTheYAMLItShows(t *testing.T) {
	t.Parallel()
	actions := `actions:
  external:
    - kind: example.com/drain
      run: [/bin/true]
    - kind: example.com/pkg.upgrade
      run: [/bin/true]
      args_schema: |
        type: object
        required: [version]
        additionalProperties: false
        properties:
          version: {type: string, pattern: "^[0-9][0-9.]*$"}
`
	f := newFleetWith(t, fleetOptions{nodes: 3, actionsYAML: actions, agentYAML: func(node string) string {
		if node == "node-3" {
			return "labels:\n  role: web\n"
		}
		return "labels:\n  role: db\n"
	}})
	testwait.Within(t, 30*time.Second, "the nodes' labels, kinds and schemas at the core", func() bool {
		ns, err := f.admin.Nodes(ctxT(t), "e2e")
		if err != nil || len(ns) != 3 {
			return false
		}
		for _, n := range ns {
			if n.Labels["role"] == "" || len(n.ArgsSchemas) == 0 {
				return false
			}
		}
		return true
	})
	base := "http://" + f.core.Addr()
	br := newChrome(t)
	shots := screenshotDir(t)
	runCount := func() int {
		runs, err := f.admin.Runs(ctxT(t), client.RunFilter{})
		if err != nil {
			t.Fatal(err)
		}
		return len(runs.Runs)
	}
	for _, size := range []struct {
		name string
		w, h int64
	}{{"desktop", 1280, 800}, {"phone", 390, 844}} {
		alice := br.tab(t, size.w, size.h, "UTC")
		signIn(t, alice, base, "/ui/runs/new", f.secrets["alice"])
		waitLoaded(t, alice, "the New run page", `document.querySelector('#new-run-tab-form') !== null`)
		do(t, alice, chromedp.Click(chromedp.CSS("#new-run-tab-form")))
		waitLoaded(t, alice, "the form builder", `document.querySelector('#run-builder-form') !== null`)
		if n := eval[int](t, alice, `document.querySelectorAll('#rb-s0-p0-kind option[value="example.com/pkg.upgrade"]').length`); n != 1 {
			t.Fatal("the kind select does not offer the kind the nodes offer")
		}
		do(t, alice, chromedp.SendKeys(chromedp.CSS("#rb-s0-name"), "drain"), chromedp.SendKeys(chromedp.CSS("#rb-s0-target"), "nodes=node-1"),
			chromedp.SetValue(chromedp.CSS("#rb-s0-p0-kind"), "example.com/drain"), chromedp.Click(chromedp.CSS("#rb-add-stage")))
		waitLoaded(t, alice, "a second stage", `document.querySelector('#rb-s1-name') !== null`)
		if got := eval[[]string](t, alice, `[document.querySelector('#rb-s0-name').value, document.querySelector('#rb-s0-target').value, document.querySelector('#rb-s0-p0-kind').value]`); strings.Join(got, " ") != "drain nodes=node-1 example.com/drain" {
			t.Fatalf("Add stage kept %q", got)
		}
		do(t, alice, chromedp.SendKeys(chromedp.CSS("#rb-s1-name"), "upgrade"), chromedp.SendKeys(chromedp.CSS("#rb-s1-target"), "role=db"),
			chromedp.SendKeys(chromedp.CSS("#rb-s1-max-concurrency"), "1"), chromedp.SetValue(chromedp.CSS("#rb-s1-p0-kind"), "example.com/pkg.upgrade"),
			chromedp.SendKeys(chromedp.CSS("#rb-s1-p0-args"), "version=<latest>"), chromedp.Click(chromedp.CSS("#rb-plan")))
		waitLoaded(t, alice, "the args error next to them", `document.querySelector('#rb-s1-p0-args-error') !== null`)
		if msg := eval[string](t, alice, `document.querySelector('#rb-s1-p0-args-error').textContent`); !strings.Contains(msg, "version") || !strings.Contains(msg, "<latest>") {
			t.Fatalf("the args error says %q, want the version field named", msg)
		}
		if n := eval[int](t, alice, `document.querySelectorAll('#rb-s1-p0-args-error *').length`); n != 0 {
			t.Fatal("the args error is not shown as text")
		}
		before := runCount()
		do(t, alice, chromedp.SetValue(chromedp.CSS("#rb-s1-p0-args"), "version=2.10"), chromedp.Click(chromedp.CSS("#rb-plan")))
		waitLoaded(t, alice, "the plan", `document.querySelector('#plan-digest') !== null`)
		stages := eval[string](t, alice, `document.querySelector('#plan-stages').textContent`)
		if !strings.Contains(stages, "drain: 1 node node-1") || !strings.Contains(stages, "upgrade: 2 nodes node-1, node-2") {
			t.Fatalf("the plan's stages say %q", stages)
		}
		digest := eval[string](t, alice, `document.querySelector('#new-run-start input[name=digest]').value`)
		planned := eval[string](t, alice, `document.querySelector('#new-run-start input[name=document]').value`)
		if !strings.HasPrefix(eval[string](t, alice, `document.querySelector('#plan-digest').title`), digest) || len(digest) != 64 {
			t.Fatalf("the plan shows another digest than its Start carries (%q)", digest)
		}
		if !strings.Contains(planned, `version: "2.10"`) && !strings.Contains(planned, `version: '2.10'`) {
			t.Fatalf("the planned document does not keep version 2.10 a string:\n%s", planned)
		}
		if runCount() != before {
			t.Fatal("a refusal or a plan made a run")
		}
		if bad := eval[[]string](t, alice, brokenCells); len(bad) > 0 {
			t.Errorf("the form's plan at %s breaks inside %q", size.name, bad)
		}
		noOverflow(t, alice, "New run's form with its plan at "+size.name)
		screenshot(t, alice, shots, "new-run-form-"+size.name)
		if size.name == "desktop" {
			screenshot(t, alice, shots, "ui-new-run-form")
			// The YAML it shows is the document the plan used, and the
			// YAML tab plans it to the same digest.
			do(t, alice, chromedp.Click(chromedp.CSS("#rb-yaml")))
			waitLoaded(t, alice, "the YAML tab with the form's document", `document.querySelector('#nr-document') !== null`)
			if shown := eval[string](t, alice, `document.querySelector('#nr-document').value`); strings.TrimSpace(shown) != strings.TrimSpace(planned) {
				t.Fatalf("Show as YAML gave\n%s\nbut the plan used\n%s", shown, planned)
			}
			do(t, alice, chromedp.Click(chromedp.CSS("#nr-plan")))
			waitLoaded(t, alice, "the YAML tab's plan", `document.querySelector('#plan-digest') !== null`)
			if d := eval[string](t, alice, `document.querySelector('#new-run-start input[name=digest]').value`); d != digest {
				t.Fatalf("the YAML tab plans digest %s, the form %s", d, digest)
			}
		}
		do(t, alice, chromedp.Click(chromedp.CSS("#nr-start")))
		waitLoaded(t, alice, "the new run's page", `location.search.includes('done=started')`)
		id := strings.TrimPrefix(strings.SplitN(location(t, alice), "?", 2)[0], base+"/ui/runs/")
		run, err := f.admin.Run(ctxT(t), id)
		if err != nil || run.Digest != digest || run.Playbook != "" || run.Requester != "alice" || run.State != "PENDING_APPROVE" {
			t.Fatalf("the started run: %+v %v, want alice's ad-hoc run of digest %s waiting for approval", run, err, digest)
		}
		if st, d := eval[string](t, alice, `document.querySelector('#run-state').textContent`),
			eval[string](t, alice, `document.querySelector('#run-digest').title`); st != "PENDING APPROVE" || d != digest {
			t.Fatalf("the run page says %q with digest %q, want PENDING APPROVE with %s", st, d, digest)
		}
		noOverflow(t, alice, "the started run at "+size.name)
		if _, err := f.admin.CancelRun(ctxT(t), run.ID, "test over", false); err != nil {
			t.Fatal(err)
		}
	}
}
