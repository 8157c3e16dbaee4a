package ui

import (
	"crypto/subtle"
	"net/http"
	"net/url"
	"time"

	"github.com/musterhq/muster/core/store"
)

// Cookies of the UI.
const (
	// sessionCookie holds the session id.
	sessionCookie = "muster_session"
	// loginCookie holds the sign-in form's CSRF token, before any session.
	loginCookie = "muster_login"
	cookiePath  = "/ui/"
	// hostPrefix marks a cookie under TLS: a browser keeps it only when it
	// is Secure, for path / and without Domain, so no other host of the
	// domain and no plaintext page can set or shadow it.
	hostPrefix = "__Host-"
)

// cookieName is the name of a UI cookie on this request's connection.
func cookieName(r *http.Request, name string) string {
	if r.TLS != nil {
		return hostPrefix + name
	}
	return name
}

// readCookie returns the UI cookie called name (cookieName) of r.
func readCookie(r *http.Request, name string) (*http.Cookie, error) {
	return r.Cookie(cookieName(r, name))
}

// checkCSRF reports whether v is the session's CSRF token.
func checkCSRF(s *store.Session, v string) bool {
	return v != "" && subtle.ConstantTimeCompare([]byte(v), []byte(s.CSRF)) == 1
}

// setCookie sets a UI cookie: under TLS with the __Host- prefix (Secure,
// path /), else for /ui/ alone.
func setCookie(w http.ResponseWriter, r *http.Request, name, value string, maxAge int) {
	path := cookiePath
	if r.TLS != nil {
		path = "/"
	}
	http.SetCookie(w, &http.Cookie{
		Name: cookieName(r, name), Value: value, Path: path, MaxAge: maxAge,
		HttpOnly: true, Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode,
	})
}

// startSession signs the token in: a new session and its cookie.
func (s *Server) startSession(w http.ResponseWriter, r *http.Request, tok *store.Token) error {
	id, err := s.sessions.Create(r.Context(), tok.Hash, isAdmin(tok))
	if err != nil {
		return err
	}
	setCookie(w, r, sessionCookie, id, int(s.cfg.SessionTTL/time.Second))
	setCookie(w, r, loginCookie, "", -1)
	s.log.Info("signed in", "actor", tok.Name, "client", clientAddr(r))
	return nil
}

// visit resolves the visitor of a live session through ops.Identify: a
// token's name and roles, or a person's name and the groups of their
// sign-in.
func (s *Server) visit(r *http.Request, sess *store.Session, tok *store.Token) (*visitor, error) {
	name, roles, groups := sess.Person, []string(nil), sess.Groups
	if tok != nil {
		name, roles, groups = tok.Name, tok.Roles, nil
	}
	who, err := s.ops.Identify(r.Context(), name, roles, groups, clientAddr(r))
	if err != nil {
		return nil, err
	}
	if tok == nil {
		tok = &store.Token{Name: who.Name, Roles: who.Roles}
	}
	return &visitor{sess: sess, tok: tok, who: who}, nil
}

// signedIn returns the visitor of a request with a live session whose token
// still exists. Otherwise it answers: a page goes to sign-in (coming back
// afterwards), the live-update stream gets 401.
func (s *Server) signedIn(w http.ResponseWriter, r *http.Request, stream bool) (*visitor, bool) {
	var (
		sess    *store.Session
		tok     *store.Token
		expired bool
	)
	if c, err := readCookie(r, sessionCookie); err == nil {
		sess, tok, expired, err = s.sessions.Get(r.Context(), c.Value)
		if err != nil {
			s.log.Error("read session", "err", err)
			s.renderError(w, r, nil, http.StatusInternalServerError, "The store could not be read.")
			return nil, false
		}
	}
	if sess != nil {
		v, err := s.visit(r, sess, tok)
		if err != nil {
			s.log.Error("identify the visitor", "err", err)
			s.renderError(w, r, nil, http.StatusInternalServerError, "The store could not be read.")
			return nil, false
		}
		return v, true
	}
	if stream {
		http.Error(w, "sign in again", http.StatusUnauthorized)
		return nil, false
	}
	q := url.Values{}
	next := "/ui/approvals"
	if r.Method == http.MethodGet {
		// Back to the whole page, even when its script asked for its live part.
		u := *r.URL
		q := u.Query()
		if q.Has("part") {
			q.Del("part")
			u.RawQuery = q.Encode()
		}
		next = u.RequestURI()
	}
	if n := safeNext(next); n != "" {
		q.Set("next", n)
	}
	if expired {
		q.Set("expired", "1")
	}
	http.Redirect(w, r, "/ui/login?"+q.Encode(), http.StatusSeeOther)
	return nil, false
}
