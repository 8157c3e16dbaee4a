package ui

import (
	"crypto/subtle"
	"errors"
	"html/template"
	"net/http"
	"strings"
	"time"

	"golang.org/x/oauth2"

	"github.com/musterhq/muster/core/ops"
	"github.com/musterhq/muster/core/sso"
)

// Single sign-on in the UI (docs/architecture.md, "Single sign-on"): the
// authorization code flow with PKCE (S256), a state and a nonce. The state,
// nonce, PKCE verifier and the page to come back to wait in a short-lived
// HttpOnly cookie of this site, bound to the browser that started.

// oidcCookie holds "state nonce verifier next" between the two routes. It is
// SameSite=Lax: the provider sends the browser back with a top-level GET
// from its own site, which a Strict cookie would not follow.
const oidcCookie = "muster_oidc"

// oidcFlowTTL bounds the time a person may take at the provider.
const oidcFlowTTL = 10 * time.Minute

// oidcLogin sends the browser to the provider.
func (s *Server) oidcLogin(w http.ResponseWriter, r *http.Request) {
	if s.cfg.SSO == nil {
		s.renderError(w, r, nil, http.StatusNotFound, "Single sign-on is not configured.")
		return
	}
	if !s.signIns.allowClient(clientAddr(r), s.cfg.Now()) {
		s.renderError(w, r, nil, http.StatusTooManyRequests, "Too many sign-ins from your address: wait a minute and try again.")
		return
	}
	state, nonce, verifier := ops.RandomToken(), ops.RandomToken(), oauth2.GenerateVerifier()
	next := safeNext(r.URL.Query().Get("next"))
	u, err := s.cfg.SSO.AuthCodeURL(r.Context(), state, nonce, verifier)
	if err != nil {
		s.log.Error("single sign-on", "err", err)
		s.renderError(w, r, nil, http.StatusBadGateway, "The identity provider could not be reached. Try again later, or sign in with a token.")
		return
	}
	s.setFlowCookie(w, r, strings.Join([]string{state, nonce, verifier, next}, " "), int(oidcFlowTTL/time.Second))
	http.Redirect(w, r, u, http.StatusSeeOther)
}

func (s *Server) setFlowCookie(w http.ResponseWriter, r *http.Request, value string, maxAge int) {
	path := cookiePath
	if r.TLS != nil {
		path = "/"
	}
	http.SetCookie(w, &http.Cookie{
		Name: cookieName(r, oidcCookie), Value: value, Path: path, MaxAge: maxAge,
		HttpOnly: true, Secure: r.TLS != nil, SameSite: http.SameSiteLaxMode,
	})
}

// errSignIn is what a refused sign-in shows: never the provider's words
// nor the token.
var errSignIn = errors.New("the sign-in could not be verified")

// oidcCallback takes the provider's answer: the state must be this
// browser's, the code is redeemed with the PKCE verifier, and the ID token
// must verify with this sign-in's nonce. Then the person's session starts.
func (s *Server) oidcCallback(w http.ResponseWriter, r *http.Request) {
	if s.cfg.SSO == nil {
		s.renderError(w, r, nil, http.StatusNotFound, "Single sign-on is not configured.")
		return
	}
	c, err := readCookie(r, oidcCookie)
	s.setFlowCookie(w, r, "", -1) // one use, whatever happens
	var parts []string
	if err == nil {
		parts = strings.SplitN(c.Value, " ", 4)
	}
	q := r.URL.Query()
	if len(parts) != 4 || subtle.ConstantTimeCompare([]byte(parts[0]), []byte(q.Get("state"))) != 1 || parts[0] == "" {
		s.showLogin(w, r, http.StatusBadRequest, loginData{}, "This sign-in is stale or was not started from this browser. Try again.")
		return
	}
	nonce, verifier, next := parts[1], parts[2], safeNext(parts[3])
	if e := q.Get("error"); e != "" {
		// The provider's error code and description are shown as text only.
		msg := "The identity provider refused the sign-in: " + clip(e, 100)
		if d := q.Get("error_description"); d != "" {
			msg += " (" + clip(d, 300) + ")"
		}
		s.showLogin(w, r, http.StatusUnauthorized, loginData{Next: next}, msg+".")
		return
	}
	in, err := s.cfg.SSO.Exchange(r.Context(), q.Get("code"), verifier, nonce)
	if err != nil {
		s.log.Warn("single sign-on refused", "client", clientAddr(r), "err", err)
		msg := "The identity provider's answer was refused: " + errSignIn.Error() + "."
		if errors.Is(err, sso.ErrClaims) {
			msg = "Your identity provider's claims do not name you as this core expects (" + clip(err.Error(), 300) + ")."
		}
		s.showLogin(w, r, http.StatusUnauthorized, loginData{Next: next}, msg)
		return
	}
	id, err := s.sessions.CreateForPerson(r.Context(), in.Name, in.Groups, in.Expiry, clientAddr(r))
	if errors.Is(err, ops.ErrTooManySessions) {
		s.showLogin(w, r, http.StatusServiceUnavailable, loginData{Next: next}, "Too many people are signed in: try again later.")
		return
	}
	if err != nil {
		s.log.Error("start session", "err", err)
		s.renderError(w, r, nil, http.StatusInternalServerError, "The session could not be stored.")
		return
	}
	maxAge := int(min(s.cfg.SessionTTL, time.Until(in.Expiry)) / time.Second)
	setCookie(w, r, sessionCookie, id, max(maxAge, 1))
	setCookie(w, r, loginCookie, "", -1)
	s.log.Info("signed in", "actor", in.Name, "groups", in.Groups, "client", clientAddr(r), "via", "oidc")
	if next == "" {
		next = "/ui/dashboard"
	}
	// A page of this site moves on: the session cookie is SameSite=Strict,
	// which a redirect that the provider's site started would not carry.
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	_ = signedInPage.Execute(w, struct{ Name, Next string }{in.Name, next})
}

var signedInPage = template.Must(template.New("signed-in").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta http-equiv="refresh" content="0;url={{.Next}}">
<title>Signed in</title><link rel="stylesheet" href="/ui/static/ui.css"></head>
<body><main><p>Signed in as <strong id="signed-in-as">{{.Name}}</strong>. <a id="continue" href="{{.Next}}">Continue</a></p></main></body></html>`))

// clip shortens s to n bytes at most, on a rune boundary.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

func utf8RuneStart(b byte) bool { return b&0xC0 != 0x80 }
