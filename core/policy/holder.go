package policy

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
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
	// good is the last spec of each record (kind/id) that read.
	good map[string]string
	// bad is the records that do not read, badChanged whether that
	// changed at the last publish; onBad is told (OnUnreadable).
	bad        []string
	badChanged bool
	onBad      func(problems []string)
}

// NewHolder holds set and no record yet; the windows go to cals.
func NewHolder(set Settings, cals *schedule.Holder, log *slog.Logger) *Holder {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	h := &Holder{set: set, appr: live.New(set.Approval), bud: live.New(budget.Policy{Kinds: set.Kinds}), cals: cals, log: log,
		last: map[string]string{}, good: map[string]string{}}
	h.mu.Lock()
	h.publish()
	h.mu.Unlock()
	return h
}

// OnUnreadable calls f with the records that do not read (one line each,
// what is kept instead) whenever that set changes; empty when every record
// reads again. f runs outside the holder's lock.
func (h *Holder) OnUnreadable(f func(problems []string)) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.onBad = f
}

// Unreadable is the records that do not read now, one line each.
func (h *Holder) Unreadable() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.bad)
}

// Approval is the approval policy as it is now.
func (h *Holder) Approval() *live.Value[approval.Policy] { return h.appr }

// Budget is the budgets and disruptive kinds as they are now.
func (h *Holder) Budget() *live.Value[budget.Policy] { return h.bud }

// SetSettings takes the settings of a reloaded configuration.
func (h *Holder) SetSettings(set Settings) {
	h.mu.Lock()
	h.set = set
	h.publish()
	h.tell()
}

// SetRecords makes recs (the live records of the store) the records of
// the policies and returns the clusters whose windows or budget changed.
func (h *Holder) SetRecords(recs []store.PolicyRecord) []string {
	h.mu.Lock()
	h.recs = slices.Clone(recs)
	changed := h.publish()
	h.tell()
	return changed
}

// tell unlocks h.mu and, when the unreadable records changed at the last
// publish, calls the OnUnreadable function.
func (h *Holder) tell() {
	f, bad, changed := h.onBad, slices.Clone(h.bad), h.badChanged
	h.badChanged = false
	h.mu.Unlock()
	if changed && f != nil {
		f(bad)
	}
}

// sourceRank orders approval rules at one position by where they come
// from: core.yaml's first, then those made by hand, then a policy file's.
// Both files number their rules 0, 1, ...: without it a file's rule would
// come before a configured one at its position only for its name.
func sourceRank(source string) int {
	switch {
	case source == store.SourceConfig:
		return 0
	case strings.HasPrefix(source, store.SourceFilePrefix):
		return 2
	}
	return 1
}

// publish composes and stores the policies; h.mu is held. A record that
// does not read (a spec of another version, a window shorter than the
// least window of a reloaded configuration) is never dropped silently:
// its last good version is kept when there is one; a cluster none of
// whose windows reads is kept closed; each is logged and reported
// (OnUnreadable).
func (h *Holder) publish() []string {
	type rule struct {
		id   string
		rank int // sourceRank
		spec wire.ApprovalRuleSpec
	}
	var (
		rules    []rule
		problems []string
	)
	bud := budget.Policy{MaxUnavailable: map[string]limit.Limit{}, Kinds: h.set.Kinds}
	windows := map[string][]schedule.Window{}
	closed := map[string]string{}
	broken := map[string]bool{}
	seen := map[string]string{}
	good := map[string]string{}
	// pick reads r's spec with read, or else its last good one.
	pick := func(r store.PolicyRecord, read func(spec string) error) (string, bool) {
		k := r.Kind + "/" + r.ID
		err := read(r.Spec)
		if err == nil {
			good[k] = r.Spec
			return r.Spec, true
		}
		if last, ok := h.good[k]; ok && last != r.Spec && read(last) == nil {
			good[k] = last
			problems = append(problems, fmt.Sprintf("%s %s does not read (%v): its last good version is kept", Name(r.Kind), r.ID, err))
			return last, true
		}
		problems = append(problems, fmt.Sprintf("%s %s does not read (%v): it is left out", Name(r.Kind), r.ID, err))
		return "", false
	}
	for _, r := range h.recs {
		if r.DeletedTS != nil {
			continue
		}
		switch r.Kind {
		case store.PolicyApprovalRule:
			var s wire.ApprovalRuleSpec
			if _, ok := pick(r, func(spec string) error { s = wire.ApprovalRuleSpec{}; return json.Unmarshal([]byte(spec), &s) }); ok {
				rules = append(rules, rule{id: r.ID, rank: sourceRank(r.Source), spec: s})
			}
		case store.PolicyBudget:
			var l limit.Limit
			if _, ok := pick(r, func(spec string) error {
				var b wire.BudgetSpec
				if err := json.Unmarshal([]byte(spec), &b); err != nil {
					return err
				}
				var err error
				l, err = limit.Parse(b.MaxUnavailable)
				return err
			}); ok {
				bud.MaxUnavailable[r.ClusterID] = l
				seen[r.ClusterID] += "b" + l.String() + ";"
			}
		case store.PolicyWindow:
			var win schedule.Window
			spec, ok := pick(r, func(spec string) error {
				var w wire.WindowSpec
				if err := json.Unmarshal([]byte(spec), &w); err != nil {
					return err
				}
				d, _ := time.ParseDuration(w.Duration)
				cal, bad := schedule.ParseCalendar([]schedule.WindowSpec{{Cron: w.Cron, Duration: d, Timezone: w.Timezone}}, nil,
					h.set.MinWindow)
				if len(bad) > 0 {
					return bad[0].Err
				}
				win = cal.Windows[0]
				return nil
			})
			if !ok {
				broken[r.ClusterID] = true
				continue
			}
			if len(windows[r.ClusterID]) < schedule.MaxWindows {
				windows[r.ClusterID] = append(windows[r.ClusterID], win)
			}
			seen[r.ClusterID] += "w" + spec + ";"
		}
	}
	for id := range broken {
		if len(windows[id]) == 0 {
			// Closed, not open at any time as a cluster without
			// windows is.
			closed[id] = "none of the cluster's windows reads"
			seen[id] += "closed;"
			problems = append(problems, fmt.Sprintf("cluster %s: none of its windows reads: it is kept closed", id))
		}
	}
	h.good = good
	slices.SortStableFunc(rules, func(a, b rule) int {
		return cmp.Or(cmp.Compare(a.spec.Position, b.spec.Position), cmp.Compare(a.rank, b.rank), cmp.Compare(a.id, b.id))
	})
	ap := h.set.Approval
	ap.Rules = nil
	for _, r := range rules {
		ap.Rules = append(ap.Rules, ToRule(r.spec))
	}
	cals := schedule.Calendars{}
	for id, ws := range windows {
		cals[id] = &schedule.Calendar{Windows: ws}
	}
	for id, why := range closed {
		cals[id] = &schedule.Calendar{Closed: why}
	}
	h.appr.Store(ap)
	h.bud.Store(bud)
	if h.cals != nil {
		h.cals.SetConfig(cals)
	}
	slices.Sort(problems)
	if !slices.Equal(problems, h.bad) {
		for _, p := range problems {
			h.log.Warn("policy: a stored record does not read", "problem", p)
		}
		h.bad, h.badChanged = problems, true
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
