package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/musterhq/muster/shared/action"
	"github.com/musterhq/muster/shared/testwait"
	"github.com/musterhq/muster/shared/wire"
)

// napPlaybook sleeps on one node chosen from an enum, for an int of
// seconds; note and loud only show that every type gets its field (the
// target uses them, rendering nothing, since every parameter must be used).
const napPlaybook = `name: nap
description: sleeps on one node
params:
  - {name: seconds, type: int, default: 1, description: how long to sleep}
  - {name: node, type: enum, values: [node-1, node-2]}
  - {name: note, type: string, default: "why not"}
  - {name: loud, type: bool, default: false}
stages:
  - name: sleep
    kind: muster.io/debug.sleep
    args: {seconds: "{{ .seconds }}"}
    target: {nodes: ['{{ .node }}{{ if .loud }}{{ end }}{{ if eq .note "" }}{{ end }}']}
`

// brokenHeaders lists the visible column headers of the page with a word
// broken over two lines: each word's text range has more than one line box.
const brokenHeaders = `(() => {
  const bad = [];
  for (const th of document.querySelectorAll('th')) {
    const box = (th.closest('thead') || th).getBoundingClientRect();
    if (box.width <= 1 || box.height <= 1) continue; // hidden (the phone layout shows labels instead)
    const w = document.createTreeWalker(th, NodeFilter.SHOW_TEXT);
    for (let n = w.nextNode(); n; n = w.nextNode()) {
      const re = /\S+/g;
      for (let m = re.exec(n.data); m; m = re.exec(n.data)) {
        const r = document.createRange();
        r.setStart(n, m.index); r.setEnd(n, m.index + m[0].length);
        const tops = new Set([...r.getClientRects()].filter(x => x.width > 0).map(x => Math.round(x.top)));
        if (tops.size > 1) bad.push(th.textContent.trim());
      }
    }
  }
  return bad;
})()`

// brokenCells lists the visible table cells and facts whose id, name,
// kind or number is broken over two lines inside itself: a word may wrap
// after a separator (- . / : _ @ = ,), never inside a run of letters, and a
// number, a count like 2/2/2 or an address like 127.0.0.1:7421 never at all.
// Each unit's text range must lie on one line box.
const brokenCells = `(() => {
  const bad = [];
  const numeric = /^[\d.,:\/%×+-]+$/;
  for (const cell of document.querySelectorAll('td, dd')) {
    const box = cell.getBoundingClientRect();
    if (box.width <= 1 || box.height <= 1) continue;
    const w = document.createTreeWalker(cell, NodeFilter.SHOW_TEXT);
    for (let n = w.nextNode(); n; n = w.nextNode()) {
      if (n.parentElement.closest('pre, textarea, script, style')) continue; // output keeps its own lines
      const words = /\S+/g;
      for (let m = words.exec(n.data); m; m = words.exec(n.data)) {
        const units = numeric.test(m[0]) ? [[m[0], 0]] : [...m[0].matchAll(/[^\-.\/:_@=,]+/g)].map(u => [u[0], u.index]);
        for (const [u, at] of units) {
          if (u.length < 2) continue;
          const r = document.createRange();
          r.setStart(n, m.index + at); r.setEnd(n, m.index + at + u.length);
          const tops = new Set([...r.getClientRects()].filter(x => x.width > 0).map(x => Math.round(x.top)));
          if (tops.size > 1) bad.push(m[0]);
        }
      }
    }
  }
  return [...new Set(bad)];
})()`

// forbiddenLinks fetches every link of the page into the UI and lists those
// answering 403: a person is never led to a Forbidden page.
const forbiddenLinks = `Promise.all([...new Set([...document.querySelectorAll('a[href^="/ui/"]')].map(a => a.getAttribute('href')))]
  .filter(h => !h.startsWith('/ui/static/'))
  .map(h => fetch(h, {credentials: 'same-origin'}).then(r => r.status === 403 ? h : '')))
  .then(l => l.filter(Boolean))`

// evalAwait evaluates js, a promise of strings, and waits for it.
func evalAwait(t *testing.T, ctx context.Context, js string) []string {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](js, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatalf("evaluate %s: %v", js, err)
	}
	return v
}

