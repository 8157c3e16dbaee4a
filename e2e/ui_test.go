package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/musterhq/muster/shared/action"
	"github.com/musterhq/muster/shared/client"
	"github.com/musterhq/muster/shared/testwait"
	"github.com/musterhq/muster/shared/wire"
)

// browserWait bounds every wait in the browser tests: generous, since the
// machine may be loaded; the waits end as soon as their condition holds.
const browserWait = 60 * time.Second

// chrome is one headless Chromium shared by the subtests of a test; each tab
// gets its own browser context (its own cookies), like a separate person.
type chrome struct {
	t   *testing.T
	ctx context.Context
}

// newChrome starts Debian's chromium (installed by .ci/run) headless. The
// flags keep it from reaching for the network, which has none here.
func newChrome(t *testing.T) *chrome {
	t.Helper()
	path := ""
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			path = p
			break
		}
	}
	if path == "" {
		t.Fatal("no chromium: install it (apt-get install -y chromium; .ci/run does)")
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()),
	)
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(alloc)
	t.Cleanup(func() { cancel(); cancelAlloc() })
	if err := chromedp.Do(ctx); err != nil { // starts the browser
		t.Fatalf("start chromium: %v", err)
	}
	return &chrome{t: t, ctx: ctx}
}

// tab opens a tab of w×h pixels in a fresh browser context, in time zone tz.
func (c *chrome) tab(t *testing.T, w, h int64, tz string) context.Context {
	t.Helper()
	ctx, cancel := chromedp.NewContext(c.ctx, chromedp.WithNewBrowserContext())
	t.Cleanup(cancel)
	ctx, cancelT := context.WithTimeout(ctx, 3*browserWait)
	t.Cleanup(cancelT)
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(w, h)); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Call(ctx, emulation.SetTimezoneOverride, emulation.SetTimezoneOverrideParams{TimezoneID: tz}); err != nil {
		t.Fatal(err)
	}
	return ctx
}

// sameUserTab opens another tab of w×h pixels in the browser context of
// parent: the same person, signed in.
func (c *chrome) sameUserTab(t *testing.T, parent context.Context, w, h int64) context.Context {
	t.Helper()
	ctx, cancel := chromedp.NewContext(parent)
	t.Cleanup(cancel)
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(w, h)); err != nil {
		t.Fatal(err)
	}
	return ctx
}

func do(t *testing.T, ctx context.Context, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	if err := chromedp.Do(ctx, steps...); err != nil {
		loc, _ := chromedp.Run(ctx, chromedp.Location())
		t.Fatalf("browser at %s: %v", loc, err)
	}
}

func eval[T any](t *testing.T, ctx context.Context, js string) T {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](js))
	if err != nil {
		t.Fatalf("evaluate %s: %v", js, err)
	}
	return v
}

// waitJS waits until the expression is truthy.
func waitJS(t *testing.T, ctx context.Context, what, js string) {
	t.Helper()
	if _, err := chromedp.Run(ctx, chromedp.Poll[chromedp.Void](js,
		chromedp.WithPollingInterval(50*time.Millisecond), chromedp.WithPollingTimeout(browserWait))); err != nil {
		loc, _ := chromedp.Run(ctx, chromedp.Location())
		t.Fatalf("waiting for %s at %s: %v", what, loc, err)
	}
}

