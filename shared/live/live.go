// Package live holds the values a running process replaces as a whole
// while others read them: the core's reloadable policies (approval rules,
// disruption budgets, windows and freezes, the notification outbox's
// routing), which a SIGHUP replaces (docs/architecture.md, "Configuration").
//
// A consumer keeps the *Value, never what Load returned, and calls Load at
// each decision: a copy kept in a field would look current and be the
// policy of some earlier moment.
package live

import "sync/atomic"

// Value holds one T, replaced as a whole by Store. Its zero value, and a
// nil *Value, hold the zero T.
type Value[T any] struct{ p atomic.Pointer[T] }

// New returns a Value holding v.
func New[T any](v T) *Value[T] {
	l := &Value[T]{}
	l.Store(v)
	return l
}

// Load returns the value stored last (the zero T when none was, or when
// l is nil).
func (l *Value[T]) Load() T {
	if l != nil {
		if p := l.p.Load(); p != nil {
			return *p
		}
	}
	var zero T
	return zero
}

// Store makes v the value every later Load returns.
func (l *Value[T]) Store(v T) { l.p.Store(&v) }
