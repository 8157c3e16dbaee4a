// Package policy is the policy kept as records in the store
// (docs/policy-as-data.md): maintenance windows, disruption budgets and
// approval rules. It checks a record's spec and gives its one canonical
// form, composes the records into the policies every decision reads (the
// approval policy, the budgets and the calendars' windows, each through
// its live holder), follows the store so that every replica reads the
// same, and seeds the store from the configuration. The freezes, kept in
// a table of their own, are composed by core/schedule.
package policy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/musterhq/muster/core/approval"
	"github.com/musterhq/muster/core/schedule"
	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/limit"
	"github.com/musterhq/muster/shared/names"
	"github.com/musterhq/muster/shared/wire"
)

// ErrInvalid is a spec or an id that cannot be stored.
var ErrInvalid = errors.New("invalid policy record")

// Kinds are the kinds of records, in the order a plan lists them.
var Kinds = []string{store.PolicyWindow, store.PolicyBudget, store.PolicyApprovalRule}

// KnownKind reports whether kind is one of Kinds.
func KnownKind(kind string) bool {
	for _, k := range Kinds {
		if k == kind {
			return true
		}
	}
	return false
}

// MaxRules bounds the approval rules in force: every decision walks them.
const MaxRules = 256

// maxSpec bounds a spec's JSON.
const maxSpec = 16 << 10

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(format, args...))
}

// strict decodes a spec's JSON into v: one object, no unknown field.
func strict(spec []byte, v any) error {
	if len(spec) > maxSpec {
		return invalid("spec of %d bytes, at most %d", len(spec), maxSpec)
	}
	dec := json.NewDecoder(bytes.NewReader(spec))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return invalid("spec: %v", err)
	}
	if dec.More() {
		return invalid("spec: one JSON object only")
	}
	return nil
}

// Record is a checked spec: the cluster it belongs to ("" for an approval
// rule) and its canonical JSON, the form stored and compared.
type Record struct {
	ClusterID string
	Spec      string
}

// Check checks a record of kind with id and spec; minWindow replaces the
// least duration of a window when set (schedule.ParseCalendar). Two specs
// that mean the same have the same canonical form ("240m" and "4h").
func Check(kind, id string, spec []byte, minWindow time.Duration) (Record, error) {
	if err := names.CheckID(id); err != nil {
		return Record{}, fmt.Errorf("%w: id: %v", ErrInvalid, err)
	}
	switch kind {
	case store.PolicyWindow:
		var w wire.WindowSpec
		if err := strict(spec, &w); err != nil {
			return Record{}, err
		}
		return CheckWindow(w, minWindow)
	case store.PolicyBudget:
		var b wire.BudgetSpec
		if err := strict(spec, &b); err != nil {
			return Record{}, err
		}
		if b.Cluster == "" {
			b.Cluster = id
		}
		if b.Cluster != id {
			return Record{}, invalid("a budget's id is its cluster's: %q, not %q", b.Cluster, id)
		}
		return CheckBudget(b)
	case store.PolicyApprovalRule:
		var r wire.ApprovalRuleSpec
		if err := strict(spec, &r); err != nil {
			return Record{}, err
		}
		return CheckRule(r)
	}
	return Record{}, invalid("kind %q: want one of %s", kind, strings.Join(Kinds, ", "))
}

func canonical(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// CheckWindow checks a window's spec.
func CheckWindow(w wire.WindowSpec, minWindow time.Duration) (Record, error) {
	if err := names.CheckID(w.Cluster); err != nil {
		return Record{}, fmt.Errorf("%w: cluster: %v", ErrInvalid, err)
	}
	d, err := time.ParseDuration(w.Duration)
	if err != nil {
		return Record{}, invalid("duration %q: want a duration like 4h", w.Duration)
	}
	if _, bad := schedule.ParseCalendar([]schedule.WindowSpec{{Cron: w.Cron, Duration: d, Timezone: w.Timezone}}, nil, minWindow); len(bad) > 0 {
		field := strings.TrimPrefix(bad[0].Field, "windows[0].")
		return Record{}, invalid("%s: %v", field, bad[0].Err)
	}
	w.Duration = d.String()
	return Record{ClusterID: w.Cluster, Spec: canonical(w)}, nil
}

// CheckBudget checks a budget's spec.
func CheckBudget(b wire.BudgetSpec) (Record, error) {
	if err := names.CheckID(b.Cluster); err != nil {
		return Record{}, fmt.Errorf("%w: cluster: %v", ErrInvalid, err)
	}
	l, err := limit.Parse(b.MaxUnavailable)
	if err != nil {
		return Record{}, fmt.Errorf("%w: max_unavailable: %v", ErrInvalid, err)
	}
	b.MaxUnavailable = l.String()
	return Record{ClusterID: b.Cluster, Spec: canonical(b)}, nil
}

// CheckRule checks an approval rule's spec as the configuration's rules
// are checked.
func CheckRule(r wire.ApprovalRuleSpec) (Record, error) {
	if r.Position < 0 || r.Position > 1_000_000 {
		return Record{}, invalid("position %d: want 0 to 1000000", r.Position)
	}
	rule := ToRule(r)
	if rule.Approval == "" {
		r.Approval = approval.Required
		if len(rule.Levels) == 0 {
			return Record{}, invalid("approval: want %q or %q", approval.Required, approval.None)
		}
	}
	p := approval.Policy{Default: approval.Required, TTL: time.Hour, Rules: []approval.Rule{ToRule(r)}}
	if errs := p.Validate(); len(errs) > 0 {
		msg := strings.ReplaceAll(errs.Err().Error(), "approval.rules[0].", "")
		return Record{}, invalid("%s", oneLine(msg))
	}
	return Record{Spec: canonical(r)}, nil
}

func oneLine(s string) string {
	var parts []string
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			parts = append(parts, l)
		}
	}
	return strings.Join(parts, "; ")
}

