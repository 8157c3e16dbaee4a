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

// POST /api/v1/actions with a target instead of a node_id makes one action
// per node it picks (201, the actions, sorted by node), all or none: args
// one node's args_schema refuses are a 422 naming it that creates nothing,
// as is a selector matching no node; a target with a node_id or an id is a
// 400. Every answer is checked against the OpenAPI document.
func TestCreateActionsOverATarget(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	err := e.st.Update(ctx, func(tx store.Tx) error {
		n, err := tx.Node(ctx, "prod", "db-2")
		if err != nil {
			return err
		}
		n.Kinds = []string{kindSleep}
		n.ArgsSchemas = map[string]json.RawMessage{kindSleep: json.RawMessage(
			`{"type":"object","properties":{"seconds":{"type":"integer","maximum":5}}}`)}
		return tx.PutNode(ctx, n)
	})
	if err != nil {
		t.Fatal(err)
	}
	zoneA := &wire.Target{Labels: map[string]string{"zone": "a"}}
	var out wire.CreatedActions
	e.call(http.MethodPost, "/api/v1/actions", "op", wire.CreateActionRequest{ClusterID: "prod", Target: zoneA,
		Kind: kindSleep, Args: json.RawMessage(`{"seconds":2}`)}, http.StatusCreated, &out)
	if len(out.Actions) != 2 || out.Actions[0].NodeID != "db-1" || out.Actions[1].NodeID != "db-2" ||
		out.Actions[0].ID == out.Actions[1].ID || out.Actions[0].Requester != "op" {
		t.Fatalf("created %+v, want one action on db-1 and one on db-2 by op", out.Actions)
	}

	d := e.fail(http.MethodPost, "/api/v1/actions", "op", wire.CreateActionRequest{ClusterID: "prod", Target: zoneA,
		Kind: kindSleep, Args: json.RawMessage(`{"seconds":9}`)}, http.StatusUnprocessableEntity)
	if !strings.Contains(d.Message, "node db-2") || !strings.Contains(d.Message, "args.seconds") {
		t.Fatalf("args db-2 refuses: %+v, want the node and the field named", d)
	}
	d = e.fail(http.MethodPost, "/api/v1/actions", "op", wire.CreateActionRequest{ClusterID: "prod",
		Target: &wire.Target{Labels: map[string]string{"zone": "z"}}, Kind: kindSleep}, http.StatusUnprocessableEntity)
	if !strings.Contains(d.Message, "zone=z") {
		t.Fatalf("a selector matching nothing: %+v, want it named", d)
	}
	for name, body := range map[string]string{
		"node_id and target": `{"cluster_id":"prod","node_id":"db-1","target":{"all":true},"kind":"` + kindSleep + `"}`,
		"id and target":      `{"id":"3f0c8a52-7e4e-4a8e-9a4e-4f5a3b0f2c11","cluster_id":"prod","target":{"all":true},"kind":"` + kindSleep + `"}`,
		"two forms":          `{"cluster_id":"prod","target":{"all":true,"nodes":["db-1"]},"kind":"` + kindSleep + `"}`,
		"empty target":       `{"cluster_id":"prod","target":{},"kind":"` + kindSleep + `"}`,
	} {
		if st, b := e.do(http.MethodPost, "/api/v1/actions", "op", json.RawMessage(body)); st != http.StatusBadRequest {
			t.Errorf("%s: %d %s, want 400", name, st, b)
		}
	}
	var acts wire.ActionList
	e.call(http.MethodGet, "/api/v1/actions", "viewer", nil, http.StatusOK, &acts)
	if len(acts.Actions) != 2 {
		t.Fatalf("%d actions stored, want the 2 of the first create only", len(acts.Actions))
	}
	e.fail(http.MethodPost, "/api/v1/actions", "viewer", wire.CreateActionRequest{ClusterID: "prod", Target: zoneA, Kind: kindSleep}, http.StatusForbidden)
}

// A create over a target with a request_id is idempotent: a retry with the
// same request_id and content answers 200 with the actions the first made
// (same ids) and stores nothing new; the same request_id with other content
// is a 409 that stores nothing; another request_id makes new actions.
func TestCreateActionsOverATargetRetriedWithItsRequestID(t *testing.T) {
	t.Parallel()
	e := setup(t)
	zoneA := &wire.Target{Labels: map[string]string{"zone": "a"}}
	body := wire.CreateActionRequest{ClusterID: "prod", Target: zoneA, Kind: kindSleep,
		Args: json.RawMessage(`{"seconds":2}`), RequestID: "req-1"}
	var first, again wire.CreatedActions
	e.call(http.MethodPost, "/api/v1/actions", "op", body, http.StatusCreated, &first)
	e.call(http.MethodPost, "/api/v1/actions", "op", body, http.StatusOK, &again)
	if len(first.Actions) != 2 || len(again.Actions) != 2 ||
		first.Actions[0].ID != again.Actions[0].ID || first.Actions[1].ID != again.Actions[1].ID {
		t.Fatalf("retry answered %+v, want the actions of the first create %+v", again.Actions, first.Actions)
	}
	other := body
	other.Args = json.RawMessage(`{"seconds":3}`)
	if d := e.fail(http.MethodPost, "/api/v1/actions", "op", other, http.StatusConflict); !strings.Contains(d.Message, "req-1") {
		t.Fatalf("other content under the same request_id: %+v, want it named", d)
	}
	e.fail(http.MethodPost, "/api/v1/actions", "admin", body, http.StatusConflict)
	var acts wire.ActionList
	e.call(http.MethodGet, "/api/v1/actions", "viewer", nil, http.StatusOK, &acts)
	if len(acts.Actions) != 2 {
		t.Fatalf("%d actions stored, want the 2 of the first create only", len(acts.Actions))
	}
	body.RequestID = "req-2"
	e.call(http.MethodPost, "/api/v1/actions", "op", body, http.StatusCreated, &again)
	if again.Actions[0].ID == first.Actions[0].ID {
		t.Fatal("another request_id reused the ids of the first")
	}
	single := `{"cluster_id":"prod","node_id":"db-1","kind":"` + kindSleep + `","request_id":"req-3"}`
	if st, b := e.do(http.MethodPost, "/api/v1/actions", "op", json.RawMessage(single)); st != http.StatusBadRequest {
		t.Fatalf("request_id without a target: %d %s, want 400", st, b)
	}
}
