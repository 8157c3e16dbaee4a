// Package retention keeps the core's database bounded: in the background it
// deletes finished actions with their history, and events, once they are
// older than the retention period, and finished runs whole (with their
// children and the playbook versions nothing refers to any more) once
// they are older than the runs' retention, a small batch per transaction so
// that the writer is never held for long.
//
// The core's retention must outlast the agents' (their retention_max, 30
// days by default): an agent that still lists a record the core has purged
// would have it imported again as an agent-made action.
package retention

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/startstop"
)

// Config tunes the purge. Zero fields take the DefaultConfig values.
type Config struct {
	// Retention is how long finished actions and events are kept.
	Retention time.Duration
	// Runs is how long finished runs are kept, counted from their end;
	// zero: Retention.
	Runs time.Duration
	// Every is the period of the purge.
	Every time.Duration
	// Batch bounds the rows deleted by one transaction.
	Batch int
	// Now is the clock (time.Now when nil).
	Now func() time.Time
}

// DefaultConfig keeps 90 days, purged every 10 minutes, 500 rows at a time.
func DefaultConfig() Config {
	return Config{Retention: 90 * 24 * time.Hour, Every: 10 * time.Minute, Batch: 500}
}

// Errors of the service.
// Errors of Start (shared/startstop's).
var (
	ErrStarted = startstop.ErrStarted
	ErrStopped = startstop.ErrStopped
)

// Purger deletes what has outlived the retention. Build it with New, run it
// with Start, end it with Stop; Purge may also be called directly.
type Purger struct {
	cfg Config
	st  store.Store
	log *slog.Logger

	startstop.Base
}

// New builds a purger. It starts nothing.
func New(cfg Config, st store.Store, log *slog.Logger) *Purger {
	d := DefaultConfig()
	if cfg.Retention <= 0 {
		cfg.Retention = d.Retention
	}
	if cfg.Runs <= 0 {
		cfg.Runs = cfg.Retention
	}
	if cfg.Every <= 0 {
		cfg.Every = d.Every
	}
	if cfg.Batch <= 0 {
		cfg.Batch = d.Batch
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Purger{cfg: cfg, st: st, log: log.With("component", "retention")}
}

// Start purges at once, then every Every, until ctx ends or Stop is called.
// It returns at once.
func (p *Purger) Start(ctx context.Context) error {
	ctx, done, err := p.StartInit(ctx)
	if err != nil {
		return err
	}
	go func() {
		defer done()
		t := time.NewTicker(p.cfg.Every)
		defer t.Stop()
		for {
			if a, e, err := p.Purge(ctx); err != nil && ctx.Err() == nil {
				p.log.Warn("purge failed", "err", err)
			} else if a+e > 0 {
				p.log.Info("purged", "actions", a, "events", e)
			}
			if r, err := p.PurgeRuns(ctx); err != nil && ctx.Err() == nil {
				p.log.Warn("purge of runs failed", "err", err)
			} else if r > 0 {
				p.log.Info("purged", "runs", r)
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return nil
}

// PurgeRuns deletes every run finished longer than the runs' retention
// ago, whole (store.Tx.PurgeRuns), Batch runs per transaction, and returns
// how many it deleted.
func (p *Purger) PurgeRuns(ctx context.Context) (int, error) {
	before := p.cfg.Now().Add(-p.cfg.Runs)
	total := 0
	for {
		var n int
		if err := p.st.Update(ctx, func(tx store.Tx) error {
			var err error
			n, err = tx.PurgeRuns(ctx, before, p.cfg.Batch)
			return err
		}); err != nil {
			return total, fmt.Errorf("purge runs: %w", err)
		}
		total += n
		if n < p.cfg.Batch {
			return total, nil
		}
	}
}

// Purge deletes every finished action (with its history) and every event
// older than the retention, Batch rows per transaction, and returns how
// many actions and events it deleted. Notification deliveries older than
// the retention go with them.
func (p *Purger) Purge(ctx context.Context) (actions, events int, err error) {
	before := p.cfg.Now().Add(-p.cfg.Retention)
	var deliveries int
	for _, step := range []struct {
		n    *int
		what string
		fn   func(tx store.Tx) (int, error)
	}{
		{&actions, "actions", func(tx store.Tx) (int, error) { return tx.PurgeActions(ctx, before, p.cfg.Batch) }},
		{&events, "events", func(tx store.Tx) (int, error) { return tx.PurgeEvents(ctx, before, p.cfg.Batch) }},
		{&deliveries, "deliveries", func(tx store.Tx) (int, error) { return tx.PurgeDeliveries(ctx, before, p.cfg.Batch) }},
	} {
		for {
			var n int
			if err := p.st.Update(ctx, func(tx store.Tx) error {
				var err error
				n, err = step.fn(tx)
				return err
			}); err != nil {
				return actions, events, fmt.Errorf("purge %s: %w", step.what, err)
			}
			*step.n += n
			if n < p.cfg.Batch {
				break
			}
		}
	}
	return actions, events, nil
}
