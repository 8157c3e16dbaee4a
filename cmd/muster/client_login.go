package main

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"github.com/spf13/cobra"
	"golang.org/x/oauth2"

	"github.com/musterhq/muster/cmd/internal/cli"
	"github.com/musterhq/muster/core/ops"
	"github.com/musterhq/muster/core/sso"
	"github.com/musterhq/muster/shared/textsafe"
	"github.com/musterhq/muster/shared/wire"
)

// loginFile is where `muster login` keeps the person's tokens, in the
// user's configuration directory (mode 0600).
const loginFile = "login.json"

// savedLogin is the content of loginFile.
type savedLogin struct {
	Addr         string    `json:"addr"`
	Issuer       string    `json:"issuer"`
	ClientID     string    `json:"client_id"`
	IDToken      string    `json:"id_token"`
	RefreshToken string    `json:"refresh_token,omitempty"`
	Expiry       time.Time `json:"expiry"`
}

func loginPath() (string, error) {
	dir, err := os.UserConfigDir()
	if err != nil {
		return "", cli.UsageError("no configuration directory for the login: %v", err)
	}
	return filepath.Join(dir, "muster", loginFile), nil
}

func newLoginCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "login [--core URL] [--no-browser] [--flow auto|device|loopback]",
		Short: "Sign in through the core's single sign-on (OpenID Connect)",
		Long: `Sign in as a person through the OpenID provider the core names
(GET /api/v1/auth/oidc). With the provider's device authorization grant,
login prints a URL and a code to enter there; otherwise it opens a browser on
the provider and waits for the answer on a loopback address (127.0.0.1), with
PKCE. --no-browser prints the URL instead of opening it.

The ID token and the refresh token are kept in the user's configuration
directory (muster/login.json, mode 0600). Later commands without an API
token send the ID token, refreshed when it expires. muster logout forgets
them.`,
		Example: `  muster login --core https://muster.example.com
  muster login --no-browser`,
		Args: cobra.NoArgs,
	}
	f := bindClientFlags(cmd)
	var (
		core      string
		noBrowser bool
		flow      string
		timeout   time.Duration
	)
	cmd.Flags().StringVar(&core, "core", "", "the core's URL (the same as --addr)")
	cmd.Flags().BoolVar(&noBrowser, "no-browser", false, "print the sign-in URL instead of opening a browser")
	cmd.Flags().StringVar(&flow, "flow", "auto", "auto (device if the provider offers it), device or loopback")
	cmd.Flags().DurationVar(&timeout, "timeout", 5*time.Minute, "how long to wait for the sign-in")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if core != "" {
			f.addr = core
		}
		if flow != "auto" && flow != "device" && flow != "loopback" {
			return cli.UsageError("--flow %q: want auto, device or loopback", flow)
		}
		ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
		defer cancel()
		return login(ctx, f, cmd.OutOrStdout(), flow, noBrowser)
	}
	return cmd
}

func newLogoutCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "logout",
		Short: "Forget the tokens of muster login",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			p, err := loginPath()
			if err != nil {
				return err
			}
			if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), "Signed out.")
			return nil
		},
	}
}