// waitLoaded waits until the expression is true in a loaded document,
// asking from outside the page, so that it survives navigations the page
// makes by itself (a poll inside the page would not).
func waitLoaded(t *testing.T, ctx context.Context, what, js string) {
	t.Helper()
	testwait.Within(t, browserWait, what, func() bool {
		ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.readyState === 'complete' && (`+js+`)`))
		return err == nil && ok
	})
}

func location(t *testing.T, ctx context.Context) string {
	t.Helper()
	loc, err := chromedp.Run(ctx, chromedp.Location())
	if err != nil {
		t.Fatal(err)
	}
	return loc
}

// signIn goes to path, is sent to the sign-in form, types the token and
// submits it.
func signIn(t *testing.T, ctx context.Context, base, path, token string) {
	t.Helper()
	do(t, ctx, chromedp.Navigate(base+path), chromedp.WaitVisible(chromedp.CSS("#token")),
		chromedp.SendKeys(chromedp.CSS("#token"), token), chromedp.Click(chromedp.CSS("form.login button")))
}

// forgePost sends a form POST from the page, as a forged request would, and
// returns its status. withCSRF puts the session's real CSRF token in it.
func forgePost(t *testing.T, ctx context.Context, path string, withCSRF bool) int {
	t.Helper()
	csrf := "''"
	if withCSRF {
		csrf = `document.querySelector('input[name=csrf]').value`
	}
	js := fmt.Sprintf(`fetch(%q, {method: "POST", credentials: "same-origin", redirect: "manual",
		body: new URLSearchParams({csrf: %s, reason: "forged"})}).then(r => r.status)`, path, csrf)
	v, err := chromedp.Run(ctx, chromedp.Evaluate[int](js, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// screenshotDir is where page screenshots go: $MUSTER_SCREENSHOT_DIR, else
// the test's artifact directory (kept with go test -artifacts -outputdir D).
func screenshotDir(t *testing.T) string {
	if d := os.Getenv("MUSTER_SCREENSHOT_DIR"); d != "" {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		return d
	}
	return t.ArtifactDir()
}

func screenshot(t *testing.T, ctx context.Context, dir, name string) {
	t.Helper()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644); err != nil {
		t.Fatal(err)
	}
}

// xssScript is an external kind whose output carries HTML and terminal
// escape sequences.
const xssScript = "#!/bin/sh\nprintf '<script>window.xssOut=1</script>\\033[31mRED\\033[0m <img src=x onerror=\"window.xssImg=1\">\\n'\n"

// TestWebUI drives the web UI in a real headless Chromium against a real
// core and a real agent: the approval flow with live updates, the four-eyes
// rule, roles, CSRF, the phone layout, bad sign-ins, session expiry and
// escaping. Screenshots of every page at both sizes go to screenshotDir.
func TestWebUI(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	script := filepath.Join(dir, "xss.sh")
	if err := os.WriteFile(script, []byte(xssScript), 0o755); err != nil {
		t.Fatal(err)
	}
	f := newFleetWith(t, fleetOptions{nodes: 1, dir: dir,
		actionsYAML: fmt.Sprintf("actions:\n  external:\n    - kind: example.com/xss\n      run: [%q]\n", script)})
	f.token("vera", "viewer")
	base := "http://" + f.core.Addr()
	br := newChrome(t)
	shots := screenshotDir(t)

	create := func(kind, args string) *action.Action {
		t.Helper()
		a, err := f.alice.CreateAction(ctxT(t), &wire.CreateActionRequest{ClusterID: "e2e", NodeID: "node-1",
			Kind: kind, Args: json.RawMessage(args)})
		if err != nil || a.State != action.PendingApprove {
			t.Fatalf("create %s: %+v %v", kind, a, err)
		}
		return a
	}
	stateOf := func(id string) action.State {
		t.Helper()
		a, err := f.admin.Action(ctxT(t), id)
		if err != nil {
			t.Fatal(err)
		}
		return a.State
	}

	t.Run("wrong token gets a message and no session", func(t *testing.T) {
		ctx := br.tab(t, 1280, 800, "UTC")
		signIn(t, ctx, base, "/ui/approvals", "mst_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA")
		do(t, ctx, chromedp.WaitVisible(chromedp.CSS("p.error")))
		if msg := eval[string](t, ctx, `document.querySelector('p.error').textContent`); !strings.Contains(msg, "not accepted") {
			t.Fatalf("the sign-in page says %q", msg)
		}
		do(t, ctx, chromedp.Navigate(base+"/ui/approvals"), chromedp.WaitVisible(chromedp.CSS("#token")))
		if loc := location(t, ctx); !strings.Contains(loc, "/ui/login") {
			t.Fatalf("after a wrong token the approvals page is at %s, want sign-in", loc)
		}
	})

	t.Run("1 bob approves alice's action and watches it reach DONE live", func(t *testing.T) {
		a := create("muster.io/debug.sleep", `{"seconds":1}`)
		ctx := br.tab(t, 1280, 800, "Asia/Tokyo")
		signIn(t, ctx, base, "/ui/", f.secrets["bob"])
		// The Dashboard is the landing page, and lists what waits for bob.
		do(t, ctx, chromedp.WaitVisible(chromedp.CSS(fmt.Sprintf(`#dash-waiting [data-action="%s"]`, a.ID))))
		if loc := location(t, ctx); !strings.HasSuffix(loc, "/ui/dashboard") {
			t.Fatalf("the first page after sign-in is %s, want the Dashboard", loc)
		}
		do(t, ctx, chromedp.Click(chromedp.CSS(`nav a[href="/ui/approvals"]`)))
		item := fmt.Sprintf(`li[data-action="%s"]`, a.ID)
		do(t, ctx, chromedp.WaitVisible(chromedp.CSS(item)))
		// Times are relative, with the absolute time in the viewer's zone on hover.
		waitJS(t, ctx, "local times", `document.querySelector('`+item+` time[data-local]')`)
		tm := eval[[]string](t, ctx, `(() => { const e = document.querySelector('`+item+` time'); return [e.textContent, e.title]; })()`)
		if !strings.HasSuffix(tm[0], " ago") || !strings.Contains(tm[1], "(UTC+09:00)") {
			t.Fatalf("time shown as %q with title %q; want a relative time with Tokyo time on hover", tm[0], tm[1])
		}
		text := eval[string](t, ctx, `document.querySelector('`+item+`').textContent`)
		for _, want := range []string{"muster.io/debug.sleep", "e2e/node-1", "alice", `"seconds": 1`, "Expires"} {
			if !strings.Contains(text, want) {
				t.Fatalf("the approval card lacks %q:\n%s", want, text)
			}
		}
		// Bob opens the action's page in a second tab, then approves it from
		// Approvals: the open page follows it to DONE by itself.
		detail := br.sameUserTab(t, ctx, 1280, 800)
		do(t, detail, chromedp.Navigate(base+"/ui/actions/"+a.ID), chromedp.WaitVisible(chromedp.CSS("#action-state")))
		waitJS(t, detail, "the live stream open", `document.querySelector('main').getAttribute('data-live-open') === '1'`)
		if first := eval[string](t, detail, `window.__loaded = true; document.querySelector('#action-state').textContent`); !strings.Contains(first, "PENDING APPROVE") {
			t.Fatalf("the action's page shows %q before the approval", first)
		}
		do(t, ctx, chromedp.SendKeys(chromedp.CSS(item+` form[action$="/approve"] input[name=reason]`), "looks right"),
			chromedp.Click(chromedp.CSS(item+` button.approve`)),
			chromedp.WaitVisible(chromedp.CSS("#flash-link")))
		if href := eval[string](t, ctx, `document.querySelector('#flash-link').getAttribute('href')`); href != "/ui/actions/"+a.ID {
			t.Fatalf("the confirmation links to %q", href)
		}
		waitJS(t, ctx, "the approved action gone from Approvals", `document.querySelector('`+item+`') === null`)
		waitJS(t, detail, "DONE on the detail page", `document.querySelector('#action-state').textContent.includes('DONE')`)
		if !eval[bool](t, detail, `window.__loaded === true`) {
			t.Fatal("the page was reloaded to show DONE")
		}
		ctx = detail
		hist := eval[string](t, ctx, `document.querySelector('table.history').textContent`)
		if !strings.Contains(hist, "approved: looks right") || !strings.Contains(hist, "bob") {
			t.Fatalf("the history lacks bob's approval with its reason:\n%s", hist)
		}
		if s := stateOf(a.ID); s != action.Done {
			t.Fatalf("the core says %s", s)
		}
	})

	t.Run("2 alice cannot approve her own action", func(t *testing.T) {
		a := create("muster.io/debug.ping", `{}`)
		ctx := br.tab(t, 1280, 800, "UTC")
		signIn(t, ctx, base, "/ui/approvals", f.secrets["alice"])
		item := fmt.Sprintf(`li[data-action="%s"]`, a.ID)
		do(t, ctx, chromedp.WaitVisible(chromedp.CSS(item)))
		if n := eval[int](t, ctx, `document.querySelectorAll('`+item+` form, `+item+` button:not(.copy)').length`); n != 0 {
			t.Fatalf("alice's own request has %d forms or buttons", n)
		}
		if why := eval[string](t, ctx, `document.querySelector('`+item+` .why').textContent`); !strings.Contains(why, "another approver") {
			t.Fatalf("no reason shown for the missing buttons: %q", why)
		}
		if status := forgePost(t, ctx, "/ui/actions/"+a.ID+"/approve", true); status != http.StatusForbidden {
			t.Fatalf("alice's forged approval: %d, want 403", status)
		}
		// The same holds for someone who may approve: carol, operator and
		// approver, sees buttons on alice's request and none on her own.
		sec, err := f.admin.CreateToken(ctxT(t), "carol", []string{"operator", "approver"})
		if err != nil {
			t.Fatal(err)
		}
		carol := client.NewCore(base, sec.Token, &http.Client{Timeout: 10 * time.Second})
		own, err := carol.CreateAction(ctxT(t), &wire.CreateActionRequest{ClusterID: "e2e", NodeID: "node-1", Kind: "muster.io/debug.ping"})
		if err != nil {
			t.Fatal(err)
		}
		cctx := br.tab(t, 1280, 800, "UTC")
		signIn(t, cctx, base, "/ui/approvals", sec.Token)
		ownItem := fmt.Sprintf(`li[data-action="%s"]`, own.ID)
		do(t, cctx, chromedp.WaitVisible(chromedp.CSS(ownItem)), chromedp.WaitVisible(chromedp.CSS(item+" button.approve")))
		if n := eval[int](t, cctx, `document.querySelectorAll('`+ownItem+` button:not(.copy)').length`); n != 0 {
			t.Fatalf("carol's own request has %d buttons", n)
		}
		if status := forgePost(t, cctx, "/ui/actions/"+own.ID+"/approve", true); status != http.StatusForbidden {
			t.Fatalf("carol's forged approval of her own request: %d, want 403", status)
		}
		for _, id := range []string{a.ID, own.ID} {
			if s := stateOf(id); s != action.PendingApprove {
				t.Fatalf("action %s became %s", id, s)
			}
		}
	})

	t.Run("3 a viewer has no approve button and a forged POST gets 403", func(t *testing.T) {
		a := create("muster.io/debug.ping", `{}`)
		ctx := br.tab(t, 1280, 800, "UTC")
		signIn(t, ctx, base, "/ui/approvals", f.secrets["vera"])
		do(t, ctx, chromedp.WaitVisible(chromedp.CSS(fmt.Sprintf(`li[data-action="%s"]`, a.ID))))
		if n := eval[int](t, ctx, `document.querySelectorAll('button.approve, form[action$="/approve"]').length`); n != 0 {
			t.Fatalf("the viewer sees %d approve controls", n)
		}
		if status := forgePost(t, ctx, "/ui/actions/"+a.ID+"/approve", true); status != http.StatusForbidden {
			t.Fatalf("the viewer's forged approval: %d, want 403", status)
		}
		if s := stateOf(a.ID); s != action.PendingApprove {
			t.Fatalf("the action became %s", s)
		}
	})

	t.Run("4 a POST without the CSRF token is refused", func(t *testing.T) {
		a := create("muster.io/debug.ping", `{}`)
		ctx := br.tab(t, 1280, 800, "UTC")
		signIn(t, ctx, base, "/ui/approvals", f.secrets["bob"])
		do(t, ctx, chromedp.WaitVisible(chromedp.CSS(fmt.Sprintf(`li[data-action="%s"] button.approve`, a.ID))))
		if status := forgePost(t, ctx, "/ui/actions/"+a.ID+"/approve", false); status != http.StatusForbidden {
			t.Fatalf("an approval without the CSRF token: %d, want 403", status)
		}
		if s := stateOf(a.ID); s != action.PendingApprove {
			t.Fatalf("the action became %s", s)
		}
	})

	t.Run("6 the phone-sized Approvals page has no horizontal scroll", func(t *testing.T) {
		create("muster.io/debug.sleep", `{"seconds":1,"note":"`+strings.Repeat("a-long-unbroken-word", 12)+`"}`)
		ctx := br.tab(t, 390, 844, "UTC")
		signIn(t, ctx, base, "/ui/approvals", f.secrets["bob"])
		do(t, ctx, chromedp.WaitVisible(chromedp.CSS("li.approval button.approve")))
		sizes := eval[[]int](t, ctx, `[document.documentElement.scrollWidth, document.documentElement.clientWidth]`)
		if sizes[0] > sizes[1] {
			t.Fatalf("scrollWidth %d > clientWidth %d: the page scrolls sideways on a phone", sizes[0], sizes[1])
		}
	})

	t.Run("usable from the keyboard with a visible focus", func(t *testing.T) {
		a := create("muster.io/debug.ping", `{}`)
		ctx := br.tab(t, 1280, 800, "UTC")
		signIn(t, ctx, base, "/ui/approvals", f.secrets["bob"])
		item := fmt.Sprintf(`li[data-action="%s"]`, a.ID)
		do(t, ctx, chromedp.WaitVisible(chromedp.CSS(item+" button.approve")), chromedp.KeyEvent(kb.Tab))
		if cls := eval[string](t, ctx, `document.activeElement.className`); cls != "skip" {
			t.Fatalf("the first Tab focuses %q, want the skip link", cls)
		}
		// Every control has a label.
		if n := eval[int](t, ctx, `[...document.querySelectorAll('input:not([type=hidden]), select')]
			.filter(e => !e.labels || e.labels.length === 0).length`); n != 0 {
			t.Fatalf("%d controls have no label", n)
		}
		// Tab reaches the approve button of the action, and shows where it is.
		reached := false
		for range 200 {
			do(t, ctx, chromedp.KeyEvent(kb.Tab))
			if eval[bool](t, ctx, `document.activeElement.matches('`+item+` button.approve')`) {
				reached = true
				break
			}
		}
		if !reached {
			t.Fatal("Tab never reaches the approve button")
		}
		if o := eval[string](t, ctx, `getComputedStyle(document.activeElement).outlineStyle`); o == "none" || o == "" {
			t.Fatalf("the focused button has no visible outline (%q)", o)
		}
		// A live refresh of the list keeps the focus where it was.
		before := eval[string](t, ctx, `document.querySelector('main').getAttribute('data-refreshed') || ''`)
		newer := create("muster.io/debug.ping", `{}`)
		waitJS(t, ctx, "the list to refresh", `(document.querySelector('main').getAttribute('data-refreshed') || '') !== '`+before+`' &&
			document.querySelector('li[data-action="`+newer.ID+`"]') !== null`)
		if !eval[bool](t, ctx, `document.activeElement.matches('`+item+` button.approve')`) {
			t.Fatalf("after a live refresh the focus is on %s", eval[string](t, ctx, `document.activeElement.outerHTML.slice(0, 120)`))
		}
		// Enter on the focused button approves.
		do(t, ctx, chromedp.KeyEvent(kb.Enter), chromedp.WaitVisible(chromedp.CSS("#flash-link")))
		if s := stateOf(a.ID); s == action.PendingApprove {
			t.Fatal("Enter on the approve button did not approve")
		}
	})

	t.Run("text from commands and people is shown as text", func(t *testing.T) {
		a := create("example.com/xss", `{"note":"<script>window.xssArgs=1</script>\u001b[31mred"}`)
		if _, err := f.bob.Approve(ctxT(t), a.ID); err != nil {
			t.Fatal(err)
		}
		testwait.Within(t, browserWait, "the xss action DONE", func() bool { return stateOf(a.ID) == action.Done })
		ctx := br.tab(t, 1280, 800, "UTC")
		signIn(t, ctx, base, "/ui/actions/"+a.ID, f.secrets["vera"])
		do(t, ctx, chromedp.WaitVisible(chromedp.CSS("pre#action-output")))
		out := eval[string](t, ctx, `document.querySelector('#action-output').textContent`)
		if !strings.Contains(out, `<script>window.xssOut=1</script>\x1b[31mRED\x1b[0m <img src=x onerror="window.xssImg=1">`) {
			t.Fatalf("the output is not shown as text: %q", out)
		}
		args := eval[string](t, ctx, `document.querySelector('pre.args').textContent`)
		if !strings.Contains(args, `<script>window.xssArgs=1</script>`) {
			t.Fatalf("the args are not shown as text: %q", args)
		}
		if n := eval[int](t, ctx, `document.querySelectorAll('main script, main img').length`); n != 0 {
			t.Fatalf("%d script or img elements made it into the page", n)
		}
		if eval[bool](t, ctx, `window.xssOut === 1 || window.xssArgs === 1 || window.xssImg === 1`) {
			t.Fatal("injected script ran")
		}
	})

	t.Run("screenshots of every page at both sizes", func(t *testing.T) {
		create("muster.io/debug.sleep", `{"seconds":30}`)
		for _, size := range []struct {
			name string
			w, h int64
		}{{"desktop", 1280, 800}, {"phone", 390, 844}} {
			ctx := br.tab(t, size.w, size.h, "Europe/Paris")
			do(t, ctx, chromedp.Navigate(base+"/ui/login"), chromedp.WaitVisible(chromedp.CSS("#token")))
			screenshot(t, ctx, shots, "login-"+size.name)
			signIn(t, ctx, base, "/ui/approvals", f.secrets["bob"])
			do(t, ctx, chromedp.WaitVisible(chromedp.CSS("li.approval")))
			for _, p := range []struct{ name, path, ready string }{
				{"approvals", "/ui/approvals", "li.approval"},
				{"actions", "/ui/actions", "table.list"},
				{"action", "", "#action-state"},
				{"clusters", "/ui/clusters", "table.list"},
				{"events", "/ui/events", "table.events"},
			} {
				if p.path == "" {
					do(t, ctx, chromedp.Navigate(base+"/ui/actions"), chromedp.WaitVisible(chromedp.CSS("table.list a")),
						chromedp.Click(chromedp.CSS("table.list a")))
				} else {
					do(t, ctx, chromedp.Navigate(base+p.path))
				}
				do(t, ctx, chromedp.WaitVisible(chromedp.CSS(p.ready)))
				waitJS(t, ctx, "local times", `!document.querySelector('time') || document.querySelector('time[data-local]')`)
				screenshot(t, ctx, shots, p.name+"-"+size.name)
				if p.name == "approvals" && size.name == "desktop" {
					// The first screen only, as docs/web-ui.md shows it.
					png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
					if err != nil {
						t.Fatal(err)
					}
					if err := os.WriteFile(filepath.Join(shots, "approvals-desktop-first-screen.png"), png, 0o644); err != nil {
						t.Fatal(err)
					}
				}
				sizes := eval[[]int](t, ctx, `[document.documentElement.scrollWidth, document.documentElement.clientWidth]`)
				if sizes[0] > sizes[1] {
					t.Errorf("%s at %s: scrollWidth %d > clientWidth %d", p.name, size.name, sizes[0], sizes[1])
				}
			}
		}
		t.Logf("screenshots in %s", shots)
	})
}

