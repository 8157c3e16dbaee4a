// Package sso signs people in through OpenID Connect (docs/architecture.md,
// "Single sign-on"): the provider's discovery, the verification of ID tokens
// (issuer, audience, expiry, signature, and the nonce of a browser sign-in)
// and the decoding of the claims that name a person and their groups. The
// web UI runs the authorization code flow with PKCE through it; the API
// accepts its ID tokens as bearers.
package sso

import (
	"fmt"
	"net"
	"net/url"
	"os"
	"slices"
	"strings"

	"github.com/musterhq/muster/shared/config"
)

// Defaults of Config.
const (
	DefaultUsernameClaim = "email"
	DefaultGroupsClaim   = "groups"
)

// DefaultScopes are the scopes asked for when Config.Scopes is empty.
var DefaultScopes = []string{"openid", "email", "profile", "groups"}

// Config is the oidc block of core.yaml. Single sign-on is off when Issuer
// is empty.
type Config struct {
	// Issuer is the provider's issuer URL (discovery at
	// Issuer/.well-known/openid-configuration).
	Issuer   string `mapstructure:"issuer" yaml:"issuer"`
	ClientID string `mapstructure:"client_id" yaml:"client_id"`
	// ClientSecretFile holds the client's secret (mode 0600); empty: a
	// public client, protected by PKCE.
	ClientSecretFile string `mapstructure:"client_secret_file" yaml:"client_secret_file"`
	// RedirectURL is the UI's callback as the browser reaches it
	// (https://muster.example/ui/oidc/callback).
	RedirectURL string `mapstructure:"redirect_url" yaml:"redirect_url"`
	// UsernameClaim names the claim that is the person's name.
	UsernameClaim string `mapstructure:"username_claim" yaml:"username_claim"`
	// GroupsClaim names the claim that lists the person's groups.
	GroupsClaim string   `mapstructure:"groups_claim" yaml:"groups_claim"`
	Scopes      []string `mapstructure:"scopes" yaml:"scopes"`
	// ProviderName is shown on the sign-in button ("Sign in with …");
	// empty: the issuer's host.
	ProviderName string `mapstructure:"provider_name" yaml:"provider_name"`
}

// Enabled reports whether single sign-on is configured.
func (c Config) Enabled() bool { return c.Issuer != "" }

// WithDefaults fills the claims and scopes left empty.
func (c Config) WithDefaults() Config {
	if c.UsernameClaim == "" {
		c.UsernameClaim = DefaultUsernameClaim
	}
	if c.GroupsClaim == "" {
		c.GroupsClaim = DefaultGroupsClaim
	}
	if len(c.Scopes) == 0 {
		c.Scopes = slices.Clone(DefaultScopes)
	}
	return c
}

// Validate returns one error per bad field, under prefix ("oidc"). An empty
// issuer is valid: single sign-on is off.
func (c Config) Validate(prefix string) config.Errors {
	var errs config.Errors
	if !c.Enabled() {
		return nil
	}
	if problem := checkURL(c.Issuer); problem != "" {
		errs.Add(prefix+".issuer", "%s", problem)
	}
	if c.ClientID == "" {
		errs.Add(prefix+".client_id", "required with %s.issuer (the client registered at the provider)", prefix)
	}
	if c.RedirectURL == "" {
		errs.Add(prefix+".redirect_url", "required with %s.issuer (the UI's callback, such as https://muster.example/ui/oidc/callback)", prefix)
	} else if problem := checkURL(c.RedirectURL); problem != "" {
		errs.Add(prefix+".redirect_url", "%s", problem)
	} else if u, _ := url.Parse(c.RedirectURL); u.Path != CallbackPath {
		errs.Add(prefix+".redirect_url", "path %q is not %s", u.Path, CallbackPath)
	}
	if c.ClientSecretFile != "" {
		if err := config.CheckPrivateFile(c.ClientSecretFile); err != nil {
			errs.Add(prefix+".client_secret_file", "%v", err)
		} else if _, err := readSecret(c.ClientSecretFile); err != nil {
			errs.Add(prefix+".client_secret_file", "%v", err)
		}
	}
	for field, claim := range map[string]string{"username_claim": c.UsernameClaim, "groups_claim": c.GroupsClaim} {
		if claim != "" && (strings.TrimSpace(claim) != claim || len(claim) > 100) {
			errs.Add(prefix+"."+field, "%q is not a claim name", claim)
		}
	}
	if len(c.Scopes) > 0 && !slices.Contains(c.Scopes, "openid") {
		errs.Add(prefix+".scopes", "must include openid, got %v", c.Scopes)
	}
	return errs
}

// CallbackPath is the UI's route the provider sends the browser back to.
const CallbackPath = "/ui/oidc/callback"

// checkURL returns what is wrong with an issuer or redirect URL: it must be
// absolute, https, or http on a loopback host (a provider on this machine).
func checkURL(s string) string {
	u, err := url.Parse(s)
	if err != nil || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return fmt.Sprintf("%q is not an absolute URL without user, query or fragment", s)
	}
	switch u.Scheme {
	case "https":
	case "http":
		if !loopbackHost(u.Hostname()) {
			return fmt.Sprintf("%q is plain http on a host that is not loopback: use https", s)
		}
	default:
		return fmt.Sprintf("%q is not an https URL", s)
	}
	return ""
}

func loopbackHost(h string) bool {
	if h == "localhost" {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

// maxSecret bounds the client secret file.
const maxSecret = 4 << 10

func readSecret(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	s := strings.TrimSpace(string(b))
	switch {
	case len(b) > maxSecret:
		return "", fmt.Errorf("%s is larger than %d bytes: not a secret", path, maxSecret)
	case s == "":
		return "", fmt.Errorf("%s is empty", path)
	}
	return s, nil
}
