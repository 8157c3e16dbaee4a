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
	"github.com/musterhq/muster/shared/client"
	"github.com/musterhq/muster/shared/testwait"
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
	admin  *client.Core
}

var listeningRE = regexp.MustCompile(`^listening on (http://\S+)$`)

// newSSO starts the provider (with extra flags) and a core that signs in
// through it.
func newSSO(t *testing.T, providerFlags ...string) *ssoSetup {
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
		filepath.Join(s.dir, "data"), port, s.issuer, callback)
	path := filepath.Join(s.dir, "core.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	core := startIn(t, s.dir, "core", nil, "core", "--config", path)
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

// TestSSOScenario3 (issue 32, scenario 3, as far as this branch goes): a
// person signs in through the real provider in Chromium; their name and
// group claims reach the core's caller (shown escaped); removed from a group
// at the provider, their next session has no such group.
func TestSSOScenario3(t *testing.T) {
	t.Parallel()
	s := newSSO(t)
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

	s.setGroups("<i>sre</i>") // removed from db-oncall at the provider
	next := br.tab(t, 1280, 800, "UTC")
	who = ssoSignIn(t, next, s)
	if strings.Contains(who, "db-oncall") || !strings.Contains(who, "dana@example.com") {
		t.Fatalf("after the removal the next session says %q", who)
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
// API calls with the identity it got.
func TestSSOScenario4(t *testing.T) {
	t.Parallel()
	// ID tokens live 20s: under the CLI's 30s margin, every later command
	// refreshes first.
	s := newSSO(t, "-id-token-ttl", "20s")
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
	go func() { done <- cmd.Wait(); pw.Close() }()
	var output strings.Builder
	code := make(chan []string, 1)
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			output.WriteString(sc.Text() + "\n")
			if m := deviceRE.FindStringSubmatch(sc.Text()); m != nil {
				code <- m
			}
		}
	}()
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
	// knows dana (no grant holds her yet, so the approval is refused naming
	// her, not 401).
	out, err := runCLI(t, env, "run", "approve", "run-none")
	if err == nil || !strings.Contains(out, "dana@example.com") || strings.Contains(out, "401") {
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
	go func() { done <- cmd.Wait(); pw.Close() }()
	authURL := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), s.issuer) {
				authURL <- sc.Text()
			}
		}
	}()
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
	out, err = runCLI(t, env, "run", "approve", "run-none")
	if err == nil || !strings.Contains(out, "dana@example.com") {
		t.Fatalf("muster run approve after the loopback login: %v\n%s", err, out)
	}
}
