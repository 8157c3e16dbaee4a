package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/musterhq/muster/shared/client"
	"github.com/musterhq/muster/shared/testwait"
)

// TestWebUILaunchByLabelsAndFollowARun: alice, an operator, launches and
// follows up from the browser alone, at 1280×800 and at 390×844. She
// creates one action per node with role=db from the New action form (the
// answer says "2 actions created" and links each; labels matching nothing
// are refused next to the field, creating nothing). On the New run page she
// writes a run's stages as YAML: a broken document is refused next to the
// YAML, the Plan shows each stage's nodes and the digest, and Start runs
// exactly that digest. Once bob approves, she opens node-1's cell on the
// run page and sees its step's output follow live, escaped, as the step
// prints more (as does the step's own page, where the output of an action
// gone stops being asked for at its first 404); when node-2's step fails and the run pauses, bob's card in
// Approvals shows the failing lines. No page scrolls sideways, and no
// table cell breaks inside a word.
func TestWebUILaunchByLabelsAndFollowARun(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	talk := filepath.Join(dir, "talk.sh")
	if err := os.WriteFile(talk, []byte(fmt.Sprintf("#!/bin/sh\necho 'step 1: draining <b>x</b>'\n"+
		"while [ ! -e %q/go-\"$MUSTER_ACTION_ID\" ]; do sleep 0.05; done\necho 'step 2: drained'\n", dir)), 0o755); err != nil {
		t.Fatal(err)
	}
	broken := filepath.Join(dir, "break.sh")
	if err := os.WriteFile(broken, []byte("#!/bin/sh\necho unpacking\necho 'E: disk <full> on /var'\nexit 3\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	kinds := fmt.Sprintf("actions:\n  external:\n    - kind: example.com/talk\n      run: [%q]\n    - kind: example.com/break\n      run: [%q]\n", talk, broken)
	f := newFleetWith(t, fleetOptions{nodes: 3, dir: dir, actionsYAML: kinds, agentYAML: func(node string) string {
		if node == "node-3" {
			return "labels:\n  role: web\n"
		}
		return "labels:\n  role: db\n"
	}})
	testwait.Within(t, 30*time.Second, "the nodes' labels and kinds at the core", func() bool {
		ns, err := f.admin.Nodes(ctxT(t), "e2e")
		if err != nil || len(ns) != 3 {
			return false
		}
		for _, n := range ns {
			if n.Labels["role"] == "" || len(n.Kinds) == 0 {
				return false
			}
		}
		return true
	})
	base := "http://" + f.core.Addr()
	br := newChrome(t)
	shots := screenshotDir(t)
	for _, size := range []struct {
		name string
		w, h int64
	}{{"desktop", 1280, 800}, {"phone", 390, 844}} {
		alice := br.tab(t, size.w, size.h, "UTC")
		signIn(t, alice, base, "/ui/actions/new", f.secrets["alice"])

		// One action per node with role=db.
		waitLoaded(t, alice, "the New action form", `document.querySelector('#new-action-form') !== null`)
		before := actionCount(t, f)
		do(t, alice, chromedp.SetValue(chromedp.CSS("#na-kind"), "example.com/break"),
			chromedp.SendKeys(chromedp.CSS("#na-target"), "role=cache"), chromedp.Click(chromedp.CSS("#na-create")))
		waitLoaded(t, alice, "the labels error next to the field", `document.querySelector('#na-target-error') !== null`)
		if msg := eval[string](t, alice, `document.querySelector('#na-target-error').textContent`); !strings.Contains(msg, "role=cache") {
			t.Fatalf("the labels error says %q, want the selector named", msg)
		}
		if n := actionCount(t, f); n != before {
			t.Fatalf("refused labels made %d actions", n-before)
		}
		do(t, alice, chromedp.SetValue(chromedp.CSS("#na-target"), "role=db"), chromedp.Click(chromedp.CSS("#na-create")))
		waitLoaded(t, alice, "the actions made", `document.querySelector('#new-actions-created') !== null`)
		if msg := eval[string](t, alice, `document.querySelector('#new-actions-created').textContent`); !strings.Contains(msg, "2 actions created") ||
			!strings.Contains(msg, "node-1") || !strings.Contains(msg, "node-2") || strings.Contains(msg, "node-3") {
			t.Fatalf("the answer says %q, want 2 actions created on node-1 and node-2", msg)
		}
		if n := eval[int](t, alice, `document.querySelectorAll('#new-actions-created a[href^="/ui/actions/"]').length`); n != 2 {
			t.Fatalf("%d links to the actions made, want 2", n)
		}
		if n := actionCount(t, f); n != before+2 {
			t.Fatalf("%d actions made, want 2", n-before)
		}
		noOverflow(t, alice, "New action over labels at "+size.name)
		screenshot(t, alice, shots, "new-action-labels-"+size.name)
		if size.name == "desktop" {
			screenshot(t, alice, shots, "ui-new-action")
		}

		// A run written as YAML: refused, planned, started.
		do(t, alice, chromedp.Navigate(base+"/ui/runs"))
		waitLoaded(t, alice, "the Runs page's New run link", `document.querySelector('#new-run-link') !== null`)
		do(t, alice, chromedp.Click(chromedp.CSS("#new-run-link")))
		waitLoaded(t, alice, "the New run form", `document.querySelector('#new-run-form') !== null`)
		do(t, alice, chromedp.SetValue(chromedp.CSS("#nr-document"), "name: hotfix\nstages: [:"), chromedp.Click(chromedp.CSS("#nr-plan")))
		waitLoaded(t, alice, "the YAML error next to it", `document.querySelector('#nr-document-error') !== null`)
		doc := "name: hotfix\nstages:\n  - name: drain\n    kind: example.com/talk\n    target: {nodes: [node-1]}\n" +
			"  - name: upgrade\n    kind: example.com/break\n    target: {labels: {role: db}}\n    max_concurrency: 2\n    on_failure: pause\n"
		do(t, alice, chromedp.SetValue(chromedp.CSS("#nr-document"), doc), chromedp.Click(chromedp.CSS("#nr-plan")))
		waitLoaded(t, alice, "the plan", `document.querySelector('#plan-digest') !== null`)
		stages := eval[string](t, alice, `document.querySelector('#plan-stages').textContent`)
		if !strings.Contains(stages, "drain: 1 node node-1") || !strings.Contains(stages, "upgrade: 2 nodes node-1, node-2") {
			t.Fatalf("the plan's stages say %q", stages)
		}
		digest := eval[string](t, alice, `document.querySelector('#new-run-start input[name=digest]').value`)
		if runs, err := f.admin.Runs(ctxT(t), client.RunFilter{}); err != nil || len(runs.Runs) != map[string]int{"desktop": 0, "phone": 1}[size.name] {
			t.Fatalf("runs after the plan: %v %v", runs, err)
		}
		if bad := eval[[]string](t, alice, brokenCells); len(bad) > 0 {
			t.Errorf("New run's plan at %s breaks inside %q", size.name, bad)
		}
		noOverflow(t, alice, "New run with its plan at "+size.name)
		screenshot(t, alice, shots, "new-run-"+size.name)
		if size.name == "desktop" {
			screenshot(t, alice, shots, "ui-new-run")
		}
		do(t, alice, chromedp.Click(chromedp.CSS("#nr-start")))
		waitLoaded(t, alice, "the new run's page", `location.search.includes('done=started')`)
		id := strings.TrimPrefix(strings.SplitN(location(t, alice), "?", 2)[0], base+"/ui/runs/")
		run, err := f.admin.Run(ctxT(t), id)
		if err != nil || run.Digest != digest || run.Playbook != "" || run.Requester != "alice" {
			t.Fatalf("the started run: %+v %v, want alice's ad-hoc run of digest %s", run, err, digest)
		}
		if _, err := f.bob.ApproveRun(ctxT(t), run.ID, run.Digest); err != nil {
			t.Fatal(err)
		}

		// node-1's cell follows its step's output live.
		cell := `document.querySelector('tr[data-node="node-1"] details.node-output')`
		waitLoaded(t, alice, "node-1's drain step started", cell+` !== null`)
		do(t, alice, chromedp.Click(chromedp.CSS(`tr[data-node="node-1"] details.node-output summary`)))
		pre := cell + `.querySelector('pre')`
		waitLoaded(t, alice, "node-1's first line in its cell", pre+`.textContent.includes('step 1: draining <b>x</b>')`)
		if n := eval[int](t, alice, pre+`.querySelectorAll('*').length`); n != 0 {
			t.Fatalf("the output made %d elements: it is not shown as text", n)
		}
		child := eval[string](t, alice, pre+`.getAttribute('data-follow-output')`)
		// The child's own page follows it too.
		page := br.tab(t, size.w, size.h, "UTC")
		signIn(t, page, base, "/ui/actions/"+child, f.secrets["alice"])
		waitLoaded(t, page, "the first line on the action's page", `(document.querySelector('pre#action-output[data-follow-output]') || {textContent: ''}).textContent.includes('step 1: draining')`)
		// The output of an action the person may not see, or that is gone,
		// answers 404: the page asks once, says so in the box and asks no
		// more (the count is read again once the step has finished below).
		gone := "00000000-0000-4000-8000-000000000000"
		eval[bool](t, page, `(function () {
			window.goneAsks = 0;
			var f = window.fetch;
			window.fetch = function (u) { if (String(u).indexOf('`+gone+`') >= 0) window.goneAsks++; return f.apply(this, arguments); };
			var d = document.createElement('details'), p = document.createElement('pre');
			d.id = 'gone-output';
			p.setAttribute('data-follow-output', '`+gone+`');
			d.appendChild(p);
			document.body.appendChild(d);
			d.open = true;
			return true;
		})()`)
		waitJS(t, page, "the following of an action gone to stop", `document.querySelector('#gone-output pre[data-stopped]') !== null`)
		if msg := eval[string](t, page, `document.querySelector('#gone-output pre').textContent`); !strings.Contains(msg, "not available") {
			t.Fatalf("the box of an action gone says %q", msg)
		}
		if err := os.WriteFile(filepath.Join(dir, "go-"+child), nil, 0o644); err != nil {
			t.Fatal(err)
		}
		waitLoaded(t, page, "the next line on the action's page", `document.querySelector('#action-output').textContent.includes('step 2: drained')`)
		if n := eval[int](t, page, `window.goneAsks`); n != 1 {
			t.Fatalf("the output of an action gone was asked for %d times, want once", n)
		}
		waitLoaded(t, alice, "node-1's next line, followed without a reload",
			`document.querySelector('pre[data-follow-output="`+child+`"]') !== null && document.querySelector('pre[data-follow-output="`+child+`"]').textContent.includes('step 2: drained')`)
		if bad := eval[[]string](t, alice, brokenCells); len(bad) > 0 {
			t.Errorf("the run page at %s breaks inside %q", size.name, bad)
		}
		noOverflow(t, alice, "the run page with a node's output at "+size.name)
		screenshot(t, alice, shots, "run-output-"+size.name)
		if size.name == "desktop" {
			screenshot(t, alice, shots, "ui-run")
		}

		// The upgrade fails and pauses the run: the card shows the lines.
		testwait.Within(t, 60*time.Second, "the run PAUSED", func() bool {
			r, err := f.admin.Run(ctxT(t), run.ID)
			return err == nil && r.State == "PAUSED"
		})
		bob := br.tab(t, size.w, size.h, "UTC")
		signIn(t, bob, base, "/ui/approvals", f.secrets["bob"])
		card := `document.querySelector('ul.failures li pre.output')`
		waitLoaded(t, bob, "the paused card's failing lines", card+` !== null`)
		if out := eval[string](t, bob, card+`.textContent`); !strings.Contains(out, "E: disk <full> on /var") {
			t.Fatalf("the paused card shows %q, want the failing lines", out)
		}
		noOverflow(t, bob, "Approvals with a paused run at "+size.name)
		if _, err := f.admin.CancelRun(ctxT(t), run.ID, "test over", false); err != nil {
			t.Fatal(err)
		}
	}
}

func actionCount(t *testing.T, f *fleet) int {
	t.Helper()
	list, err := f.admin.Actions(ctxT(t), client.ActionFilter{Limit: 500})
	if err != nil {
		t.Fatal(err)
	}
	return len(list.Actions)
}
