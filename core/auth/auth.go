// Package auth is the core's identity model: API token secrets, the hash under
// which they are stored, the roles a token may hold and what each role is
// allowed to do. It also creates the first admin token of an empty store.
package auth

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/names"
)

// SecretPrefix starts every token secret, so that a leaked one is easy to
// recognise (and to scan for).
const SecretPrefix = "mst_"

// secretBytes is the amount of randomness in a secret.
const secretBytes = 32

// Errors of this package, matched with errors.Is.
var (
	// ErrUnauthenticated: the secret is missing, malformed, unknown or revoked.
	ErrUnauthenticated = errors.New("unauthenticated")
	// ErrInvalid: a token name or role is not acceptable.
	ErrInvalid = errors.New("invalid token")
)

// Permission is one thing a caller may do through the API.
type Permission string

// The permissions of each role (docs/architecture.md, "The core").
const (
	Read        Permission = "read"
	Create      Permission = "create"
	Cancel      Permission = "cancel"
	Retry       Permission = "retry"
	Orchestrate Permission = "orchestrate"
	Approve     Permission = "approve"
	Reject      Permission = "reject"
	Tokens      Permission = "tokens"
	// Drain drains and undrains nodes.
	Drain Permission = "drain"
	// Forget removes a node for good, ending its open actions.
	Forget Permission = "forget"
	// Notify sees and runs the notification destinations (admin).
	Notify Permission = "notify"
)

// Permissions lists every permission.
var Permissions = []Permission{Read, Create, Cancel, Retry, Orchestrate, Approve, Reject, Tokens, Drain, Forget, Notify}

// Roles lists every role, least powerful first.
var Roles = []string{store.RoleViewer, store.RoleOperator, store.RoleApprover, store.RoleAdmin}

// grants is the one table of what each role may do. admin may do everything.
var grants = map[string][]Permission{
	store.RoleViewer:   {Read},
	store.RoleOperator: {Read, Create, Cancel, Retry, Orchestrate, Drain},
	store.RoleApprover: {Read, Approve, Reject},
	store.RoleAdmin:    Permissions,
}

// Can reports whether a token holding roles may do p.
func Can(roles []string, p Permission) bool {
	for _, r := range roles {
		if slices.Contains(grants[r], p) {
			return true
		}
	}
	return false
}

// ValidRole reports whether r is a known role.
func ValidRole(r string) bool { return slices.Contains(Roles, r) }

// CheckToken validates a name and a set of roles, returning the roles sorted
// and deduplicated.
func CheckToken(name string, roles []string) ([]string, error) {
	if err := names.CheckToken(name); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	if len(roles) == 0 {
		return nil, fmt.Errorf("%w: at least one role is needed (one of %s)", ErrInvalid, strings.Join(Roles, ", "))
	}
	out := make([]string, 0, len(roles))
	for _, r := range roles {
		if !ValidRole(r) {
			return nil, fmt.Errorf("%w: unknown role %q (want one of %s)", ErrInvalid, r, strings.Join(Roles, ", "))
		}
		if !slices.Contains(out, r) {
			out = append(out, r)
		}
	}
	slices.Sort(out)
	return out, nil
}

// NewSecret returns a fresh token secret: SecretPrefix and 32 random bytes in
// unpadded base64url.
func NewSecret() (string, error) {
	b := make([]byte, secretBytes)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("token secret: %w", err)
	}
	return SecretPrefix + base64.RawURLEncoding.EncodeToString(b), nil
}

// Hash returns the SHA-256 hex digest under which a secret is stored. The
// secret has 256 bits of entropy, so a plain hash is enough: there is nothing
// to brute-force.
func Hash(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(sum[:])
}

// wellFormed reports whether s has the shape of a secret made by NewSecret.
func wellFormed(s string) bool {
	rest, ok := strings.CutPrefix(s, SecretPrefix)
	if !ok || len(rest) != base64.RawURLEncoding.EncodedLen(secretBytes) {
		return false
	}
	_, err := base64.RawURLEncoding.DecodeString(rest)
	return err == nil
}

// Authenticate returns the token whose secret is secret. Every failure is
// ErrUnauthenticated, and none says why, nor repeats the secret.
func Authenticate(ctx context.Context, r store.Reader, secret string) (*store.Token, error) {
	if !wellFormed(secret) {
		return nil, fmt.Errorf("%w: malformed token", ErrUnauthenticated)
	}
	h := Hash(secret)
	t, err := r.TokenByHash(ctx, h)
	if errors.Is(err, store.ErrNotFound) {
		return nil, fmt.Errorf("%w: unknown or revoked token", ErrUnauthenticated)
	}
	if err != nil {
		return nil, fmt.Errorf("look up token: %w", err)
	}
	// The lookup is by hash; compare again in constant time so that nothing
	// about the stored hash leaks through timing, whatever the store does.
	if subtle.ConstantTimeCompare([]byte(t.Hash), []byte(h)) != 1 {
		return nil, fmt.Errorf("%w: unknown or revoked token", ErrUnauthenticated)
	}
	return t, nil
}

// CreateToken stores a new token named name with roles, appends a
// token.created event naming actor and clientAddr, and returns the secret. The
// secret is shown to the caller once and stored nowhere: only its hash is
// kept. A name already in use, ignoring case, is store.ErrExists.
func CreateToken(ctx context.Context, st store.Store, name string, roles []string, actor, clientAddr string) (string, error) {
	roles, err := CheckToken(name, roles)
	if err != nil {
		return "", err
	}
	secret, err := NewSecret()
	if err != nil {
		return "", err
	}
	err = st.Update(ctx, func(tx store.Tx) error {
		return insertToken(ctx, tx, name, roles, secret, actor, clientAddr)
	})
	if err != nil {
		return "", err
	}
	return secret, nil
}

func insertToken(ctx context.Context, tx store.Tx, name string, roles []string, secret, actor, clientAddr string) error {
	now := time.Now().UTC()
	t := &store.Token{Name: name, Roles: roles, Hash: Hash(secret), CreatedTS: now}
	if err := tx.InsertToken(ctx, t); err != nil {
		if errors.Is(err, store.ErrExists) {
			return fmt.Errorf("token %q: %w (names are unique ignoring case)", name, err)
		}
		return fmt.Errorf("insert token: %w", err)
	}
	return tx.AppendEvent(ctx, &store.Event{
		TS:         now,
		Type:       store.EventTokenCreated,
		Actor:      actor,
		ClientAddr: clientAddr,
		Message:    fmt.Sprintf("token %s created with roles %s", name, strings.Join(roles, ",")),
		Data:       map[string]any{"name": name, "roles": roles},
	})
}

// RevokeToken deletes the token named name and appends a token.revoked event.
// An unknown name is store.ErrNotFound.
func RevokeToken(ctx context.Context, st store.Store, name, actor, clientAddr string) error {
	return st.Update(ctx, func(tx store.Tx) error {
		return RevokeTokenTx(ctx, tx, name, actor, clientAddr)
	})
}

// RevokeTokenTx is RevokeToken inside a caller's transaction.
func RevokeTokenTx(ctx context.Context, tx store.Tx, name, actor, clientAddr string) error {
	if err := tx.DeleteToken(ctx, name); err != nil {
		return fmt.Errorf("token %q: %w", name, err)
	}
	return tx.AppendEvent(ctx, &store.Event{
		Type:       store.EventTokenRevoked,
		Actor:      actor,
		ClientAddr: clientAddr,
		Message:    fmt.Sprintf("token %s revoked", name),
		Data:       map[string]any{"name": name},
	})
}
