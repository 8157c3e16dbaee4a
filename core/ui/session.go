package ui

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
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

// sessions keeps the web UI's sessions in the store, so that every replica
// of the core knows them and a restart keeps them. Only the hash of a
// session id is stored: a copy of the database does not hand out sessions.
type sessions struct {
	st       store.Store
	ttl      time.Duration
	max      int
	perToken int
	now      func() time.Time
}

func newSessions(st store.Store, ttl time.Duration, max, perToken int, now func() time.Time) *sessions {
	return &sessions{st: st, ttl: ttl, max: max, perToken: perToken, now: now}
}

// errTooManySessions: the store holds as many live sessions as allowed.
var errTooManySessions = errors.New("too many sessions open")

// randomToken returns 32 random bytes in unpadded base64url.
func randomToken() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return base64.RawURLEncoding.EncodeToString(b)
}

func hashID(id string) string {
	sum := sha256.Sum256([]byte(id))
	return hex.EncodeToString(sum[:])
}

// create starts a session for the token with hash tokenHash and returns its
// id (to put in the cookie; it is not kept). Expired sessions are removed
// on the way, and the token's oldest when it holds as many as it may. The
// cap over all tokens does not apply to an admin: an admin can always sign
// in, to revoke whatever fills the store.
func (ss *sessions) create(ctx context.Context, tokenHash string, admin bool) (string, error) {
	id := randomToken()
	// The store keeps microseconds: truncated, a session never outlives
	// its TTL by rounding.
	now := ss.now().UTC().Truncate(time.Microsecond)
	sess := &store.Session{Hash: hashID(id), TokenHash: tokenHash, CSRF: randomToken(), CreatedTS: now, ExpiresTS: now.Add(ss.ttl)}
	err := ss.st.Update(ctx, func(tx store.Tx) error {
		if _, err := tx.DeleteSessionsBefore(ctx, now); err != nil {
			return err
		}
		if _, err := tx.TrimSessions(ctx, tokenHash, ss.perToken-1); err != nil {
			return err
		}
		if admin {
			return tx.InsertSession(ctx, sess)
		}
		n, err := tx.SessionCount(ctx)
		if err != nil {
			return err
		}
		if n >= ss.max {
			return errTooManySessions
		}
		return tx.InsertSession(ctx, sess)
	})
	if err != nil {
		return "", err
	}
	return id, nil
}

// get returns the live session with this id and its token as stored now.
// ended reports a session that existed and has expired, or whose token was
// revoked: it is removed.
func (ss *sessions) get(ctx context.Context, id string) (sess *store.Session, tok *store.Token, ended bool, err error) {
	if id == "" {
		return nil, nil, false, nil
	}
	err = ss.st.Read(ctx, func(r store.Reader) error {
		var err error
		if sess, err = r.Session(ctx, hashID(id)); err != nil {
			return err
		}
		tok, err = r.TokenByHash(ctx, sess.TokenHash)
		return err
	})
	switch {
	case errors.Is(err, store.ErrNotFound) && sess == nil:
		return nil, nil, false, nil
	case errors.Is(err, store.ErrNotFound): // the token was revoked: so is the session
		ended = true
	case err != nil:
		return nil, nil, false, err
	case !ss.now().Before(sess.ExpiresTS), tok.Expired(ss.now()):
		ended = true // the session's end, or its token's (a TTL)
	}
	if ended {
		return nil, nil, true, ss.end(ctx, sess.Hash)
	}
	return sess, tok, false, nil
}

// live reports whether the session with this hash still exists, has not
// expired and its token has not been revoked. A store error counts as live:
// the next request finds out.
func (ss *sessions) live(ctx context.Context, hash string) bool {
	ok := true
	err := ss.st.Read(ctx, func(r store.Reader) error {
		sess, err := r.Session(ctx, hash)
		if err != nil {
			return err
		}
		ok = ss.now().Before(sess.ExpiresTS)
		tok, err := r.TokenByHash(ctx, sess.TokenHash)
		if err == nil && tok.Expired(ss.now()) {
			ok = false
		}
		return err
	})
	return ok && !errors.Is(err, store.ErrNotFound)
}

// end removes a session.
func (ss *sessions) end(ctx context.Context, hash string) error {
	return ss.st.Update(ctx, func(tx store.Tx) error { return tx.DeleteSession(ctx, hash) })
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
	id, err := s.sessions.create(r.Context(), tok.Hash, isAdmin(tok))
	if err != nil {
		return err
	}
	setCookie(w, r, sessionCookie, id, int(s.cfg.SessionTTL/time.Second))
	setCookie(w, r, loginCookie, "", -1)
	s.log.Info("signed in", "actor", tok.Name, "client", clientAddr(r))
	return nil
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
		sess, tok, expired, err = s.sessions.get(r.Context(), c.Value)
		if err != nil {
			s.log.Error("read session", "err", err)
			s.renderError(w, r, nil, http.StatusInternalServerError, "The store could not be read.")
			return nil, false
		}
	}
	if sess != nil {
		return &visitor{sess: sess, tok: tok}, true
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
