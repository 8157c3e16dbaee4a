// Package target picks the nodes of one cluster that a run's stage (or any
// other operation over many nodes) works on (DESIGN.md §9). A target has
// exactly one form: a list of node ids, a label selector (every pair must
// match), or all the cluster's nodes. Resolve turns it into the fixed,
// sorted list of node ids that people see and approve.
package target

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/musterhq/muster/core/discovery"
	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/labels"
)

// MaxNodes bounds a list of node ids.
const MaxNodes = 10_000

// Errors of the package, matched with errors.Is. The messages say what was
// wrong (which node, which selector).
var (
	// ErrInvalid: not exactly one form, an empty form, or a bad name.
	ErrInvalid = errors.New("invalid target")
	// ErrUnknownNode: a listed node is not in the cluster.
	ErrUnknownNode = errors.New("unknown node")
	// ErrNoMatch: a label selector matches no node of the cluster.
	ErrNoMatch = errors.New("no node matches")
)

// Target is {"nodes": [...]}, {"labels": {...}} or {"all": true}.
type Target struct {
	Nodes  []string   `json:"nodes,omitempty"`
	Labels labels.Set `json:"labels,omitempty"`
	All    bool       `json:"all,omitempty"`
}

// Nodes returns the target of these node ids.
func Nodes(ids ...string) Target { return Target{Nodes: ids} }

// Labels returns the target of the nodes carrying every pair of sel.
func Labels(sel map[string]string) Target { return Target{Labels: sel} }

// All returns the target of every node of the cluster.
func All() Target { return Target{All: true} }

// Decode reads a target from JSON, refusing unknown fields, trailing data,
// and anything Validate refuses.
func Decode(b []byte) (Target, error) {
	var w struct {
		Nodes  *[]string          `json:"nodes"`
		Labels *map[string]string `json:"labels"`
		All    *bool              `json:"all"`
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&w); err != nil {
		return Target{}, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return Target{}, fmt.Errorf("%w: data after the target object", ErrInvalid)
	}
	forms := 0
	var t Target
	if w.Nodes != nil {
		forms++
		t.Nodes = *w.Nodes
	}
	if w.Labels != nil {
		forms++
		t.Labels = *w.Labels
	}
	if w.All != nil {
		forms++
		if !*w.All {
			return Target{}, fmt.Errorf(`%w: "all": false selects nothing; give nodes, labels or "all": true`, ErrInvalid)
		}
		t.All = true
	}
	if forms > 1 {
		return Target{}, fmt.Errorf("%w: give exactly one of nodes, labels and all", ErrInvalid)
	}
	return t, t.Validate()
}

// UnmarshalJSON is Decode.
func (t *Target) UnmarshalJSON(b []byte) error {
	v, err := Decode(b)
	if err != nil {
		return err
	}
	*t = v
	return nil
}

// Validate checks that t has exactly one non-empty form with valid names.
func (t Target) Validate() error {
	forms := 0
	if t.Nodes != nil {
		forms++
	}
	if t.Labels != nil {
		forms++
	}
	if t.All {
		forms++
	}
	switch {
	case forms == 0:
		return fmt.Errorf(`%w: empty target; give nodes, labels or "all": true`, ErrInvalid)
	case forms > 1:
		return fmt.Errorf("%w: give exactly one of nodes, labels and all", ErrInvalid)
	case t.Nodes != nil:
		if len(t.Nodes) == 0 {
			return fmt.Errorf("%w: empty node list", ErrInvalid)
		}
		if len(t.Nodes) > MaxNodes {
			return fmt.Errorf("%w: %d nodes, at most %d", ErrInvalid, len(t.Nodes), MaxNodes)
		}
		seen := make(map[string]bool, len(t.Nodes))
		for _, id := range t.Nodes {
			if !discovery.ValidName(id) {
				return fmt.Errorf("%w: node %q: use 1 to 128 letters, digits, '.', '_' and '-'", ErrInvalid, id)
			}
			if seen[id] {
				return fmt.Errorf("%w: node %s is listed twice", ErrInvalid, id)
			}
			seen[id] = true
		}
	case t.Labels != nil:
		if len(t.Labels) == 0 {
			return fmt.Errorf(`%w: empty label selector; use "all": true for every node`, ErrInvalid)
		}
		if err := t.Labels.Validate(); err != nil {
			return fmt.Errorf("%w: %v", ErrInvalid, err)
		}
	}
	return nil
}

// Resolve returns the sorted ids of the nodes of a cluster (nodes, as the
// store lists them) that t picks. Every listed node must exist; a label
// selector must match at least one node; all needs at least one node.
func (t Target) Resolve(nodes []store.Node) ([]string, error) {
	if err := t.Validate(); err != nil {
		return nil, err
	}
	var out []string
	switch {
	case t.Nodes != nil:
		known := make(map[string]bool, len(nodes))
		for i := range nodes {
			known[nodes[i].ID] = true
		}
		var unknown []string
		for _, id := range t.Nodes {
			if !known[id] {
				unknown = append(unknown, id)
			}
		}
		if len(unknown) > 0 {
			slices.Sort(unknown)
			return nil, fmt.Errorf("%w: %s", ErrUnknownNode, strings.Join(unknown, ", "))
		}
		out = slices.Clone(t.Nodes)
	case t.Labels != nil:
		for i := range nodes {
			if labels.Set(nodes[i].Labels).Matches(t.Labels) {
				out = append(out, nodes[i].ID)
			}
		}
		if len(out) == 0 {
			return nil, fmt.Errorf("%w the labels %s", ErrNoMatch, t.Labels)
		}
	default:
		for i := range nodes {
			out = append(out, nodes[i].ID)
		}
		if len(out) == 0 {
			return nil, fmt.Errorf("%w: the cluster has no nodes", ErrNoMatch)
		}
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// Parse reads the command-line form of a target: "all", "nodes=a,b" (or
// "node=a"), or label pairs "k=v,k2=v2".
func Parse(s string) (Target, error) {
	s = strings.TrimSpace(s)
	switch {
	case s == "all":
		return All(), nil
	case strings.HasPrefix(s, "nodes=") || strings.HasPrefix(s, "node="):
		_, list, _ := strings.Cut(s, "=")
		var ids []string
		for _, id := range strings.Split(list, ",") {
			ids = append(ids, strings.TrimSpace(id))
		}
		t := Nodes(ids...)
		return t, t.Validate()
	}
	sel, err := labels.ParseSelector([]string{s})
	if err != nil {
		return Target{}, fmt.Errorf(`%w: %q is not "all", "nodes=a,b" or label pairs "k=v,k2=v2": %v`, ErrInvalid, s, err)
	}
	t := Labels(sel)
	return t, t.Validate()
}

// String is the form Parse reads.
func (t Target) String() string {
	switch {
	case t.All:
		return "all"
	case t.Nodes != nil:
		return "nodes=" + strings.Join(t.Nodes, ",")
	}
	return t.Labels.String()
}
