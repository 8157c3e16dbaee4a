package ui

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/musterhq/muster/core/auth"
	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/core/streams"
)

// signInStatus posts the sign-in form as who from a fresh browser and
// returns the status.
func (e *env) signInStatus(who string) int {
	e.t.Helper()
	b := e.browser()
	b.get("/ui/login")
	status, _, _ := b.post("/ui/login", url.Values{"token": {e.secrets[who]}, "csrf": {b.csrf}})
	return status
}

// Issue 17, item 2: a token's streams are capped over all its sessions and
// the API's event streams together; other tokens keep theirs.
func TestStreamsAreCappedPerTokenAcrossSessionsAndTheAPI(t *testing.T) {
	t.Parallel()
	e := setup(t, func(c *Config) { c.Streams = streams.New(100, 3) })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	open := func(b *browser) int {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, e.ts.URL+"/ui/stream", nil)
		resp, err := b.c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != http.StatusOK {
			resp.Body.Close()
		}
		return resp.StatusCode
	}
	a, b := e.browser().signIn("viewer"), e.browser().signIn("viewer")
	if open(a) != http.StatusOK || open(b) != http.StatusOK {
		t.Fatal("the first two streams of the token were refused")
	}
	// The third from the API's event stream.
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, e.ts.URL+"/api/v1/events/stream", nil)
	req.Header.Set("Authorization", "Bearer "+e.secrets["viewer"])
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("the API stream of the token: %v %v", resp, err)
	}
	defer resp.Body.Close()
	c := e.browser().signIn("viewer")
	if got := open(c); got != http.StatusTooManyRequests {
		t.Fatalf("a fourth stream of the token from a third session: %d, want 429", got)
	}
	if got := open(e.browser().signIn("op")); got != http.StatusOK {
		t.Fatalf("another token's stream: %d, want 200", got)
	}
}

// Issue 17, item 3: a token holds at most MaxSessionsPerToken sessions;
// signing in once more ends its oldest, not the new one.
func TestSessionsPerTokenAreCappedOldestEnded(t *testing.T) {
	t.Parallel()
	e := setup(t, func(c *Config) { c.MaxSessionsPerToken = 2; c.SessionTTL = time.Hour })
	first := e.browser().signIn("viewer")
	e.clock.add(time.Second)
	second := e.browser().signIn("viewer")
	e.clock.add(time.Second)
	third := e.browser().signIn("viewer")
	if status, loc, _ := first.get("/ui/approvals"); status != http.StatusSeeOther || !strings.HasPrefix(loc, "/ui/login") {
		t.Fatalf("the oldest session after a third sign-in: %d %q, want sent to sign in", status, loc)
	}
	for i, b := range []*browser{second, third} {
		if status, _, _ := b.get("/ui/approvals"); status != http.StatusOK {
			t.Fatalf("session %d of the two newest: %d, want 200", i+2, status)
		}
	}
	if n := e.sessionCount(); n != 2 {
		t.Fatalf("%d sessions held, want 2", n)
	}
}

