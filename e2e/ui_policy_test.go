package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/musterhq/muster/shared/wire"
)

// clusterWindows are the live windows of cluster e2e, by id, as the API
// (and `muster window list`) lists them.
func clusterWindows(t *testing.T, f *fleet) map[string]wire.WindowSpec {
	t.Helper()
	rs, err := f.admin.Policies(ctxT(t), wire.KindWindow, "e2e", false)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]wire.WindowSpec{}
	for _, r := range rs {
		var w wire.WindowSpec
		if err := json.Unmarshal(r.Spec, &w); err != nil {
			t.Fatal(err)
		}
		out[r.ID] = w
	}
	return out
}

// clusterBudget is cluster e2e's stored max_unavailable ("" for none).
func clusterBudget(t *testing.T, f *fleet) string {
	t.Helper()
	rs, err := f.admin.Policies(ctxT(t), wire.KindBudget, "e2e", false)
	if err != nil || len(rs) > 1 {
		t.Fatal(rs, err)
	}
	if len(rs) == 0 {
		return ""
	}
	var b wire.BudgetSpec
	_ = json.Unmarshal(rs[0].Spec, &b)
	return b.MaxUnavailable
}

// fillAndSubmit opens the <details> box, types each field's value and
// submits form, then waits for the page the change leads to.
func fillAndSubmit(t *testing.T, tab context.Context, box, form string, fields map[string]string, done string) {
	t.Helper()
	steps := []chromedp.Action[chromedp.Void]{}
	if box != "" {
		steps = append(steps, chromedp.Click(chromedp.CSS(box+" > summary")))
	}
	for name, val := range fields {
		steps = append(steps, chromedp.WaitVisible(chromedp.CSS(form+` [name="`+name+`"]`)),
			chromedp.SendKeys(chromedp.CSS(form+` [name="`+name+`"]`), val))
	}
	steps = append(steps, chromedp.Click(chromedp.CSS(form+` button[type=submit]`)))
	do(t, tab, steps...)
	waitLoaded(t, tab, "the page after "+done, fmt.Sprintf(`location.search.includes('done=%s')`, done))
}

// pageFits checks what every Clusters page must: no column header or
// cell broken inside a word, nothing wider than the screen.
func pageFits(t *testing.T, tab context.Context, size string) {
	t.Helper()
	if bad := eval[[]string](t, tab, brokenHeaders); len(bad) > 0 {
		t.Errorf("%s: headers broken inside a word: %q", size, bad)
	}
	if bad := eval[[]string](t, tab, brokenCells); len(bad) > 0 {
		t.Errorf("%s: cells broken inside a word: %q", size, bad)
	}
	if over := eval[bool](t, tab, `document.documentElement.scrollWidth > window.innerWidth + 1`); over {
		t.Errorf("%s: the page is wider than the screen", size)
	}
}

