package e2e

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/musterhq/muster/shared/testwait"
	"github.com/musterhq/muster/shared/wire"
)

// recordStates makes the page note every run state its live region shows,
// in window.__states (a state once, in the order seen), and marks the page
// so that a reload would be noticed (window.__loaded).
const recordStates = `(() => {
	window.__loaded = true;
	window.__states = [];
	const note = () => {
		const el = document.querySelector('#run-state');
		const s = el ? el.textContent.trim() : '';
		if (s && window.__states[window.__states.length - 1] !== s) window.__states.push(s);
	};
	note();
	new MutationObserver(note).observe(document.querySelector('#live'), {childList: true, subtree: true});
	return true;
})()`

// TestWebUIRuns is the browser scenario 5 against a real core and
// real agents: alice, an operator, pauses a run from its page with the
// keyboard and resumes it; while it is paused no new child starts; a
// viewer's open page shows PAUSED, then RUNNING, then DONE live, without a
// reload, and has no pause button (a forged resume gets 403). Screenshots of
// the Runs list, a run's page and a run waiting in Approvals at both sizes
// go to screenshotDir.
func TestWebUIRuns(t *testing.T) {
	t.Parallel()
	f := newFleetWith(t, fleetOptions{nodes: 2})
	f.token("vera", "viewer")
	base := "http://" + f.core.Addr()
	br := newChrome(t)
	shots := screenshotDir(t)

	// One stage over both nodes, one at a time: the second child starts
	// only after the first has finished, so a pause made while the first
	// runs holds the second back.
	run, err := f.alice.CreateRun(ctxT(t), &wire.CreateRunRequest{ClusterID: "e2e", Stages: []wire.StageSpec{{
		Name: "rolling-sleep", Kind: "muster.io/debug.sleep", Args: json.RawMessage(`{"seconds":4}`),
		Target: wire.Target{Nodes: []string{"node-1", "node-2"}},
	}}})
	if err != nil || run.State != "PENDING_APPROVE" {
		t.Fatalf("create run: %+v %v", run, err)
	}
	page := "/ui/runs/" + run.ID
	stateOf := func() *wire.Run {
		t.Helper()
		r, err := f.admin.Run(ctxT(t), run.ID)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}

	// Vera, a viewer, watches the run's page.
	vera := br.tab(t, 1280, 800, "UTC")
	signIn(t, vera, base, page, f.secrets["vera"])
	do(t, vera, chromedp.WaitVisible(chromedp.CSS("#run-state")))
	waitJS(t, vera, "vera's live stream open", `document.querySelector('main').getAttribute('data-live-open') === '1'`)
	eval[bool](t, vera, recordStates)

	// Alice opens it too; it waits for approval, so she has no pause button.
	alice := br.tab(t, 1280, 800, "UTC")
	signIn(t, alice, base, page, f.secrets["alice"])
	do(t, alice, chromedp.WaitVisible(chromedp.CSS("#run-state")))
	waitJS(t, alice, "alice's live stream open", `document.querySelector('main').getAttribute('data-live-open') === '1'`)
	if n := eval[int](t, alice, `document.querySelectorAll('#run-pause, form[action$="/approve"]').length`); n != 0 {
		t.Fatalf("alice sees %d pause or approve controls on her run waiting for approval", n)
	}
	if why := eval[string](t, alice, `document.querySelector('main').textContent`); !strings.Contains(why, "another approver must decide") {
		t.Fatal("alice is not told that another approver must decide")
	}

	// Bob approves what he was shown; alice's page turns RUNNING by itself
	// and offers Pause, which she reaches and presses from the keyboard.
	if _, err := f.bob.ApproveRun(ctxT(t), run.ID, run.Digest); err != nil {
		t.Fatal(err)
	}
	waitJS(t, alice, "the pause button, live", `document.querySelector('#run-pause') !== null`)
	if n := eval[int](t, alice, `[...document.querySelectorAll('input:not([type=hidden]), select')]
		.filter(e => !e.labels || e.labels.length === 0).length`); n != 0 {
		t.Fatalf("%d controls of the run's page have no label", n)
	}
	reached := false
	for range 200 {
		do(t, alice, chromedp.KeyEvent(kb.Tab))
		if eval[bool](t, alice, `document.activeElement.id === 'run-pause'`) {
			reached = true
			break
		}
	}
	if !reached {
		t.Fatal("Tab never reaches the pause button")
	}
	if o := eval[string](t, alice, `getComputedStyle(document.activeElement).outlineStyle`); o == "none" || o == "" {
		t.Fatalf("the focused pause button has no visible outline (%q)", o)
	}
	do(t, alice, chromedp.KeyEvent(kb.Enter))
	waitLoaded(t, alice, "PAUSED on alice's page", `document.querySelector('#run-resume') !== null &&
		document.querySelector('#run-state').textContent.includes('PAUSED')`)
	if flash := eval[string](t, alice, `document.querySelector('.flash').textContent`); !strings.Contains(flash, "Paused run "+run.ID) {
		t.Fatalf("no confirmation of the pause: %q", flash)
	}
	waitJS(t, vera, "PAUSED on vera's page", `document.querySelector('#run-state').textContent.includes('PAUSED')`)

	// While paused: the children made before the pause finish, and no new
	// one is made.
	var started int
	testwait.Within(t, browserWait, "the children started before the pause to finish", func() bool {
		r := stateOf()
		started = 0
		for _, c := range r.Children {
			if c.ActionID == "" {
				continue
			}
			started++
			if !c.State.Final() {
				return false
			}
		}
		return started > 0
	})
	if started != 1 {
		t.Fatalf("%d children were started before the pause took hold, want 1", started)
	}
	if err := f.alice.Orchestrate(ctxT(t), "e2e"); err != nil {
		t.Fatal(err)
	}
	waitJS(t, vera, "node-1's cell DONE on vera's page", `(() => {
		const c = document.querySelector('.cell[data-node="node-1"]'); return c && c.dataset.state === 'DONE'; })()`)
	r := stateOf()
	if r.State != "PAUSED" {
		t.Fatalf("the run is %s after a pass, want PAUSED", r.State)
	}
	for _, c := range r.Children {
		if c.NodeID == "node-2" && c.ActionID != "" {
			t.Fatalf("node-2 got child %s while the run was paused", c.ActionID)
		}
	}
	if eval[string](t, vera, `document.querySelector('.cell[data-node="node-2"]').textContent`) != "w2 not started" {
		t.Fatalf("vera's grid shows node-2 as %q", eval[string](t, vera, `document.querySelector('.cell[data-node="node-2"]').textContent`))
	}

	// Vera, a viewer, has no pause, resume or cancel button, and a forged
	// resume with her session's CSRF token gets 403.
	if n := eval[int](t, vera, `document.querySelectorAll('.run-ops button, form[action*="/ui/runs/"]').length`); n != 0 {
		t.Fatalf("vera sees %d run buttons", n)
	}
	if status := forgePost(t, vera, "/ui/runs/"+run.ID+"/resume", true); status != http.StatusForbidden {
		t.Fatalf("vera's forged resume: %d, want 403", status)
	}
	if s := stateOf().State; s != "PAUSED" {
		t.Fatalf("the forged resume changed the run to %s", s)
	}

	// Alice resumes: her page shows RUNNING, then DONE by itself.
	do(t, alice, chromedp.Click(chromedp.CSS("#run-resume")))
	waitLoaded(t, alice, "RUNNING or DONE on alice's page after resuming", `document.querySelector('#run-state') !== null &&
		document.querySelector('.flash') !== null && document.querySelector('.flash').textContent.includes('Resumed run')`)
	eval[bool](t, alice, `window.__loaded = true`)
	waitJS(t, alice, "DONE on alice's page", `document.querySelector('#run-state').textContent.includes('DONE')`)
	if !eval[bool](t, alice, `window.__loaded === true`) {
		t.Fatal("alice's page was reloaded to show DONE")
	}
	waitJS(t, vera, "DONE on vera's page", `document.querySelector('#run-state').textContent.includes('DONE')`)
	if !eval[bool](t, vera, `window.__loaded === true`) {
		t.Fatal("vera's page was reloaded")
	}
	seen := eval[[]string](t, vera, `window.__states`)
	if got := strings.Join(seen, " → "); !strings.HasSuffix(got, "PAUSED → RUNNING → DONE") {
		t.Fatalf("vera's page showed %s; want it to end PAUSED → RUNNING → DONE", got)
	}
	if n := eval[int](t, vera, `document.querySelectorAll('.cell[data-state="DONE"] a[href^="/ui/actions/"]').length`); n != 2 {
		t.Fatalf("%d grid cells link a DONE child, want 2", n)
	}
	if s := stateOf().State; s != "DONE" {
		t.Fatalf("the core says the run is %s", s)
	}

	t.Run("the Runs list and a run's page at both sizes", func(t *testing.T) {
		// Another run waits for approval, with two stages, so that the
		// list shows more than one state.
		if _, err := f.alice.CreateRun(ctxT(t), &wire.CreateRunRequest{ClusterID: "e2e", Stages: []wire.StageSpec{
			{Name: "ping", Kind: "muster.io/debug.ping", Target: wire.Target{All: true}},
			{Name: "sleep", Kind: "muster.io/debug.sleep", Args: json.RawMessage(`{"seconds":1}`), Target: wire.Target{All: true}},
		}}); err != nil {
			t.Fatal(err)
		}
		for _, size := range []struct {
			name string
			w, h int64
		}{{"desktop", 1280, 800}, {"phone", 390, 844}} {
			ctx := br.tab(t, size.w, size.h, "Europe/Paris")
			signIn(t, ctx, base, "/ui/runs", f.secrets["bob"])
			do(t, ctx, chromedp.WaitVisible(chromedp.CSS("table.runs")))
			for _, p := range []struct{ name, path, ready string }{
				{"runs", "/ui/runs", "table.runs tr[data-run]"},
				{"run", page, "table.grid .cell"},
				{"runs-filtered", "/ui/runs?state=DONE&cluster=e2e", "table.runs tr[data-run]"},
				{"approvals-runs", "/ui/approvals", "li.approval.run button.approve"},
			} {
				if err := chromedp.Do(ctx, chromedp.Navigate(base+p.path), chromedp.WaitVisible(chromedp.CSS(p.ready))); err != nil {
					t.Fatalf("%s at %s: %v", p.name, size.name, err)
				}
				waitJS(t, ctx, "local times", `!document.querySelector('time') || document.querySelector('time[data-local]')`)
				if p.name == "runs-filtered" {
					if n := eval[int](t, ctx, `document.querySelectorAll('table.runs tr[data-run]').length`); n != 1 {
						t.Fatalf("the DONE filter shows %d runs, want 1", n)
					}
					continue
				}
				screenshot(t, ctx, shots, p.name+"-"+size.name)
				sizes := eval[[]int](t, ctx, `[document.documentElement.scrollWidth, document.documentElement.clientWidth]`)
				if sizes[0] > sizes[1] {
					t.Errorf("%s at %s: scrollWidth %d > clientWidth %d", p.name, size.name, sizes[0], sizes[1])
				}
			}
		}
		t.Logf("screenshots in %s", shots)
	})
}
