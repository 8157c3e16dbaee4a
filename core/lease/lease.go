// Package lease decides which clusters this core replica runs passes for, when
// several replicas share one PostgreSQL database (docs/architecture.md,
// "Several core replicas").
//
// Every third of the TTL, a Manager runs one round of coordination in the
// database (Store.Coordinate): it writes this replica's heartbeat, and holds
// the leases Assign gives it over the live replicas. A lease carries an
// epoch that grows whenever it changes hands; every write of a pass is made
// under a store.Fence with that epoch, so the database refuses the writes of
// a replica that lost its lease. Locally, a lease is dropped when the TTL has
// passed since the start of the last round that renewed it: from then on the
// replica starts no pass of that cluster, and the pass under way is
// cancelled, even when the database cannot be reached to say so.
package lease

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/startstop"
)

// DefaultTTL is the lease TTL when none is configured (ha.lease_ttl).
const DefaultTTL = 10 * time.Second

// Store is what a Manager needs of the database (core/store/postgres).
type Store interface {
	Coordinate(ctx context.Context, me store.Replica, ttl time.Duration, assign func(v store.LeaseView) []string) (map[string]int64, error)
	Release(ctx context.Context, me string) error
}

// Config configures a Manager.
type Config struct {
	// TTL is how long a lease lasts unless renewed; renewals come every
	// third of it.
	TTL time.Duration
	// Replica is this replica: ID (unique among the replicas), Addr (its
	// API), Version.
	Replica store.Replica
	// OnAcquire is called, outside any lock, with each cluster whose lease
	// this replica took (the core nudges it: its first pass starts at once).
	OnAcquire func(clusterID string)
	// OnView, when set, is called after each successful round, outside any
	// lock, with the live replicas that round saw (sorted; this one among
	// them).
	OnView func(live []string)
}

// Manager holds this replica's leases. Build it with New, run it with
// Start, end it with Stop.
type Manager struct {
	cfg     Config
	st      Store
	log     *slog.Logger
	metrics *metrics

	startstop.Base
	mu   sync.Mutex
	held map[string]*held
	ctx  context.Context // the service's, set by Start
}

// held is one lease this replica holds: ctx ends when it is lost.
type held struct {
	epoch    int64
	deadline time.Time
	ctx      context.Context
	cancel   context.CancelFunc
	timer    *time.Timer
}

// New builds a manager; it starts nothing. Its metrics go to reg (none when
// nil).
func New(cfg Config, st Store, log *slog.Logger, reg prometheus.Registerer) (*Manager, error) {
	if cfg.TTL <= 0 {
		cfg.TTL = DefaultTTL
	}
	if cfg.Replica.ID == "" {
		return nil, errors.New("lease: replica id required")
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	m := &Manager{cfg: cfg, st: st, log: log.With("component", "lease", "replica", cfg.Replica.ID), held: map[string]*held{}}
	var err error
	if m.metrics, err = newMetrics(reg, m); err != nil {
		return nil, fmt.Errorf("lease metrics: %w", err)
	}
	return m, nil
}

// Start runs the first round, then the others every TTL/3 until ctx ends or
// Stop is called; then it drops every lease (cancelling passes under way)
// and gives them up in the database, so that other replicas take them at
// their next round instead of after the TTL. An error of the first round is
// logged, not returned: the replica serves its API and keeps trying. Stop
// (shared/startstop's) is idempotent and returns once the leases are given
// up.
func (m *Manager) Start(ctx context.Context) error {
	ctx, done, err := m.StartInit(ctx)
	if err != nil {
		return err
	}
	m.mu.Lock()
	m.ctx = ctx
	m.mu.Unlock()
	m.round(ctx)
	go func() {
		defer done()
		m.loop(ctx)
		m.release()
	}()
	return nil
}

func (m *Manager) loop(ctx context.Context) {
	t := time.NewTicker(m.cfg.TTL / 3)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			m.round(ctx)
		}
	}
}

// release drops every lease and gives them up in the database.
func (m *Manager) release() {
	m.mu.Lock()
	for c, h := range m.held {
		h.timer.Stop()
		h.cancel()
		delete(m.held, c)
	}
	m.mu.Unlock()
	ctx, cancelRelease := context.WithTimeout(context.Background(), m.cfg.TTL/3)
	defer cancelRelease()
	if err := m.st.Release(ctx, m.cfg.Replica.ID); err != nil {
		m.log.Warn("giving up leases failed; they expire after the TTL", "err", err)
	}
}