// TestWebUIWindowsBudgetsAndOnAlert drives issue 33's items 1 and 6 from
// the browser, at 1280×800 and 390×844, against a real core and agent:
// bob (approver) adds a window, sets the budget and removes the window on
// a desktop; on a phone he adds a window and approves the cluster's
// on_alert playbook; alice (operator) on a phone narrows the budget, is
// offered neither Remove nor Approve, and a forged removal is refused
// with a page naming the role it takes. Every change is what the API then
// lists. Screenshots go to screenshotDir.
func TestWebUIWindowsBudgetsAndOnAlert(t *testing.T) {
	t.Parallel()
	f := newFleetWith(t, fleetOptions{nodes: 1, clusterYAML: `    expect:
      nodes: [node-1]
      on_alert:
        playbook: heal
`})
	if _, err := f.admin.ApplyPlaybook(ctxT(t), "name: heal\nparams: [{name: missing, type: string}]\n"+
		"stages:\n  - {name: a, kind: example.com/append, target: {nodes: [node-1]}, args: {note: \"restart {{ .missing }}\"}}\n"); err != nil {
		t.Fatal(err)
	}
	base := "http://" + f.core.Addr()
	dir := screenshotDir(t)
	br := newChrome(t)

	// A desktop: bob adds a window, sets the budget, removes the window.
	desk := br.tab(t, 1280, 800, "Europe/Berlin")
	signIn(t, desk, base, "/ui/clusters", f.secrets["bob"])
	waitLoaded(t, desk, "the Clusters page", `!!document.querySelector('#policy-e2e')`)
	fillAndSubmit(t, desk, "#add-window-e2e", "form.add-window", map[string]string{"name": "nightly", "cron": "0 2 * * *",
		"duration": "4h", "timezone": "Europe/Berlin", "reason": "change board 12"}, "window-added")
	if w := clusterWindows(t, f)["nightly"]; w != (wire.WindowSpec{Cluster: "e2e", Cron: "0 2 * * *", Duration: "4h0m0s", Timezone: "Europe/Berlin"}) {
		t.Fatalf("the window the form made: %+v", w)
	}
	waitLoaded(t, desk, "the window listed", `(document.querySelector('#window-nightly') || {textContent: ''}).textContent.includes('Europe/Berlin')`)
	fillAndSubmit(t, desk, "#set-budget-e2e", "form.set-budget", map[string]string{"max_unavailable": "2", "reason": "capacity review"}, "budget-set")
	if got := clusterBudget(t, f); got != "2" {
		t.Fatalf("the budget the form set: %q", got)
	}
	waitLoaded(t, desk, "the budget shown", `(document.querySelector('.budget-max') || {}).textContent === '2'`)
	pageFits(t, desk, "1280×800")
	screenshot(t, desk, dir, "ui-clusters")
	fillAndSubmit(t, desk, "", `form[data-window="nightly"]`, map[string]string{"reason": "not needed"}, "window-removed")
	if ws := clusterWindows(t, f); len(ws) != 0 {
		t.Fatalf("windows after the removal: %v", ws)
	}
	waitLoaded(t, desk, "no window listed", `!document.querySelector('#window-nightly') && !!document.querySelector('.windows-none')`)

	// A phone: bob adds a window and approves the on_alert playbook.
	phone := br.tab(t, 390, 844, "UTC")
	signIn(t, phone, base, "/ui/clusters", f.secrets["bob"])
	waitLoaded(t, phone, "the Clusters page on a phone", `!!document.querySelector('form.approve-on-alert')`)
	fillAndSubmit(t, phone, "#add-window-e2e", "form.add-window", map[string]string{"name": "weekend", "cron": "0 6 * * 6",
		"duration": "8h", "reason": "weekend work"}, "window-added")
	if w := clusterWindows(t, f)["weekend"]; w.Cron != "0 6 * * 6" || w.Duration != "8h0m0s" {
		t.Fatalf("the window the phone made: %+v", w)
	}
	do(t, phone, chromedp.Click(chromedp.CSS("form.approve-on-alert button[type=submit]")))
	waitLoaded(t, phone, "the page after the approval", `location.search.includes('done=on-alert-approved')`)
	c, err := f.admin.Cluster(ctxT(t), "e2e")
	if err != nil || c.OnAlert == nil || !c.OnAlert.Approved || c.OnAlert.ApprovedBy != "bob" {
		t.Fatalf("on_alert after the button: %+v, %v", c, err)
	}
	waitLoaded(t, phone, "approved shown", `document.querySelector('.on-alert-line').textContent.includes('approved by bob') && !document.querySelector('form.approve-on-alert')`)
	pageFits(t, phone, "390×844 (bob)")
	screenshot(t, phone, dir, "clusters-policy-390")

	// alice, an operator, on a phone: she narrows the budget; another
	// window, a removal and the approval are not hers.
	alice := br.tab(t, 390, 844, "UTC")
	signIn(t, alice, base, "/ui/clusters", f.secrets["alice"])
	waitLoaded(t, alice, "the Clusters page as alice", `!!document.querySelector('#set-budget-e2e')`)
	for _, sel := range []string{"#add-window-e2e", `form[data-window="weekend"]`, "form.approve-on-alert"} {
		if eval[bool](t, alice, fmt.Sprintf(`!!document.querySelector(%q)`, sel)) {
			t.Errorf("alice is offered %s", sel)
		}
	}
	fillAndSubmit(t, alice, "#set-budget-e2e", "form.set-budget", map[string]string{"max_unavailable": "1", "reason": "incident 4711"}, "budget-set")
	if got := clusterBudget(t, f); got != "1" {
		t.Fatalf("the budget alice set: %q", got)
	}
	if status := forgePost(t, alice, "/ui/windows/weekend/remove", true); status != 403 {
		t.Errorf("alice's forged removal: %d, want 403", status)
	}
	msg, err := chromedp.Run(alice, chromedp.Evaluate[string](`fetch('/ui/windows/weekend/remove', {method: 'POST', credentials: 'same-origin',
		body: new URLSearchParams({csrf: document.querySelector('input[name=csrf]').value, reason: 'x'})}).then(r => r.text())`,
		chromedp.EvalAwaitPromise))
	if err != nil || !strings.Contains(msg, "approver") {
		t.Errorf("the refusal does not name the role it takes:\n%s", msg)
	}
	if _, ok := clusterWindows(t, f)["weekend"]; !ok {
		t.Fatal("alice's forged post removed the window")
	}
	pageFits(t, alice, "390×844 (alice)")
}
