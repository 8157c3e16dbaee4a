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
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/labels"
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
	// Enroll sends an agent's certificate signing request (a join token).
	Enroll Permission = "enroll"
	// Revoke puts a node's certificates on the revocation list.
	Revoke Permission = "revoke"
	// Continue resumes a paused run or promotes a canary: an operator's
	// manual pause, an approver's pause on errors or canary (the run
	// engine decides which).
	Continue Permission = "continue"
	// Grants makes and revokes grants and changes teams (admin; on a
	// scope its admin grant contains, auth.MayGrant).
	Grants Permission = "grants"
	// Freeze freezes a cluster: nothing disruptive goes to it until the
	// freeze ends or is lifted (operator, approver).
	Freeze Permission = "freeze"
	// Unfreeze lifts a freeze before its end (approver): what it held
	// goes at once.
	Unfreeze Permission = "unfreeze"
)

// Verb is what p lets a caller do, as a sentence says it after "may not":
// the permission itself where it is a verb ("approve"), a phrase where it
// is a noun ("manage tokens").
func (p Permission) Verb() string {
	switch p {
	case Tokens:
		return "manage tokens"
	case Grants:
		return "change grants and teams"
	case Notify:
		return "see and run notification destinations"
	case Enroll:
		return "enroll agents"
	case Continue:
		return "continue (resume or promote) runs"
	}
	return string(p)
}

// Permissions lists every permission.
var Permissions = []Permission{Read, Create, Cancel, Retry, Orchestrate, Approve, Reject, Tokens, Drain, Forget, Enroll, Revoke,
	Notify, Continue, Grants, Freeze, Unfreeze}

// Roles lists every role, least powerful first.
var Roles = []string{store.RoleEnroll, store.RoleViewer, store.RoleOperator, store.RoleApprover, store.RoleAdmin}

// roleGrants is the one table of what each role may do. admin may do everything;
// enroll may only enroll.
var roleGrants = map[string][]Permission{
	store.RoleEnroll:   {Enroll},
	store.RoleViewer:   {Read},
	store.RoleOperator: {Read, Create, Cancel, Retry, Orchestrate, Drain, Continue, Freeze},
	store.RoleApprover: {Read, Approve, Reject, Continue, Freeze, Unfreeze},
	store.RoleAdmin:    Permissions,
}

// Can reports whether a token holding roles may do p.
func Can(roles []string, p Permission) bool {
	for _, r := range roles {
		if slices.Contains(roleGrants[r], p) {
			return true
		}
	}
	return false
}

// Granting lists the roles that grant p, least powerful first: what a
// refusal tells the caller to ask for.
func Granting(p Permission) []string {
	var out []string
	for _, r := range Roles {
		if slices.Contains(roleGrants[r], p) {
			out = append(out, r)
		}
	}
	return out
}

// ValidRole reports whether r is a known role.
func ValidRole(r string) bool { return slices.Contains(Roles, r) }

// CheckToken validates a name and a set of roles (none: the token holds
// its person's grants alone), returning the roles sorted and deduplicated.
func CheckToken(name string, roles []string) ([]string, error) {
	if err := names.CheckToken(name); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	// A token without roles holds only the grants of its person and its
	// teams (docs/architecture.md, "Access: people, teams and grants").
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
	if t.Expired(time.Now()) {
		return nil, fmt.Errorf("%w: token %s expired at %s", ErrUnauthenticated, t.Name, t.ExpiresTS.Format(time.RFC3339))
	}
	return t, nil
}

// DefaultJoinTTL is the lifetime of a join token made without a TTL.
const DefaultJoinTTL = 24 * time.Hour

// Options are what a token may carry beyond its name and roles: a TTL (any
// token), and for a join token (role enroll, alone) its cluster and a use
// count.
type Options struct {
	TTL       time.Duration
	ClusterID string
	// Uses is the number of enrollments allowed (nil: no count).
	Uses *int
	// Labels, on a join token, are the labels the core holds for each
	// node it enrolls.
	Labels map[string]string
}

