package nodes

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/labels"
)

// Declared membership (docs/architecture.md, "Declared membership"): a
// cluster may say which nodes it expects, by id or as a count of nodes
// matching a label selector. Missing nodes make the cluster ALERT;
// unexpected ones are only shown.

// DefaultGrace is how long a declared node may be DOWN before it counts as
// missing, when the cluster's expect block does not say.
const DefaultGrace = 5 * time.Minute

// Expect is a cluster's `expect:` block: either Nodes (ids), or Count nodes
// matching Selector (every label must match; empty matches every node).
type Expect struct {
	Nodes    []string          `mapstructure:"nodes" yaml:"nodes,omitempty"`
	Count    int               `mapstructure:"count" yaml:"count,omitempty"`
	Selector map[string]string `mapstructure:"selector" yaml:"selector,omitempty"`
	// Grace is how long a declared node may be DOWN before it is missing;
	// zero means DefaultGrace.
	Grace time.Duration `mapstructure:"grace" yaml:"grace,omitempty"`
	// OnAlert is the playbook the core starts when missing nodes make the
	// cluster ALERT (core/onalert); nil: none.
	OnAlert *OnAlert `mapstructure:"on_alert" yaml:"on_alert,omitempty"`
}

// OnAlertParam is the parameter an on_alert playbook gets the missing
// nodes in, comma-separated (a count's shortfall by its reason).
const OnAlertParam = "missing"

// MaxOnAlertParams bounds an on_alert block's params.
const MaxOnAlertParams = 100

// OnAlert is a cluster's `expect.on_alert` block: a stored playbook (of
// Version, 0: the latest) and its parameters; the core adds OnAlertParam.
type OnAlert struct {
	Playbook string            `mapstructure:"playbook" yaml:"playbook"`
	Version  int               `mapstructure:"version" yaml:"version,omitempty"`
	Params   map[string]string `mapstructure:"params" yaml:"params,omitempty"`
}

// Declared says whether the block declares anything.
func (e *Expect) Declared() bool { return e != nil && (len(e.Nodes) > 0 || e.Count > 0) }

// Validate returns one message per bad field, by field name under the block
// ("nodes", "count", "selector", "grace").
func (e *Expect) Validate(checkID func(string) error, checkLabels func(map[string]string) error) map[string]string {
	out := map[string]string{}
	if e == nil {
		return out
	}
	switch {
	case len(e.Nodes) > 0 && (e.Count != 0 || len(e.Selector) > 0):
		out["nodes"] = "give either nodes or count with a selector, not both"
	case len(e.Nodes) == 0 && e.Count == 0:
		out["nodes"] = "required: the node ids, or count (with an optional selector)"
	}
	seen := map[string]bool{}
	for _, id := range e.Nodes {
		if err := checkID(id); err != nil {
			out["nodes"] = fmt.Sprintf("%q: %v", id, err)
			break
		}
		if seen[id] {
			out["nodes"] = fmt.Sprintf("node %q is listed twice", id)
			break
		}
		seen[id] = true
	}
	if e.Count < 0 {
		out["count"] = fmt.Sprintf("must be positive, got %d", e.Count)
	}
	if len(e.Selector) > 0 && e.Count == 0 && len(e.Nodes) == 0 {
		out["count"] = "required with a selector"
	}
	if err := checkLabels(e.Selector); err != nil {
		out["selector"] = err.Error()
	}
	if e.Grace < 0 {
		out["grace"] = fmt.Sprintf("must not be negative, got %s", e.Grace)
	}
	if a := e.OnAlert; a != nil {
		switch {
		case a.Playbook == "":
			out["on_alert.playbook"] = "required: the stored playbook to start when nodes are missing"
		case checkID(a.Playbook) != nil:
			out["on_alert.playbook"] = checkID(a.Playbook).Error()
		}
		if a.Version < 0 {
			out["on_alert.version"] = fmt.Sprintf("must be positive (0: the latest), got %d", a.Version)
		}
		if len(a.Params) > MaxOnAlertParams {
			out["on_alert.params"] = fmt.Sprintf("at most %d", MaxOnAlertParams)
		}
		if _, ok := a.Params[OnAlertParam]; ok {
			out["on_alert.params"] = fmt.Sprintf("%q is set by the core: the missing nodes", OnAlertParam)
		}
	}
	return out
}

