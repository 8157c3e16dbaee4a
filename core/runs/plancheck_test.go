package runs_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/musterhq/muster/core/runs"
	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/limit"
	"github.com/musterhq/muster/shared/wire"
)

const upgradeKind = "example.com/pkg.upgrade"

// schemaNodes are three nodes: n1 announces no schema for upgradeKind, n2
// and n3 require a string version, n3 also a version of digits and dots.
func schemaNodes() []store.Node {
	str := json.RawMessage(`{"type":"object","required":["version"],"properties":{"version":{"type":"string"}}}`)
	dots := json.RawMessage(`{"type":"object","required":["version"],"properties":{"version":{"type":"string","pattern":"^[0-9.]+$"}}}`)
	kinds := []string{upgradeKind, "muster.io/debug.ping"}
	return []store.Node{
		{ID: "n1", Kinds: kinds, Labels: map[string]string{"role": "primary"}},
		{ID: "n2", Kinds: kinds, Labels: map[string]string{"role": "replica"}, ArgsSchemas: map[string]json.RawMessage{upgradeKind: str}},
		{ID: "n3", Kinds: kinds, Labels: map[string]string{"role": "replica"}, ArgsSchemas: map[string]json.RawMessage{upgradeKind: dots}},
	}
}

// stepsRun is a run of one stage over every node with the given steps
// and rollback.
func stepsRun(steps []wire.StepSpec, rollback ...wire.StepSpec) *wire.CreateRunRequest {
	c, e := limit.MustParse("1"), limit.MustParse("0")
	return &wire.CreateRunRequest{ClusterID: "c", Stages: []wire.StageSpec{{
		Name: "roll", Target: wire.Target{All: true}, MaxConcurrency: &c, MaxErrors: &e, Steps: steps, Rollback: rollback}}}
}

func resolve(t *testing.T, req *wire.CreateRunRequest) error {
	t.Helper()
	if err := runs.Check(req); err != nil {
		return err
	}
	_, err := runs.Resolve(req, schemaNodes(), nil, nil)
	return err
}

func upgrade(args string) wire.StepSpec {
	return wire.StepSpec{Name: "upgrade", Kind: upgradeKind, Args: json.RawMessage(args)}
}

func ping(name, when string) wire.StepSpec {
	return wire.StepSpec{Name: name, Kind: "muster.io/debug.ping", When: when}
}

// Args are checked at create and plan against the schema each target node
// announced, naming the step, the node and the field.
func TestResolveChecksArgsAgainstEachNodesSchema(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		req  *wire.CreateRunRequest
		want []string // in the error; none: accepted
	}{
		{"good args", stepsRun([]wire.StepSpec{upgrade(`{"version":"2.0"}`)}), nil},
		{"missing field", stepsRun([]wire.StepSpec{upgrade(`{}`)}), []string{"step upgrade", "node n2", "args.version: required", "1 more node(s): n3"}},
		{"wrong type", stepsRun([]wire.StepSpec{upgrade(`{"version":2}`)}), []string{"node n2", "args.version"}},
		{"a node's own schema", stepsRun([]wire.StepSpec{upgrade(`{"version":"two"}`)}), []string{"node n3", "args.version"}},
		{"rendered from the node", stepsRun([]wire.StepSpec{upgrade(`{"version":"{{ .node.labels.role }}"}`)}), []string{"node n3", "args.version"}},
		{"a value known when the node runs", stepsRun([]wire.StepSpec{ping("check", ""),
			upgrade(`{"version":"{{ .steps.check.outputs.version }}"}`)}), nil},
		{"known later does not excuse a missing field", stepsRun([]wire.StepSpec{ping("check", ""),
			upgrade(`{"other":"{{ .steps.check.outputs.version }}"}`)}), []string{"node n2", "args.version: required"}},
		{"rollback", stepsRun([]wire.StepSpec{ping("drain", "")}, upgrade(`{"version":3}`)), []string{"step upgrade", "node n2"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := resolve(t, tc.req)
			if tc.want == nil {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if !errors.Is(err, runs.ErrUnresolvable) {
				t.Fatalf("got %v, want ErrUnresolvable", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Fatalf("%q does not say %q", err, w)
				}
			}
		})
	}
}

// A when that does not render true or false is refused at create and plan
// (ErrInvalid, naming the node), not when the node runs. What a step's
// outputs hold is not known yet: a when that reads one is rendered with
// "true" in its place, and a step's state as DONE.
func TestResolveRefusesAWhenThatIsNotABoolean(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, when string
		ok         bool
	}{
		{"a label", `{{ .node.labels.role }}`, false},
		{"a comparison", `{{ eq .node.labels.role "replica" }}`, true},
		{"an output used as a boolean", `{{ .steps.check.outputs.needed }}`, true},
		{"an output compared", `{{ ne .steps.check.outputs.version "2.0" }}`, true},
		{"a state", `{{ .steps.check.state }}`, false},
		{"text", `{{ if eq .node.id "n1" }}yes{{ else }}false{{ end }}`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := resolve(t, stepsRun([]wire.StepSpec{ping("check", ""), ping("act", tc.when)}))
			if tc.ok != (err == nil) {
				t.Fatalf("when %s: %v", tc.when, err)
			}
			if !tc.ok && (!errors.Is(err, runs.ErrInvalid) || !strings.Contains(err.Error(), "node n1") ||
				!strings.Contains(err.Error(), "not true or false")) {
				t.Fatalf("when %s: %v, want ErrInvalid naming node n1", tc.when, err)
			}
		})
	}
}

// BenchmarkResolveChecksArgsSchemas: resolving a 1,000-node procedure of four
// steps whose every node announces a schema for the templated step, with a
// when over its labels (the plan-time check of every node and step).
func BenchmarkResolveChecksArgsSchemas(b *testing.B) {
	schema := json.RawMessage(`{"type":"object","required":["version","node"],"properties":{"version":{"type":"string"},"node":{"type":"string","pattern":"^n[0-9]+$"}}}`)
	nodes := make([]store.Node, 1000)
	for i := range nodes {
		nodes[i] = store.Node{ID: fmt.Sprintf("n%d", i), Kinds: []string{upgradeKind, "muster.io/debug.ping"},
			Labels: map[string]string{"role": "replica"}, ArgsSchemas: map[string]json.RawMessage{upgradeKind: schema}}
	}
	req := stepsRun([]wire.StepSpec{ping("drain", ""), upgrade(`{"version":"2.0","node":"{{ .node.id }}"}`),
		ping("verify", `{{ eq .node.labels.role "replica" }}`), ping("undrain", "always")})
	if err := runs.Check(req); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for range b.N {
		if _, err := runs.Resolve(req, nodes, nil, nil); err != nil {
			b.Fatal(err)
		}
	}
}
