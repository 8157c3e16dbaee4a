package sso_test

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/oauth2"

	"github.com/musterhq/muster/core/sso"
	"github.com/musterhq/muster/e2e/oidcprovider/idp"
)

const callback = "http://127.0.0.1:7410/ui/oidc/callback"

// setup starts the test provider on a real listener with one person.
func setup(t *testing.T) (issuer string) {
	t.Helper()
	issuer, _ = setupCounting(t)
	return issuer
}

// setupCounting is setup that also counts the fetches of the provider's keys.
func setupCounting(t *testing.T) (issuer string, keyFetches *atomic.Int64) {
	t.Helper()
	users := filepath.Join(t.TempDir(), "users.json")
	if err := idp.WriteUsers(users, idp.Users{Users: []idp.User{
		{Username: "dana", Password: "pw", Email: "dana@example.com", Groups: []string{"db-oncall", "<sre>"}},
	}}); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(nil)
	issuer = "http://" + srv.Listener.Addr().String()
	h, err := idp.New(idp.Config{Issuer: issuer, UsersFile: users, ClientID: "muster", RedirectURIs: []string{callback}})
	if err != nil {
		t.Fatal(err)
	}
	keyFetches = &atomic.Int64{}
	srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/keys" {
			keyFetches.Add(1)
		}
		h.ServeHTTP(w, r)
	})
	srv.Start()
	t.Cleanup(srv.Close)
	return issuer, keyFetches
}

// signIn plays the browser: to the provider, through its login form, back
// with the code (not followed).
func signIn(t *testing.T, authURL, password string) url.Values {
	t.Helper()
	hc := &http.Client{CheckRedirect: func(r *http.Request, _ []*http.Request) error {
		if strings.HasPrefix(r.URL.String(), callback) {
			return http.ErrUseLastResponse
		}
		return nil
	}}
	resp, err := hc.Get(authURL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	id := resp.Request.URL.Query().Get("id")
	if id == "" {
		t.Fatalf("the provider did not show its login form: %s", resp.Request.URL)
	}
	resp, err = hc.PostForm(resp.Request.URL.Scheme+"://"+resp.Request.URL.Host+"/login",
		url.Values{"id": {id}, "username": {"dana"}, "password": {password}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	loc, err := url.Parse(resp.Header.Get("Location"))
	if err != nil || !strings.HasPrefix(loc.String(), callback) {
		t.Fatalf("after the login form: %d to %q, want the callback", resp.StatusCode, loc)
	}
	return loc.Query()
}

func TestSignInThroughTheProvider(t *testing.T) {
	t.Parallel()
	issuer := setup(t)
	p, err := sso.New(sso.Config{Issuer: issuer, ClientID: "muster", RedirectURL: callback}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	verifier := oauth2.GenerateVerifier()
	u, err := p.AuthCodeURL(ctx, "st4te", "n0nce", verifier)
	if err != nil {
		t.Fatal(err)
	}
	q, _ := url.Parse(u)
	if q.Query().Get("code_challenge_method") != "S256" || q.Query().Get("nonce") != "n0nce" {
		t.Fatalf("auth URL %s lacks PKCE S256 or the nonce", u)
	}
	back := signIn(t, u, "pw")
	if back.Get("state") != "st4te" {
		t.Fatalf("state %q came back, want st4te", back.Get("state"))
	}
	if _, err := p.Exchange(ctx, back.Get("code"), oauth2.GenerateVerifier(), "n0nce"); err == nil {
		t.Fatal("a code redeemed with another PKCE verifier was accepted")
	}
	back = signIn(t, u, "pw")
	if _, err := p.Exchange(ctx, back.Get("code"), verifier, "other"); !errors.Is(err, sso.ErrInvalidToken) {
		t.Fatalf("a token with another nonce: %v, want ErrInvalidToken", err)
	}
	back = signIn(t, u, "pw")
	got, err := p.Exchange(ctx, back.Get("code"), verifier, "n0nce")
	if err != nil {
		t.Fatal(err)
	}
	want := sso.Identity{Name: "dana@example.com", Groups: []string{"db-oncall", "<sre>"}}
	if !reflect.DeepEqual(got.Identity, want) || got.Expiry.Before(time.Now().Add(50*time.Minute)) {
		t.Fatalf("sign-in = %+v, want %+v expiring in an hour", got, want)
	}
}

func TestVerifyRefusesForeignAndExpiredTokens(t *testing.T) {
	t.Parallel()
	issuer := setup(t)
	p, err := sso.New(sso.Config{Issuer: issuer, ClientID: "muster", RedirectURL: callback}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	verifier := oauth2.GenerateVerifier()
	u, err := p.AuthCodeURL(ctx, "s", "n", verifier)
	if err != nil {
		t.Fatal(err)
	}
	back := signIn(t, u, "pw")
	tok, err := (&oauth2.Config{ClientID: "muster", RedirectURL: callback, Endpoint: oauth2.Endpoint{
		TokenURL: issuer + "/oauth/token", AuthStyle: oauth2.AuthStyleInParams}}).Exchange(ctx, back.Get("code"), oauth2.VerifierOption(verifier))
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := tok.Extra("id_token").(string)
	if _, err := p.Verify(ctx, raw); err != nil {
		t.Fatalf("Verify(the ID token) = %v", err)
	}
	other, _ := sso.New(sso.Config{Issuer: issuer, ClientID: "someone-else", RedirectURL: callback}, nil, nil)
	if _, err := other.Verify(ctx, raw); !errors.Is(err, sso.ErrInvalidToken) {
		t.Errorf("a token for another client: %v, want ErrInvalidToken", err)
	}
	late, _ := sso.New(sso.Config{Issuer: issuer, ClientID: "muster", RedirectURL: callback}, nil,
		func() time.Time { return time.Now().Add(2 * time.Hour) })
	if _, err := late.Verify(ctx, raw); !errors.Is(err, sso.ErrInvalidToken) {
		t.Errorf("an expired token: %v, want ErrInvalidToken", err)
	}
	if _, err := p.Verify(ctx, raw[:len(raw)-4]+"AAAA"); !errors.Is(err, sso.ErrInvalidToken) {
		t.Errorf("a token with a wrong signature: %v, want ErrInvalidToken", err)
	}
}

// TestForgedTokensDoNotFloodTheProvider: tokens naming unknown keys fetch
// the provider's keys again at most once per MinKeyRefresh.
func TestForgedTokensDoNotFloodTheProvider(t *testing.T) {
	t.Parallel()
	issuer, fetches := setupCounting(t)
	p, err := sso.New(sso.Config{Issuer: issuer, ClientID: "muster", RedirectURL: callback}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	payload := base64.RawURLEncoding.EncodeToString([]byte(`{"iss":"` + issuer + `","aud":"muster","sub":"x","email":"x"}`))
	for i := range 20 {
		header := base64.RawURLEncoding.EncodeToString([]byte(fmt.Sprintf(`{"alg":"RS256","kid":"forged-%d"}`, i)))
		if _, err := p.Verify(ctx, header+"."+payload+".c2ln"); !errors.Is(err, sso.ErrInvalidToken) {
			t.Fatalf("forged token %d: %v, want ErrInvalidToken", i, err)
		}
	}
	if n := fetches.Load(); n < 1 || n > 1 {
		t.Fatalf("20 forged tokens fetched the keys %d times, want once", n)
	}
}
