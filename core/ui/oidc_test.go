package ui

import (
	"context"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/musterhq/muster/core/sso"
	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/core/store/sqlite"
	"github.com/musterhq/muster/e2e/oidcprovider/idp"
)

type ssoEnv struct {
	t     *testing.T
	st    *sqlite.Store
	ts    *httptest.Server
	users string
	clock *clock
}

// setupSSO serves the UI with single sign-on through the test provider,
// which knows dana (groups db-oncall and a group with markup).
func setupSSO(t *testing.T) *ssoEnv {
	t.Helper()
	st, err := sqlite.Open(context.Background(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	e := &ssoEnv{t: t, st: st, users: filepath.Join(t.TempDir(), "users.json"), clock: &clock{t: time.Now()}}
	e.setGroups("db-oncall", "<b>sre</b>")
	e.ts = httptest.NewUnstartedServer(nil)
	callback := "http://" + e.ts.Listener.Addr().String() + sso.CallbackPath
	issuer := idp.Serve(t, e.users, callback)
	p, err := sso.New(sso.Config{Issuer: issuer, ClientID: "muster", RedirectURL: callback}, nil, e.clock.now)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := New(Config{SSO: p, Now: e.clock.now, SignInBurst: 1000}, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	e.ts.Config.Handler = srv.Handler()
	e.ts.Start()
	t.Cleanup(func() { srv.Close(); e.ts.Close() })
	return e
}

func (e *ssoEnv) setGroups(groups ...string) {
	e.t.Helper()
	if err := idp.WriteUsers(e.users, idp.Users{Users: []idp.User{
		{Username: "dana", Password: "pw", Email: "dana@example.com", Groups: groups},
	}}); err != nil {
		e.t.Fatal(err)
	}
}

// browser is a client with cookies that follows redirects.
func (e *ssoEnv) browser() *http.Client {
	jar, _ := cookiejar.New(nil)
	return &http.Client{Jar: jar, Timeout: 10 * time.Second}
}

func (e *ssoEnv) get(c *http.Client, path string) (int, string, string) {
	e.t.Helper()
	resp, err := c.Get(e.ts.URL + path)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Request.URL.Path, string(b)
}

// signIn goes through the provider's login form and back.
func (e *ssoEnv) signIn(c *http.Client, password string) (int, string) {
	e.t.Helper()
	resp, err := idp.SubmitLogin(c, e.ts.URL+"/ui/oidc/login?next=/ui/events", "dana", password)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestOIDCSignIn(t *testing.T) {
	t.Parallel()
	e := setupSSO(t)

	_, _, page := e.get(e.browser(), "/ui/login")
	if !strings.Contains(page, `href="/ui/oidc/login"`) || !strings.Contains(page, "Sign in with 127.0.0.1") {
		t.Fatalf("the sign-in page offers no single sign-on:\n%s", page)
	}
	if status, body := e.signIn(e.browser(), "wrong"); status != http.StatusUnauthorized || !strings.Contains(body, "wrong username or password") {
		t.Fatalf("a wrong password at the provider: %d", status)
	}

	b := e.browser()
	status, body := e.signIn(b, "pw")
	if status != http.StatusOK || !strings.Contains(body, `id="signed-in-as">dana@example.com<`) || !strings.Contains(body, `url=/ui/events`) {
		t.Fatalf("after the provider: %d\n%s", status, body)
	}
	// Signed in as a person without grants: the page names them and their
	// groups, escaped.
	status, path, page := e.get(b, "/ui/events")
	if path != "/ui/events" || !strings.Contains(page, "dana@example.com") || !strings.Contains(page, "groups: db-oncall, &lt;b&gt;sre&lt;/b&gt;") {
		t.Fatalf("GET /ui/events as the person: %d at %s\n%s", status, path, page)
	}
	if strings.Contains(page, "<b>sre</b>") {
		t.Fatal("a group claim was shown unescaped")
	}
	err := e.st.Read(context.Background(), func(r store.Reader) error {
		p, err := r.Person(context.Background(), "dana@example.com")
		if err != nil {
			return err
		}
		if !slices.Equal(p.Groups, []string{"db-oncall", "<b>sre</b>"}) || p.Source != "oidc" {
			t.Errorf("person = %+v", p)
		}
		evs, err := r.Events(context.Background(), 0, 100)
		if err != nil {
			return err
		}
		n := 0
		for _, ev := range evs {
			if ev.Type == store.EventPersonSignedIn && ev.Actor == "dana@example.com" {
				n++
			}
		}
		if n != 1 {
			t.Errorf("person.signed_in events = %+v, want one naming dana", evs)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}

	// Removed from a group at the provider: the next session has no such
	// group; the one already open keeps its own until it ends.
	e.setGroups("db-oncall")
	next := e.browser()
	if status, _ := e.signIn(next, "pw"); status != http.StatusOK {
		t.Fatalf("second sign-in: %d", status)
	}
	if _, _, page := e.get(next, "/ui/events"); !strings.Contains(page, "groups: db-oncall<") {
		t.Fatalf("after the removal, the new session shows:\n%s", page)
	}

	// The session ends when the provider's token expires (an hour after it
	// was issued; ui.session_ttl, 12h, is far).
	e.clock.add(30 * time.Minute)
	if _, path, _ := e.get(b, "/ui/events"); path != "/ui/events" {
		t.Fatalf("half an hour in: at %s, want still signed in", path)
	}
	e.clock.add(90 * time.Minute)
	if _, path, _ := e.get(b, "/ui/events"); path != "/ui/login" {
		t.Fatalf("after the ID token expired: at %s, want /ui/login", path)
	}
}

func TestOIDCCallbackRefusesAStrangersState(t *testing.T) {
	t.Parallel()
	e := setupSSO(t)
	// The victim's browser never started a sign-in: an attacker's code and
	// state are refused, and no session starts.
	attacker := e.browser()
	attacker.CheckRedirect = func(r *http.Request, _ []*http.Request) error {
		if r.URL.Path == sso.CallbackPath {
			return http.ErrUseLastResponse
		}
		return nil
	}
	resp, err := idp.SubmitLogin(attacker, e.ts.URL+"/ui/oidc/login", "dana", "pw")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	loc, err := url.Parse(resp.Header.Get("Location"))
	if err != nil || loc.Query().Get("code") == "" {
		t.Fatalf("no code came back: %d %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	victim := e.browser()
	status, _, body := e.get(victim, sso.CallbackPath+"?"+loc.RawQuery)
	if status != http.StatusBadRequest || !strings.Contains(body, "not started from this browser") {
		t.Fatalf("callback in another browser: %d\n%s", status, body)
	}
	if _, path, _ := e.get(victim, "/ui/events"); path != "/ui/login" {
		t.Fatalf("the victim was signed in: at %s", path)
	}
	// The attacker's own browser with a changed state is refused too.
	q := loc.Query()
	q.Set("state", "forged")
	status, _, _ = e.get(attacker, sso.CallbackPath+"?"+q.Encode())
	if status != http.StatusBadRequest {
		t.Fatalf("forged state: %d, want 400", status)
	}
}
