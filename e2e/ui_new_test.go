package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/musterhq/muster/shared/action"
	"github.com/musterhq/muster/shared/client"
	"github.com/musterhq/muster/shared/testwait"
)

// stampKind is an external kind whose args_schema needs a version string.
const stampKind = "example.com/stamp"

// noOverflow fails when the page scrolls sideways.
func noOverflow(t *testing.T, ctx context.Context, what string) {
	t.Helper()
	sizes := eval[[]int](t, ctx, `[document.documentElement.scrollWidth, document.documentElement.clientWidth]`)
	if sizes[0] > sizes[1] {
		t.Errorf("%s: scrollWidth %d > clientWidth %d", what, sizes[0], sizes[1])
	}
}

// TestWebUINewActionScheduleAndCancel: alice, an operator, launches and
// follows up from the browser alone, at 1280×800 and at 390×844: she opens
// New action from the Actions page, is told next to the args field that
// her args break the kind's args_schema (nothing is made), fixes them and
// creates the action, which bob approves and which reaches DONE on its
// page; she creates a schedule after seeing its next five occurrences in
// the cluster's time zone; and she cancels an action waiting for approval
// with a reason the core keeps. No page scrolls sideways.
func TestWebUINewActionScheduleAndCancel(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	actions := fmt.Sprintf(`actions:
  external:
    - kind: %s
      run: ["/bin/sh", "-c", "echo stamped"]
      args_schema: |
        type: object
        required: [version]
        properties:
          version: {type: string}
`, stampKind)
	f := newFleetWith(t, fleetOptions{nodes: 2, actionsYAML: actions, dir: dir})
	if _, err := f.admin.ApplyPlaybook(ctxT(t), napPlaybook); err != nil {
		t.Fatal(err)
	}
	// The core has learnt the kind and its schema.
	testwait.Within(t, 30*time.Second, "node-1 advertising "+stampKind, func() bool {
		ns, err := f.admin.Nodes(ctxT(t), "e2e")
		if err != nil {
			return false
		}
		for _, n := range ns {
			if n.ID == "node-1" && len(n.ArgsSchemas[stampKind]) > 0 {
				return true
			}
		}
		return false
	})
	base := "http://" + f.core.Addr()
	br := newChrome(t)
	shots := screenshotDir(t)
	for _, size := range []struct {
		name string
		w, h int64
	}{{"desktop", 1280, 800}, {"phone", 390, 844}} {
		alice := br.tab(t, size.w, size.h, "UTC")
		signIn(t, alice, base, "/ui/actions", f.secrets["alice"])
		do(t, alice, chromedp.WaitVisible(chromedp.CSS("#new-action-link")), chromedp.Click(chromedp.CSS("#new-action-link")))
		// One cluster: it is chosen, its nodes and kinds listed.
		do(t, alice, chromedp.WaitVisible(chromedp.CSS("#new-action-form")))
		noOverflow(t, alice, "New action at "+size.name)
		do(t, alice, chromedp.SetValue(chromedp.CSS("#na-node"), "node-1"),
			chromedp.SetValue(chromedp.CSS("#na-kind"), stampKind),
			chromedp.SetValue(chromedp.CSS("#na-args"), `{"version": 2}`),
			chromedp.Click(chromedp.CSS("#na-create")))
		waitLoaded(t, alice, "the args error next to the field", `document.querySelector('#na-args-error') !== null`)
		if msg := eval[string](t, alice, `document.querySelector('#na-args-error').textContent`); !strings.Contains(msg, "version") {
			t.Fatalf("the args error says %q, want the field named", msg)
		}
		noOverflow(t, alice, "New action with an error at "+size.name)
		screenshot(t, alice, shots, "new-action-"+size.name)
		list, err := f.admin.Actions(ctxT(t), client.ActionFilter{})
		if err != nil {
			t.Fatal(err)
		}
		before := len(list.Actions)
		do(t, alice, chromedp.SetValue(chromedp.CSS("#na-args"), `{"version": "2.0"}`), chromedp.Click(chromedp.CSS("#na-create")))
		waitLoaded(t, alice, "the new action's page", `location.search.includes('done=created')`)
		id := strings.TrimPrefix(strings.SplitN(location(t, alice), "?", 2)[0], base+"/ui/actions/")
		if !action.ValidID(id) {
			t.Fatalf("landed on %s, not an action's page", location(t, alice))
		}
		if list, err := f.admin.Actions(ctxT(t), client.ActionFilter{}); err != nil || len(list.Actions) != before+1 {
			t.Fatalf("actions after the refused form and the good one: %v, want %d", err, before+1)
		}
		f.approve(id)
		waitLoaded(t, alice, "the action DONE on its page", `(document.querySelector('#action-state') || {}).textContent === 'DONE'`)
		if a := f.waitCore(id, 30*time.Second, action.Done); a.Requester != "alice" || a.Kind != stampKind {
			t.Fatalf("the UI's action: %+v", a)
		}
		noOverflow(t, alice, "the action's page at "+size.name)

		// A schedule, after its preview.
		name := "nap-" + size.name
		do(t, alice, chromedp.Navigate(base+"/ui/schedules"), chromedp.WaitVisible(chromedp.CSS("#new-schedule-link")),
			chromedp.Click(chromedp.CSS("#new-schedule-link")), chromedp.WaitVisible(chromedp.CSS("#new-schedule-form")))
		do(t, alice, chromedp.SendKeys(chromedp.CSS("#ns-name"), name),
			chromedp.SetValue(chromedp.CSS("#ns-cluster"), "e2e"),
			chromedp.SetValue(chromedp.CSS("#ns-playbook"), "nap"),
			chromedp.SetValue(chromedp.CSS("#ns-params"), "node=node-2"),
			chromedp.SendKeys(chromedp.CSS("#ns-cron"), "15 3 * * *"),
			chromedp.SendKeys(chromedp.CSS("#ns-timezone"), "Asia/Tokyo"),
			chromedp.Click(chromedp.CSS("#ns-preview")))
		waitLoaded(t, alice, "the preview", `document.querySelectorAll('#ns-next li').length === 5`)
		shown := eval[[]string](t, alice, `[...document.querySelectorAll('#ns-next li')].map(l => l.textContent)`)
		for _, s := range shown {
			if !strings.Contains(s, "03:15 JST") {
				t.Fatalf("the preview shows %q, want 03:15 Tokyo time", shown)
			}
		}
		if _, err := f.admin.Schedule(ctxT(t), name); err == nil {
			t.Fatal("the preview stored the schedule")
		}
		noOverflow(t, alice, "New schedule with its preview at "+size.name)
		screenshot(t, alice, shots, "new-schedule-"+size.name)
		do(t, alice, chromedp.Click(chromedp.CSS("#ns-create")))
		waitLoaded(t, alice, "the new schedule's page", `location.search.includes('done=created')`)
		sc, err := f.admin.Schedule(ctxT(t), name)
		if err != nil || sc.State != "PENDING_APPROVE" || sc.Timezone != "Asia/Tokyo" || sc.Params["node"] != "node-2" {
			t.Fatalf("the UI's schedule: %+v %v", sc, err)
		}

		// Cancel an action waiting for approval, with a reason.
		waiting := f.create("node-2", "muster.io/debug.sleep", `{"seconds":1}`)
		do(t, alice, chromedp.Navigate(base+"/ui/actions/"+waiting.ID), chromedp.WaitVisible(chromedp.CSS("#action-cancel")),
			chromedp.SendKeys(chromedp.CSS("#reason-c"), "wrong node"), chromedp.Click(chromedp.CSS("#action-cancel")))
		waitLoaded(t, alice, "the cancelled action", `(document.querySelector('#action-state') || {}).textContent === 'CANCELLED'`)
		noOverflow(t, alice, "the cancelled action's page at "+size.name)
		got := f.waitCore(waiting.ID, 10*time.Second, action.Cancelled)
		if got.StateReason != "wrong node" {
			t.Fatalf("the cancelled action's reason is %q", got.StateReason)
		}
	}
}