// TestWebUISessionExpiry: a session that expires while a page is open sends
// the browser to sign in, and signing in brings it back to that page.
func TestWebUISessionExpiry(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := fmt.Sprintf("data_dir: %s\napi:\n  addr: 127.0.0.1:%d\nui:\n  session_ttl: 3s\n", filepath.Join(dir, "data"), freePort(t))
	path := filepath.Join(dir, "core.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	core := startIn(t, dir, "core", nil, "core", "--config", path)
	admin, err := os.ReadFile(filepath.Join(dir, "data", "admin.token"))
	if err != nil {
		t.Fatal(err)
	}
	ac := client.NewCore("http://"+core.Addr(), strings.TrimSpace(string(admin)), &http.Client{Timeout: 10 * time.Second})
	sec, err := ac.CreateToken(ctxT(t), "vera", []string{"viewer"})
	if err != nil {
		t.Fatal(err)
	}
	base := "http://" + core.Addr()
	br := newChrome(t)
	ctx := br.tab(t, 1280, 800, "UTC")
	page := "/ui/events?type=token.created"
	signIn(t, ctx, base, page, sec.Token)
	do(t, ctx, chromedp.WaitVisible(chromedp.CSS("table.events")))
	if loc := location(t, ctx); loc != base+page && loc != base+"/ui/events?type=token.created" {
		t.Fatalf("after sign-in the browser is at %s, want %s", loc, page)
	}
	// The open page's live stream learns that the session ended and sends
	// the browser to sign in, remembering the page.
	waitLoaded(t, ctx, "the sign-in page after expiry", `location.pathname === '/ui/login' && document.querySelector('#token') !== null`)
	msg := eval[string](t, ctx, `document.querySelector('main').textContent`)
	if !strings.Contains(msg, "Your session has ended") {
		t.Fatalf("the sign-in page does not say why: %s", msg)
	}
	do(t, ctx, chromedp.SendKeys(chromedp.CSS("#token"), sec.Token), chromedp.Click(chromedp.CSS("form.login button")),
		chromedp.WaitVisible(chromedp.CSS("table.events")))
	if loc := location(t, ctx); loc != base+page {
		t.Fatalf("after signing in again the browser is at %s, want %s", loc, base+page)
	}
}

// TestWebUIAcrossReplicas: with two core replicas on one PostgreSQL, a
// session started on one is good on the other (sessions live in the store),
// and an approval made through one replica's page shows live on the
// other's (events reach every replica).
func TestWebUIAcrossReplicas(t *testing.T) {
	t.Parallel()
	f := newHAFleet(t, 2, 1)
	br := newChrome(t)
	r0, r1 := "http://"+f.cores[0].Addr(), "http://"+f.cores[1].Addr()
	a, err := f.client(1, "alice").CreateAction(ctxT(t), &wire.CreateActionRequest{ClusterID: "c1", NodeID: "node-1",
		Kind: "example.com/append", Args: json.RawMessage(`{}`)})
	if err != nil {
		t.Fatal(err)
	}
	ctx := br.tab(t, 1280, 800, "UTC")
	signIn(t, ctx, r0, "/ui/actions/"+a.ID, f.secrets["bob"])
	do(t, ctx, chromedp.WaitVisible(chromedp.CSS("#action-state")))
	waitJS(t, ctx, "the live stream open", `document.querySelector('main').getAttribute('data-live-open') === '1'`)
	eval[bool](t, ctx, `window.__loaded = true`)

	// The same browser on the other replica is signed in already.
	other := br.sameUserTab(t, ctx, 1280, 800)
	item := fmt.Sprintf(`li[data-action="%s"]`, a.ID)
	do(t, other, chromedp.Navigate(r1+"/ui/approvals"), chromedp.WaitVisible(chromedp.CSS(item+" button.approve")))
	if loc := location(t, other); loc != r1+"/ui/approvals" {
		t.Fatalf("replica 1 sent the signed-in browser to %s", loc)
	}
	do(t, other, chromedp.Click(chromedp.CSS(item+" button.approve")), chromedp.WaitVisible(chromedp.CSS("#flash-link")))

	// Replica 0's page follows the action to DONE by itself; passes are
	// nudged through replica 1 (they run on the lease holder).
	n := 0
	testwait.Within(t, browserWait, "DONE on replica 0's page", func() bool {
		if eval[bool](t, ctx, `document.querySelector('#action-state').textContent.includes('DONE')`) {
			return true
		}
		if n++; n%25 == 0 {
			_ = f.client(1, "alice").Orchestrate(ctxT(t), "c1")
		}
		return false
	})
	if !eval[bool](t, ctx, `window.__loaded === true`) {
		t.Fatal("replica 0's page was reloaded to show DONE")
	}
	f.onceEach([]string{a.ID})
}
