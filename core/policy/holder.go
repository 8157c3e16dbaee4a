package policy

import (
	"cmp"
	"context"
	"encoding/json"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/musterhq/muster/core/approval"
	"github.com/musterhq/muster/core/budget"
	"github.com/musterhq/muster/core/schedule"
	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/limit"
	"github.com/musterhq/muster/shared/live"
	"github.com/musterhq/muster/shared/wire"
)

// Settings is what of the policies stays in the configuration: the
// approval policy's default, self-approval and TTL (its rules are
// records), the disruptive kinds, and the least window.
type Settings struct {
	Approval  approval.Policy
	Kinds     []budget.KindRule
	MinWindow time.Duration
}

// Holder composes the live policies every decision reads from the
// settings of the configuration and the records of the store: the
// approval policy (its rules the records', by position), the budgets and
// the calendars' windows. No consumer keeps a copy: each reads its
// live.Value at each decision.
type Holder struct {
	mu   sync.Mutex
	set  Settings
	recs []store.PolicyRecord
	appr *live.Value[approval.Policy]
	bud  *live.Value[budget.Policy]
	cals *schedule.Holder
	log  *slog.Logger
	// last is each cluster's windows and budget as last published, to
	// tell which changed.
	last map[string]string
}

// NewHolder holds set and no record yet; the windows go to cals.
func NewHolder(set Settings, cals *schedule.Holder, log *slog.Logger) *Holder {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	h := &Holder{set: set, appr: live.New(set.Approval), bud: live.New(budget.Policy{Kinds: set.Kinds}), cals: cals, log: log,
		last: map[string]string{}}
	h.mu.Lock()
	h.publish()
	h.mu.Unlock()
	return h
}

// Approval is the approval policy as it is now.
func (h *Holder) Approval() *live.Value[approval.Policy] { return h.appr }

// Budget is the budgets and disruptive kinds as they are now.
func (h *Holder) Budget() *live.Value[budget.Policy] { return h.bud }

// SetSettings takes the settings of a reloaded configuration.
func (h *Holder) SetSettings(set Settings) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.set = set
	h.publish()
}

// SetRecords makes recs (the live records of the store) the records of
// the policies and returns the clusters whose windows or budget changed.
func (h *Holder) SetRecords(recs []store.PolicyRecord) []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.recs = slices.Clone(recs)
	return h.publish()
}

// publish composes and stores the policies; h.mu is held.
func (h *Holder) publish() []string {
	var rules []store.PolicyRecord
	bud := budget.Policy{MaxUnavailable: map[string]limit.Limit{}, Kinds: h.set.Kinds}
	windows := map[string][]schedule.WindowSpec{}
	seen := map[string]string{}
	for _, r := range h.recs {
		if r.DeletedTS != nil {
			continue
		}
		switch r.Kind {
		case store.PolicyApprovalRule:
			rules = append(rules, r)
		case store.PolicyBudget:
			var b wire.BudgetSpec
			if err := json.Unmarshal([]byte(r.Spec), &b); err != nil {
				h.log.Warn("policy: a stored budget does not read; it is left out", "id", r.ID, "err", err)
				continue
			}
			l, err := limit.Parse(b.MaxUnavailable)
			if err != nil {
				h.log.Warn("policy: a stored budget does not read; it is left out", "id", r.ID, "err", err)
				continue
			}
			bud.MaxUnavailable[r.ClusterID] = l
			seen[r.ClusterID] += "b" + l.String() + ";"
		case store.PolicyWindow:
			var w wire.WindowSpec
			if err := json.Unmarshal([]byte(r.Spec), &w); err != nil {
				h.log.Warn("policy: a stored window does not read; it is left out", "id", r.ID, "err", err)
				continue
			}
			d, _ := time.ParseDuration(w.Duration)
			windows[r.ClusterID] = append(windows[r.ClusterID], schedule.WindowSpec{Cron: w.Cron, Duration: d, Timezone: w.Timezone})
			seen[r.ClusterID] += "w" + r.Spec + ";"
		}
	}
	slices.SortStableFunc(rules, func(a, b store.PolicyRecord) int {
		var x, y wire.ApprovalRuleSpec
		_ = json.Unmarshal([]byte(a.Spec), &x)
		_ = json.Unmarshal([]byte(b.Spec), &y)
		return cmp.Or(cmp.Compare(x.Position, y.Position), cmp.Compare(a.ID, b.ID))
	})
	ap := h.set.Approval
	ap.Rules = nil
	for _, r := range rules {
		var s wire.ApprovalRuleSpec
		if err := json.Unmarshal([]byte(r.Spec), &s); err != nil {
			h.log.Warn("policy: a stored approval rule does not read; it is left out", "id", r.ID, "err", err)
			continue
		}
		ap.Rules = append(ap.Rules, ToRule(s))
	}
	cals := schedule.Calendars{}
	for id, ws := range windows {
		if len(ws) > schedule.MaxWindows {
			ws = ws[:schedule.MaxWindows]
		}
		cal, bad := schedule.ParseCalendar(ws, nil, h.set.MinWindow)
		if len(bad) > 0 {
			h.log.Warn("policy: stored windows do not read; the cluster's windows are left out", "cluster", id, "err", bad[0].Err)
			continue
		}
		cals[id] = cal
	}
	h.appr.Store(ap)
	h.bud.Store(bud)
	if h.cals != nil {
		h.cals.SetConfig(cals)
	}
	var changed []string
	for id := range maps.Keys(seen) {
		if seen[id] != h.last[id] {
			changed = append(changed, id)
		}
	}
	for id := range maps.Keys(h.last) {
		if _, ok := seen[id]; !ok {
			changed = append(changed, id)
		}
	}
	h.last = seen
	slices.Sort(changed)
	return changed
}

// Load reads the live policy records of the store.
func Load(ctx context.Context, st store.Store) ([]store.PolicyRecord, error) {
	var out []store.PolicyRecord
	err := st.Read(ctx, func(r store.Reader) error {
		var err error
		out, err = r.Policies(ctx, store.PolicyQuery{Live: true})
		return err
	})
	return out, err
}

// Events are the event types of a change of a policy record.
var Events = []string{store.EventPolicyCreated, store.EventPolicyChanged, store.EventPolicyDeleted}

// Watch keeps h's records those of the store: it loads them, then again
// whenever the event log (of this replica or, on PostgreSQL, of another)
// shows a record made, changed or deleted, and calls changed with the
// clusters whose windows or budget changed (to sync them now), until ctx
// ends.
func Watch(ctx context.Context, st store.Store, h *Holder, log *slog.Logger, changed func(clusters []string)) {
	store.Follow(ctx, st, Events, func(ctx context.Context) error {
		recs, err := Load(ctx, st)
		if err != nil {
			return err
		}
		if cs := h.SetRecords(recs); len(cs) > 0 && changed != nil {
			changed(cs)
		}
		return nil
	}, func(err error, loaded bool) {
		if loaded {
			log.Warn("policy: reading the stored records failed; the last ones stay", "err", err)
		} else {
			log.Warn("policy: reading the stored records failed; trying again at the next commit", "err", err)
		}
	})
}
