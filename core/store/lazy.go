package store

import (
	"context"
	"errors"
)

type lazyKey struct{}

// WithLazyCommit returns a context whose Updates commit without waiting for
// the disk (SQLite: synchronous=NORMAL for that commit; PostgreSQL:
// synchronous_commit off). A crash, or a power loss, may then lose the
// newest such commits, whole and in order, never one followed by an
// ordinary commit: a later ordinary commit makes them durable with it. For
// writes whose loss is harmless, such as the outbox worker recording
// deliveries it sent, which are then sent again with the same webhook-id
// (docs/notifications.md, "Cost"). Such an Update may not append events
// (ErrLazyEvent): an event is durable once seen.
func WithLazyCommit(ctx context.Context) context.Context {
	return context.WithValue(ctx, lazyKey{}, true)
}

// LazyCommit reports whether ctx asks for a lazy commit.
func LazyCommit(ctx context.Context) bool {
	lazy, _ := ctx.Value(lazyKey{}).(bool)
	return lazy
}

// ErrLazyEvent: an Update with a lazy commit appended an event.
var ErrLazyEvent = errors.New("an event is never committed lazily")
