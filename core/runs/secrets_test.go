package runs

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/secret"
	"github.com/musterhq/muster/shared/wire"
)

// TestARunReferencingASecretANodeLacksIsRefused: a step whose args
// reference {{ secret "NAME" }} fits only nodes that announced NAME; the
// refusal names the node and the secret. The reference passes the
// template check, and a name that is not plain does not.
func TestARunReferencingASecretANodeLacksIsRefused(t *testing.T) {
	t.Parallel()
	ns := nodes(3, nil)
	for i := range ns {
		ns[i].Kinds = []string{"example.com/db.migrate"}
		ns[i].Secrets = []string{"db-password"}
	}
	ns[1].Secrets = nil
	ns[2].Secrets = []string{"api-token", "db-password"}
	steps := func(args string) wire.StageSpec {
		return wire.StageSpec{Name: "up", Target: wire.Target{All: true}, Steps: []wire.StepSpec{
			{Name: "migrate", Kind: "example.com/db.migrate", Args: json.RawMessage(args)}}}
	}
	req := wire.CreateRunRequest{ClusterID: "c", Stages: []wire.StageSpec{steps(`{"dsn":"pg://app:{{ secret \"db-password\" }}@{{ .node.id }}/app"}`)}}
	if err := Check(&req); err != nil {
		t.Fatalf("Check: %v", err)
	}
	_, err := Resolve(&req, ns, nil, nil)
	if !errors.Is(err, ErrUnresolvable) || !strings.Contains(err.Error(), "stage up: step migrate: node n02 has no secret db-password") ||
		strings.Contains(err.Error(), "n01") || strings.Contains(err.Error(), "n03") {
		t.Fatalf("Resolve = %v; want ErrUnresolvable naming n02 and db-password only", err)
	}
	req.Stages[0].Target = wire.Target{Nodes: []string{"n01", "n03"}}
	st, err := Resolve(&req, ns, nil, nil)
	if err != nil {
		t.Fatalf("Resolve over the nodes that have it: %v", err)
	}
	if got := string(st[0].Steps[0].Args); !strings.Contains(got, `{{ secret \"db-password\" }}`) {
		t.Fatalf("the run keeps %s; want the reference", got)
	}
	// A one-step stage, and a rollback step, are checked too.
	req = wire.CreateRunRequest{ClusterID: "c", Stages: []wire.StageSpec{{Name: "one", Kind: "example.com/db.migrate",
		Args: json.RawMessage(`{"t":"{{ secret \"api-token\" }}"}`), Target: wire.Target{All: true}}}}
	if err := Check(&req); err != nil {
		t.Fatal(err)
	}
	if _, err := Resolve(&req, ns, nil, nil); err == nil || !strings.Contains(err.Error(), "node n01 has no secret api-token; node n02 has no secret api-token") {
		t.Fatalf("Resolve of a one-step stage = %v", err)
	}
	req = wire.CreateRunRequest{ClusterID: "c", Stages: []wire.StageSpec{steps(`{"dsn":"{{ secret \"../etc/shadow\" }}"}`)}}
	if err := Check(&req); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "not a plain name") {
		t.Fatalf("Check of a bad name = %v; want ErrInvalid, not a plain name", err)
	}
}

// A command's output that holds a reference does not become one in a later
// step's args: only the run's author names secrets.
func TestAnOutputNeverNamesASecret(t *testing.T) {
	t.Parallel()
	steps := []store.RunStep{{Name: "a", Kind: "example.com/x"},
		{Name: "b", Kind: "example.com/x", Args: json.RawMessage(`{"v":"{{ .steps.a.outputs.x }}","w":"{{ secret \"mine\" }}"}`)}}
	c := newNodeContext(nil, "n1", nil, steps)
	c.set("a", "DONE", json.RawMessage(`{"x":"{{ secret \"theirs\" }}"}`))
	args, err := newStepTemplates().renderArgs(&steps[1], c)
	if err != nil {
		t.Fatal(err)
	}
	names, err := secret.FindArgs(args)
	if err != nil || strings.Join(names, ",") != "mine" {
		t.Fatalf("args %s name the secrets %v (%v); want only mine", args, names, err)
	}
}

// A core-side call's secret is the core's (core_steps.secrets), never a
// node's: nodes that announced their kinds and secrets do not refuse it.
func TestACallsSecretIsNotAskedOfTheNodes(t *testing.T) {
	t.Parallel()
	ns := nodes(2, nil)
	for i := range ns {
		ns[i].Kinds = []string{"example.com/x"}
		ns[i].Secrets = []string{"other"}
	}
	req := wire.CreateRunRequest{ClusterID: "c", Stages: []wire.StageSpec{{Name: "up", Target: wire.Target{All: true},
		Steps: []wire.StepSpec{
			{Name: "lb-out", Call: &wire.Call{HTTP: &wire.HTTPCall{Method: "POST", URL: "https://lb.example/{{ .node.id }}",
				Headers: map[string]string{"Authorization": `Bearer {{ secret "lb-token" }}`}}}},
			{Name: "up", Kind: "example.com/x"}}}}}
	if err := Check(&req); err != nil {
		t.Fatalf("Check: %v", err)
	}
	if _, err := Resolve(&req, ns, nil, nil); err != nil {
		t.Fatalf("Resolve refused a call's core secret: %v", err)
	}
}

// Two outputs put side by side cannot spell a reference the step's author
// did not write: the step fails to render, naming the secret.
func TestOutputsPutTogetherCannotSpellASecret(t *testing.T) {
	t.Parallel()
	steps := []store.RunStep{{Name: "a", Kind: "example.com/x"},
		{Name: "b", Kind: "example.com/x", Args: json.RawMessage(`{"v":"{{ .steps.a.outputs.p }}{{ .steps.a.outputs.q }}"}`)}}
	c := newNodeContext(nil, "n1", nil, steps)
	c.set("a", "DONE", json.RawMessage(`{"p":"{","q":"{ secret \"theirs\" }}"}`))
	_, err := newStepTemplates().renderArgs(&steps[1], c)
	if err == nil || !strings.Contains(err.Error(), "secret theirs") {
		t.Fatalf("renderArgs = %v; want a refusal naming secret theirs", err)
	}
	// A secret the run's params name is the run's author's, as one its
	// args write.
	c = newNodeContext(map[string]any{"dsn": `pg://{{ secret "db" }}@h`}, "n1", nil, steps)
	steps[1].Args = json.RawMessage(`{"v":"{{ .params.dsn }}"}`)
	if _, err := newStepTemplates().renderArgs(&steps[1], c); err != nil {
		t.Fatalf("a reference from the params: %v", err)
	}
}
