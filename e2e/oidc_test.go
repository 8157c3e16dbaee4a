package e2e

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/musterhq/muster/e2e/oidcprovider/idp"
	"github.com/musterhq/muster/shared/action"
	"github.com/musterhq/muster/shared/client"
	"github.com/musterhq/muster/shared/testwait"
	"github.com/musterhq/muster/shared/wire"
)

var (
	providerOnce sync.Once
	providerBin  string
	providerErr  error
)

// providerBinary builds the test OpenID provider (e2e/oidcprovider) once.
func providerBinary(t *testing.T) string {
	t.Helper()
	providerOnce.Do(func() {
		dir, err := os.MkdirTemp("", "muster-e2e-idp-")
		if err != nil {
			providerErr = err
			return
		}
		providerBin = filepath.Join(dir, "oidcprovider")
		out, err := exec.Command("go", "build", "-o", providerBin, "./oidcprovider").CombinedOutput()
		if err != nil {
			providerErr = fmt.Errorf("build the provider: %v\n%s", err, out)
		}
	})
	if providerErr != nil {
		t.Fatal(providerErr)
	}
	return providerBin
}

// ssoSetup is a core with single sign-on through the test provider, each
// its own process.
type ssoSetup struct {
	t      *testing.T
	dir    string
	users  string
	issuer string
	base   string // the core's URL
	core   *proc
	admin  *client.Core
}

var listeningRE = regexp.MustCompile(`^listening on (http://\S+)$`)

// dbOncallConfig is the core configuration of a fleet of one cluster,
// prod-db-1, with the agent at addr as its node p-1: team db, mapped to the
// group claim db-oncall, holds approver on prod-db-* (issue 32, scenario
// 3), and dana herself viewer on staging-* (so that without the group she
// still uses the pages, and sees nothing of prod-db-1).
func dbOncallConfig(addr string) string {
	return fmt.Sprintf(`clusters:
  - id: prod-db-1
    nodes:
      - {id: p-1, addr: %q}
orchestrate:
  interval: 1s
teams:
  - name: db
    groups: [db-oncall]
grants:
  - team: db
    role: approver
    clusters: "prod-db-*"
  - person: dana@example.com
    role: viewer
    clusters: "staging-*"
`, addr)
}

// dbOncall starts the agent of node p-1 in cluster prod-db-1 and a core
// with single sign-on configured by dbOncallConfig (provider flags as
// newSSOWith), and waits for the node to be UP; it returns the setup and a
// client of olga, an operator who asks for the work dana approves.
func dbOncall(t *testing.T, providerFlags ...string) (*ssoSetup, *client.Core) {
	t.Helper()
	agent := startAll(t, clusterAgent(t, "prod-db-1", "p-1"))[0]
	s := newSSOWith(t, dbOncallConfig(agent.Addr()), providerFlags...)
	testwait.Within(t, 30*time.Second, "node p-1 UP", func() bool {
		ns, err := s.admin.Nodes(ctxT(t), "")
		return err == nil && len(ns) == 1 && ns[0].Status == "UP"
	})
	return s, clientAs(t, s.core, s.admin, "olga", "operator")
}

// newSSOWith starts the provider (with extra flags) and a core that signs
// in through it, extra appended to the core's configuration.
func newSSOWith(t *testing.T, extra string, providerFlags ...string) *ssoSetup {
	t.Helper()
	s := &ssoSetup{t: t, dir: t.TempDir()}
	s.users = filepath.Join(s.dir, "users.json")
	s.setGroups("db-oncall", "<i>sre</i>")
	port := freePort(t)
	callback := fmt.Sprintf("http://127.0.0.1:%d/ui/oidc/callback", port)
	cmd := exec.Command(providerBinary(t), append([]string{"-users", s.users, "-client-id", "muster",
		"-redirect", callback + ",http://127.0.0.1/callback"}, providerFlags...)...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	ready := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if m := listeningRE.FindStringSubmatch(sc.Text()); m != nil {
				ready <- m[1]
			}
		}
	}()
	select {
	case s.issuer = <-ready:
	case <-time.After(60 * time.Second):
		t.Fatal("the provider did not start")
	}
	cfg := fmt.Sprintf("data_dir: %s\napi:\n  addr: 127.0.0.1:%d\noidc:\n  issuer: %s\n  client_id: muster\n  redirect_url: %s\n  provider_name: Test IdP\n",
		filepath.Join(s.dir, "data"), port, s.issuer, callback) + extra
	path := filepath.Join(s.dir, "core.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	core := startIn(t, s.dir, "core", nil, "core", "--config", path)
	s.core = core
	s.base = "http://" + core.Addr()
	admin, err := os.ReadFile(filepath.Join(s.dir, "data", "admin.token"))
	if err != nil {
		t.Fatal(err)
	}
	s.admin = client.NewCore(s.base, strings.TrimSpace(string(admin)), &http.Client{Timeout: 10 * time.Second})
	return s
}

