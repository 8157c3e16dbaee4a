package idp

import (
	"crypto/sha256"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"time"

	"github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"
	"golang.org/x/text/language"
)

// Config is the provider's one client and its people.
type Config struct {
	// Issuer is the provider's URL (http://127.0.0.1:PORT).
	Issuer string
	// UsersFile is the JSON file of Users.
	UsersFile string
	// ClientID is the one client, public (PKCE), native (any loopback
	// port), allowed to redirect to RedirectURIs.
	ClientID     string
	RedirectURIs []string
	// IDTokenTTL is how long ID tokens last (default an hour).
	IDTokenTTL time.Duration
}

// client is the one public client.
type client struct {
	id        string
	redirects []string
	ttl       time.Duration
}

var _ op.Client = (*client)(nil)

func (c *client) GetID() string                       { return c.id }
func (c *client) RedirectURIs() []string              { return c.redirects }
func (c *client) PostLogoutRedirectURIs() []string    { return nil }
func (c *client) ApplicationType() op.ApplicationType { return op.ApplicationTypeNative }
func (c *client) AuthMethod() oidc.AuthMethod         { return oidc.AuthMethodNone }
func (c *client) ResponseTypes() []oidc.ResponseType {
	return []oidc.ResponseType{oidc.ResponseTypeCode}
}
func (c *client) GrantTypes() []oidc.GrantType {
	return []oidc.GrantType{oidc.GrantTypeCode, oidc.GrantTypeRefreshToken, oidc.GrantTypeDeviceCode}
}
func (c *client) LoginURL(id string) string           { return "/login?id=" + url.QueryEscape(id) }
func (c *client) AccessTokenType() op.AccessTokenType { return op.AccessTokenTypeBearer }
func (c *client) IDTokenLifetime() time.Duration      { return c.ttl }
func (c *client) DevMode() bool                       { return false }
func (c *client) RestrictAdditionalIdTokenScopes() func([]string) []string {
	return func(s []string) []string { return s }
}
func (c *client) RestrictAdditionalAccessTokenScopes() func([]string) []string {
	return func(s []string) []string { return s }
}
func (c *client) IsScopeAllowed(scope string) bool     { return scope == "groups" }
func (c *client) IDTokenUserinfoClaimsAssertion() bool { return true }
func (c *client) ClockSkew() time.Duration             { return 0 }

// New returns the provider's handler: the OpenID endpoints, the login form
// at /login and the device page at /device.
func New(cfg Config) (http.Handler, error) {
	if cfg.IDTokenTTL <= 0 {
		cfg.IDTokenTTL = time.Hour
	}
	c := &client{id: cfg.ClientID, redirects: cfg.RedirectURIs, ttl: cfg.IDTokenTTL}
	st, err := newStorage(&userFile{path: cfg.UsersFile}, c)
	if err != nil {
		return nil, err
	}
	provider, err := op.NewProvider(&op.Config{
		CryptoKey:             sha256.Sum256([]byte(randomID())),
		CodeMethodS256:        true,
		GrantTypeRefreshToken: true,
		SupportedUILocales:    []language.Tag{language.English},
		DeviceAuthorization: op.DeviceAuthorizationConfig{
			Lifetime: 5 * time.Minute, PollInterval: time.Second, UserFormPath: "/device", UserCode: op.UserCodeBase20,
		},
	}, st, op.StaticIssuer(cfg.Issuer), op.WithAllowInsecure())
	if err != nil {
		return nil, err
	}
	callback := op.AuthCallbackURL(provider)
	intercept := op.NewIssuerInterceptor(provider.IssuerFromRequest)
	mux := http.NewServeMux()
	mux.Handle("/", provider)
	mux.HandleFunc("GET /login", func(w http.ResponseWriter, r *http.Request) {
		render(w, http.StatusOK, loginPage, form{ID: r.URL.Query().Get("id")})
	})
	mux.Handle("POST /login", intercept.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.PostFormValue("id")
		if err := st.signIn(id, r.PostFormValue("username"), r.PostFormValue("password")); err != nil {
			render(w, http.StatusUnauthorized, loginPage, form{ID: id, Error: err.Error()})
			return
		}
		http.Redirect(w, r, callback(r.Context(), id), http.StatusFound)
	}))
	mux.HandleFunc("GET /device", func(w http.ResponseWriter, r *http.Request) {
		render(w, http.StatusOK, devicePage, form{ID: r.URL.Query().Get("user_code")})
	})
	mux.HandleFunc("POST /device", func(w http.ResponseWriter, r *http.Request) {
		code := r.PostFormValue("user_code")
		if err := st.completeDevice(code, r.PostFormValue("username"), r.PostFormValue("password")); err != nil {
			render(w, http.StatusUnauthorized, devicePage, form{ID: code, Error: err.Error()})
			return
		}
		render(w, http.StatusOK, devicePage, form{Done: true})
	})
	return mux, nil
}

type form struct {
	ID, Error string
	Done      bool
}

var (
	loginPage = template.Must(template.New("login").Parse(`<!doctype html><title>Sign in</title>
<h1>Test provider</h1>{{with .Error}}<p id="error">{{.}}</p>{{end}}
<form method="post" action="/login"><input type="hidden" name="id" value="{{.ID}}">
<label>Username <input id="username" name="username"></label>
<label>Password <input id="password" name="password" type="password"></label>
<button id="submit" type="submit">Sign in</button></form>`))
	devicePage = template.Must(template.New("device").Parse(`<!doctype html><title>Device</title>
{{if .Done}}<p id="done">Signed in: you may close this page.</p>{{else}}{{with .Error}}<p id="error">{{.}}</p>{{end}}
<form method="post" action="/device">
<label>Code <input id="user_code" name="user_code" value="{{.ID}}"></label>
<label>Username <input id="username" name="username"></label>
<label>Password <input id="password" name="password" type="password"></label>
<button id="submit" type="submit">Sign in</button></form>{{end}}`))
)

func render(w http.ResponseWriter, status int, t *template.Template, f form) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	if err := t.Execute(w, f); err != nil {
		fmt.Fprintln(w, err)
	}
}
