package core

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"time"

	"github.com/musterhq/muster/core/approval"
	"github.com/musterhq/muster/core/budget"
	"github.com/musterhq/muster/core/discovery"
	"github.com/musterhq/muster/core/nodes"
	"github.com/musterhq/muster/core/notify"
	"github.com/musterhq/muster/core/policy"
	"github.com/musterhq/muster/core/schedule"
	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/live"
)

// ErrNotRunning is a reload asked of a core that is not serving.
var ErrNotRunning = errors.New("the core is not running")

// Reloader applies one part of a reloaded configuration to the running
// core and says what changed ("" for nothing). It is called with the
// configuration in use and the new one, already validated. A part that
// reloads itself (notifications, once they have a running half) adds one
// with AddReloader before Run.
type Reloader func(old, next Config) (changed string)

// AddReloader adds a part reloaded on Reload, after the built-in ones.
func (c *Core) AddReloader(r Reloader) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.reloaders = append(c.reloaders, r)
}

// reloadable is what a reload may change in a running core: the approval
// policy, the disruptive kinds, the clusters' budgets, windows and freezes,
// and the notification destinations. The parts of the core read the
// policies through one live.Value each, at each decision; the destinations
// through the notify worker and the store's outbox.
type reloadable struct {
	approval *live.Value[approval.Policy]
	budget   *live.Value[budget.Policy]
	members  *live.Value[nodes.Membership]
	calendar *live.Value[schedule.Calendars]
	cals     *schedule.Holder // writes calendar: the windows and the freezes of the store
	pol      *policy.Holder   // writes approval, budget and the windows of cals from the store's records
	notify   *notify.Worker
	st       store.Store
	// nudge asks for a sync of a cluster (nil before the orchestrator
	// exists): a reloaded calendar may let held work go now.
	nudge func(clusterID string)
}

// Reload makes next the running configuration's approval rules, kinds,
// budgets, windows, freezes and notification destinations (the parts a core can change
// without a restart), and appends a core.config_reloaded event saying what
// changed. next is validated first: an invalid next changes nothing, and
// RejectConfig records why. Other changed sections are named in the event
// as needing a restart. Secret files of destinations are read again at
// every reload; one that cannot be read by then keeps the destinations in
// use, with a core.config_rejected event and a log line.
func (c *Core) Reload(ctx context.Context, next Config) (string, error) {
	if err := next.Validate(); err != nil {
		return "", c.RejectConfig(ctx, err)
	}
	c.mu.Lock()
	lv, old, reloaders := c.running, c.cfg, append([]Reloader(nil), c.reloaders...)
	c.mu.Unlock()
	if lv == nil {
		return "", ErrNotRunning
	}
	var changed []string
	if !reflect.DeepEqual(old.Approval, next.Approval) {
		changed = append(changed, "approval")
	}
	oldBudget, nextBudget := old.BudgetPolicy(), next.BudgetPolicy()
	if !reflect.DeepEqual(oldBudget.Kinds, nextBudget.Kinds) {
		changed = append(changed, "kinds")
	}
	if !reflect.DeepEqual(oldBudget.MaxUnavailable, nextBudget.MaxUnavailable) {
		changed = append(changed, "budgets")
	}
	// The approval settings and the kinds stay the configuration's; its
	// rules, budgets, windows and freezes seed the store (the watchers
	// then load them on every replica), and where the file and the store
	// disagree is told again.
	lv.pol.SetSettings(next.policySettings())
	lv.members.Store(next.Membership())
	oldCals, nextCals := calendarSpecs(old.Clusters), calendarSpecs(next.Clusters)
	if err := liftRemovedFreezes(ctx, lv.st, old, next); err != nil {
		c.log.Error("reload: lifting the freezes removed from the configuration", "err", err)
	}
	if drift, err := seedPolicy(ctx, lv.st, &old, next, c.policyDrift()); err != nil {
		c.log.Error("reload: seeding the configuration's policy", "err", err)
	} else {
		c.setDrift(drift)
	}
	if recs, err := policy.Load(ctx, lv.st); err != nil {
		c.log.Error("reload: reading the policy records", "err", err)
	} else {
		lv.pol.SetRecords(recs)
	}
	if !reflect.DeepEqual(oldCals, nextCals) {
		changed = append(changed, "windows and freezes")
		for _, cl := range next.Clusters {
			if lv.nudge != nil && !reflect.DeepEqual(oldCals[cl.ID], nextCals[cl.ID]) {
				lv.nudge(cl.ID)
			}
		}
	}
	kept := old
	data := map[string]any{}
	if lv.notify != nil {
		ch, err := lv.notify.Reload(next.Notify, next.NotifyAllowLoopback)
		if err != nil {
			// Validate read the secrets a moment ago: one changed since.
			_ = c.RejectConfig(ctx, fmt.Errorf("notify: %w", err))
		} else {
			lv.st.SetOutbox(notify.Route(next.Notify))
			kept.Notify, kept.NotifyAllowLoopback = next.Notify, next.NotifyAllowLoopback
			if !ch.Empty() {
				changed = append(changed, "notify")
				data["notify"] = ch
				c.log.Info("notification destinations reloaded", "added", ch.Added, "removed", ch.Removed,
					"changed", ch.Changed, "loopback_changed", ch.Loopback)
			}
		}
	}
	for _, r := range reloaders {
		if what := r(old, next); what != "" {
			changed = append(changed, what)
		}
	}
	restart := needsRestart(old, next)
	msg := "configuration reloaded: nothing changed"
	if len(changed) > 0 {
		msg = "configuration reloaded: " + strings.Join(changed, ", ") + " changed"
	}
	if ch, ok := data["notify"].(notify.Change); ok {
		msg += " (notify: " + ch.String() + ")"
	}
	if len(restart) > 0 {
		msg += "; changes to " + strings.Join(restart, ", ") + " take effect at the next restart"
	}
	// What is running now: the reloaded parts of next, the rest of old.
	kept.Approval, kept.Kinds = next.Approval, next.Kinds
	kept.Clusters = withBudgets(old.Clusters, next)
	c.mu.Lock()
	c.cfg = kept
	c.mu.Unlock()
	data["changed"], data["restart"] = changed, restart
	c.log.Info(msg)
	return msg, appendCoreEvent(ctx, lv.st, store.EventCoreConfigReloaded, msg,
		data)
}

