package sso

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"
)

// ErrInvalidToken is an ID token that does not verify: wrong signature,
// issuer or audience, expired, or (for a browser sign-in) the wrong nonce.
var ErrInvalidToken = errors.New("invalid ID token")

// Provider is the configured OpenID provider. Its discovery document and
// keys are fetched on first use (a provider that is down does not stop the
// core from starting) and kept once fetched; the keys are fetched again when
// a token names a key not held, at most once per MinKeyRefresh.
type Provider struct {
	cfg    Config
	secret string
	hc     *http.Client
	now    func() time.Time

	mu       sync.Mutex
	op       *oidc.Provider
	verifier *oidc.IDTokenVerifier
}

// New builds the provider of cfg (which must be Enabled and valid); hc
// reaches it (nil: http.DefaultClient) and now is the clock of expiries
// (nil: time.Now). It fetches nothing yet.
func New(cfg Config, hc *http.Client, now func() time.Time) (*Provider, error) {
	cfg = cfg.WithDefaults()
	if hc == nil {
		hc = http.DefaultClient
	}
	if now == nil {
		now = time.Now
	}
	p := &Provider{cfg: cfg, hc: hc, now: now}
	if cfg.ClientSecretFile != "" {
		s, err := readSecret(cfg.ClientSecretFile)
		if err != nil {
			return nil, fmt.Errorf("oidc.client_secret_file: %w", err)
		}
		p.secret = s
	}
	return p, nil
}

// Config is the provider's configuration, defaults filled.
func (p *Provider) Config() Config { return p.cfg }

// Name is what the sign-in button names: the configured name, else the
// issuer's host.
func (p *Provider) Name() string {
	if p.cfg.ProviderName != "" {
		return p.cfg.ProviderName
	}
	if u, err := url.Parse(p.cfg.Issuer); err == nil && u.Host != "" {
		return u.Host
	}
	return p.cfg.Issuer
}

func (p *Provider) ctx(ctx context.Context) context.Context { return oidc.ClientContext(ctx, p.hc) }

// discover returns the provider's metadata and the verifier of its ID
// tokens, fetching them the first time.
func (p *Provider) discover(ctx context.Context) (*oidc.Provider, *oidc.IDTokenVerifier, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.op != nil {
		return p.op, p.verifier, nil
	}
	op, err := oidc.NewProvider(p.ctx(ctx), p.cfg.Issuer)
	if err != nil {
		return nil, nil, fmt.Errorf("discover the OpenID provider %s: %w", p.cfg.Issuer, err)
	}
	var meta struct {
		JWKSURL string   `json:"jwks_uri"`
		Algs    []string `json:"id_token_signing_alg_values_supported"`
	}
	if err := op.Claims(&meta); err != nil || meta.JWKSURL == "" {
		return nil, nil, fmt.Errorf("the OpenID provider %s names no keys (jwks_uri)", p.cfg.Issuer)
	}
	p.op = op
	keys := &keySet{url: meta.JWKSURL, hc: p.hc, now: p.now}
	p.verifier = oidc.NewVerifier(p.cfg.Issuer, keys, &oidc.Config{ClientID: p.cfg.ClientID, Now: p.now,
		SupportedSigningAlgs: meta.Algs})
	return p.op, p.verifier, nil
}

func (p *Provider) oauth2(op *oidc.Provider) *oauth2.Config {
	return &oauth2.Config{ClientID: p.cfg.ClientID, ClientSecret: p.secret, Endpoint: op.Endpoint(),
		RedirectURL: p.cfg.RedirectURL, Scopes: p.cfg.Scopes}
}

// AuthCodeURL is where a browser goes to sign in: the authorization code
// flow with state, nonce and a PKCE (S256) challenge of verifier.
func (p *Provider) AuthCodeURL(ctx context.Context, state, nonce, verifier string) (string, error) {
	op, _, err := p.discover(ctx)
	if err != nil {
		return "", err
	}
	return p.oauth2(op).AuthCodeURL(state, oidc.Nonce(nonce), oauth2.S256ChallengeOption(verifier)), nil
}

// SignIn is a verified sign-in: the person and when their ID token expires.
type SignIn struct {
	Identity
	Expiry time.Time
}

// Exchange trades the code of a browser sign-in (with its PKCE verifier) for
// tokens at the provider, verifies the ID token (signature, issuer,
// audience, expiry) and its nonce, and decodes the person.
func (p *Provider) Exchange(ctx context.Context, code, verifier, nonce string) (SignIn, error) {
	op, _, err := p.discover(ctx)
	if err != nil {
		return SignIn{}, err
	}
	tok, err := p.oauth2(op).Exchange(p.ctx(ctx), code, oauth2.VerifierOption(verifier))
	if err != nil {
		return SignIn{}, fmt.Errorf("exchange the code at the provider: %w", err)
	}
	raw, _ := tok.Extra("id_token").(string)
	if raw == "" {
		return SignIn{}, fmt.Errorf("%w: the provider answered without an ID token", ErrInvalidToken)
	}
	return p.verify(ctx, raw, nonce)
}

// Verify checks an ID token sent as a bearer (by the CLI) and decodes the
// person it names.
func (p *Provider) Verify(ctx context.Context, raw string) (SignIn, error) {
	return p.verify(ctx, raw, "")
}

// verify checks raw; a non-empty nonce must be the token's.
func (p *Provider) verify(ctx context.Context, raw, nonce string) (SignIn, error) {
	_, v, err := p.discover(ctx)
	if err != nil {
		return SignIn{}, err
	}
	idt, err := v.Verify(p.ctx(ctx), raw)
	if err != nil {
		return SignIn{}, fmt.Errorf("%w: %w", ErrInvalidToken, err)
	}
	if nonce != "" && subtle.ConstantTimeCompare([]byte(idt.Nonce), []byte(nonce)) != 1 {
		return SignIn{}, fmt.Errorf("%w: its nonce is not this sign-in's", ErrInvalidToken)
	}
	var claims json.RawMessage
	if err := idt.Claims(&claims); err != nil {
		return SignIn{}, fmt.Errorf("%w: %w", ErrInvalidToken, err)
	}
	id, err := DecodeClaims(claims, p.cfg.UsernameClaim, p.cfg.GroupsClaim)
	if err != nil {
		return SignIn{}, err
	}
	return SignIn{Identity: id, Expiry: idt.Expiry}, nil
}