// setGroups rewrites the provider's users file: dana in these groups.
func (s *ssoSetup) setGroups(groups ...string) {
	s.t.Helper()
	if err := idp.WriteUsers(s.users, idp.Users{Users: []idp.User{
		{Username: "dana", Password: "correct horse", Email: "dana@example.com", Groups: groups},
	}}); err != nil {
		s.t.Fatal(err)
	}
}

// signedInEvents counts the person.signed_in events naming dana.
func (s *ssoSetup) signedInEvents() int {
	s.t.Helper()
	evs, err := s.admin.Events(ctxT(s.t), 0, 100, client.EventFilter{Types: []string{"person.signed_in"}})
	if err != nil {
		s.t.Fatal(err)
	}
	n := 0
	for _, e := range evs.Events {
		if e.Actor == "dana@example.com" {
			n++
		}
	}
	return n
}

// ssoSignIn signs dana in through the provider's form in the browser and
// returns the header's "who" text of the page the core lands on.
func ssoSignIn(t *testing.T, ctx context.Context, s *ssoSetup) string {
	t.Helper()
	do(t, ctx, chromedp.Navigate(s.base+"/ui/login"), chromedp.WaitVisible(chromedp.CSS("#sso")))
	if txt := eval[string](t, ctx, `document.querySelector('#sso').textContent`); txt != "Sign in with Test IdP" {
		t.Fatalf("the sign-in button says %q", txt)
	}
	do(t, ctx, chromedp.Click(chromedp.CSS("#sso")), chromedp.WaitVisible(chromedp.CSS("#username")))
	if loc := location(t, ctx); !strings.HasPrefix(loc, s.issuer+"/login") {
		t.Fatalf("the button led to %s, not the provider", loc)
	}
	do(t, ctx, chromedp.SendKeys(chromedp.CSS("#username"), "dana"), chromedp.SendKeys(chromedp.CSS("#password"), "correct horse"),
		chromedp.Click(chromedp.CSS("#submit")))
	waitLoaded(t, ctx, "the dashboard after single sign-on",
		`location.pathname === '/ui/dashboard' && document.querySelector('.who') !== null`)
	return eval[string](t, ctx, `document.querySelector('.who').textContent`)
}