func login(ctx context.Context, f *clientFlags, out io.Writer, flow string, noBrowser bool) error {
	addr := strings.TrimRight(firstNonEmpty(f.addr, os.Getenv("MUSTER_ADDR"), DefaultCoreAddr), "/")
	hc, err := f.httpClient()
	if err != nil {
		return err
	}
	info, err := oidcInfo(ctx, hc, addr)
	if err != nil {
		return err
	}
	// The provider is reached with the default client: the core's CA is
	// not the provider's.
	provider, err := oidc.NewProvider(ctx, info.Issuer)
	if err != nil {
		return fmt.Errorf("discover the OpenID provider %s: %w", info.Issuer, err)
	}
	var meta struct {
		DeviceAuthURL string `json:"device_authorization_endpoint"`
	}
	_ = provider.Claims(&meta)
	// offline_access asks for a refresh token: later commands refresh the
	// ID token with it.
	scopes := info.Scopes
	if !slices.Contains(scopes, oidc.ScopeOfflineAccess) {
		scopes = append(slices.Clone(scopes), oidc.ScopeOfflineAccess)
	}
	oc := &oauth2.Config{ClientID: info.ClientID, Scopes: scopes, Endpoint: provider.Endpoint()}
	oc.Endpoint.DeviceAuthURL = meta.DeviceAuthURL
	if flow == "device" && meta.DeviceAuthURL == "" {
		return fmt.Errorf("the provider %s offers no device authorization grant: use --flow loopback", info.Issuer)
	}
	var (
		tok   *oauth2.Token
		nonce string
	)
	if flow == "device" || (flow == "auto" && meta.DeviceAuthURL != "") {
		tok, err = deviceLogin(ctx, oc, out)
	} else {
		nonce = ops.RandomToken()
		tok, err = loopbackLogin(ctx, oc, out, nonce, noBrowser)
	}
	if err != nil {
		return err
	}
	raw, _ := tok.Extra("id_token").(string)
	if raw == "" {
		return errors.New("the provider answered without an ID token")
	}
	idt, err := provider.Verifier(&oidc.Config{ClientID: info.ClientID}).Verify(ctx, raw)
	if err != nil {
		return fmt.Errorf("the ID token does not verify: %w", err)
	}
	if nonce != "" && subtle.ConstantTimeCompare([]byte(idt.Nonce), []byte(nonce)) != 1 {
		return errors.New("the ID token's nonce is not this sign-in's")
	}
	var claims json.RawMessage
	if err := idt.Claims(&claims); err != nil {
		return err
	}
	id, err := sso.DecodeClaims(claims, info.UsernameClaim, info.GroupsClaim)
	if err != nil {
		return err
	}
	if err := saveLogin(savedLogin{Addr: addr, Issuer: info.Issuer, ClientID: info.ClientID, IDToken: raw,
		RefreshToken: tok.RefreshToken, Expiry: idt.Expiry}); err != nil {
		return err
	}
	groups := ""
	if len(id.Groups) > 0 {
		groups = " (groups: " + textsafe.Escape(strings.Join(id.Groups, ", ")) + ")"
	}
	fmt.Fprintf(out, "Signed in to %s as %s%s until %s.\n", textsafe.Escape(addr), textsafe.Escape(id.Name), groups, idt.Expiry.Format(time.RFC3339))
	return nil
}

// oidcInfo asks the core where to sign in.
func oidcInfo(ctx context.Context, hc *http.Client, addr string) (wire.OIDCInfo, error) {
	var info wire.OIDCInfo
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, addr+"/api/v1/auth/oidc", nil)
	if err != nil {
		return info, cli.UsageError("--core %q: %v", addr, err)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return info, err
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusNotFound:
		return info, fmt.Errorf("the core at %s has no single sign-on configured (use an API token)", addr)
	case resp.StatusCode != http.StatusOK:
		return info, fmt.Errorf("GET %s/api/v1/auth/oidc: %s", addr, resp.Status)
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 64<<10)).Decode(&info); err != nil || info.Issuer == "" || info.ClientID == "" {
		return info, fmt.Errorf("GET %s/api/v1/auth/oidc: not an answer of a core", addr)
	}
	return info, nil
}

func deviceLogin(ctx context.Context, oc *oauth2.Config, out io.Writer) (*oauth2.Token, error) {
	da, err := oc.DeviceAuth(ctx)
	if err != nil {
		return nil, fmt.Errorf("device authorization: %w", err)
	}
	u := da.VerificationURIComplete
	if u == "" {
		u = da.VerificationURI
	}
	fmt.Fprintf(out, "To sign in, open %s and enter the code %s\n", textsafe.Escape(u), textsafe.Escape(da.UserCode))
	return oc.DeviceAccessToken(ctx, da)
}

