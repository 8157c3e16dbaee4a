// Package budget is the arithmetic of the disruption budget
// (docs/architecture.md, "Labels, targets and the disruption budget"): which
// kinds are disruptive, which nodes of a cluster are unavailable and why, and
// how many more may become so. It reads store records and decides nothing on
// its own: the orchestrator enforces the budget at push time (core/orchestrate,
// budget.go), and the API shows it.
package budget

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/musterhq/muster/core/glob"
	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/action"
	"github.com/musterhq/muster/shared/config"
	"github.com/musterhq/muster/shared/limit"
	"github.com/musterhq/muster/shared/names"
)

// KindRule marks the kinds matching a glob (glob.Match, the syntax of the
// approval rules: "*" alone matches every kind, example.com/** every kind
// below example.com/) as disruptive or not, and may name a lock those kinds
// take. It is one entry of the core's `kinds:` configuration.
type KindRule struct {
	Kind       string `mapstructure:"kind" yaml:"kind"`
	Disruptive bool   `mapstructure:"disruptive" yaml:"disruptive"`
	// Lock is a lock every stage whose steps (rollback included) run a
	// kind of the rule takes while it runs, as if the stage said it
	// (docs/runs-and-playbooks.md, "Locks across runs"); nil: none. It
	// is written "lock: db" (per cluster) or "lock: {name: db, scope:
	// global}".
	Lock *KindLock `mapstructure:"lock" yaml:"lock,omitempty"`
}

// KindLock is the lock of a kind rule: a name, and a scope ("" or
// "cluster": per cluster; "global": across clusters).
type KindLock struct {
	Name  string `mapstructure:"name" yaml:"name"`
	Scope string `mapstructure:"scope" yaml:"scope,omitempty"`
}

// Policy is the budget configuration of the core. A running core holds it
// in a live.Value, which a reload replaces: read it there at each
// decision (a sync pass loads it once), never from a copy kept since.
type Policy struct {
	// MaxUnavailable by cluster id; a cluster not listed has no budget.
	MaxUnavailable map[string]limit.Limit
	// Kinds in order: the first rule whose glob matches a kind decides;
	// a kind no rule matches is not disruptive.
	Kinds []KindRule
}

// UnmarshalText reads a lock written as its name alone ("lock: db").
func (l *KindLock) UnmarshalText(b []byte) error {
	*l = KindLock{Name: string(b)}
	return nil
}

// ValidateKinds returns one error per bad rule, named by its key.
func ValidateKinds(rules []KindRule) config.Errors {
	var errs config.Errors
	for i, r := range rules {
		if r.Kind == "" {
			errs.Add(fmt.Sprintf("kinds[%d].kind", i), "required (a kind or a glob such as example.com/db.*)")
			continue
		}
		if !glob.Valid(r.Kind) {
			errs.Add(fmt.Sprintf("kinds[%d].kind", i), "bad glob %q", r.Kind)
		}
		if r.Lock == nil {
			continue
		}
		if err := names.CheckStep(r.Lock.Name); err != nil {
			errs.Add(fmt.Sprintf("kinds[%d].lock.name", i), "%v", err)
		}
		switch r.Lock.Scope {
		case "", store.LockCluster, store.LockGlobal:
		default:
			errs.Add(fmt.Sprintf("kinds[%d].lock.scope", i), "%q is not %q or %q", r.Lock.Scope, store.LockCluster, store.LockGlobal)
		}
	}
	return errs
}

// KindLock is the lock actions of kind take (nil: none): that of the first
// rule whose glob matches kind and which names a lock. A rule without a
// lock decides nothing of locks, so a rule that only marks kinds
// disruptive may come before or after those naming locks. The scope is
// filled: cluster when the rule leaves it out.
func (p Policy) KindLock(kind string) *store.Lock {
	for _, r := range p.Kinds {
		if r.Lock != nil && glob.Match(r.Kind, kind) {
			l := &store.Lock{Name: r.Lock.Name, Scope: r.Lock.Scope}
			if l.Scope == "" {
				l.Scope = store.LockCluster
			}
			return l
		}
	}
	return nil
}

// Disruptive reports whether actions of kind count against a budget.
func (p Policy) Disruptive(kind string) bool {
	for _, r := range p.Kinds {
		if glob.Match(r.Kind, kind) {
			return r.Disruptive
		}
	}
	return false
}

// Limit returns the cluster's max_unavailable, and false when it has none
// (a cluster listed with 0 has a budget: no disruption at all).
func (p Policy) Limit(clusterID string) (limit.Limit, bool) {
	l, ok := p.MaxUnavailable[clusterID]
	return l, ok
}

// Max resolves max_unavailable against a cluster of total nodes: a
// percentage is rounded down, but never below 1 when it is above 0 and the
// cluster has nodes (10% of 5 nodes is 1), so that a small cluster can
// still make progress.
func Max(l limit.Limit, total int) int {
	n := l.Floor(total)
	if n < 1 && l.Percent && l.N > 0 && total > 0 {
		n = 1
	}
	return n
}

// Reasons a node is unavailable.
const (
	ReasonDown       = "down"
	ReasonDrained    = "drained"
	ReasonDisruptive = "disruptive action"
	ReasonPushing    = "disruptive action pushed, not yet confirmed"
	ReasonProcedure  = "in flight in a disruptive procedure"
)

