package e2e

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
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

// costlyArgsSchema is issue 30's schema: 21 levels of an anyOf of two $refs
// to the level below (about 1.6 KB); args failing the bottom level made a
// real core try 2^21 paths, holding its writer 34 s.
func costlyArgsSchema() json.RawMessage {
	defs := []string{`"l0":{"type":"string","minLength":1}`}
	for i := 1; i < 21; i++ {
		defs = append(defs, fmt.Sprintf(`"l%d":{"anyOf":[{"$ref":"#/$defs/l%d"},{"$ref":"#/$defs/l%d"}]}`, i, i-1, i-1))
	}
	return json.RawMessage(`{"$defs":{` + strings.Join(defs, ",") + `},"$ref":"#/$defs/l20"}`)
}

// hostileAgent is a plain-HTTP server answering as agent node of cluster
// e2e that announces kind with schema (an agent a person changed: a real
// agent refuses such a schema in its configuration).
func hostileAgent(t testing.TB, node, kind string, schema json.RawMessage) string {
	t.Helper()
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.URL.Path == "/api/v1/info":
			_ = json.NewEncoder(w).Encode(wire.AgentInfo{NodeID: node, ClusterID: "e2e", StoreID: "hostile",
				Kinds: []string{kind}, ArgsSchemas: map[string]json.RawMessage{kind: schema}})
		case r.URL.Path == "/api/v1/actions" && r.Method == http.MethodGet:
			_ = json.NewEncoder(w).Encode(wire.ChangesPage{})
		default:
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	t.Cleanup(ts.Close)
	return strings.TrimPrefix(ts.URL, "http://")
}

// TestANodesCostlyArgsSchemaLeavesTheCoreResponsive: a node announcing
// issue 30's schema is shown with why the core refuses it (and an event
// says so), its kind is refused there at once, with the reason, for an
// action and a target-all run, while the other node's same kind works,
// and an admin's write answers within a second throughout.
func TestANodesCostlyArgsSchemaLeavesTheCoreResponsive(t *testing.T) {
	t.Parallel()
	const kind = "example.com/pkg.upgrade"
	hostile := hostileAgent(t, "node-2", kind, costlyArgsSchema())
	actions := fmt.Sprintf("actions:\n  external:\n    - kind: %s\n      run: [/bin/true]\n      args_schema: |\n        {\"type\": \"object\"}\n", kind)
	f := newFleetWith(t, fleetOptions{nodes: 2, actionsYAML: actions, coreAddr: func(node, addr string) string {
		if node == "node-2" {
			return hostile
		}
		return addr
	}})
	why := testwait.Value(t, "node-2 shown with why its schema is refused", func() (string, bool) {
		nodes, err := f.admin.Nodes(ctxT(t), "e2e")
		if err != nil {
			return "", false
		}
		for _, n := range nodes {
			if n.ID == "node-2" {
				w, ok := n.ArgsSchemasRefused[kind]
				return w, ok
			}
		}
		return "", false
	})
	if !strings.Contains(why, "schema too costly") || !strings.Contains(why, "$ref") {
		t.Fatalf("node-2 is refused for %q, want why its schema is too costly", why)
	}
	evs, err := f.admin.Events(ctxT(t), 0, 100, client.EventFilter{Node: "node-2", Types: []string{"node.args_schema_refused"}})
	if err != nil || len(evs.Events) == 0 || !strings.Contains(evs.Events[0].Message, kind) {
		t.Fatalf("no node.args_schema_refused event naming the kind: %v %+v", err, evs)
	}

	// The admin's write answers within a second while the kind is asked of
	// node-2, by an action and by a run over every node.
	timed := func(what string, call func() error) error {
		t.Helper()
		start := time.Now()
		err := call()
		if d := time.Since(start); d > time.Second {
			t.Errorf("%s took %s, more than the 1 s bound", what, d)
		}
		return err
	}
	done := make(chan error, 1)
	go func() {
		c, e := limit.MustParse("2"), limit.MustParse("0")
		done <- timed("a target-all run of the kind", func() error {
			_, err := f.alice.CreateRun(ctxT(t), &wire.CreateRunRequest{ClusterID: "e2e", Stages: []wire.StageSpec{{
				Name: "up", Target: wire.Target{All: true}, MaxConcurrency: &c, MaxErrors: &e,
				Steps: []wire.StepSpec{{Name: "upgrade", Kind: kind, Args: json.RawMessage(`{}`)}}}}})
			return err
		})
	}()
	if err := timed("an admin's write", func() error {
		_, err := f.admin.DrainNode(ctxT(t), "e2e", "node-1", "maintenance")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	var ae *client.APIError
	if err := <-done; !errors.As(err, &ae) || ae.Status != http.StatusUnprocessableEntity ||
		!strings.Contains(ae.Detail.Message, "node-2") || !strings.Contains(ae.Detail.Message, "schema too costly") {
		t.Fatalf("target-all run: %v, want 422 naming node-2 and why", err)
	}
	err = timed("an action of the kind on node-2", func() error {
		_, err := f.alice.CreateAction(ctxT(t), &wire.CreateActionRequest{ClusterID: "e2e", NodeID: "node-2", Kind: kind, Args: json.RawMessage(`{}`)})
		return err
	})
	if !errors.As(err, &ae) || ae.Status != http.StatusUnprocessableEntity || !strings.Contains(ae.Detail.Message, "unusable") {
		t.Fatalf("action on node-2: %v, want 422 saying the kind is unusable there", err)
	}
	if _, err := f.admin.UndrainNode(ctxT(t), "e2e", "node-1"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.alice.CreateAction(ctxT(t), &wire.CreateActionRequest{ClusterID: "e2e", NodeID: "node-1", Kind: kind, Args: json.RawMessage(`{}`)}); err != nil {
		t.Fatalf("the same kind on node-1: %v", err)
	}
}
