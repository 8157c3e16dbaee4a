// Package streams counts the core's long-lived answers: the API's event
// streams and the web UI's live-update streams. Each holds a connection for
// as long as it lasts, so they share one cap per token (over every session
// and both kinds) and one cap in all, kept well under the listener's
// connection cap: a token holding all it may still leaves room for /health,
// sign-in and every other request (docs/architecture.md, "Web UI").
package streams

import (
	"errors"
	"fmt"
	"sync"
)

// Defaults of the caps (api.max_event_streams, api.max_streams_per_token).
const (
	DefaultMax      = 256
	DefaultPerToken = 16
)

// Errors of Acquire.
var (
	// ErrTokenFull: the token has as many streams open as it may (429).
	ErrTokenFull = errors.New("too many event streams open for this token")
	// ErrFull: the core has as many streams open as it serves (503).
	ErrFull = errors.New("too many event streams open")
)

// Limiter counts open streams. The zero value is not usable: build it with New.
type Limiter struct {
	max, perToken int

	mu      sync.Mutex
	open    int
	byToken map[string]int
}

// New returns a limiter of at most max streams in all and perToken for one
// token; a value below 1 takes the default.
func New(max, perToken int) *Limiter {
	if max < 1 {
		max = DefaultMax
	}
	if perToken < 1 {
		perToken = DefaultPerToken
	}
	return &Limiter{max: max, perToken: perToken, byToken: map[string]int{}}
}

// Acquire counts one more stream of token (its name), or says why not.
// release gives the slot back; calling it more than once is harmless.
func (l *Limiter) Acquire(token string) (release func(), err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case l.byToken[token] >= l.perToken:
		return nil, fmt.Errorf("%w: token %s has %d open (API and web UI together), the most it may", ErrTokenFull, token, l.byToken[token])
	case l.open >= l.max:
		return nil, fmt.Errorf("%w: %d are open, the most this core serves; retry later", ErrFull, l.open)
	}
	l.byToken[token]++
	l.open++
	var once sync.Once
	return func() {
		once.Do(func() {
			l.mu.Lock()
			defer l.mu.Unlock()
			l.open--
			if l.byToken[token]--; l.byToken[token] <= 0 {
				delete(l.byToken, token)
			}
		})
	}, nil
}

// Open returns the streams open now, in all and for token.
func (l *Limiter) Open(token string) (all, ofToken int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.open, l.byToken[token]
}