// RejectConfig records a reload that brought an invalid configuration:
// the core keeps the one it has, with an event and a log line saying why.
// It returns err.
func (c *Core) RejectConfig(ctx context.Context, err error) error {
	c.mu.Lock()
	lv := c.running
	c.mu.Unlock()
	msg := "configuration not reloaded, the one in use stays: " + oneLine(err)
	c.log.Error("configuration not reloaded, the one in use stays", "err", err)
	if lv == nil {
		return errors.Join(err, ErrNotRunning)
	}
	if werr := appendCoreEvent(ctx, lv.st, store.EventCoreConfigRejected, msg, nil); werr != nil {
		return errors.Join(err, werr)
	}
	return err
}

// oneLine puts a report of several lines (a heading ending in ":", then
// one indented line per field) on one line: "heading: a; b".
func oneLine(err error) string {
	lines := strings.Split(err.Error(), "\n")
	var fields []string
	for _, l := range lines[1:] {
		if l = strings.TrimSpace(l); l != "" {
			fields = append(fields, l)
		}
	}
	if len(fields) == 0 {
		return lines[0]
	}
	return strings.TrimSuffix(lines[0], ":") + ": " + strings.Join(fields, "; ")
}

func appendCoreEvent(ctx context.Context, st store.Store, typ, msg string, data map[string]any) error {
	return st.Update(ctx, func(tx store.Tx) error {
		return tx.AppendEvent(ctx, &store.Event{TS: time.Now().UTC(), Type: typ, Actor: store.ActorCore, Message: msg, Data: data})
	})
}

// withBudgets returns clusters with the budgets, windows and freezes next
// gives them.
func withBudgets(clusters []discovery.ClusterSpec, next Config) []discovery.ClusterSpec {
	out := make([]discovery.ClusterSpec, len(clusters))
	copy(out, clusters)
	for i := range out {
		for _, n := range next.Clusters {
			if n.ID == out[i].ID {
				out[i].Budget, out[i].Windows, out[i].Freezes, out[i].Expect = n.Budget, n.Windows, n.Freezes, n.Expect
			}
		}
	}
	return out
}

// needsRestart names the sections that changed but are only read at start.
func needsRestart(old, next Config) []string {
	var out []string
	a, b := reflect.ValueOf(old), reflect.ValueOf(next)
	t := a.Type()
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("mapstructure"), ",")
		switch name {
		case "", "-", "approval", "kinds", "notify", "notify_allow_loopback":
			continue
		}
		x, y := a.Field(i).Interface(), b.Field(i).Interface()
		if name == "clusters" { // budgets, windows, freezes and expect reload; the rest does not
			x, y = withoutBudgets(old.Clusters), withoutBudgets(next.Clusters)
		}
		if !reflect.DeepEqual(x, y) {
			out = append(out, name)
		}
	}
	return out
}

func withoutBudgets(cs []discovery.ClusterSpec) []discovery.ClusterSpec {
	out := make([]discovery.ClusterSpec, len(cs))
	copy(out, cs)
	for i := range out {
		out[i].Budget = discovery.BudgetSpec{}
		out[i].Windows, out[i].Freezes, out[i].Expect = nil, nil, nil
	}
	return out
}

// calendarSpecs is the windows and freezes of every cluster, by id, for
// comparison.
func calendarSpecs(cs []discovery.ClusterSpec) map[string]any {
	out := map[string]any{}
	for _, c := range cs {
		if len(c.Windows)+len(c.Freezes) > 0 {
			out[c.ID] = []any{c.Windows, c.Freezes}
		}
	}
	return out
}
