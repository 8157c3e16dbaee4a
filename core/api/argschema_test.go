package api

import (
	"context"
	"encoding/json"
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
