package orchestrate

import (
	"sync"
	"time"

	"github.com/musterhq/muster/core/actions"
	"github.com/musterhq/muster/core/budget"
	"github.com/musterhq/muster/core/runs"
	"github.com/musterhq/muster/core/schedule"
	"github.com/musterhq/muster/core/store"
)

// Windows, freezes and later starts at push time (docs/architecture.md,
// "Windows, freezes and later starts"). They are one more hold of
// pushPending, beside the drained node and the disruption budget: an
// action the gate holds stays PENDING_SCHEDULE with a state_reason saying
// until when, and a wake-up is armed for that moment, so that it goes
// promptly once it may, not at the next interval.

// pushGate is what a sync asks before pushing each action: its not_before,
// and, for a disruptive action (or any step of a stage the budget holds
// whole, runs.Procedures), the cluster's windows and freezes.
type pushGate struct {
	cal    *schedule.Calendar // nil: the cluster has none
	policy budget.Policy
	procs  *runs.Procedures

	mu     sync.Mutex
	status schedule.CalendarStatus // the calendar at status.At, until status.NextChange()
	valid  bool
}

// newGate is the gate of one sync of a cluster.
func (o *Orchestrator) newGate(clusterID string, procs *runs.Procedures) *pushGate {
	return &pushGate{cal: o.cfg.Calendars.Load().Of(clusterID), policy: o.cfg.Budget.Load(), procs: procs}
}

// at is the calendar's status at now, computed again only once it may
// have changed.
func (g *pushGate) at(now time.Time) schedule.CalendarStatus {
	g.mu.Lock()
	defer g.mu.Unlock()
	if next := g.status.NextChange(); !g.valid || now.Before(g.status.At) || (!next.IsZero() && !now.Before(next)) {
		g.status, g.valid = g.cal.At(now), true
	}
	return g.status
}

// holds says why r may not be pushed at now ("" when it may) and when that
// may change (zero when nothing will change it by itself).
func (g *pushGate) holds(r *store.Record, now time.Time) (string, time.Time) {
	if g == nil {
		return "", time.Time{}
	}
	if r.NotBefore != nil && now.Before(*r.NotBefore) {
		return actions.NotBeforeReason(*r.NotBefore), *r.NotBefore
	}
	if g.cal == nil || !g.policy.WindowHolds(r.Kind, g.procs.Holds(r)) {
		return "", time.Time{}
	}
	s := g.at(now)
	urgent := r.Urgent != ""
	if s.Allows(urgent) || g.procs.Started(r) {
		// Open; or a node already in flight in its procedure, which
		// finishes its steps.
		return "", time.Time{}
	}
	return s.Reason(urgent), s.NextChange()
}

// again is holds asked with the calendar cal as it is now, rather than the
// one the sync began with (a reload may have replaced it).
func (g *pushGate) again(cal *schedule.Calendar, r *store.Record, now time.Time) (string, time.Time) {
	if g == nil {
		return "", time.Time{}
	}
	if cal != g.cal {
		g = &pushGate{cal: cal, policy: g.policy, procs: g.procs}
	}
	return g.holds(r, now)
}
