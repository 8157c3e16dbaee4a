// Package target picks the nodes of one cluster that a run's stage (or any
// other operation over many nodes) works on (docs/architecture.md, "Labels,
// targets and the disruption budget"). A target has exactly one form: a list of
// node ids, a label selector (every pair must match), or all the cluster's
// nodes. Resolve turns it into the fixed, sorted list of node ids that people
// see and approve. The type is wire.Target, as the APIs carry it; this package
// checks and resolves it.
package target

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/musterhq/muster/core/glob"
	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/labels"
	"github.com/musterhq/muster/shared/names"
	"github.com/musterhq/muster/shared/wire"
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
	// ErrNoMatch: a label selector (or all) matches no node of the cluster.
	ErrNoMatch = errors.New("no node matches")
)

// Target is {"nodes": [...]}, {"labels": {...}} or {"all": true}.
type Target = wire.Target

// Nodes returns the target of these node ids.
func Nodes(ids ...string) Target { return Target{Nodes: ids} }

// Labels returns the target of the nodes carrying every pair of sel.
func Labels(sel map[string]string) Target { return Target{Labels: sel} }

// All returns the target of every node of the cluster.
func All() Target { return Target{All: true} }

// targetError is an error of one of the kinds above with its own message.
type targetError struct {
	kind error
	msg  string
}

func (e *targetError) Error() string        { return e.msg }
func (e *targetError) Is(target error) bool { return target == e.kind }

func fail(kind error, format string, args ...any) error {
	return &targetError{kind: kind, msg: fmt.Sprintf(format, args...)}
}

// Decode reads a target from JSON, refusing unknown fields, trailing data,
// "all": false, and anything Check refuses.
func Decode(b []byte) (Target, error) {
	var w struct {
		Nodes  *[]string          `json:"nodes"`
		Labels *map[string]string `json:"labels"`
		All    *bool              `json:"all"`
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&w); err != nil {
		return Target{}, fail(ErrInvalid, "not a target: %v", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return Target{}, fail(ErrInvalid, "data after the target object")
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
			return Target{}, fail(ErrInvalid, `"all": false selects nothing: give "nodes", "labels" or "all": true`)
		}
		t.All = true
	}
	if forms > 1 {
		return Target{}, fail(ErrInvalid, `give only one of "nodes", "labels" or "all"`)
	}
	return t, Check(t)
}

// CheckForm reports whether t has exactly one non-empty form, with at most
// MaxNodes nodes. It leaves the names alone: a playbook's target may hold
// template references until it is rendered.
func CheckForm(t Target) error {
	forms := 0
	if len(t.Nodes) > 0 {
		forms++
	}
	if len(t.Labels) > 0 {
		forms++
	}
	if t.All {
		forms++
	}
	switch {
	case forms == 0:
		return fail(ErrInvalid, `empty: give "nodes", "labels" or "all"`)
	case forms > 1:
		return fail(ErrInvalid, `give only one of "nodes", "labels" or "all"`)
	case len(t.Nodes) > MaxNodes:
		return fail(ErrInvalid, "more than %d nodes", MaxNodes)
	}
	return nil
}

// Check is CheckForm, and valid names: node ids as cluster and node ids are
// written (one listed twice counts once), a selector within the bounds of
// package labels.
func Check(t Target) error {
	if err := CheckForm(t); err != nil {
		return err
	}
	for _, id := range t.Nodes {
		if err := names.CheckID(id); err != nil {
			return fail(ErrInvalid, "node: %v", err)
		}
	}
	if err := labels.Set(t.Labels).Validate(); err != nil {
		return fail(ErrInvalid, "%v", err)
	}
	return nil
}

// Resolve returns the sorted ids of the nodes of a cluster (nodes, as the
// store lists them) that t picks. Every listed node must exist; a label
// selector must match at least one node; all needs at least one node.
func Resolve(t Target, nodes []store.Node) ([]string, error) {
	if err := Check(t); err != nil {
		return nil, err
	}
	var out []string
	switch {
	case len(t.Nodes) > 0:
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
			return nil, fail(ErrUnknownNode, "unknown node(s) %s", strings.Join(unknown, ", "))
		}
		out = slices.Clone(t.Nodes)
	case len(t.Labels) > 0:
		for i := range nodes {
			if labels.Set(nodes[i].Labels).Matches(t.Labels) {
				out = append(out, nodes[i].ID)
			}
		}
		if len(out) == 0 {
			return nil, fail(ErrNoMatch, "no node has the labels %s", labels.Set(t.Labels))
		}
	default:
		for i := range nodes {
			out = append(out, nodes[i].ID)
		}
		if len(out) == 0 {
			return nil, fail(ErrNoMatch, "the cluster has no nodes")
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
		return t, Check(t)
	}
	sel, err := labels.ParseSelector([]string{s})
	if err != nil {
		return Target{}, fail(ErrInvalid, `%q is not "all", "nodes=a,b" or label pairs "k=v,k2=v2": %v`, s, err)
	}
	t := Labels(sel)
	return t, Check(t)
}

// String is the form Parse reads.
func String(t Target) string {
	switch {
	case t.All:
		return "all"
	case len(t.Nodes) > 0:
		return "nodes=" + strings.Join(t.Nodes, ",")
	}
	return labels.Set(t.Labels).String()
}

// MaxLimit bounds the patterns of a limit.
const MaxLimit = 1000

// CheckLimit reports whether every pattern of limit (a node subset: node
// ids or globs over them, as package glob reads them) is well formed and
// picks at least one of the cluster's nodes: a typo in a limit is an error,
// not a smaller run.
func CheckLimit(limit []string, nodes []store.Node) error {
	if len(limit) > MaxLimit {
		return fail(ErrInvalid, "limit: more than %d patterns", MaxLimit)
	}
	var unknown []string
	for _, p := range limit {
		if p == "" {
			return fail(ErrInvalid, "limit: an empty pattern")
		}
		if !glob.Valid(p) || len(p) > 2*names.MaxID {
			return fail(ErrInvalid, "limit: %q is neither a node id nor a glob", p)
		}
		if !slices.ContainsFunc(nodes, func(n store.Node) bool { return glob.Match(p, n.ID) }) {
			unknown = append(unknown, p)
		}
	}
	if len(unknown) > 0 {
		return fail(ErrUnknownNode, "limit: no node of the cluster matches %s", strings.Join(unknown, ", "))
	}
	return nil
}

// Limit keeps the ids (a resolved target) that some pattern of limit
// matches; an empty limit keeps them all.
func Limit(ids, limit []string) []string {
	if len(limit) == 0 {
		return ids
	}
	var out []string
	for _, id := range ids {
		if slices.ContainsFunc(limit, func(p string) bool { return glob.Match(p, id) }) {
			out = append(out, id)
		}
	}
	return out
}
