package e2e

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/musterhq/muster/shared/client"
)

// floodCore starts a core with the default limits but for extraAPI (lines
// under api:) and returns it, its base URL, an admin client and its secret.
func floodCore(t *testing.T, extraAPI string) (*proc, string, *client.Core, string) {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "core.yaml")
	p := startOnFreePort(t, dir, "core", func(port int) []string {
		cfg := fmt.Sprintf("data_dir: %s\napi:\n  addr: 127.0.0.1:%d\n%s", filepath.Join(dir, "data"), port, extraAPI)
		if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
			t.Fatal(err)
		}
		return []string{"core", "--config", path}
	})
	secret, err := os.ReadFile(filepath.Join(dir, "data", "admin.token"))
	if err != nil {
		t.Fatal(err)
	}
	base := "http://" + p.Addr()
	return p, base, client.NewCore(base, strings.TrimSpace(string(secret)), nil), strings.TrimSpace(string(secret))
}

// from is an HTTP client whose connections come from the loopback address
// ip, keeping cookies, following no redirects, one connection per request.
func from(ip string) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 5 * time.Second}
	jar, _ := cookiejar.New(nil)
	return &http.Client{
		Transport: &http.Transport{DialContext: d.DialContext, DisableKeepAlives: true},
		Jar:       jar, Timeout: 10 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

var formCSRF = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// uiSignIn signs hc in with token through the sign-in form and returns the
// answer's status (303 when signed in).
func uiSignIn(t *testing.T, hc *http.Client, base, token string) int {
	t.Helper()
	resp, err := hc.Get(base + "/ui/login")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	m := formCSRF.FindSubmatch(body)
	if m == nil {
		t.Fatalf("no sign-in form (%d)", resp.StatusCode)
	}
	resp, err = hc.PostForm(base+"/ui/login", url.Values{"token": {token}, "csrf": {string(m[1])}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// openStream opens a stream (a web UI one with hc's session, or the API's
// with a bearer token) and returns its status; an open stream stays open
// until ctx ends.
func openStream(t *testing.T, ctx context.Context, hc *http.Client, u, bearer string) int {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	hc2 := *hc
	hc2.Timeout = 0 // a stream lasts
	resp, err := hc2.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		return resp.StatusCode
	}
	// Read the opening line, so the stream is counted by the core.
	if _, err := bufio.NewReader(resp.Body).ReadString('\n'); err != nil {
		t.Fatalf("stream %s: %v", u, err)
	}
	go func() { <-ctx.Done(); resp.Body.Close() }()
	return resp.StatusCode
}

// timed runs f and returns how long it took.
func timed(f func() error) (time.Duration, error) {
	start := time.Now()
	err := f()
	return time.Since(start), err
}

// Issue 17, item 2: one viewer signing in again and again to open web UI
// streams gets its token's share and no more; with every stream slot of
// the core taken (API and web UI streams of many tokens), /health, sign-in
// and the API still answer at once. A real core with the default limits.
func TestStreamFloodLeavesHealthAndSignInAnswering(t *testing.T) {
	t.Parallel()
	_, base, admin, adminSecret := floodCore(t, "")
	ctx, cancel := context.WithCancel(ctxT(t))
	defer cancel()
	const perToken, all = 16, 256 // api.max_streams_per_token, api.max_event_streams
	secrets := make([]string, all/perToken)
	for i := range secrets {
		sec, err := admin.CreateToken(ctx, fmt.Sprintf("viewer-%d", i), []string{"viewer"})
		if err != nil {
			t.Fatal(err)
		}
		secrets[i] = sec.Token
	}

	// The attack of the review: 64 sign-ins of one viewer, 16 streams each.
	attacker := "127.0.1.1"
	opened := 0
	for range 64 {
		hc := from(attacker)
		if uiSignIn(t, hc, base, secrets[0]) != http.StatusSeeOther {
			continue // sign-ins are limited
		}
		for range 16 {
			if openStream(t, ctx, hc, base+"/ui/stream", "") == http.StatusOK {
				opened++
			}
		}
	}
	if opened != perToken {
		t.Fatalf("one viewer opened %d streams, want its token's cap %d", opened, perToken)
	}
	// Every other slot, half web UI and half API streams, each token from
	// its own address (under api.max_connections_per_client).
	for i := 1; i < len(secrets); i++ {
		hc := from(fmt.Sprintf("127.0.1.%d", i+1))
		if got := uiSignIn(t, hc, base, secrets[i]); got != http.StatusSeeOther {
			t.Fatalf("viewer-%d sign-in: %d", i, got)
		}
		for j := range perToken {
			u, bearer := base+"/ui/stream", ""
			if j%2 == 1 {
				u, bearer = base+"/api/v1/events/stream", secrets[i]
			}
			if got := openStream(t, ctx, hc, u, bearer); got != http.StatusOK {
				t.Fatalf("stream %d of viewer-%d: %d", j+1, i, got)
			}
		}
		if got := openStream(t, ctx, hc, base+"/api/v1/events/stream", secrets[i]); got != http.StatusTooManyRequests {
			t.Fatalf("an API stream beyond viewer-%d's cap: %d, want 429", i, got)
		}
	}
	if got := openStream(t, ctx, from("127.0.2.1"), base+"/api/v1/events/stream", adminSecret); got != http.StatusServiceUnavailable {
		t.Fatalf("a stream with every slot taken: %d, want 503", got)
	}

	// Every slot is taken: the rest of the core answers.
	probe := from("127.0.0.1")
	var worst time.Duration
	for range 5 {
		d, err := timed(func() error {
			resp, err := probe.Get(base + "/health")
			if err == nil {
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					err = fmt.Errorf("status %d", resp.StatusCode)
				}
			}
			return err
		})
		if err != nil {
			t.Fatalf("/health with every stream slot taken: %v", err)
		}
		worst = max(worst, d)
	}
	d, err := timed(func() error {
		if got := uiSignIn(t, from("127.0.0.1"), base, adminSecret); got != http.StatusSeeOther {
			return fmt.Errorf("status %d", got)
		}
		_, err := admin.Clusters(ctx)
		return err
	})
	if err != nil {
		t.Fatalf("sign-in and the API with every stream slot taken: %v", err)
	}
	t.Logf("every stream slot taken (%d): /health slowest %s; sign-in and an API call %s", all, worst, d)
}

// Issue 17, item 3: a viewer flooding the sign-in form is held back (per
// address and per token) and keeps only its newest sessions; an admin
// signs in from the same address meanwhile; revoking the viewer's token
// ends its sessions at once. A real core with the default limits.
func TestSignInFloodAdminStillSignsInAndRevokeEndsSessions(t *testing.T) {
	t.Parallel()
	_, base, admin, adminSecret := floodCore(t, "")
	ctx := ctxT(t)
	sec, err := admin.CreateToken(ctx, "viewer", []string{"viewer"})
	if err != nil {
		t.Fatal(err)
	}
	var signedIn []*http.Client
	refused := 0
	for range 300 {
		hc := from("127.0.0.1")
		switch got := uiSignIn(t, hc, base, sec.Token); got {
		case http.StatusSeeOther:
			signedIn = append(signedIn, hc)
		case http.StatusTooManyRequests:
			refused++
		default:
			t.Fatalf("a flooding sign-in: %d", got)
		}
	}
	// 10 at once, then one every 6 s: a few more while the flood lasts.
	if len(signedIn) > 20 || refused < 280 {
		t.Fatalf("300 sign-ins of one viewer: %d signed in, %d refused; want at most 20 signed in", len(signedIn), refused)
	}
	page := func(hc *http.Client) int {
		resp, err := hc.Get(base + "/ui/approvals")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	// The token keeps its 8 newest sessions (ui.max_sessions_per_token).
	live := 0
	for i, hc := range signedIn {
		ok := page(hc) == http.StatusOK
		if ok {
			live++
		}
		if want := i >= len(signedIn)-8; ok != want {
			t.Fatalf("session %d of %d live %v, want the 8 newest live", i+1, len(signedIn), ok)
		}
	}
	// An admin signs in from the flooding address.
	adminBrowser := from("127.0.0.1")
	if got := uiSignIn(t, adminBrowser, base, adminSecret); got != http.StatusSeeOther {
		t.Fatalf("an admin after the flood: %d, want 303", got)
	}
	if err := admin.RevokeToken(ctx, "viewer"); err != nil {
		t.Fatal(err)
	}
	for i, hc := range signedIn[len(signedIn)-8:] {
		if got := page(hc); got != http.StatusSeeOther {
			t.Fatalf("session %d of the revoked token: %d, want sent to sign in", i+1, got)
		}
	}
	if got := page(adminBrowser); got != http.StatusOK {
		t.Fatalf("the admin's session: %d", got)
	}
	t.Logf("300 sign-ins of one viewer: %d signed in, %d refused (429), %d sessions kept", len(signedIn), refused, live)
}

// Issue 17, item 4: about 2,000 connections opened from 16 addresses and
// left idle, reopened as soon as the core closes them, do not keep /health
// or an authenticated request out: the core closes connections that never
// sent a request first, and caps each address. A real core with the
// default limits.
func TestIdleConnectionFloodLeavesHealthAndAPIAnswering(t *testing.T) {
	t.Parallel()
	core, base, admin, _ := floodCore(t, "")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// Connections open at about 250 a second from 16 addresses.
	const addrs = 16
	flood := idleFlood(t, core.Addr(), 2000, 4*time.Millisecond, func(slot int) net.IP { return net.IPv4(127, 0, 3, byte(1+slot%addrs)) })
	probe := from("127.0.0.1")
	var worst time.Duration
	for i := range 10 {
		d, err := timed(func() error {
			resp, err := probe.Get(base + "/health")
			if err == nil {
				resp.Body.Close()
			}
			return err
		})
		if err != nil {
			t.Fatalf("/health probe %d under the flood: %v", i+1, err)
		}
		worst = max(worst, d)
		d, err = timed(func() error { _, err := admin.Clusters(ctx); return err })
		if err != nil {
			t.Fatalf("an authenticated request %d under the flood: %v", i+1, err)
		}
		worst = max(worst, d)
	}
	t.Logf("%d idle connections opened (%d reopened) from %d addresses: /health and GET /api/v1/clusters slowest %s",
		flood.dials.Load(), flood.reopened.Load(), addrs, worst)
}
