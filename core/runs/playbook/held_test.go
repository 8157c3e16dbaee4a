package playbook

import (
	"testing"

	"github.com/musterhq/muster/core/budget"
	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/limit"
	"github.com/musterhq/muster/shared/wire"
)

// In a plan, every step of a stage with a disruptive step counts against
// the budget, not only the disruptive one: with max_unavailable 1 and two
// nodes in one wave, the first node's steps go and the second's are held;
// a node in flight in another procedure holds them all.
func TestMarkHeldCountsEveryStepOfADisruptiveProcedure(t *testing.T) {
	t.Parallel()
	pol := budget.Policy{MaxUnavailable: map[string]limit.Limit{"c": limit.MustParse("1")},
		Kinds: []budget.KindRule{{Kind: "example.com/node.upgrade", Disruptive: true}}}
	steps := []wire.StepSpec{{Name: "drain", Kind: "example.com/node.drain"}, {Name: "upgrade", Kind: "example.com/node.upgrade"},
		{Name: "undrain", Kind: "example.com/node.undrain"}}
	plan := func() *wire.Plan {
		p := &wire.Plan{ClusterID: "c", Stages: []wire.Stage{{Name: "up", Steps: steps}}}
		for _, n := range []string{"n1", "n2"} {
			for _, sp := range steps {
				p.Children = append(p.Children, wire.PlanChild{Stage: "up", Wave: 1, NodeID: n, Step: sp.Name, Kind: sp.Kind})
			}
		}
		return p
	}
	nodes := []store.Node{{ID: "n1", ClusterID: "c"}, {ID: "n2", ClusterID: "c"}, {ID: "n3", ClusterID: "c"}}
	p := plan()
	MarkHeld(p, pol, nodes, nil, nil)
	for _, ch := range p.Children {
		if held := ch.Held != ""; held != (ch.NodeID == "n2") {
			t.Fatalf("%s/%s held %q", ch.NodeID, ch.Step, ch.Held)
		}
	}
	p = plan()
	MarkHeld(p, pol, nodes, nil, map[string]bool{"n3": true})
	for _, ch := range p.Children {
		if ch.Held == "" {
			t.Fatalf("%s/%s not held while n3 is in flight", ch.NodeID, ch.Step)
		}
	}
}