// CheckOptions validates o against roles (checked by CheckToken) and
// returns it with a join token's default TTL.
func CheckOptions(roles []string, o Options) (Options, error) {
	join := slices.Contains(roles, store.RoleEnroll)
	if o.TTL < 0 {
		return o, fmt.Errorf("%w: ttl %s is negative", ErrInvalid, o.TTL)
	}
	if !join {
		if o.ClusterID != "" || o.Uses != nil || len(o.Labels) > 0 {
			return o, fmt.Errorf("%w: cluster, uses and labels are for join tokens (role %s)", ErrInvalid, store.RoleEnroll)
		}
		return o, nil
	}
	if len(roles) != 1 {
		return o, fmt.Errorf("%w: role %s goes alone: a join token can do nothing else", ErrInvalid, store.RoleEnroll)
	}
	if o.ClusterID == "" {
		return o, fmt.Errorf("%w: a join token needs a cluster (the only one it may enroll into)", ErrInvalid)
	}
	if err := names.CheckID(o.ClusterID); err != nil {
		return o, fmt.Errorf("%w: cluster: %w", ErrInvalid, err)
	}
	if o.Uses != nil && *o.Uses < 1 {
		return o, fmt.Errorf("%w: uses must be at least 1, got %d", ErrInvalid, *o.Uses)
	}
	if err := labels.Set(o.Labels).Validate(); err != nil {
		return o, fmt.Errorf("%w: labels: %w", ErrInvalid, err)
	}
	if len(o.Labels) == 0 {
		o.Labels = nil
	}
	if o.TTL == 0 {
		o.TTL = DefaultJoinTTL
	}
	return o, nil
}

// CreateToken stores a new token named name with roles, appends a
// token.created event naming actor and clientAddr, and returns the secret. The
// secret is shown to the caller once and stored nowhere: only its hash is
// kept. A name already in use, ignoring case, is store.ErrExists.
func CreateToken(ctx context.Context, st store.Store, name string, roles []string, actor, clientAddr string) (string, error) {
	secret, _, err := CreateTokenWith(ctx, st, name, roles, Options{}, actor, clientAddr)
	return secret, err
}

// CreateTokenWith is CreateToken with Options; it returns the token as
// stored too.
func CreateTokenWith(ctx context.Context, st store.Store, name string, roles []string, o Options, actor, clientAddr string) (string, *store.Token, error) {
	roles, err := CheckToken(name, roles)
	if err != nil {
		return "", nil, err
	}
	if o, err = CheckOptions(roles, o); err != nil {
		return "", nil, err
	}
	secret, err := NewSecret()
	if err != nil {
		return "", nil, err
	}
	var t *store.Token
	err = st.Update(ctx, func(tx store.Tx) error {
		t, err = insertToken(ctx, tx, name, roles, o, secret, actor, clientAddr)
		return err
	})
	if err != nil {
		return "", nil, err
	}
	return secret, t, nil
}

func insertToken(ctx context.Context, tx store.Tx, name string, roles []string, o Options, secret, actor, clientAddr string) (*store.Token, error) {
	now := time.Now().UTC().Round(time.Microsecond)
	t := &store.Token{Name: name, Roles: roles, Hash: Hash(secret), CreatedTS: now, ClusterID: o.ClusterID,
		Labels: maps.Clone(o.Labels)}
	if o.TTL > 0 {
		exp := now.Add(o.TTL).Round(time.Microsecond)
		t.ExpiresTS = &exp
	}
	if o.Uses != nil {
		n := *o.Uses
		t.UsesLeft = &n
	}
	data := map[string]any{"name": name, "roles": roles}
	msg := fmt.Sprintf("token %s created with roles %s", name, strings.Join(roles, ","))
	if t.ClusterID != "" {
		data["cluster_id"] = t.ClusterID
		msg += " for cluster " + t.ClusterID
	}
	if t.UsesLeft != nil {
		data["uses"] = *t.UsesLeft
		msg += fmt.Sprintf(", %d uses", *t.UsesLeft)
	}
	if len(t.Labels) > 0 {
		data["labels"] = t.Labels
		msg += ", labels " + labels.Set(t.Labels).String()
	}
	if t.ExpiresTS != nil {
		data["expires_ts"] = t.ExpiresTS.Format(time.RFC3339)
		msg += ", expires " + t.ExpiresTS.Format(time.RFC3339)
	}
	if err := tx.InsertToken(ctx, t); err != nil {
		if errors.Is(err, store.ErrExists) {
			return nil, fmt.Errorf("token %q: %w (names are unique ignoring case)", name, err)
		}
		return nil, fmt.Errorf("insert token: %w", err)
	}
	return t, tx.AppendEvent(ctx, &store.Event{
		TS:         now,
		Type:       store.EventTokenCreated,
		Actor:      actor,
		ClientAddr: clientAddr,
		ClusterID:  t.ClusterID,
		Message:    msg,
		Data:       data,
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
