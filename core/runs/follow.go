package runs

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/musterhq/muster/core/actions"
	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/core/target"
	"github.com/musterhq/muster/shared/labels"
	"github.com/musterhq/muster/shared/wire"
)

// Stages that follow their labels (docs/runs-and-playbooks.md, "Nodes
// that join while a run goes"): a RUNNING stage with follow takes the
// nodes that join the cluster with its labels; the approval covered "the
// nodes matching", not a list (DigestRunLocked leaves such a stage's nodes
// out). A stage without follow leaves them alone, and the run shows them
// as not in it (NotInRun).

// following reports whether run r has a stage that may take a node now: a
// RUNNING stage with follow, in a RUNNING run.
func following(r *store.Run) bool {
	if r.State != store.RunRunning {
		return false
	}
	return slices.ContainsFunc(r.Stages, func(st store.RunStage) bool {
		return st.Follow && st.State == store.StageRunning && len(st.Target.Labels) > 0
	})
}

// HeldLabels are the labels the core holds for a node: those its
// configuration gives it (static, by node id), with the labels it holds
// for the node (Node.CoreLabels, those of a node it replaced) over them.
// The labels an agent reports about itself are not among them.
func HeldLabels(static map[string]map[string]string, n *store.Node) labels.Set {
	return labels.Set(labels.Merge(static[n.ID], n.CoreLabels))
}

// Joining returns, by stage index, the nodes among nodes (of r's cluster)
// that a RUNNING stage of r with follow takes now: UP, not drained, with
// the stage's labels among the labels the core holds for them (HeldLabels
// over static, the configured labels of r's cluster by node id: never the
// labels an agent reports about itself, which anyone holding a join token
// chooses, while the approval covered "the nodes matching") and, when they
// announced kinds, every kind of its steps, and not among its nodes yet;
// in the order of nodes' ids.
func Joining(r *store.Run, nodes []store.Node, static map[string]map[string]string) map[int][]string {
	if !following(r) {
		return nil
	}
	var out map[int][]string
	for i := range r.Stages {
		st := &r.Stages[i]
		if !st.Follow || st.State != store.StageRunning || len(st.Target.Labels) == 0 {
			continue
		}
		var kinds []string
		for _, sp := range st.Procedure() {
			if !IsCoreKind(sp.Kind) {
				kinds = append(kinds, sp.Kind)
			}
		}
		for j := range nodes {
			n := &nodes[j]
			if n.Status != store.NodeUp || n.Drained || slices.Contains(st.Nodes, n.ID) ||
				!HeldLabels(static, n).Matches(st.Target.Labels) {
				continue
			}
			if len(n.Kinds) > 0 && slices.ContainsFunc(kinds, func(k string) bool { return !slices.Contains(n.Kinds, k) }) {
				continue
			}
			if out == nil {
				out = map[int][]string{}
			}
			out[i] = append(out[i], n.ID)
		}
		slices.Sort(out[i])
	}
	return out
}

// follow adds to r's RUNNING stages with follow the nodes that joined
// with their labels (Joining over the cluster's nodes as tx reads them),
// with a run.node_joined event each, and stores r; it reports whether it
// added any.
func (a *Advancer) follow(ctx context.Context, tx store.Tx, r *store.Run, t time.Time) (bool, error) {
	if !following(r) {
		return false, nil
	}
	nodes, err := tx.Nodes(ctx, r.ClusterID)
	if err != nil {
		return false, err
	}
	join := Joining(r, nodes, a.staticLabels[r.ClusterID])
	if len(join) == 0 {
		return false, nil
	}
	c := changeOf(r)
	for i := range r.Stages {
		ids := join[i]
		if len(ids) == 0 {
			continue
		}
		st := &r.Stages[i]
		st.Nodes = append(st.Nodes, ids...)
		st.Joined = append(st.Joined, ids...)
		c.event(store.EventRunNodeJoined, actions.Core, t,
			fmt.Sprintf("run %s: stage %s takes node(s) %s, which joined with its labels %s (follow)",
				r.ID, st.Name, strings.Join(ids, ", "), labels.Set(st.Target.Labels)),
			map[string]any{"stage": st.Name, "nodes": ids})
	}
	r.UpdatedTS = t
	return true, c.save(ctx, tx)
}

// byLabels says whether stage st's target is by labels: only then can a
// node match it without being among its nodes.
func byLabels(st *store.RunStage) bool { return len(st.Target.Nodes) == 0 && len(st.Target.Labels) > 0 }

// NeedsNodes says whether NotInRun needs the cluster's nodes for r: only
// when a stage's target is by labels (a run of listed nodes, the common
// run of a page, reads none).
func NeedsNodes(r *store.Run) bool {
	return slices.ContainsFunc(r.Stages, func(st store.RunStage) bool { return byLabels(&st) })
}

// NotInRun returns, by stage index, the nodes among nodes (of r's
// cluster) that match a stage's target of labels now but are not among
// its nodes: joined after the stage was planned (or, with follow, after it
// ended, or not yet taken), or left out at the plan (DOWN, beyond a limit,
// without its kinds). The run does not touch them; its views say so.
func NotInRun(r *store.Run, nodes []store.Node) map[int][]string {
	var out map[int][]string
	for i := range r.Stages {
		st := &r.Stages[i]
		if !byLabels(st) {
			continue
		}
		ids, err := target.Resolve(wire.Target(st.Target), nodes)
		if err != nil {
			continue
		}
		for _, id := range ids {
			if !slices.Contains(st.Nodes, id) {
				if out == nil {
					out = map[int][]string{}
				}
				out[i] = append(out[i], id)
			}
		}
	}
	return out
}
