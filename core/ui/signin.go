package ui

import (
	"slices"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/musterhq/muster/core/store"
)

// Defaults of the sign-in limits (Config.SignInBurst, Config.SignInEvery,
// Config.MaxSessionsPerToken).
const (
	// DefaultSignInBurst sign-ins at once, then one every
	// DefaultSignInEvery, per client address and per token.
	DefaultSignInBurst = 10
	DefaultSignInEvery = 6 * time.Second
	// DefaultMaxSessionsPerToken: signing in once more ends the oldest.
	DefaultMaxSessionsPerToken = 8
	// maxLimited bounds the client addresses and tokens whose sign-ins are
	// counted at once; beyond it, a new one is refused until some have
	// waited long enough to be forgotten.
	maxLimited = 10000
)

// signIns limits the sign-ins of each client address (every attempt, right
// or wrong, but an admin's) and of each token (every sign-in with it). An
// admin is never held back by the address it shares with someone flooding
// the form. The counts are this replica's own.
type signIns struct {
	burst int
	every time.Duration

	mu      sync.Mutex
	clients map[string]*rate.Limiter
	tokens  map[string]*rate.Limiter
}

func newSignIns(burst int, every time.Duration) *signIns {
	return &signIns{burst: burst, every: every, clients: map[string]*rate.Limiter{}, tokens: map[string]*rate.Limiter{}}
}

// allowClient counts an attempt from client at now, and reports whether it
// is within the limit.
func (l *signIns) allowClient(client string, now time.Time) bool {
	return l.allow(l.clients, client, now)
}

// allowToken counts a sign-in with the token of hash at now.
func (l *signIns) allowToken(hash string, now time.Time) bool {
	return l.allow(l.tokens, hash, now)
}

func (l *signIns) allow(m map[string]*rate.Limiter, key string, now time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	lim := m[key]
	if lim == nil {
		if len(m) >= maxLimited {
			// Forget the keys whose allowance is whole again.
			for k, v := range m {
				if v.TokensAt(now) >= float64(l.burst) {
					delete(m, k)
				}
			}
			if len(m) >= maxLimited {
				return false
			}
		}
		lim = rate.NewLimiter(rate.Every(l.every), l.burst)
		m[key] = lim
	}
	return lim.AllowN(now, 1)
}

func isAdmin(tok *store.Token) bool {
	return tok != nil && slices.Contains(tok.Roles, store.RoleAdmin)
}
