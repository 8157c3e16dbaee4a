package store

import (
	"context"
	"errors"
	"time"
)

// ErrFenced is returned (wrapped) by an Update made under a Fence that is no
// longer current: another replica holds the cluster's lease now, or the
// lease expired. Nothing was written.
var ErrFenced = errors.New("lease lost: write refused by its fencing epoch")

// ErrUnavailable is returned (wrapped) when the database cannot be reached.
// Nothing was written; the same call may succeed later.
var ErrUnavailable = errors.New("database unavailable")

// Fence names the lease a write depends on (docs/architecture.md, "Several core
// replicas"): the cluster, the replica holding its lease and the lease's epoch.
// A store shared by several replicas checks it inside the write transaction; a
// store used by one core only (SQLite) has no leases and ignores it.
type Fence struct {
	ClusterID string
	Holder    string
	Epoch     int64
}

type fenceKey struct{}

// WithFence returns a context whose Updates are made under f.
func WithFence(ctx context.Context, f Fence) context.Context {
	return context.WithValue(ctx, fenceKey{}, f)
}

// FenceOf returns the fence ctx carries, if any.
func FenceOf(ctx context.Context) (Fence, bool) {
	f, ok := ctx.Value(fenceKey{}).(Fence)
	return f, ok
}

// Replica is one core replica sharing the database, as its heartbeats show.
type Replica struct {
	ID          string
	Addr        string
	Version     string
	StartedTS   time.Time
	HeartbeatTS time.Time
	// Live: the last heartbeat is younger than the lease TTL.
	Live bool
}

// Lease is the right of one replica to run a cluster's full syncs.
type Lease struct {
	ClusterID  string
	Holder     string
	Epoch      int64
	AcquiredTS time.Time
	ExpiresTS  time.Time
	// Valid: not expired.
	Valid bool
}

// LeaseView is what one round of lease coordination sees, in one snapshot.
type LeaseView struct {
	Me       string
	Live     []string // ids of the live replicas, sorted; Me among them
	Clusters []string // sorted
	Leases   []Lease
}