// TestWebUIPages drives the Dashboard, the Node page and the Playbooks
// pages in a real headless Chromium against a real core and agents: an
// operator drains a node from its page and the budget holds an action; the
// Dashboard lists the action live once it runs; an operator starts a
// playbook through its typed form and an approver approves it to DONE; every
// page at 1280×800 and 390×844 has no column header broken inside a word,
// no link to a Forbidden page, relative times with the local time on hover,
// and on a phone its filters folded. Screenshots go to screenshotDir.
func TestWebUIPages(t *testing.T) {
	t.Parallel()
	f := newFleetWith(t, fleetOptions{nodes: 2,
		clusterYAML: "    budget:\n      max_unavailable: 1\n",
		coreExtra:   "kinds:\n  - {kind: muster.io/debug.sleep, disruptive: true}\n"})
	f.token("vera", "viewer")
	base := "http://" + f.core.Addr()
	br := newChrome(t)
	shots := screenshotDir(t)
	nodePage := "/ui/clusters/e2e/nodes/node-1"

	// Alice, an operator, drains node-1 from its page with a reason.
	alice := br.tab(t, 1280, 800, "Europe/Paris")
	signIn(t, alice, base, nodePage, f.secrets["alice"])
	do(t, alice, chromedp.WaitVisible(chromedp.CSS("#drain-reason")),
		chromedp.SendKeys(chromedp.CSS("#drain-reason"), "kernel <update>"),
		chromedp.Click(chromedp.CSS("form.drain button")))
	waitLoaded(t, alice, "the drained node's page", `document.querySelector('#node-status .health-drained') !== null`)
	if cause := eval[string](t, alice, `document.querySelector('#node-cause').textContent`); !strings.Contains(cause, "Drained by alice: kernel <update>") {
		t.Fatalf("the node page says %q", cause)
	}
	screenshot(t, alice, shots, "ui-node")
	n, err := f.admin.Nodes(ctxT(t), "e2e")
	if err != nil {
		t.Fatal(err)
	}
	for _, node := range n {
		if node.ID == "node-1" && (!node.Drained || node.DrainReason != "kernel <update>") {
			t.Fatalf("node-1 after the UI's drain: %+v", node)
		}
	}

	// Bob, an approver, watches the Dashboard.
	bob := br.tab(t, 1280, 800, "UTC")
	signIn(t, bob, base, "/ui/", f.secrets["bob"])
	do(t, bob, chromedp.WaitVisible(chromedp.CSS("#dash-running")))
	waitJS(t, bob, "bob's live stream open", `document.querySelector('main').getAttribute('data-live-open') === '1'`)
	if loc := location(t, bob); !strings.HasSuffix(loc, "/ui/dashboard") {
		t.Fatalf("the landing page is %s, want the Dashboard", loc)
	}

	// With node-1 drained the budget (1) is used up: a sleep on node-2 is
	// held, and the Clusters page and the Dashboard say so.
	a := f.create("node-2", "muster.io/debug.sleep", `{"seconds":3}`)
	waitJS(t, bob, "the action waiting for bob, live", fmt.Sprintf(`document.querySelector('#dash-waiting [data-action="%s"]') !== null`, a.ID))
	f.approve(a.ID)
	testwait.Within(t, 20*time.Second, "the action held by the budget", func() bool {
		r, err := f.admin.Action(ctxT(t), a.ID)
		return err == nil && r.State == action.PendingSchedule && strings.HasPrefix(r.StateReason, "held by the disruption budget")
	})
	do(t, alice, chromedp.Navigate(base+"/ui/clusters"))
	waitLoaded(t, alice, "the budget on the Clusters page", `document.querySelector('.budget-held') !== null`)
	if line := eval[string](t, alice, `document.querySelector('.budget-line').textContent`); !strings.Contains(line, "1 of 1") || !strings.Contains(line, "1 action held") {
		t.Fatalf("the Clusters page's budget line: %q", line)
	}
	waitJS(t, bob, "the budget held on the Dashboard", `(document.querySelector('#dash-budgets .budget-held') || {}).textContent === '1 action held'`)

	// Alice undrains node-1 from its page: the held action runs, and Bob's
	// Dashboard lists it running without a reload.
	do(t, alice, chromedp.Navigate(base+nodePage), chromedp.WaitVisible(chromedp.CSS("form.undrain button")),
		chromedp.Click(chromedp.CSS("form.undrain button")))
	waitLoaded(t, alice, "the undrained node", `document.querySelector('#node-status .health-up') !== null`)
	waitJS(t, bob, "the running action on the Dashboard, live", fmt.Sprintf(`document.querySelector('#dash-running [data-action="%s"]') !== null`, a.ID))
	if eval[string](t, bob, `document.querySelector('main').getAttribute('data-refreshed') || ''`) == "" {
		t.Fatal("the Dashboard changed without a live refresh")
	}
	screenshot(t, bob, shots, "ui-dashboard")
	f.waitCore(a.ID, 30*time.Second, action.Done)

	// Alice starts the playbook through its typed form; Bob approves the
	// run from its page and it reaches DONE.
	if _, err := f.admin.ApplyPlaybook(ctxT(t), napPlaybook); err != nil {
		t.Fatal(err)
	}
	do(t, alice, chromedp.Navigate(base+"/ui/playbooks"), chromedp.WaitVisible(chromedp.CSS(`tr[data-playbook="nap"] a`)),
		chromedp.Click(chromedp.CSS(`tr[data-playbook="nap"] a`)), chromedp.WaitVisible(chromedp.CSS("#plan-cluster")))
	if ty := eval[[]string](t, alice, `['#param-seconds', '#param-node', '#param-note', '#param-loud'].map(s => document.querySelector(s).type)`); strings.Join(ty, ",") != "number,select-one,text,checkbox" {
		t.Fatalf("the plan form's fields are %v, want number, select, text, checkbox", ty)
	}
	do(t, alice, chromedp.SetValue(chromedp.CSS("#plan-cluster"), "e2e"),
		chromedp.SetValue(chromedp.CSS("#param-seconds"), "1"),
		chromedp.SetValue(chromedp.CSS("#param-node"), "node-2"),
		chromedp.Click(chromedp.CSS("#param-loud")),
		chromedp.Click(chromedp.CSS("#plan-button")))
	waitLoaded(t, alice, "the plan", `document.querySelector('#start-button') !== null`)
	digest := eval[string](t, alice, `document.querySelector('.start-form input[name=digest]').value`)
	if args := eval[string](t, alice, `document.querySelector('table.plan-children pre.args').textContent`); !strings.Contains(args, `"seconds": 1`) {
		t.Fatalf("the plan's args are %q, want seconds as an int", args)
	}
	screenshot(t, alice, shots, "ui-playbooks")
	do(t, alice, chromedp.Click(chromedp.CSS("#start-button")))
	waitLoaded(t, alice, "the started run's page", `document.querySelector('#run-state') !== null`)
	runID := strings.TrimPrefix(strings.SplitN(location(t, alice), "?", 2)[0], base+"/ui/runs/")
	run, err := f.admin.Run(ctxT(t), runID)
	if err != nil || run.Playbook != "nap" || run.Digest != digest || run.Requester != "alice" {
		t.Fatalf("the started run: %+v %v", run, err)
	}
	do(t, bob, chromedp.Navigate(base+"/ui/runs/"+runID), chromedp.WaitVisible(chromedp.CSS(`form[action$="/approve"] button`)),
		chromedp.Click(chromedp.CSS(`form[action$="/approve"] button`)))
	waitLoaded(t, bob, "the run DONE", `(document.querySelector('#run-state') || {}).textContent === 'DONE'`)

	// A run that fails says why on its page, and its progress bar has the
	// colour of FAILED.
	failing, err := f.alice.CreateRun(ctxT(t), &wire.CreateRunRequest{ClusterID: "e2e", Stages: []wire.StageSpec{
		{Name: "break", Kind: "muster.io/debug.fail", Args: json.RawMessage(`{"message":"disk full"}`),
			Target: wire.Target{Nodes: []string{"node-1"}}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.bob.ApproveRun(ctxT(t), failing.ID, failing.Digest); err != nil {
		t.Fatal(err)
	}
	var last string
	testwait.Within(t, 30*time.Second, "the failing run FAILED", func() bool {
		r, err := f.admin.Run(ctxT(t), failing.ID)
		if err == nil {
			last = r.State + " " + r.StateReason
		}
		return err == nil && r.State == "FAILED"
	})
	t.Logf("failing run: %s", last)
	do(t, alice, chromedp.Navigate(base+"/ui/runs/"+failing.ID))
	waitLoaded(t, alice, "the failed run's page", `(document.querySelector('#run-state') || {}).textContent === 'FAILED'`)
	waitLoaded(t, alice, "why it failed", `document.querySelector('#run-why') !== null`)
	if why := eval[string](t, alice, `document.querySelector('#run-why').textContent`); !strings.Contains(why, "This run failed") || !strings.Contains(why, "break") {
		t.Fatalf("the failed run says %q", why)
	}
	colours := eval[[]string](t, alice, `[getComputedStyle(document.querySelector('.progress.is-failed progress')).accentColor,
		getComputedStyle(document.querySelector('#run-state .state')).color]`)
	if colours[0] != colours[1] || colours[0] != "rgb(180, 35, 24)" {
		t.Fatalf("the failed run's progress bar is %s and its state %s, want both the colour of FAILED", colours[0], colours[1])
	}

	// A run with long stage names waits for approval, so that the lists
	// have wide rows that squeeze their narrow columns.
	if _, err := f.alice.CreateRun(ctxT(t), &wire.CreateRunRequest{ClusterID: "e2e", Stages: []wire.StageSpec{
		{Name: "ping-every-node-of-the-cluster-first", Kind: "muster.io/debug.ping", Target: wire.Target{All: true}},
		{Name: "then-sleep-on-every-node-one-at-a-time", Kind: "muster.io/debug.sleep", Args: json.RawMessage(`{"seconds":1}`),
			Target: wire.Target{All: true}, DependsOn: []string{"ping-every-node-of-the-cluster-first"}},
	}}); err != nil {
		t.Fatal(err)
	}

	// An approved schedule, for the Schedules pages.
	sched, err := f.alice.ApplySchedule(ctxT(t), &wire.CreateScheduleRequest{Name: "nap-nightly", Cluster: "e2e", Playbook: "nap",
		Cron: "0 2 * * *", Timezone: "Europe/Berlin", Params: map[string]string{"node": "node-1"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.bob.ApproveSchedule(ctxT(t), sched.Name, sched.Digest); err != nil {
		t.Fatal(err)
	}

	// Every page at both sizes, as a viewer (the fewest buttons) and as the
	// operator (the most forms).
	pages := []struct{ name, path, ready string }{
		{"dashboard", "/ui/dashboard", "#dash-failed"},
		{"node", nodePage, "#node-status"},
		{"playbooks", "/ui/playbooks", `tr[data-playbook="nap"]`},
		{"playbook", "/ui/playbooks/nap?plan=1&version=1&cluster=e2e&p.node=node-1", "#plan"},
		{"clusters", "/ui/clusters", "table.list"},
		{"approvals", "/ui/approvals", "main h1"},
		{"actions", "/ui/actions", "table.list"},
		{"action", "/ui/actions/" + a.ID, "#action-state"},
		{"runs", "/ui/runs", "table.runs"},
		{"run", "/ui/runs/" + runID, "#run-state"},
		{"run-failed", "/ui/runs/" + failing.ID, "#run-why"},
		{"events", "/ui/events", "main h1"},
		{"schedules", "/ui/schedules", `tr[data-schedule="nap-nightly"]`},
		{"schedule", "/ui/schedules/nap-nightly", "#sc-next-h"},
	}
	for _, who := range []string{"vera", "alice"} {
		for _, size := range []struct {
			name string
			w, h int64
		}{{"desktop", 1280, 800}, {"phone", 390, 844}} {
			ctx := br.tab(t, size.w, size.h, "Asia/Tokyo")
			signIn(t, ctx, base, "/ui/dashboard", f.secrets[who])
			do(t, ctx, chromedp.WaitVisible(chromedp.CSS("#dash-running")))
			for _, p := range pages {
				if err := chromedp.Do(ctx, chromedp.Navigate(base+p.path), chromedp.WaitVisible(chromedp.CSS(p.ready))); err != nil {
					t.Fatalf("%s as %s at %s: %v", p.name, who, size.name, err)
				}
				waitJS(t, ctx, "local times", `!document.querySelector('time') || document.querySelector('time[data-local]')`)
				if bad := eval[[]string](t, ctx, brokenHeaders); len(bad) > 0 {
					t.Errorf("%s at %s as %s: headers broken inside a word: %q", p.name, size.name, who, bad)
				}
				if bad := eval[[]string](t, ctx, brokenCells); len(bad) > 0 {
					t.Errorf("%s at %s as %s: ids, names or numbers broken inside themselves: %q", p.name, size.name, who, bad)
				}
				if tm := eval[[]string](t, ctx, `[...document.querySelectorAll('time[data-local]')].slice(0, 1).flatMap(e => [e.textContent, e.title])`); len(tm) == 2 &&
					(!strings.HasSuffix(tm[0], " ago") && !strings.HasPrefix(tm[0], "in ") || !strings.Contains(tm[1], "(UTC+09:00)")) {
					t.Errorf("%s: time shown as %q with title %q, want relative with Tokyo time on hover", p.name, tm[0], tm[1])
				}
				if bad := evalAwait(t, ctx, forbiddenLinks); len(bad) > 0 {
					t.Errorf("%s as %s: links to Forbidden pages: %v", p.name, who, bad)
				}
				if who == "vera" && eval[int](t, ctx, `document.querySelectorAll('form[method=post] button:not(.copy)').length - document.querySelectorAll('form.signout button').length`) != 0 {
					t.Errorf("%s shows vera, a viewer, buttons she cannot use", p.name)
				}
				sizes := eval[[]int](t, ctx, `[document.documentElement.scrollWidth, document.documentElement.clientWidth]`)
				if sizes[0] > sizes[1] {
					t.Errorf("%s at %s: scrollWidth %d > clientWidth %d", p.name, size.name, sizes[0], sizes[1])
				}
				if p.name == "actions" {
					open := eval[bool](t, ctx, `document.querySelector('details.filter-box').open`)
					if open != (size.name == "desktop") {
						t.Errorf("at %s the filters are open=%v", size.name, open)
					}
				}
				if who == "alice" {
					screenshot(t, ctx, shots, p.name+"-"+size.name)
				}
			}
		}
	}
	t.Logf("screenshots in %s", shots)
}