// round runs one coordination round and applies its result.
func (m *Manager) round(ctx context.Context) {
	start := time.Now()
	rctx, cancel := context.WithTimeout(ctx, m.cfg.TTL/3)
	var live []string
	got, err := m.st.Coordinate(rctx, m.cfg.Replica, m.cfg.TTL, func(v store.LeaseView) []string {
		live = slices.Clone(v.Live)
		return Assign(v)
	})
	cancel()
	if err != nil {
		if ctx.Err() == nil {
			m.metrics.roundErrors.Inc()
			m.log.Warn("lease round failed; leases are dropped when their TTL passes", "err", err)
		}
		return
	}
	// The database's expiry is at least TTL after this round began.
	deadline := start.Add(m.cfg.TTL)
	var acquired []string
	m.mu.Lock()
	for c, epoch := range got {
		h := m.held[c]
		if h != nil && h.epoch == epoch {
			h.deadline = deadline
			h.timer.Reset(time.Until(deadline))
			continue
		}
		if h != nil {
			h.timer.Stop()
			h.cancel()
		}
		hctx, hcancel := context.WithCancel(m.ctx)
		h = &held{epoch: epoch, deadline: deadline, ctx: hctx, cancel: hcancel}
		h.timer = time.AfterFunc(time.Until(deadline), func() { m.expire(c, epoch) })
		m.held[c] = h
		acquired = append(acquired, c)
		m.metrics.changes.WithLabelValues("acquired").Inc()
		m.log.Info("lease acquired", "cluster", c, "epoch", epoch)
	}
	for c, h := range m.held {
		if _, ok := got[c]; !ok {
			h.timer.Stop()
			h.cancel()
			delete(m.held, c)
			m.metrics.changes.WithLabelValues("released").Inc()
			m.log.Info("lease given up", "cluster", c, "epoch", h.epoch)
		}
	}
	m.mu.Unlock()
	sort.Strings(acquired)
	for _, c := range acquired {
		if m.cfg.OnAcquire != nil {
			m.cfg.OnAcquire(c)
		}
	}
	if m.cfg.OnView != nil {
		m.cfg.OnView(live)
	}
}

// expire drops a lease whose TTL passed without a renewal.
func (m *Manager) expire(c string, epoch int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	h := m.held[c]
	if h == nil || h.epoch != epoch || time.Now().Before(h.deadline) {
		return // renewed meanwhile
	}
	h.cancel()
	delete(m.held, c)
	m.metrics.changes.WithLabelValues("expired").Inc()
	m.log.Warn("lease expired without renewal: passes of the cluster stop", "cluster", c, "epoch", epoch)
}

// PassContext returns the context of one pass of the cluster: it carries the
// lease's fence and ends when the lease is lost. ok is false when this
// replica does not hold the lease: then there is no pass.
func (m *Manager) PassContext(ctx context.Context, clusterID string) (context.Context, context.CancelFunc, bool) {
	m.mu.Lock()
	h := m.held[clusterID]
	m.mu.Unlock()
	if h == nil || h.ctx.Err() != nil {
		return nil, nil, false
	}
	pctx, cancel := context.WithCancel(store.WithFence(ctx, store.Fence{ClusterID: clusterID, Holder: m.cfg.Replica.ID, Epoch: h.epoch}))
	stop := context.AfterFunc(h.ctx, cancel)
	return pctx, func() { stop(); cancel() }, true
}

// Held returns the leases this replica holds: cluster → epoch.
func (m *Manager) Held() map[string]int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make(map[string]int64, len(m.held))
	for c, h := range m.held {
		out[c] = h.epoch
	}
	return out
}

// Assign spreads the clusters evenly over the live replicas and returns
// those v.Me should hold. Every replica computes it from the same snapshot,
// so they agree. Each replica's share is len(clusters)/len(live), and one
// more for the first len(clusters)%len(live) replicas in the order (holding
// most now, id). A cluster stays with its valid holder while that holder is
// live and within its share; the others go, in cluster order, to the
// replicas with room, in the same order: clusters move only when the
// replicas change.
func Assign(v store.LeaseView) []string {
	live := slices.Clone(v.Live)
	if !slices.Contains(live, v.Me) {
		live = append(live, v.Me)
	}
	if len(v.Clusters) == 0 {
		return nil
	}
	holder := map[string]string{}
	holds := map[string]int{}
	for _, l := range v.Leases {
		if l.Valid && slices.Contains(live, l.Holder) {
			holder[l.ClusterID] = l.Holder
			holds[l.Holder]++
		}
	}
	sort.Slice(live, func(i, j int) bool {
		if holds[live[i]] != holds[live[j]] {
			return holds[live[i]] > holds[live[j]]
		}
		return live[i] < live[j]
	})
	share := map[string]int{}
	for i, r := range live {
		share[r] = len(v.Clusters) / len(live)
		if i < len(v.Clusters)%len(live) {
			share[r]++
		}
	}
	clusters := slices.Clone(v.Clusters)
	sort.Strings(clusters)
	owner := map[string]string{}
	count := map[string]int{}
	for _, c := range clusters {
		if h, ok := holder[c]; ok && count[h] < share[h] {
			owner[c] = h
			count[h]++
		}
	}
	for _, c := range clusters {
		if _, ok := owner[c]; ok {
			continue
		}
		for _, r := range live {
			if count[r] < share[r] {
				owner[c] = r
				count[r]++
				break
			}
		}
	}
	var mine []string
	for _, c := range clusters {
		if owner[c] == v.Me {
			mine = append(mine, c)
		}
	}
	return mine
}
