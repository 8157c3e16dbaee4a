package e2e

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/musterhq/muster/shared/limit"
	"github.com/musterhq/muster/shared/wire"
)

// TestWebUIApproverAbortsAPausedCanary is issue 34's scenario 2, in
// Chromium: a canary of one node pauses the run; bob, an approver, opens
// the run's page and aborts it with a reason, ticking the confirmation.
// The canary node's rollback runs (downgrade to the version its upgrade
// reported), no other node starts, and the run ends ABORTED, its page
// saying so.
func TestWebUIApproverAbortsAPausedCanary(t *testing.T) {
	t.Parallel()
	f := newProcFleet(t, 3)
	base := "http://" + f.core.Addr()
	br := newChrome(t)
	one, none := limit.MustParse("1"), limit.MustParse("0")
	req := &wire.CreateRunRequest{ClusterID: "e2e", Stages: []wire.StageSpec{{
		Name: "upgrade", Target: wire.Target{All: true}, MaxConcurrency: &one, MaxErrors: &none, Canary: 1,
		Steps: []wire.StepSpec{
			{Name: "drain", Kind: "example.com/drain"},
			{Name: "upgrade", Kind: "example.com/upgrade", Args: json.RawMessage(`{"version":"2.0"}`)},
			{Name: "undrain", Kind: "example.com/undrain", When: "always"},
		},
		Rollback: []wire.StepSpec{{Name: "downgrade", Kind: "example.com/downgrade",
			Args: json.RawMessage(`{"version":"{{ .steps.upgrade.outputs.previous }}"}`)}},
	}}}
	r := f.start(t, req)
	if p := f.waitRun(t, r.ID, 60*time.Second, "PAUSED", "DONE", "FAILED", "PARTIAL"); p.State != "PAUSED" ||
		p.PausedFor != wire.PausedCanary {
		t.Fatalf("the run is %s (%s), want PAUSED for its canary", p.State, p.StateReason)
	}
	bob := br.tab(t, 1280, 800, "UTC")
	signIn(t, bob, base, "/ui/runs/"+r.ID, f.secrets["bob"])
	form := fmt.Sprintf(`form[data-abort-run="%s"]`, r.ID)
	do(t, bob, chromedp.WaitVisible(chromedp.CSS(form)),
		chromedp.SendKeys(chromedp.CSS(form+` input[name=reason]`), "p99 latency doubled on node-1"),
		chromedp.Click(chromedp.CSS(form+` input[name=confirm]`)),
		chromedp.Click(chromedp.CSS(form+` button[type=submit]`)))
	waitLoaded(t, bob, "the run's page after the abort", `location.search.includes('done=aborted')`)
	end := f.waitRun(t, r.ID, 90*time.Second, "ABORTED", "DONE", "FAILED", "PARTIAL", "CANCELLED")
	if end.State != "ABORTED" {
		t.Fatalf("the run ended %s (%s), want ABORTED", end.State, end.StateReason)
	}
	var ran []string
	for _, e := range f.executions(t) {
		ran = append(ran, e.node+":"+e.step)
	}
	if got := strings.Join(ran, " "); got != "node-1:drain node-1:upgrade node-1:undrain node-1:downgrade" {
		t.Fatalf("executions %q: want the canary's steps, then its rollback alone", got)
	}
	for _, k := range f.children(t, r.ID) {
		if k.Step == "downgrade" && string(k.Args) != `{"version":"1.0-node-1"}` {
			t.Fatalf("the rollback ran with %s, want the version node-1's upgrade reported", k.Args)
		}
	}
	// The page shown after the abort was rendered before the run ended;
	// its live stream starts after the event it was rendered from, so it
	// says ABORTED without being opened again, even when the run ended
	// before the stream opened.
	waitLoaded(t, bob, "the page saying ABORTED", `(document.querySelector('#run-state') || {}).textContent === 'ABORTED'`)
	if why := eval[string](t, bob, `(document.querySelector('#run-why') || {}).textContent || ''`); !strings.Contains(why, "aborted") ||
		!strings.Contains(why, "p99 latency doubled on node-1") {
		t.Fatalf("the page of the aborted run says %q", why)
	}
}
