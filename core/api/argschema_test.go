package api

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/wire"
)

// Args that break the args_schema a node announced for the kind are
// refused before any approval, for an action and for a run, with a 422
// naming the node and the field; nothing is stored.
func TestArgsSchemaRefusesBeforeApproval(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	err := e.st.Update(ctx, func(tx store.Tx) error {
		n, err := tx.Node(ctx, "prod", "db-1")
		if err != nil {
			return err
		}
		n.ArgsSchemas = map[string]json.RawMessage{kindSleep: json.RawMessage(
			`{"type":"object","required":["seconds"],"properties":{"seconds":{"type":"integer","maximum":5}}}`)}
		return tx.PutNode(ctx, n)
	})
	if err != nil {
		t.Fatal(err)
	}
	d := e.fail(http.MethodPost, "/api/v1/actions", "op",
		wire.CreateActionRequest{ClusterID: "prod", NodeID: "db-1", Kind: kindSleep, Args: json.RawMessage(`{"seconds":10}`)}, 422)
	if d.Code != wire.CodeUnprocessable || !strings.Contains(d.Message, "db-1") || !strings.Contains(d.Message, "args.seconds") {
		t.Fatalf("action: %+v", d)
	}
	run := oneStageRun(kindSleep)
	run.Stages[0].Args = json.RawMessage(`{}`)
	d = e.fail(http.MethodPost, "/api/v1/runs", "op", run, 422)
	if !strings.Contains(d.Message, "node db-1") || !strings.Contains(d.Message, "args.seconds: required") {
		t.Fatalf("run: %+v", d)
	}
	var acts wire.ActionList
	e.call(http.MethodGet, "/api/v1/actions", "viewer", nil, http.StatusOK, &acts)
	var runs wire.RunList
	e.call(http.MethodGet, "/api/v1/runs", "viewer", nil, http.StatusOK, &runs)
	if len(acts.Actions) != 0 || len(runs.Runs) != 0 {
		t.Fatalf("refused requests stored %d actions, %d runs", len(acts.Actions), len(runs.Runs))
	}
	var nodes wire.NodeList
	e.call(http.MethodGet, "/api/v1/nodes?cluster=prod", "viewer", nil, http.StatusOK, &nodes)
	if len(nodes.Nodes) == 0 || nodes.Nodes[0].ID != "db-1" || !strings.Contains(string(nodes.Nodes[0].ArgsSchemas[kindSleep]), `"maximum":5`) {
		t.Fatalf("the node's args schemas are not shown: %+v", nodes.Nodes)
	}
	// Good args pass.
	e.create("op", wire.CreateActionRequest{ClusterID: "prod", NodeID: "db-1", Kind: kindSleep, Args: json.RawMessage(`{"seconds":1}`)})
}

// costlySchema is issue 30's args_schema: 21 levels of an anyOf of two
// $refs to the level below (about 1.6 KB), which made checking args take
// 2^21 steps.
func costlySchema() json.RawMessage {
	defs := []string{`"l0":{"type":"string","minLength":1}`}
	for i := 1; i < 21; i++ {
		defs = append(defs, fmt.Sprintf(`"l%d":{"anyOf":[{"$ref":"#/$defs/l%d"},{"$ref":"#/$defs/l%d"}]}`, i, i-1, i-1))
	}
	return json.RawMessage(`{"$defs":{` + strings.Join(defs, ",") + `},"$ref":"#/$defs/l20"}`)
}

// A node whose args_schema the core refuses is shown with the reason, and
// that kind is unusable on it (an action or a run step of it is a 422
// saying why); its other kinds, and that kind on another node, work.
func TestANodesRefusedSchemaIsShownAndOnlyItsKindThereIsRefused(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	err := e.st.Update(ctx, func(tx store.Tx) error {
		for _, id := range []string{"db-1", "db-2"} {
			n, err := tx.Node(ctx, "prod", id)
			if err != nil {
				return err
			}
			n.Status, n.Kinds = store.NodeUp, []string{kindPing, kindSleep}
			n.ArgsSchemas = map[string]json.RawMessage{kindSleep: json.RawMessage(`{"type":"object"}`)}
			if id == "db-1" {
				n.ArgsSchemas[kindSleep] = costlySchema()
			}
			if err := tx.PutNode(ctx, n); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var list wire.NodeList
	e.call(http.MethodGet, "/api/v1/nodes?cluster=prod", "viewer", nil, http.StatusOK, &list)
	for _, n := range list.Nodes {
		why := n.ArgsSchemasRefused[kindSleep]
		switch {
		case n.ID == "db-1" && (!strings.Contains(why, "schema too costly") || !strings.Contains(why, "$ref")):
			t.Fatalf("db-1 is shown refused for %q, want why its schema is too costly", why)
		case n.ID == "db-2" && len(n.ArgsSchemasRefused) > 0:
			t.Fatalf("db-2 is shown refused: %v", n.ArgsSchemasRefused)
		}
	}

	d := e.fail(http.MethodPost, "/api/v1/actions", "op",
		wire.CreateActionRequest{ClusterID: "prod", NodeID: "db-1", Kind: kindSleep, Args: json.RawMessage(`{"seconds":1}`)}, 422)
	if !strings.Contains(d.Message, "db-1") || !strings.Contains(d.Message, "unusable") || !strings.Contains(d.Message, "schema too costly") {
		t.Fatalf("action of the refused kind: %+v", d)
	}
	run := oneStageRun(kindSleep)
	d = e.fail(http.MethodPost, "/api/v1/runs", "op", run, 422)
	if !strings.Contains(d.Message, "db-1") || !strings.Contains(d.Message, "schema too costly") {
		t.Fatalf("run of the refused kind: %+v", d)
	}
	e.create("op", wire.CreateActionRequest{ClusterID: "prod", NodeID: "db-1", Kind: kindPing})
	e.create("op", wire.CreateActionRequest{ClusterID: "prod", NodeID: "db-2", Kind: kindSleep, Args: json.RawMessage(`{"seconds":1}`)})
}
