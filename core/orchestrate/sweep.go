package orchestrate

import (
	"context"
	"fmt"
	"time"

	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/action"
	"github.com/musterhq/muster/shared/startstop"
)

// The expiry sweep (docs/architecture.md, "One loop per cluster"): approvals
// past approval.ttl, approved actions past orchestrate.schedule_ttl and runs
// nobody approved in time, every SweepEvery, each writing nothing when there
// is nothing to expire.

// sweeper is the expiry sweep, a shared/startstop part.
type sweeper struct {
	*startstop.Func
	o *Orchestrator
	// nudge asks for a full sync of a cluster (an expired schedule's cancel
	// request to send).
	nudge func(clusterID string)
}

var _ startstop.Service = (*sweeper)(nil)

func newSweeper(o *Orchestrator, nudge func(clusterID string)) *sweeper {
	s := &sweeper{o: o, nudge: nudge}
	s.Func = startstop.NewFunc(s.run)
	return s
}

// run runs expireApprovals, expireSchedules and the runs' expiry every
// SweepEvery until ctx ends.
func (s *sweeper) run(ctx context.Context) {
	o := s.o
	// It runs whatever the TTLs at start: a reload may give approvals
	// one (an idle sweep only reads).
	t := time.NewTicker(o.cfg.SweepEvery)
	defer t.Stop()
	for {
		var sw Swept
		var err error
		if sw.Approvals, err = s.expireApprovals(ctx); err != nil && ctx.Err() == nil {
			o.log.Warn("approval expiry failed", "err", err)
		}
		if sw.Schedules, err = s.expireSchedules(ctx); err != nil && ctx.Err() == nil {
			o.log.Warn("schedule expiry failed", "err", err)
		}
		if _, err := o.expireRuns(ctx); err != nil && ctx.Err() == nil {
			o.log.Warn("run expiry failed", "err", err)
		}
		o.TestSignals.Swept.Send(sw)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// expire runs fn in an Update, after a read finds that there is work for it
// (so an idle sweep takes no write transaction), and returns how many
// records it changed.
func (s *sweeper) expire(ctx context.Context, pending func(r store.Reader, cutoff time.Time) ([]store.Record, error),
	ttl time.Duration, fn func(ctx context.Context, tx store.Tx) ([]*store.Record, error)) ([]*store.Record, error) {
	if ttl <= 0 {
		return nil, nil
	}
	o := s.o
	var n int
	err := o.st.Read(ctx, func(r store.Reader) error {
		recs, err := pending(r, action.UTC(time.Now()).Add(-ttl))
		n = len(recs)
		return err
	})
	if err != nil || n == 0 {
		return nil, err
	}
	var out []*store.Record
	err = o.st.Update(ctx, func(tx store.Tx) error {
		var err error
		out, err = fn(ctx, tx)
		return err
	})
	return out, err
}

// expireApprovals cancels, with reason "expired" and an action.expired event,
// every PENDING_APPROVE action created more than the approval policy's TTL
// ago (as it is now)
// (actions.Rules.ExpireApprovals). It returns how many it expired, and
// writes nothing when there are none.
func (s *sweeper) expireApprovals(ctx context.Context) (int, error) {
	o := s.o
	out, err := s.expire(ctx, func(r store.Reader, cutoff time.Time) ([]store.Record, error) {
		return r.ApprovalsBefore(ctx, cutoff)
	}, o.rules.Policy.Load().TTL, o.rules.ExpireApprovals)
	if err != nil {
		return 0, fmt.Errorf("expire approvals: %w", err)
	}
	o.metrics.expired.Add(float64(len(out)))
	return len(out), nil
}

// expireSchedules ends every PENDING_SCHEDULE action that has not reached
// its agent ScheduleTTL after it was scheduled: CANCELLED with reason
// "schedule timeout", or a cancel request when a push was attempted
// (actions.Rules.ExpireSchedules). It returns how many it changed, and
// writes nothing when there are none.
func (s *sweeper) expireSchedules(ctx context.Context) (int, error) {
	o := s.o
	out, err := s.expire(ctx, func(r store.Reader, cutoff time.Time) ([]store.Record, error) {
		return r.ScheduledBefore(ctx, cutoff)
	}, o.rules.ScheduleTTL, o.rules.ExpireSchedules)
	if err != nil {
		return 0, fmt.Errorf("expire schedules: %w", err)
	}
	clusters := map[string]bool{}
	for _, r := range out {
		if r.CancelRequested && !clusters[r.ClusterID] {
			clusters[r.ClusterID] = true
			s.nudge(r.ClusterID)
		}
	}
	return len(out), nil
}