// Issue 17, item 3: sign-ins are limited per client address and per token;
// a viewer flooding the form does not keep an admin from the same address
// out, and the admin's own sign-ins are limited per token.
func TestSignInIsRateLimitedPerClientAndTokenAdminStillSignsIn(t *testing.T) {
	t.Parallel()
	const burst = 3
	e := setup(t, func(c *Config) { c.SignInBurst = burst; c.SignInEvery = time.Minute })
	for i := range burst {
		if got := e.signInStatus("viewer"); got != http.StatusSeeOther {
			t.Fatalf("viewer sign-in %d: %d, want 303", i+1, got)
		}
	}
	for i := range 20 {
		if got := e.signInStatus("viewer"); got != http.StatusTooManyRequests {
			t.Fatalf("viewer sign-in %d past the limit: %d, want 429", burst+i+1, got)
		}
	}
	// The address's allowance is spent: an operator (not an admin) is
	// held back too, even with a wrong token.
	if got := e.signInStatus("op"); got != http.StatusTooManyRequests {
		t.Fatalf("an operator from the flooding address: %d, want 429", got)
	}
	b := e.browser()
	b.get("/ui/login")
	if status, _, _ := b.post("/ui/login", url.Values{"token": {"mst_wrong"}, "csrf": {b.csrf}}); status != http.StatusTooManyRequests {
		t.Fatalf("a wrong token from the flooding address: %d, want 429", status)
	}
	// An admin still signs in, up to the admin token's own limit.
	for i := range burst {
		if got := e.signInStatus("admin"); got != http.StatusSeeOther {
			t.Fatalf("admin sign-in %d after the flood: %d, want 303", i+1, got)
		}
	}
	if got := e.signInStatus("admin"); got != http.StatusTooManyRequests {
		t.Fatalf("admin sign-in past the token's limit: %d, want 429", got)
	}
	// A minute later, the viewer may sign in again.
	e.clock.add(time.Minute)
	if got := e.signInStatus("viewer"); got != http.StatusSeeOther {
		t.Fatalf("viewer sign-in a minute later: %d, want 303", got)
	}
}

// Issue 17, item 3: with the store at its cap of sessions, an admin still
// signs in; others are told why they cannot.
func TestAdminSignsInWhenSessionsAreFull(t *testing.T) {
	t.Parallel()
	e := setup(t, func(c *Config) { c.MaxSessions = 2; c.SessionTTL = time.Hour })
	e.browser().signIn("viewer")
	e.browser().signIn("op")
	if got := e.signInStatus("appr"); got != http.StatusServiceUnavailable {
		t.Fatalf("an approver with the sessions full: %d, want 503", got)
	}
	admin := e.browser().signIn("admin")
	if status, _, _ := admin.get("/ui/approvals"); status != http.StatusOK {
		t.Fatalf("the admin's session: %d", status)
	}
}

// Issue 17, item 3: revoking a token deletes its sessions in the store at
// once, not when they are next used.
func TestRevokingATokenDeletesItsSessions(t *testing.T) {
	t.Parallel()
	e := setup(t)
	v := e.browser().signIn("viewer")
	e.browser().signIn("viewer")
	e.browser().signIn("op")
	if err := e.st.Update(context.Background(), func(tx store.Tx) error {
		return auth.RevokeTokenTx(context.Background(), tx, "viewer", "admin", "")
	}); err != nil {
		t.Fatal(err)
	}
	if n := e.sessionCount(); n != 1 {
		t.Fatalf("%d sessions in the store after revoking the viewer, want the operator's alone", n)
	}
	if status, loc, _ := v.get("/ui/approvals"); status != http.StatusSeeOther || !strings.HasPrefix(loc, "/ui/login") {
		t.Fatalf("the revoked token's session: %d %q", status, loc)
	}
}

// Hardening of issue 17: `muster dev`'s sign-in links stop working ten
// minutes after they are made.
func TestDevLoginLinkExpiresAfterTenMinutes(t *testing.T) {
	t.Parallel()
	nonce, late := strings.Repeat("n", 32), strings.Repeat("l", 32)
	e := setup(t, func(c *Config) { c.DevLogins = map[string]string{nonce: "appr", late: "op"} })
	e.clock.add(DevLoginTTL - time.Second)
	if status, _, _ := e.browser().get("/ui/dev-login?nonce=" + nonce); status != http.StatusSeeOther {
		t.Fatalf("a link within ten minutes: %d, want 303", status)
	}
	e.clock.add(time.Second)
	status, _, body := e.browser().get("/ui/dev-login?nonce=" + late)
	if status != http.StatusForbidden || !strings.Contains(body, "expired") {
		t.Fatalf("an unused link after ten minutes: %d, want 403 saying it expired", status)
	}
}
