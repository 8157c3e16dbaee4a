package api

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/oauth2"

	"github.com/musterhq/muster/core/auth"
	"github.com/musterhq/muster/core/sso"
	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/core/store/sqlite"
	"github.com/musterhq/muster/e2e/oidcprovider/idp"
	"github.com/musterhq/muster/shared/wire"
)

const loopback = "http://127.0.0.1/callback"

// ssoAPI serves the API with single sign-on through the test provider and
// returns its URL, an admin token and an ID token of dana; now is the
// API's clock of expiries.
func ssoAPI(t *testing.T, now func() time.Time) (base, admin, idToken string) {
	t.Helper()
	ctx := context.Background()
	users := filepath.Join(t.TempDir(), "users.json")
	if err := idp.WriteUsers(users, idp.Users{Users: []idp.User{
		{Username: "dana", Password: "pw", Email: "dana@example.com", Groups: []string{"db-oncall"}},
	}}); err != nil {
		t.Fatal(err)
	}
	issuer := idp.Serve(t, users, loopback)
	st, err := sqlite.Open(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	admin, err = auth.CreateToken(ctx, st, "admin", []string{store.RoleAdmin}, "test", "")
	if err != nil {
		t.Fatal(err)
	}
	p, err := sso.New(sso.Config{Issuer: issuer, ClientID: "muster", RedirectURL: "http://127.0.0.1:1" + sso.CallbackPath}, nil, now)
	if err != nil {
		t.Fatal(err)
	}
	srv := New(Config{SSO: p}, st, nil, nil)
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(func() { srv.Close(); ts.Close() })

	// The CLI's loopback sign-in, played here.
	oc := &oauth2.Config{ClientID: "muster", RedirectURL: "http://127.0.0.1:5/callback", Scopes: sso.DefaultScopes,
		Endpoint: oauth2.Endpoint{AuthURL: issuer + "/authorize", TokenURL: issuer + "/oauth/token", AuthStyle: oauth2.AuthStyleInParams}}
	verifier := oauth2.GenerateVerifier()
	hc := &http.Client{CheckRedirect: func(r *http.Request, _ []*http.Request) error {
		if r.URL.Port() == "5" {
			return http.ErrUseLastResponse
		}
		return nil
	}}
	resp, err := idp.SubmitLogin(hc, oc.AuthCodeURL("s", oauth2.S256ChallengeOption(verifier)), "dana", "pw")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	loc, _ := url.Parse(resp.Header.Get("Location"))
	tok, err := oc.Exchange(ctx, loc.Query().Get("code"), oauth2.VerifierOption(verifier))
	if err != nil {
		t.Fatal(err)
	}
	idToken, _ = tok.Extra("id_token").(string)
	return ts.URL, admin, idToken
}

func call(t *testing.T, method, u, bearer string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(method, u, nil)
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestOIDCBearer(t *testing.T) {
	t.Parallel()
	var late atomic.Bool
	base, admin, idToken := ssoAPI(t, func() time.Time {
		if late.Load() {
			return time.Now().Add(2 * time.Hour)
		}
		return time.Now()
	})
	// The person is authenticated (their name reaches the operations) but
	// holds no role: 403, not 401.
	status, body := call(t, http.MethodGet, base+"/api/v1/clusters", idToken)
	if status != http.StatusForbidden || !strings.Contains(body, "dana@example.com") {
		t.Fatalf("GET /api/v1/clusters with an ID token: %d %s", status, body)
	}
	// Tokens for automation work unchanged beside it.
	if status, body := call(t, http.MethodGet, base+"/api/v1/clusters", admin); status != http.StatusOK {
		t.Fatalf("GET /api/v1/clusters with the admin token: %d %s", status, body)
	}
	for name, bearer := range map[string]string{
		"garbage":         "not-a-token-at-all",
		"wrong signature": idToken[:len(idToken)-6] + "AAAAAA",
		"overlong":        strings.Repeat("a", maxBearer+1),
	} {
		status, body := call(t, http.MethodGet, base+"/api/v1/clusters", bearer)
		if status != http.StatusUnauthorized || strings.Contains(body, bearer[:10]) {
			t.Errorf("%s bearer: %d %s, want 401 without the token", name, status, body)
		}
	}
	late.Store(true)
	if status, body := call(t, http.MethodGet, base+"/api/v1/clusters", idToken); status != http.StatusUnauthorized ||
		strings.Contains(body, idToken[:20]) {
		t.Fatalf("an expired ID token: %d %s, want 401", status, body)
	}
}

func TestOIDCInfo(t *testing.T) {
	t.Parallel()
	base, _, _ := ssoAPI(t, nil)
	status, body := call(t, http.MethodGet, base+"/api/v1/auth/oidc", "")
	var info wire.OIDCInfo
	if status != http.StatusOK || json.Unmarshal([]byte(body), &info) != nil ||
		!strings.HasPrefix(info.Issuer, "http://127.0.0.1:") || info.ClientID != "muster" || len(info.Scopes) == 0 {
		t.Fatalf("GET /api/v1/auth/oidc = %d %s", status, body)
	}
}
