package e2e

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/musterhq/muster/shared/client"
	"github.com/musterhq/muster/shared/limit"
	"github.com/musterhq/muster/shared/testwait"
	"github.com/musterhq/muster/shared/wire"
)

// TestArgsSchemaRefusesBadArgsEverywhere: an external kind's args_schema,
// declared in the agents' configuration, is enforced by a real agent (422
// naming the field) and, once the core has learnt it, by a real core at
// action create, run create and playbook plan and start (422 naming the
// node and the field), before any approval: nothing is stored and the
// command never ran.
func TestArgsSchemaRefusesBadArgsEverywhere(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ran := filepath.Join(dir, "ran.log")
	script := filepath.Join(dir, "upgrade.sh")
	if err := os.WriteFile(script, []byte(fmt.Sprintf("#!/bin/sh\necho \"$MUSTER_ACTION_ID\" >> %q\n", ran)), 0o755); err != nil {
		t.Fatal(err)
	}
	const kind = "example.com/pkg.upgrade"
	actions := fmt.Sprintf(`actions:
  external:
    - kind: %s
      run: [%q]
      args_schema: |
        type: object
        required: [version]
        additionalProperties: false
        properties:
          version: {type: string, pattern: "^[0-9][0-9.]*$"}
`, kind, script)
	f := newFleetWith(t, fleetOptions{nodes: 2, actionsYAML: actions})

	// The agent refuses by itself.
	_, status, err := f.agentC["node-1"].Push(ctxT(t), &wire.PushRequest{Kind: kind, Args: json.RawMessage(`{"version":"latest"}`)})
	if status != http.StatusUnprocessableEntity || err == nil || !strings.Contains(err.Error(), "args.version") {
		t.Fatalf("agent push: %d %v, want 422 naming args.version", status, err)
	}
	// The core learns the schema from the agents' info.
	testwait.Within(t, 20*time.Second, "the core to store both nodes' args schemas", func() bool {
		nodes, err := f.admin.Nodes(ctxT(t), "e2e")
		if err != nil {
			return false
		}
		for _, n := range nodes {
			if _, ok := n.ArgsSchemas[kind]; !ok {
				return false
			}
		}
		return len(nodes) == 2
	})
	refused := func(what string, err error, want ...string) {
		t.Helper()
		var ae *client.APIError
		if !errors.As(err, &ae) || ae.Status != http.StatusUnprocessableEntity {
			t.Fatalf("%s: %v, want 422", what, err)
		}
		for _, w := range want {
			if !strings.Contains(ae.Detail.Message, w) {
				t.Fatalf("%s: %q does not say %q", what, ae.Detail.Message, w)
			}
		}
	}
	_, err = f.alice.CreateAction(ctxT(t), &wire.CreateActionRequest{ClusterID: "e2e", NodeID: "node-2", Kind: kind,
		Args: json.RawMessage(`{"version":"2.0","force":true}`)})
	refused("action create", err, "node-2", "args.force")

	c, e := limit.MustParse("1"), limit.MustParse("0")
	_, err = f.alice.CreateRun(ctxT(t), &wire.CreateRunRequest{ClusterID: "e2e", Stages: []wire.StageSpec{{
		Name: "up", Target: wire.Target{All: true}, MaxConcurrency: &c, MaxErrors: &e,
		Steps: []wire.StepSpec{{Name: "upgrade", Kind: kind, Args: json.RawMessage(`{}`)}}}}})
	refused("run create", err, "step upgrade", "node node-1", "args.version: required")

	doc := fmt.Sprintf(`name: upgrade
description: upgrade every node
params:
  - {name: version, type: string}
stages:
  - name: up
    target: {all: true}
    steps:
      - {name: upgrade, kind: %s, args: {version: "{{ .version }}"}}
`, kind)
	if _, err := f.alice.ApplyPlaybook(ctxT(t), doc); err != nil {
		t.Fatal(err)
	}
	_, err = f.alice.PlanPlaybook(ctxT(t), "upgrade", &wire.PlanRequest{ClusterID: "e2e", Params: map[string]string{"version": "latest"}})
	refused("playbook plan", err, "node node-1", "args.version")
	_, err = f.alice.StartPlaybook(ctxT(t), "upgrade", &wire.PlanRequest{ClusterID: "e2e", Version: 1, Params: map[string]string{"version": "latest"}})
	refused("playbook start", err, "args.version")
	if _, err := f.alice.PlanPlaybook(ctxT(t), "upgrade", &wire.PlanRequest{ClusterID: "e2e", Params: map[string]string{"version": "2.0"}}); err != nil {
		t.Fatalf("a good plan: %v", err)
	}

	acts, err := f.admin.Actions(ctxT(t), client.ActionFilter{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	runs, err := f.admin.Runs(ctxT(t), client.RunFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(acts.Actions) != 0 || len(runs.Runs) != 0 {
		t.Fatalf("refused requests stored %d actions and %d runs", len(acts.Actions), len(runs.Runs))
	}
	if b, err := os.ReadFile(ran); err == nil && len(b) > 0 {
		t.Fatalf("the command ran: %s", b)
	}
}
