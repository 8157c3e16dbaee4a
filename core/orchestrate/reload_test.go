package orchestrate

import (
	"testing"
	"time"

	"github.com/musterhq/muster/core/actions"
	"github.com/musterhq/muster/core/approval"
	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/action"
	"github.com/musterhq/muster/shared/live"
)

// Issue 30, item 5: the sweep expires approvals with the TTL of the policy
// as it is now. Reloaded from 24 h to 1 h, a 2 h-old action expires at the
// next sweep; from 0 (nothing expires) to 1 h, old actions start expiring.
func TestTheSweepExpiresApprovalsWithTheReloadedTTL(t *testing.T) {
	t.Parallel()
	for name, start := range map[string]time.Duration{"24h to 1h": 24 * time.Hour, "0 to 1h": 0} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			pol := live.New(approval.Policy{Default: approval.Required, TTL: start})
			h := setup(t, Config{Interval: time.Hour, SweepEvery: 10 * time.Millisecond,
				Rules: &actions.Rules{Policy: pol}}, "n1")
			h.start()
			id := h.create("n1", func(r *store.Record) { r.State, r.CreatedTS = action.PendingApprove, time.Now().Add(-2*time.Hour) })
			if start > 0 {
				h.o.TestSignals.Swept.WaitFor("a sweep under the first TTL", func(Swept) bool { return true })
				wantState(t, h.record(id), action.PendingApprove)
			}
			pol.Store(approval.Policy{Default: approval.Required, TTL: time.Hour})
			h.o.TestSignals.Swept.WaitFor("a sweep that expires it under the reloaded TTL", func(s Swept) bool { return s.Approvals == 1 })
			wantState(t, h.record(id), action.Cancelled)
		})
	}
}