// ToRule is the approval rule of a spec.
func ToRule(r wire.ApprovalRuleSpec) approval.Rule {
	out := approval.Rule{Kind: r.Kind, Cluster: r.Cluster, Approval: r.Approval}
	for _, l := range r.Levels {
		out.Levels = append(out.Levels, approval.Level{Teams: l.Teams, Persons: l.Persons, Min: l.Min})
	}
	return out
}

// FromRule is the spec of an approval rule at position.
func FromRule(r approval.Rule, position int) wire.ApprovalRuleSpec {
	out := wire.ApprovalRuleSpec{Position: position, Kind: r.Kind, Cluster: r.Cluster, Approval: r.Approval}
	if out.Approval == "" && len(r.Levels) > 0 {
		out.Approval = approval.Required
	}
	for _, l := range r.Levels {
		out.Levels = append(out.Levels, wire.RuleLevel{Teams: l.Teams, Persons: l.Persons, Min: l.Min})
	}
	return out
}

// Loosens reports whether replacing the record cur (nil: none) with next
// (nil: deleted) may let work go that cur held: a wider or removed budget,
// a window added beside others or removed, any change of an approval rule.
// Such changes take auth.Unfreeze, as lifting a freeze does; the others
// (a first window, a narrower budget) only hold work, and take auth.Freeze.
// windows is how many live windows the cluster has besides this one.
func Loosens(kind string, cur, next *Record, windows int) bool {
	switch kind {
	case store.PolicyBudget:
		if cur == nil {
			return false
		}
		if next == nil {
			return true
		}
		var a, b wire.BudgetSpec
		_ = json.Unmarshal([]byte(cur.Spec), &a)
		_ = json.Unmarshal([]byte(next.Spec), &b)
		la, _ := limit.Parse(a.MaxUnavailable)
		lb, _ := limit.Parse(b.MaxUnavailable)
		return la.Percent != lb.Percent || lb.N > la.N
	case store.PolicyWindow:
		if next == nil {
			return cur != nil
		}
		if cur != nil {
			return cur.Spec != next.Spec
		}
		return windows > 0
	}
	return true
}

// ClusterOf is the cluster of a stored spec of kind: a window's cluster
// field, a budget's id; "" for an approval rule (it governs by glob).
func ClusterOf(kind, id, spec string) string {
	switch kind {
	case store.PolicyBudget:
		return id
	case store.PolicyWindow:
		var w struct {
			Cluster string `json:"cluster"`
		}
		_ = json.Unmarshal([]byte(spec), &w)
		return w.Cluster
	}
	return ""
}

// Describe is a record's spec in a line, for plans and events.
func Describe(kind, spec string) string {
	switch kind {
	case store.PolicyWindow:
		var w wire.WindowSpec
		_ = json.Unmarshal([]byte(spec), &w)
		tz := w.Timezone
		if tz == "" {
			tz = "UTC"
		}
		return fmt.Sprintf("cluster %s at %q for %s (%s)", w.Cluster, w.Cron, w.Duration, tz)
	case store.PolicyBudget:
		var b wire.BudgetSpec
		_ = json.Unmarshal([]byte(spec), &b)
		return fmt.Sprintf("cluster %s max_unavailable %s", b.Cluster, b.MaxUnavailable)
	case store.PolicyApprovalRule:
		var r wire.ApprovalRuleSpec
		_ = json.Unmarshal([]byte(spec), &r)
		kind, cl := r.Kind, r.Cluster
		if kind == "" {
			kind = "*"
		}
		if cl == "" {
			cl = "*"
		}
		s := fmt.Sprintf("#%d kind %s cluster %s: %s", r.Position, kind, cl, r.Approval)
		if len(r.Levels) > 0 {
			s += fmt.Sprintf(" (%d levels)", len(r.Levels))
		}
		return s
	}
	return spec
}
