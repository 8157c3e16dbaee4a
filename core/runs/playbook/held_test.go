package playbook

import (
	"fmt"
	"strings"
	"testing"

	"github.com/musterhq/muster/core/budget"
	"github.com/musterhq/muster/core/runs"
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

// A plan's HELD note names the real cause: with node-1 drained and a budget
// of one, the first node of a wave is held because of node-1, not because of
// "this wave's earlier nodes" (it has none); the second names both.
func TestMarkHeldNamesTheNodesThatUseTheBudget(t *testing.T) {
	t.Parallel()
	pol := budget.Policy{MaxUnavailable: map[string]limit.Limit{"c": limit.MustParse("2")},
		Kinds: []budget.KindRule{{Kind: "example.com/node.upgrade", Disruptive: true}}}
	p := &wire.Plan{ClusterID: "c", Stages: []wire.Stage{{Name: "up", Steps: []wire.StepSpec{{Name: "upgrade", Kind: "example.com/node.upgrade"}}}}}
	for _, n := range []string{"node-2", "node-3", "node-4"} {
		p.Children = append(p.Children, wire.PlanChild{Stage: "up", Wave: 1, NodeID: n, Step: "upgrade", Kind: "example.com/node.upgrade"})
	}
	nodes := []store.Node{{ID: "node-1", ClusterID: "c", Drained: true}, {ID: "node-2", ClusterID: "c"},
		{ID: "node-3", ClusterID: "c"}, {ID: "node-4", ClusterID: "c"}}
	MarkHeld(p, pol, nodes, nil, nil)
	want := map[string]string{
		"node-2": "",
		"node-3": "held by the disruption budget: 2 of 2 unavailable (node-1 drained, node-2 earlier in this wave)",
		"node-4": "held by the disruption budget: 2 of 2 unavailable (node-1 drained, node-2 earlier in this wave)",
	}
	for _, ch := range p.Children {
		if ch.Held != want[ch.NodeID] {
			t.Errorf("%s held %q, want %q", ch.NodeID, ch.Held, want[ch.NodeID])
		}
	}
	pol.MaxUnavailable["c"] = limit.MustParse("1")
	for i := range p.Children {
		p.Children[i].Held = ""
	}
	MarkHeld(p, pol, nodes, nil, nil)
	if got, w := p.Children[0].Held, "held by the disruption budget: 1 of 1 unavailable (node-1 drained)"; got != w {
		t.Errorf("first node of the wave held %q, want %q", got, w)
	}
}

// The plan shows each node's steps in order, then the rollback steps of
// that node, its wave, the canary nodes and where the canary pause falls;
// the budget marks the rollback of a node it holds back as held too; and
// the digest covers every one of them, the rollback's args, when, kind and
// order included.
func TestPlanShowsEachNodesRollbackAndTheDigestCoversIt(t *testing.T) {
	t.Parallel()
	doc := func(rollbackArgs, when string) string {
		return `name: up
description: upgrade
params:
  - {name: version, type: string}
stages:
  - name: up
    target: {all: true}
    max_concurrency: 1
    canary: 1
    steps:
      - {name: drain, kind: example.com/node.drain}
      - {name: upgrade, kind: example.com/node.upgrade, args: {version: "{{ .version }}"}}
    rollback:
      - {name: downgrade, kind: example.com/node.upgrade, when: '` + when + `', args: ` + rollbackArgs + `}
      - {name: note, kind: example.com/node.note}
`
	}
	nodes := []store.Node{{ID: "n1", ClusterID: "c"}, {ID: "n2", ClusterID: "c"}, {ID: "n3", ClusterID: "c"}}
	plan := func(d string) wire.Plan {
		t.Helper()
		pb, err := Parse([]byte(d))
		if err != nil {
			t.Fatal(err)
		}
		values, err := pb.Values(map[string]string{"version": "2.0"})
		if err != nil {
			t.Fatal(err)
		}
		specs, err := pb.Render(values)
		if err != nil {
			t.Fatal(err)
		}
		req := wire.CreateRunRequest{ClusterID: "c", Stages: specs}
		if err := runs.Check(&req); err != nil {
			t.Fatal(err)
		}
		stages, err := runs.Resolve(&req, nodes, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		return (&Planned{Name: pb.Name, Cluster: "c", Values: values, Stages: stages}).Wire()
	}
	base := doc(`{version: "{{ .steps.upgrade.outputs.previous }}"}`, `{{ eq .steps.upgrade.state "DONE" }}`)
	p := plan(base)
	var got []string
	for _, ch := range p.Children {
		mark := ""
		if ch.Rollback {
			mark += " rollback"
		}
		if ch.Canary {
			mark += " canary"
		}
		if ch.CanaryPause {
			mark += " pause"
		}
		got = append(got, fmt.Sprintf("%d %s %s%s", ch.Wave, ch.NodeID, ch.Step, mark))
	}
	want := []string{
		"1 n1 drain canary", "1 n1 upgrade canary", "1 n1 downgrade rollback canary", "1 n1 note rollback canary pause",
		"2 n2 drain", "2 n2 upgrade", "2 n2 downgrade rollback", "2 n2 note rollback",
		"3 n3 drain", "3 n3 upgrade", "3 n3 downgrade rollback", "3 n3 note rollback",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("plan children:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if r := p.Children[2]; r.Kind != "example.com/node.upgrade" || !strings.Contains(string(r.Args), "outputs.previous") || !strings.Contains(r.When, "DONE") {
		t.Fatalf("rollback child %+v", r)
	}
	// Held: with room for no node, every child of every node, rollback included.
	pol := budget.Policy{MaxUnavailable: map[string]limit.Limit{"c": limit.MustParse("1")},
		Kinds: []budget.KindRule{{Kind: "example.com/node.upgrade", Disruptive: true}}}
	MarkHeld(&p, pol, nodes, nil, map[string]bool{"other": true})
	for _, ch := range p.Children {
		if ch.Held == "" {
			t.Fatalf("%s/%s (rollback %v) not held while another node is in flight", ch.NodeID, ch.Step, ch.Rollback)
		}
	}
	for name, d := range map[string]string{
		"rollback args":  doc(`{version: "1.0"}`, `{{ eq .steps.upgrade.state "DONE" }}`),
		"rollback when":  doc(`{version: "{{ .steps.upgrade.outputs.previous }}"}`, `{{ ne .steps.upgrade.state "SKIPPED" }}`),
		"rollback kind":  strings.Replace(base, "example.com/node.note", "example.com/node.notify", 1),
		"rollback order": swapRollback(base),
		"canary":         strings.Replace(base, "canary: 1", "canary: 2", 1),
	} {
		if plan(d).Digest == p.Digest {
			t.Errorf("changing the %s keeps the digest", name)
		}
	}
	if plan(base).Digest != p.Digest {
		t.Fatal("the same plan twice has two digests")
	}
}

// swapRollback swaps the two rollback lines of the document.
func swapRollback(doc string) string {
	lines := strings.Split(doc, "\n")
	for i, l := range lines {
		if strings.Contains(l, "name: downgrade") {
			lines[i], lines[i+1] = lines[i+1], lines[i]
			break
		}
	}
	return strings.Join(lines, "\n")
}