// Membership is every cluster's declared membership, by cluster id; a
// cluster absent from it declares nothing.
type Membership map[string]Expect

// Missing is a declared node (or a shortfall of a count) that is not there.
type Missing struct {
	// ID is the node's id; for a count, "" (Reason says how many).
	ID     string `json:"id"`
	Reason string `json:"reason"`
}

// Members is what a cluster's declaration and its nodes say.
type Members struct {
	Missing    []Missing
	Unexpected []string
}

// Alert is the cluster's status reason for its missing nodes, "" when none
// are.
func (m Members) Alert() string {
	if len(m.Missing) == 0 {
		return ""
	}
	parts := make([]string, len(m.Missing))
	for i, x := range m.Missing {
		parts[i] = x.Reason
		if x.ID != "" {
			parts[i] = x.ID
		}
	}
	return "missing: " + strings.Join(parts, ", ")
}

// present says whether n counts as there: UP, or not UP for less than
// grace since its record last changed (the change that made it DOWN; its
// last contact is stored only about once a minute, too coarse for a
// grace). A node never contacted is not there.
func present(n *store.Node, grace time.Duration, now time.Time) bool {
	if n.Status == store.NodeUp {
		return true
	}
	return n.LastContact != nil && now.Sub(n.UpdatedTS) < grace
}

func absentReason(n *store.Node, grace time.Duration) string {
	switch {
	case n == nil || n.LastContact == nil:
		return "never seen"
	default:
		return fmt.Sprintf("%s for more than %s", strings.ToLower(n.Status), grace)
	}
}

// Of computes the members of cluster clusterID from all (nodes of any
// cluster) as of now: missing (declared, never seen, or not UP for grace)
// and unexpected (seen, not declared). ok is false when the cluster
// declares nothing.
func (m Membership) Of(clusterID string, all []store.Node, now time.Time) (out Members, ok bool) {
	e, has := m[clusterID]
	if !has || !e.Declared() {
		return out, false
	}
	grace := e.Grace
	if grace <= 0 {
		grace = DefaultGrace
	}
	byID := map[string]*store.Node{}
	for i := range all {
		if all[i].ClusterID == clusterID {
			byID[all[i].ID] = &all[i]
		}
	}
	if len(e.Nodes) > 0 {
		// A declared place is held by the node of its id, or by the node
		// that took it by a replace (Replace): either one there fills it.
		taken := takes(byID)
		declared := map[string]bool{}
		for _, id := range slices.Sorted(slices.Values(e.Nodes)) {
			declared[id] = true
			n := byID[id]
			if t, ok := taken[id]; ok {
				declared[t] = true
				if n == nil || !present(n, grace, now) {
					n = byID[t]
				}
			}
			if n == nil || !present(n, grace, now) {
				out.Missing = append(out.Missing, Missing{ID: id, Reason: absentReason(n, grace)})
			}
		}
		for _, id := range slices.Sorted(maps.Keys(byID)) {
			if !declared[id] {
				out.Unexpected = append(out.Unexpected, id)
			}
		}
		return out, true
	}
	sel := e.Selector
	there := 0
	var unexpected []string
	for id, n := range byID {
		if !labels.Set(n.Labels).Matches(sel) {
			unexpected = append(unexpected, id)
			continue
		}
		if present(n, grace, now) {
			there++
		}
	}
	sort.Strings(unexpected)
	out.Unexpected = unexpected
	if there < e.Count {
		what := "nodes"
		if len(sel) > 0 {
			what = "nodes matching " + labels.Set(sel).String()
		}
		out.Missing = []Missing{{Reason: fmt.Sprintf("%d of %d %s", e.Count-there, e.Count, what)}}
	}
	return out, true
}
