package ops

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/musterhq/muster/core/store"
)

// Sessions keeps the web UI's sessions in the store, so that every replica
// of the core knows them and a restart keeps them. Only the hash of a
// session id is stored: a copy of the database does not hand out sessions.
type Sessions struct {
	st       store.Store
	ttl      time.Duration
	max      int
	perToken int
	now      func() time.Time
}

// NewSessions keeps sessions that last ttl, at most max in all (but
// admins') and perToken per token.
func NewSessions(st store.Store, ttl time.Duration, max, perToken int, now func() time.Time) *Sessions {
	return &Sessions{st: st, ttl: ttl, max: max, perToken: perToken, now: now}
}

// ErrTooManySessions: the store holds as many live sessions as allowed.
var ErrTooManySessions = errors.New("too many sessions open")

// RandomToken returns 32 random bytes in unpadded base64url.
func RandomToken() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return base64.RawURLEncoding.EncodeToString(b)
}

// HashSessionID is the hash a session id is stored as.
func HashSessionID(id string) string {
	sum := sha256.Sum256([]byte(id))
	return hex.EncodeToString(sum[:])
}

// Create starts a session for the token with hash tokenHash and returns its
// id (to put in the cookie; it is not kept). Expired sessions are removed
// on the way, and the token's oldest when it holds as many as it may. The
// cap over all tokens does not apply to an admin: an admin can always sign
// in, to revoke whatever fills the store.
func (ss *Sessions) Create(ctx context.Context, tokenHash string, admin bool) (string, error) {
	id := RandomToken()
	// The store keeps microseconds: truncated, a session never outlives
	// its TTL by rounding.
	now := ss.now().UTC().Truncate(time.Microsecond)
	sess := &store.Session{Hash: HashSessionID(id), TokenHash: tokenHash, CSRF: RandomToken(), CreatedTS: now, ExpiresTS: now.Add(ss.ttl)}
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
			return ErrTooManySessions
		}
		return tx.InsertSession(ctx, sess)
	})
	if err != nil {
		return "", err
	}
	return id, nil
}

// CreateForPerson starts the session of a person who signed in through
// single sign-on with these group claims and an ID token that expires at
// idExpiry: the session ends then at the latest. In the same transaction
// the person is recorded (their groups, now) and a person.signed_in event
// names them. The person's oldest sessions go beyond the cap per token.
func (ss *Sessions) CreateForPerson(ctx context.Context, name string, groups []string, idExpiry time.Time, addr string) (string, error) {
	id := RandomToken()
	now := ss.now().UTC().Truncate(time.Microsecond)
	idExpiry = idExpiry.UTC().Truncate(time.Microsecond)
	if !now.Before(idExpiry) {
		return "", fmt.Errorf("%w: the ID token has expired", ErrBadRequest)
	}
	key := store.PersonSessionKey(name)
	end := now.Add(ss.ttl)
	if idExpiry.Before(end) {
		end = idExpiry
	}
	sess := &store.Session{Hash: HashSessionID(id), TokenHash: key, CSRF: RandomToken(), CreatedTS: now,
		ExpiresTS: end, Person: name, Groups: groups, IDExpiresTS: &idExpiry}
	err := ss.st.Update(ctx, func(tx store.Tx) error {
		if _, err := tx.DeleteSessionsBefore(ctx, now); err != nil {
			return err
		}
		if _, err := tx.TrimSessions(ctx, key, ss.perToken-1); err != nil {
			return err
		}
		n, err := tx.SessionCount(ctx)
		if err != nil {
			return err
		}
		if n >= ss.max {
			return ErrTooManySessions
		}
		if err := tx.InsertSession(ctx, sess); err != nil {
			return err
		}
		if err := tx.UpsertPerson(ctx, &store.Person{Name: name, Source: "oidc", Groups: groups, LastSeenTS: now}); err != nil {
			return err
		}
		return tx.AppendEvent(ctx, &store.Event{TS: now, Type: store.EventPersonSignedIn, Actor: name, ClientAddr: addr,
			Message: fmt.Sprintf("%s signed in through single sign-on", name), Data: map[string]any{"groups": groupList(groups)}})
	})
	if err != nil {
		return "", err
	}
	return id, nil
}

// groupList is groups as an event's data holds it (never null).
func groupList(groups []string) []string {
	if groups == nil {
		return []string{}
	}
	return groups
}

// Get returns the live session with this id and its token as stored now.
// ended reports a session that existed and has expired, or whose token was
// revoked: it is removed.
func (ss *Sessions) Get(ctx context.Context, id string) (sess *store.Session, tok *store.Token, ended bool, err error) {
	if id == "" {
		return nil, nil, false, nil
	}
	err = ss.st.Read(ctx, func(r store.Reader) error {
		var err error
		if sess, err = r.Session(ctx, HashSessionID(id)); err != nil {
			return err
		}
		if sess.Person != "" {
			return nil // a person's session: no token
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
	case !ss.now().Before(sess.ExpiresTS), tok != nil && tok.Expired(ss.now()):
		ended = true // the session's end, or its token's (a TTL)
	}
	if ended {
		return nil, nil, true, ss.End(ctx, sess.Hash)
	}
	return sess, tok, false, nil
}

// Live reports whether the session with this hash still exists, has not
// expired and its token has not been revoked. A store error counts as live:
// the next request finds out.
func (ss *Sessions) Live(ctx context.Context, hash string) bool {
	ok := true
	err := ss.st.Read(ctx, func(r store.Reader) error {
		sess, err := r.Session(ctx, hash)
		if err != nil {
			return err
		}
		ok = ss.now().Before(sess.ExpiresTS)
		if sess.Person != "" {
			return nil
		}
		tok, err := r.TokenByHash(ctx, sess.TokenHash)
		if err == nil && tok.Expired(ss.now()) {
			ok = false
		}
		return err
	})
	return ok && !errors.Is(err, store.ErrNotFound)
}

// End removes a session.
func (ss *Sessions) End(ctx context.Context, hash string) error {
	return ss.st.Update(ctx, func(tx store.Tx) error { return tx.DeleteSession(ctx, hash) })
}
