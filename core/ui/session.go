package ui

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"net/http"
	"net/url"
	"sync"
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
)

// session is one signed-in browser. Only the hash of its id is kept, so a
// copy of the memory (or a log of it) does not hand out sessions.
type session struct {
	hash      string // sha256 of the id, the map key
	tokenHash string // the token signed in with, looked up on every request
	csrf      string
	created   time.Time
	expires   time.Time
}

func (s *session) checkCSRF(v string) bool {
	return v != "" && subtle.ConstantTimeCompare([]byte(v), []byte(s.csrf)) == 1
}

// sessions is the in-memory session table of one core. Sessions do not
// survive a restart, and each replica of a core has its own.
type sessions struct {
	ttl time.Duration
	max int
	now func() time.Time

	mu   sync.Mutex
	byID map[string]*session
}

func newSessions(ttl time.Duration, max int, now func() time.Time) *sessions {
	return &sessions{ttl: ttl, max: max, now: now, byID: map[string]*session{}}
}

// errTooManySessions: the table is full of live sessions.
var errTooManySessions = errors.New("too many sessions are open; try again later")

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
// id (to put in the cookie; it is not kept).
func (ss *sessions) create(tokenHash string) (string, *session, error) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	now := ss.now()
	if len(ss.byID) >= ss.max {
		for k, s := range ss.byID {
			if !now.Before(s.expires) {
				delete(ss.byID, k)
			}
		}
		if len(ss.byID) >= ss.max {
			return "", nil, errTooManySessions
		}
	}
	id := randomToken()
	s := &session{hash: hashID(id), tokenHash: tokenHash, csrf: randomToken(), created: now, expires: now.Add(ss.ttl)}
	ss.byID[s.hash] = s
	return id, s, nil
}

// get returns the live session with this id; expired reports a session that
// existed and has expired (it is removed).
func (ss *sessions) get(id string) (s *session, expired bool) {
	if id == "" {
		return nil, false
	}
	h := hashID(id)
	ss.mu.Lock()
	defer ss.mu.Unlock()
	s = ss.byID[h]
	if s == nil {
		return nil, false
	}
	if !ss.now().Before(s.expires) {
		delete(ss.byID, h)
		return nil, true
	}
	return s, false
}

// end removes a session.
func (ss *sessions) end(hash string) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	delete(ss.byID, hash)
}

// count returns how many sessions are held (live or not yet swept).
func (ss *sessions) count() int {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	return len(ss.byID)
}

func setCookie(w http.ResponseWriter, r *http.Request, name, value string, maxAge int) {
	http.SetCookie(w, &http.Cookie{
		Name: name, Value: value, Path: cookiePath, MaxAge: maxAge,
		HttpOnly: true, Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode,
	})
}

// startSession signs the token in: a new session and its cookie.
func (s *Server) startSession(w http.ResponseWriter, r *http.Request, tok *store.Token) error {
	id, _, err := s.sessions.create(tok.Hash)
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
	var sess *session
	expired := false
	if c, err := r.Cookie(sessionCookie); err == nil {
		sess, expired = s.sessions.get(c.Value)
	}
	var tok *store.Token
	if sess != nil {
		err := s.st.Read(r.Context(), func(rd store.Reader) error {
			var err error
			tok, err = rd.TokenByHash(r.Context(), sess.tokenHash)
			return err
		})
		switch {
		case errors.Is(err, store.ErrNotFound):
			s.sessions.end(sess.hash) // the token was revoked: so is the session
			sess, expired = nil, true
		case err != nil:
			s.renderError(w, r, nil, http.StatusInternalServerError, "The store could not be read.")
			s.log.Error("read token", "err", err)
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
