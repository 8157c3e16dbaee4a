package e2e

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/musterhq/muster/shared/limit"
	"github.com/musterhq/muster/shared/testwait"
	"github.com/musterhq/muster/shared/wire"
)

// TestWebUIRunSteps drives a procedure through the web UI in Chromium:
// three nodes, drain → upgrade → verify (3 attempts) → undrain (always),
// a rollback from upgrade's outputs, canary 1, on_failure pause. verify
// fails once on node-1 (retried); the canary pauses the run and Approvals
// shows bob, an approver, what promoting continues with a Promote button,
// and alice, who asked, none and why; bob promotes from Approvals. upgrade
// fails on node-3: its undrain and rollback run there, the run pauses on
// its errors, and its page shows each node's steps in order with their
// attempts and outputs, the rollback on node-3 alone, the canary, the
// stage PAUSED and why. The run's page is checked at 1280×800 and 390×844
// (no header broken inside a word, nothing wider than the screen, no link
// to a Forbidden page, no button for a viewer) and shot as ui-run-steps.
func TestWebUIRunSteps(t *testing.T) {
	t.Parallel()
	f := newProcFleet(t, 3)
	f.token("vera", "viewer")
	base := "http://" + f.core.Addr()
	br := newChrome(t)
	shots := screenshotDir(t)

	one, none := limit.MustParse("1"), limit.MustParse("0")
	req := &wire.CreateRunRequest{ClusterID: "e2e", Stages: []wire.StageSpec{{
		Name: "upgrade", Target: wire.Target{All: true}, MaxConcurrency: &one, MaxErrors: &none, OnFailure: "pause", Canary: 1,
		Steps: []wire.StepSpec{
			{Name: "drain", Kind: "example.com/drain"},
			{Name: "upgrade", Kind: "example.com/upgrade", Args: json.RawMessage(`{"version":"2.0"}`)},
			{Name: "verify", Kind: "example.com/verify", Retry: &wire.Retry{Attempts: 3}},
			{Name: "undrain", Kind: "example.com/undrain", When: "always"},
		},
		Rollback: []wire.StepSpec{{Name: "downgrade", Kind: "example.com/downgrade",
			Args: json.RawMessage(`{"version":"{{ .steps.upgrade.outputs.previous }}"}`)}},
	}}}
	f.failTimes(t, "verify", "node-1", 1)
	f.failTimes(t, "upgrade", "node-3", 1)
	r := f.start(t, req)
	paused := f.waitRun(t, r.ID, 60*time.Second, "PAUSED", "DONE", "FAILED", "PARTIAL", "CANCELLED")
	if paused.State != "PAUSED" || paused.PausedFor != wire.PausedCanary {
		t.Fatalf("after the canary the run is %s (%s, paused for %q), want PAUSED for its canary", paused.State, paused.StateReason, paused.PausedFor)
	}

	// Approvals: bob may promote, and reads what it continues; alice,
	// who asked, has no button and reads why.
	bob := br.tab(t, 1280, 800, "UTC")
	signIn(t, bob, base, "/ui/approvals", f.secrets["bob"])
	card := fmt.Sprintf(`[data-paused-run="%s"]`, r.ID)
	do(t, bob, chromedp.WaitVisible(chromedp.CSS(card)))
	if text := eval[string](t, bob, `document.querySelector('`+card+` .continues').textContent`); !strings.Contains(text, "Promoting lets stage upgrade go on past its canary: 2 of its 3 nodes remain.") ||
		!strings.Contains(text, "1 node done, 0 failed") {
		t.Fatalf("bob's card says %q", text)
	}
	alice := br.tab(t, 1280, 800, "UTC")
	signIn(t, alice, base, "/ui/approvals", f.secrets["alice"])
	do(t, alice, chromedp.WaitVisible(chromedp.CSS(card)))
	// Alice, who asked, may abort her run, not promote it.
	if n := eval[int](t, alice, `document.querySelectorAll('`+card+` form:not([action$="/abort"])').length`); n != 0 {
		t.Fatalf("alice, who asked, has %d forms besides Abort on the paused run's card", n)
	}
	if why := eval[string](t, alice, `document.querySelector('`+card+` .why').textContent`); !strings.Contains(why, "You may not promote this run") {
		t.Fatalf("alice reads %q", why)
	}
	do(t, bob, chromedp.SendKeys(chromedp.CSS(card+` form[action$="/promote"] input[name=reason]`), "the canary is healthy"),
		chromedp.Click(chromedp.CSS(card+` form[action$="/promote"] button`)))
	waitLoaded(t, bob, "Approvals after the promote", `location.search.includes('done=promoted')`)

	// node-3's upgrade fails: its undrain and rollback run, and the run
	// pauses on its errors.
	var end *wire.Run
	testwait.Within(t, 90*time.Second, "the run past its canary, paused or ended", func() bool {
		var err error
		end, err = f.admin.Run(ctxT(t), r.ID)
		return err == nil && (end.State == "PAUSED" && end.PausedFor != wire.PausedCanary ||
			end.State == "DONE" || end.State == "FAILED" || end.State == "PARTIAL" || end.State == "CANCELLED")
	})
	if end.State != "PAUSED" || end.PausedFor != wire.PausedErrors || end.Stages[0].State != "PAUSED" {
		t.Fatalf("after node-3's failure the run is %s (%s, %q), stage %s; want PAUSED by errors, the stage PAUSED",
			end.State, end.StateReason, end.PausedFor, end.Stages[0].State)
	}

	page := "/ui/runs/" + r.ID
	do(t, bob, chromedp.Navigate(base+page))
	waitLoaded(t, bob, "the run's page", `(document.querySelector('#run-state') || {}).textContent === 'PAUSED'`)
	steps := func(node string) []string {
		return eval[[]string](t, bob, fmt.Sprintf(`[...document.querySelectorAll('ol.steps[data-node="%s"] li.step')].map(li =>
			li.dataset.step + ':' + li.dataset.state + ':' + ((li.querySelector('.attempt') || {}).textContent || ''))`, node))
	}
	if got := strings.Join(steps("node-1"), " "); got != "drain:DONE:attempt 1 of 1 upgrade:DONE:attempt 1 of 1 verify:FAILED:attempt 1 of 3 verify:DONE:attempt 2 of 3 undrain:DONE:attempt 1 of 1" {
		t.Errorf("node-1's steps: %s", got)
	}
	if got := strings.Join(steps("node-3"), " "); got != "drain:DONE:attempt 1 of 1 upgrade:FAILED:attempt 1 of 1 verify::attempt 1 of 3 undrain:DONE:attempt 1 of 1" &&
		got != "drain:DONE:attempt 1 of 1 upgrade:FAILED:attempt 1 of 1 verify:: undrain:DONE:attempt 1 of 1" {
		t.Errorf("node-3's steps: %s", got)
	}
	if rb := eval[[]string](t, bob, `[...document.querySelectorAll('ol.steps.rollback li.step')].map(li => li.closest('td').querySelector('.cell').dataset.node + ':' + li.dataset.step + ':' + li.dataset.state + ':' + li.querySelector('pre.step-args').textContent.replace(/\s+/g, ''))`); len(rb) != 1 || rb[0] != `node-3:downgrade:DONE:{"version":"1.0-node-3"}` {
		t.Errorf("rollbacks shown: %q, want node-3's downgrade to 1.0-node-3 alone", rb)
	}
	if out := eval[string](t, bob, `document.querySelector('ol.steps[data-node="node-2"] li[data-step="upgrade"] pre.step-outputs').textContent`); !strings.Contains(out, `"previous": "1.0-node-2"`) {
		t.Errorf("node-2's upgrade outputs: %q", out)
	}
	if c := eval[[]string](t, bob, `[...document.querySelectorAll('.tag.canary')].map(e => e.closest('td').querySelector('.cell').dataset.node)`); strings.Join(c, ",") != "node-1" {
		t.Errorf("canary marks on %v, want node-1", c)
	}
	if why := eval[string](t, bob, `document.querySelector('#run-why').textContent`); !strings.Contains(why, "This run is paused: stage upgrade") {
		t.Errorf("the run's page says %q", why)
	}
	if eval[int](t, bob, `document.querySelectorAll('#run-resume').length`) != 1 {
		t.Error("bob, an approver, has no Resume on a run paused by its errors")
	}
	colours := eval[[]string](t, bob, `[getComputedStyle(document.querySelector('.progress.is-paused progress')).accentColor,
		getComputedStyle(document.querySelector('#run-state .state')).color]`)
	if colours[0] != colours[1] {
		t.Errorf("the paused stage's bar is %s and the run's state %s, want the colour of PAUSED in both", colours[0], colours[1])
	}
	screenshot(t, bob, shots, "ui-run-steps")

	for _, who := range []string{"vera", "alice"} {
		for _, size := range []struct {
			name string
			w, h int64
		}{{"desktop", 1280, 800}, {"phone", 390, 844}} {
			ctx := br.tab(t, size.w, size.h, "Asia/Tokyo")
			signIn(t, ctx, base, page, f.secrets[who])
			do(t, ctx, chromedp.WaitVisible(chromedp.CSS("ol.steps")))
			if bad := eval[[]string](t, ctx, brokenHeaders); len(bad) > 0 {
				t.Errorf("run page at %s as %s: headers broken inside a word: %q", size.name, who, bad)
			}
			if bad := eval[[]string](t, ctx, brokenCells); len(bad) > 0 {
				t.Errorf("run page at %s as %s: ids, names or numbers broken inside themselves: %q", size.name, who, bad)
			}
			if bad := evalAwait(t, ctx, forbiddenLinks); len(bad) > 0 {
				t.Errorf("run page as %s: links to Forbidden pages: %v", who, bad)
			}
			if who == "vera" && eval[int](t, ctx, `document.querySelectorAll('form[method=post] button:not(.copy)').length - document.querySelectorAll('form.signout button').length`) != 0 {
				t.Errorf("the run page shows vera, a viewer, buttons she cannot use")
			}
			sizes := eval[[]int](t, ctx, `[document.documentElement.scrollWidth, document.documentElement.clientWidth]`)
			if sizes[0] > sizes[1] {
				t.Errorf("run page at %s: scrollWidth %d > clientWidth %d", size.name, sizes[0], sizes[1])
			}
			if who == "alice" {
				screenshot(t, ctx, shots, "run-steps-"+size.name)
			}
		}
	}
	t.Logf("screenshots in %s", shots)
}