// loopbackLogin runs the authorization code flow with PKCE, state and
// nonce, with the answer on a loopback listener of this process.
func loopbackLogin(ctx context.Context, oc *oauth2.Config, out io.Writer, nonce string, noBrowser bool) (*oauth2.Token, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	defer ln.Close()
	oc.RedirectURL = "http://" + ln.Addr().String() + "/callback"
	state, verifier := ops.RandomToken(), oauth2.GenerateVerifier()
	u := oc.AuthCodeURL(state, oidc.Nonce(nonce), oauth2.S256ChallengeOption(verifier))
	type answer struct {
		code string
		err  error
	}
	got := make(chan answer, 1)
	srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		if r.URL.Path != "/callback" || subtle.ConstantTimeCompare([]byte(q.Get("state")), []byte(state)) != 1 {
			http.Error(w, "not this sign-in", http.StatusBadRequest)
			return
		}
		a := answer{code: q.Get("code")}
		if e := q.Get("error"); e != "" {
			a.err = fmt.Errorf("the provider refused the sign-in: %s", textsafe.Escape(e))
		}
		select {
		case got <- a:
		default:
		}
		fmt.Fprintln(w, "Signed in: you may close this page and go back to the terminal.")
	})}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()
	if noBrowser || openBrowser(u) != nil {
		fmt.Fprintf(out, "To sign in, open this URL in a browser:\n%s\n", u)
	} else {
		fmt.Fprintln(out, "Opening the browser to sign in...")
	}
	select {
	case <-ctx.Done():
		return nil, fmt.Errorf("no sign-in came back: %w", ctx.Err())
	case a := <-got:
		if a.err != nil {
			return nil, a.err
		}
		return oc.Exchange(ctx, a.code, oauth2.VerifierOption(verifier))
	}
}

func openBrowser(u string) error {
	return exec.Command("xdg-open", u).Start()
}

func saveLogin(l savedLogin) error {
	p, err := loginPath()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return err
	}
	b, err := json.Marshal(l)
	if err != nil {
		return err
	}
	tmp := p + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, p)
}

// loginToken returns the ID token of muster login, refreshed when it has
// expired (and saved again), with the core it was for; ok is false when
// nobody logged in.
func loginToken(ctx context.Context) (token, addr string, ok bool, err error) {
	p, err := loginPath()
	if err != nil {
		return "", "", false, nil
	}
	b, err := os.ReadFile(p)
	if errors.Is(err, os.ErrNotExist) {
		return "", "", false, nil
	}
	if err != nil {
		return "", "", false, err
	}
	var l savedLogin
	if err := json.Unmarshal(b, &l); err != nil || l.IDToken == "" {
		return "", "", false, cli.UsageError("%s is not a login: run muster login again", p)
	}
	if time.Until(l.Expiry) > 30*time.Second {
		return l.IDToken, l.Addr, true, nil
	}
	if l.RefreshToken == "" {
		return "", "", false, cli.UsageError("the login has expired: run muster login again")
	}
	provider, err := oidc.NewProvider(ctx, l.Issuer)
	if err != nil {
		return "", "", false, fmt.Errorf("refresh the login: %w", err)
	}
	oc := &oauth2.Config{ClientID: l.ClientID, Endpoint: provider.Endpoint()}
	tok, err := oc.TokenSource(ctx, &oauth2.Token{RefreshToken: l.RefreshToken, Expiry: time.Now().Add(-time.Minute)}).Token()
	if err != nil {
		return "", "", false, cli.UsageError("the login has expired and could not be refreshed: run muster login again")
	}
	raw, _ := tok.Extra("id_token").(string)
	if raw == "" {
		return "", "", false, cli.UsageError("the provider refreshed without an ID token: run muster login again")
	}
	idt, err := provider.Verifier(&oidc.Config{ClientID: l.ClientID}).Verify(ctx, raw)
	if err != nil {
		return "", "", false, fmt.Errorf("the refreshed ID token does not verify: %w", err)
	}
	l.IDToken, l.Expiry = raw, idt.Expiry
	if tok.RefreshToken != "" {
		l.RefreshToken = tok.RefreshToken
	}
	if err := saveLogin(l); err != nil {
		return "", "", false, err
	}
	return l.IDToken, l.Addr, true, nil
}