// Procedure reports whether the nodes of a run's stage whose steps (and
// rollback steps) are of kinds are unavailable for their whole time in
// flight, from their first step until their last ended and their soak
// passed: when any of those kinds is disruptive. Drain → upgrade → verify →
// undrain of one node is then one unavailability, gaps between steps,
// retry delays and soak included, and every step of such a stage, of a
// disruptive kind or not, waits for the budget before it is pushed to a
// node not yet unavailable (docs/architecture.md, "Labels, targets and the
// disruption budget").
func (p Policy) Procedure(kinds []string) bool {
	for _, k := range kinds {
		if p.Disruptive(k) {
			return true
		}
	}
	return false
}

// WindowHolds is the one rule of which actions a maintenance window
// holds: one of a disruptive kind, and every child of a run stage that is
// a procedure (inProcedure: of a stage whose kinds make one). The push
// gate passes runs.Procedures.Holds, which knows the stages running now;
// the web UI, offering Mark urgent before the stage runs, passes whether
// the child's stage could be one (Procedure of its kinds).
func (p Policy) WindowHolds(kind string, inProcedure bool) bool {
	return inProcedure || p.Disruptive(kind)
}

// NodeReason says whether a node is unavailable by its own status, and why (""
// when it is not). It is the one place that decides it: a node is unavailable
// while DOWN or drained (docs/architecture.md, "Labels, targets and the
// disruption budget").
func NodeReason(n *store.Node) string {
	switch {
	case n.Status == store.NodeDown:
		return ReasonDown
	case n.Drained:
		return ReasonDrained
	}
	return ""
}

// Holds reports whether an open record makes its node unavailable: a
// disruptive action NEW or RUNNING on the agent, or PENDING_SCHEDULE but
// already pushed (its answer not seen yet: it may be running).
func (p Policy) Holds(r *store.Record) bool {
	if !p.Disruptive(r.Kind) {
		return false
	}
	switch r.State {
	case action.New, action.Running:
		return true
	case action.PendingSchedule:
		return r.PushedStoreID != ""
	}
	return false
}

// Usage is a cluster's budget in use.
type Usage struct {
	Limit limit.Limit
	// Total is the cluster's node count; Max is Limit resolved against it.
	Total, Max int
	// Unavailable maps each unavailable node to why.
	Unavailable map[string]string
}

// Usage computes the budget in use of a cluster from its nodes and its open
// actions; nil when the cluster has no budget.
func (p Policy) Usage(clusterID string, nodes []store.Node, open []store.Record) *Usage {
	return p.UsageWith(clusterID, nodes, open, nil)
}

// UsageWith is Usage with the nodes in flight in a stage that Procedure
// holds (ReasonProcedure).
func (p Policy) UsageWith(clusterID string, nodes []store.Node, open []store.Record, inFlight map[string]bool) *Usage {
	l, ok := p.Limit(clusterID)
	if !ok {
		return nil
	}
	u := &Usage{Limit: l, Total: len(nodes), Max: Max(l, len(nodes)), Unavailable: map[string]string{}}
	for i := range nodes {
		if why := NodeReason(&nodes[i]); why != "" {
			u.Unavailable[nodes[i].ID] = why
		}
	}
	for node := range inFlight {
		if _, ok := u.Unavailable[node]; !ok {
			u.Unavailable[node] = ReasonProcedure
		}
	}
	for i := range open {
		r := &open[i]
		if _, ok := u.Unavailable[r.NodeID]; ok || r.ClusterID != clusterID || !p.Holds(r) {
			continue
		}
		u.Unavailable[r.NodeID] = ReasonDisruptive
		if r.State == action.PendingSchedule {
			u.Unavailable[r.NodeID] = ReasonPushing
		}
	}
	return u
}

// Admits reports whether a disruptive action may start on node: the node is
// already unavailable (one more disruptive action does not change the
// count), or there is room for one more.
func (u *Usage) Admits(node string) bool {
	if _, ok := u.Unavailable[node]; ok {
		return true
	}
	return len(u.Unavailable) < u.Max
}

// HeldReason is the state_reason of an action the budget holds back: the
// count, and which nodes are unavailable and why, so the reason names the
// real cause (a drained node elsewhere, not the held node itself).
func (u *Usage) HeldReason() string { return u.HeldReasonWith(nil) }

// heldCauses is how many unavailable nodes a held reason names; the rest
// are counted.
const heldCauses = 3

// HeldReasonWith is HeldReason counting also the nodes of earlier, whose
// turn comes first (a plan's wave): they are named last, as "earlier in
// this wave".
func (u *Usage) HeldReasonWith(earlier []string) string {
	var causes []string
	for _, n := range u.Nodes() {
		causes = append(causes, n+" "+u.Unavailable[n])
	}
	for _, n := range earlier {
		causes = append(causes, n+" earlier in this wave")
	}
	more := ""
	if len(causes) > heldCauses {
		more = fmt.Sprintf(", and %d more", len(causes)-heldCauses)
		causes = causes[:heldCauses]
	}
	total := len(u.Unavailable) + len(earlier)
	if len(causes) == 0 {
		return fmt.Sprintf("%s: %d of %d unavailable", HeldPrefix, total, u.Max)
	}
	return fmt.Sprintf("%s: %d of %d unavailable (%s%s)", HeldPrefix, total, u.Max, strings.Join(causes, ", "), more)
}

// Nodes lists the unavailable node ids, sorted.
func (u *Usage) Nodes() []string { return slices.Sorted(maps.Keys(u.Unavailable)) }

// HeldPrefix starts the state_reason of every action the budget holds.
const HeldPrefix = "held by the disruption budget"

// Held counts the actions of open that the budget holds back now.
func Held(open []store.Record) int {
	n := 0
	for i := range open {
		if r := &open[i]; r.State == action.PendingSchedule && strings.HasPrefix(r.StateReason, HeldPrefix) {
			n++
		}
	}
	return n
}