// TestSSOScenario3 (issue 32, scenario 3): a person signs in through the
// real provider in Chromium; their name and group claims reach the core's
// caller (shown escaped). Team db, mapped to their group db-oncall, holds
// approver on prod-db-*: they see an action of prod-db-1 waiting in
// Approvals and approve it from the page, and it runs. Removed from the
// group at the provider, their next session sees nothing of prod-db-1 and
// cannot approve there.
func TestSSOScenario3(t *testing.T) {
	t.Parallel()
	s, olga := dbOncall(t)
	br := newChrome(t)
	ctx := br.tab(t, 1280, 800, "UTC")
	who := ssoSignIn(t, ctx, s)
	if !strings.Contains(who, "dana@example.com") || !strings.Contains(who, "groups: db-oncall, <i>sre</i>") {
		t.Fatalf("the header says %q, want dana and her groups", who)
	}
	if n := eval[int](t, ctx, `document.querySelectorAll('.who i').length`); n != 0 {
		t.Fatal("a group claim's markup was rendered, not escaped")
	}
	if n := s.signedInEvents(); n != 1 {
		t.Fatalf("%d person.signed_in events, want 1", n)
	}

	// olga asks; dana, approver on prod-db-* through her group, approves
	// from Approvals, and the action runs.
	ping := func() string {
		a, err := olga.CreateAction(ctxT(t), &wire.CreateActionRequest{ClusterID: "prod-db-1", NodeID: "p-1", Kind: "muster.io/debug.ping"})
		if err != nil || a.State != action.PendingApprove {
			t.Fatalf("olga's action: %+v, %v; want it waiting for approval", a, err)
		}
		return a.ID
	}
	first, second := ping(), ping()
	item := fmt.Sprintf(`li[data-action="%s"]`, first)
	do(t, ctx, chromedp.Navigate(s.base+"/ui/approvals"), chromedp.WaitVisible(chromedp.CSS(item+" button.approve")))
	do(t, ctx, chromedp.Click(chromedp.CSS(item+" button.approve")), chromedp.WaitVisible(chromedp.CSS("#flash-link")))
	if flash := eval[string](t, ctx, `document.querySelector('.flash').textContent`); !strings.Contains(flash, "Approved action "+first) {
		t.Fatalf("after approving, the page says %q", flash)
	}
	testwait.Within(t, 30*time.Second, "dana's approved action DONE", func() bool {
		a, err := s.admin.Action(ctxT(t), first)
		return err == nil && a.State == action.Done
	})
	a, err := s.admin.Action(ctxT(t), first)
	if err != nil {
		t.Fatal(err)
	}
	approvedBy := ""
	for _, h := range a.History {
		if h.From == action.PendingApprove {
			approvedBy = h.Actor
		}
	}
	if approvedBy != "dana@example.com" {
		t.Fatalf("the action was approved by %q, want dana", approvedBy)
	}

	s.setGroups("<i>sre</i>") // removed from db-oncall at the provider
	next := br.tab(t, 1280, 800, "UTC")
	who = ssoSignIn(t, next, s)
	if strings.Contains(who, "db-oncall") || !strings.Contains(who, "dana@example.com") {
		t.Fatalf("after the removal the next session says %q", who)
	}
	// Her own grant on staging-* alone holds her now: prod-db-1 and what
	// waits there do not exist for her, and there is nothing she can
	// approve.
	do(t, next, chromedp.Navigate(s.base+"/ui/approvals"), chromedp.WaitVisible(chromedp.CSS("main")))
	if title := eval[string](t, next, `document.querySelector('h1').textContent`); title != "Approvals" {
		t.Fatalf("after the removal the Approvals page is %q", title)
	}
	if n := eval[int](t, next, fmt.Sprintf(`document.querySelectorAll('li[data-action="%s"], button.approve').length`, second)); n != 0 {
		t.Fatalf("after the removal Approvals shows her %d controls or items of prod-db-1", n)
	}
	do(t, next, chromedp.Navigate(s.base+"/ui/clusters"), chromedp.WaitVisible(chromedp.CSS("main")))
	if txt := eval[string](t, next, `document.querySelector('main').textContent`); strings.Contains(txt, "prod-db-1") {
		t.Fatalf("after the removal the Clusters page shows prod-db-1:\n%s", txt)
	}
	do(t, next, chromedp.Navigate(s.base+"/ui/actions/"+second), chromedp.WaitVisible(chromedp.CSS("main")))
	if txt := eval[string](t, next, `document.querySelector('main').textContent`); !strings.Contains(txt, "There is no such action.") {
		t.Fatalf("the waiting action's page after the removal says:\n%s", txt)
	}
	if got, err := s.admin.Action(ctxT(t), second); err != nil || got.State != action.PendingApprove {
		t.Fatalf("the second action: %+v, %v; want it still waiting", got, err)
	}
}

// runCLI runs muster with env (no API token) and returns its output.
func runCLI(t *testing.T, env []string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(binary, args...)
	cmd.Env = append(cleanEnv(), env...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// cleanEnv is the environment without any MUSTER_ variable.
func cleanEnv() []string {
	var out []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "MUSTER_") && !strings.HasPrefix(kv, "XDG_CONFIG_HOME=") {
			out = append(out, kv)
		}
	}
	return out
}

var deviceRE = regexp.MustCompile(`open (\S+) and enter the code (\S+)`)

// TestSSOScenario4 (issue 32, scenario 4): muster login against the same
// provider (the device grant, then the loopback redirect with PKCE), then
// API calls with the identity it got: dana, approver on prod-db-* through
// the team her group maps to, approves a real waiting run with each login.
func TestSSOScenario4(t *testing.T) {
	t.Parallel()
	// ID tokens live 20s: under the CLI's 30s margin, every later command
	// refreshes first.
	s, olga := dbOncall(t, "-id-token-ttl", "20s")
	pendingRun := func() string {
		r, err := olga.CreateRun(ctxT(t), &wire.CreateRunRequest{ClusterID: "prod-db-1",
			Stages: []wire.StageSpec{{Kind: "muster.io/debug.ping", Target: wire.Target{All: true}}}})
		if err != nil || r.State != "PENDING_APPROVE" {
			t.Fatalf("olga's run: %+v, %v; want it waiting for approval", r, err)
		}
		return r.ID
	}
	// approved says whether run id left PENDING_APPROVE, approved by dana.
	approved := func(id string) bool {
		r, err := s.admin.Run(ctxT(t), id)
		return err == nil && r.State != "PENDING_APPROVE" && r.ApprovedBy == "dana@example.com"
	}
	home := t.TempDir()
	env := []string{"XDG_CONFIG_HOME=" + home}

	// The device grant: the person enters the code at the provider.
	cmd := exec.Command(binary, "login", "--core", s.base, "--flow", "device", "--timeout", "60s")
	cmd.Env = append(cleanEnv(), env...)
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func(cmd *exec.Cmd, done chan<- error, pw *io.PipeWriter) { done <- cmd.Wait(); pw.Close() }(cmd, done, pw)
	var output syncBuffer
	code := make(chan []string, 1)
	go func(pr *io.PipeReader) {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			fmt.Fprintln(&output, sc.Text())
			if m := deviceRE.FindStringSubmatch(sc.Text()); m != nil {
				code <- m
			}
		}
	}(pr)
	var m []string
	select {
	case m = <-code:
	case err := <-done:
		t.Fatalf("muster login ended before it showed a code: %v", err)
	case <-time.After(60 * time.Second):
		t.Fatal("muster login showed no code")
	}
	resp, err := http.PostForm(s.issuer+"/device", url.Values{"user_code": {m[2]}, "username": {"dana"}, "password": {"correct horse"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("the provider's device page: %d", resp.StatusCode)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("muster login: %v", err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("muster login did not finish")
	}
	testwait.Within(t, 10*time.Second, "the login's output", func() bool { return strings.Contains(output.String(), "Signed in") })
	if !strings.Contains(output.String(), "as dana@example.com (groups: db-oncall, <i>sre</i>)") {
		t.Fatalf("muster login said:\n%s", output.String())
	}
	fi, err := os.Stat(filepath.Join(home, "muster", "login.json"))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("the login file: %v, mode %v; want 0600", err, fi.Mode())
	}

	first, err := os.ReadFile(filepath.Join(home, "muster", "login.json"))
	if err != nil {
		t.Fatal(err)
	}

	// Later commands send the ID token, refreshed as it expires: the core
	// knows dana and her group, and the approval of a run of prod-db-1
	// succeeds.
	run := pendingRun()
	out, err := runCLI(t, env, "run", "approve", run)
	if err != nil || !approved(run) {
		t.Fatalf("muster run approve as dana: %v\n%s", err, out)
	}
	second, err := os.ReadFile(filepath.Join(home, "muster", "login.json"))
	if err != nil || string(second) == string(first) || !strings.Contains(string(second), `"refresh_token"`) {
		t.Fatalf("the login was not refreshed before the call: %v", err)
	}
	// The login's ID token goes to its core only.
	if out, err := runCLI(t, env, "--addr", "http://127.0.0.1:1", "run", "approve", "run-none"); err == nil ||
		!strings.Contains(out, "the login is for "+s.base) {
		t.Fatalf("muster run approve towards another core: %v\n%s", err, out)
	}
	// The automation token works unchanged beside it.
	admin, _ := os.ReadFile(filepath.Join(s.dir, "data", "admin.token"))
	if out, err := runCLI(t, []string{"MUSTER_TOKEN=" + strings.TrimSpace(string(admin)), "MUSTER_ADDR=" + s.base}, "cluster", "list"); err != nil {
		t.Fatalf("muster cluster list with the admin token: %v\n%s", err, out)
	}

	// logout forgets the tokens.
	if out, err := runCLI(t, env, "logout"); err != nil {
		t.Fatalf("muster logout: %v\n%s", err, out)
	}
	if out, err := runCLI(t, env, "--addr", s.base, "run", "approve", "run-none"); err == nil || !strings.Contains(out, "muster login") {
		t.Fatalf("after logout: %v\n%s", err, out)
	}

	// The loopback redirect with PKCE, the URL printed (--no-browser).
	cmd = exec.Command(binary, "login", "--core", s.base, "--flow", "loopback", "--no-browser", "--timeout", "60s")
	cmd.Env = append(cleanEnv(), env...)
	pr, pw = io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done = make(chan error, 1)
	go func(cmd *exec.Cmd, done chan<- error, pw *io.PipeWriter) { done <- cmd.Wait(); pw.Close() }(cmd, done, pw)
	authURL := make(chan string, 1)
	go func(pr *io.PipeReader) {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), s.issuer) {
				authURL <- sc.Text()
			}
		}
	}(pr)
	var u string
	select {
	case u = <-authURL:
	case <-time.After(60 * time.Second):
		t.Fatal("muster login printed no URL")
	}
	resp, err = idp.SubmitLogin(&http.Client{Timeout: 10 * time.Second}, u, "dana", "correct horse")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if err := <-done; err != nil {
		t.Fatalf("muster login --flow loopback: %v", err)
	}
	run = pendingRun()
	out, err = runCLI(t, env, "run", "approve", run)
	if err != nil || !approved(run) {
		t.Fatalf("muster run approve after the loopback login: %v\n%s", err, out)
	}
}
