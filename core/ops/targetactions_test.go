package ops_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/musterhq/muster/core/ops"
	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/core/target"
	"github.com/musterhq/muster/shared/wire"
)

// labelNodes gives prod's nodes labels (db-1 and db-2 role=db, db-3
// role=db too when added) and db-2 an args_schema for the sleep kind
// with seconds at most 5.
func (e *env) labelNodes() {
	e.t.Helper()
	ctx := context.Background()
	now := time.Now().UTC()
	err := e.st.Update(ctx, func(tx store.Tx) error {
		for _, id := range []string{"db-1", "db-2", "web-1"} {
			n := &store.Node{ClusterID: "prod", ID: id, Addr: "127.0.0.1:1", Source: store.SourceStatic,
				Status: store.NodeUp, Kinds: []string{kindSleep}, UpdatedTS: now, LastContact: &now,
				Labels: map[string]string{"role": strings.TrimRight(id, "-12")}}
			if id == "db-2" {
				n.ArgsSchemas = map[string]json.RawMessage{kindSleep: json.RawMessage(
					`{"type":"object","properties":{"seconds":{"type":"integer","maximum":5}}}`)}
			}
			if err := tx.PutNode(ctx, n); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) actionCount() int {
	e.t.Helper()
	var n int
	err := e.st.Read(context.Background(), func(r store.Reader) error {
		recs, _, err := store.ActionPage(context.Background(), r, store.ListQuery{ClusterID: "prod", Limit: 100})
		n = len(recs)
		return err
	})
	if err != nil {
		e.t.Fatal(err)
	}
	return n
}

// TestCreateActionsOverALabelTarget: a label selector makes one action per
// matching node, sorted by node, and syncs none before approval; args one
// node's args_schema refuses create nothing, and the error names that
// node; a selector matching nothing is a 422 that creates nothing.
func TestCreateActionsOverALabelTarget(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.labelNodes()
	ctx := context.Background()
	req := ops.ActionRequest{ClusterID: "prod", Kind: kindSleep, Args: []byte(`{"seconds":3}`)}

	recs, _, err := e.ops.CreateActions(ctx, operator, req, target.Labels(map[string]string{"role": "db"}))
	if err != nil {
		t.Fatal(err)
	}
	var nodes []string
	for _, r := range recs {
		nodes = append(nodes, r.NodeID)
		if r.Requester != operator.Name || r.Kind != kindSleep {
			t.Fatalf("action %+v: want requester %s, kind %s", r.Action, operator.Name, kindSleep)
		}
	}
	if !slices.Equal(nodes, []string{"db-1", "db-2"}) {
		t.Fatalf("created on %v, want db-1 and db-2", nodes)
	}
	if n := e.actionCount(); n != 2 {
		t.Fatalf("%d actions stored, want 2", n)
	}

	// All or none: db-2's schema refuses 30 seconds, db-1 has none.
	req.Args = []byte(`{"seconds":30}`)
	_, _, err = e.ops.CreateActions(ctx, operator, req, target.Labels(map[string]string{"role": "db"}))
	if p := ops.Describe(err); p.Status != http.StatusUnprocessableEntity || !strings.Contains(p.Message, "node db-2") {
		t.Fatalf("args db-2 refuses: %d %q, want 422 naming node db-2", p.Status, p.Message)
	}
	if n := e.actionCount(); n != 2 {
		t.Fatalf("%d actions stored after a refused create, want still 2", n)
	}

	_, _, err = e.ops.CreateActions(ctx, operator, req, target.Labels(map[string]string{"role": "cache"}))
	if p := ops.Describe(err); p.Status != http.StatusUnprocessableEntity || !strings.Contains(p.Message, "role=cache") {
		t.Fatalf("a selector matching nothing: %d %q, want 422 naming it", p.Status, p.Message)
	}
	_, _, err = e.ops.CreateActions(ctx, operator, req, target.Nodes("db-1", "db-9"))
	if p := ops.Describe(err); p.Status != http.StatusUnprocessableEntity || !strings.Contains(p.Message, "db-9") {
		t.Fatalf("an unknown node: %d %q, want 422 naming it", p.Status, p.Message)
	}
	req.NodeID = "db-1"
	if _, _, err := e.ops.CreateActions(ctx, operator, req, target.All()); !errors.Is(err, ops.ErrBadRequest) {
		t.Fatalf("node_id and a target: %v, want a bad request", err)
	}
	req.NodeID = ""
	if _, _, err := e.ops.CreateActions(ctx, approver, req, target.All()); !errors.Is(err, ops.ErrForbidden) {
		t.Fatalf("an approver creating: %v, want forbidden", err)
	}
	if n := e.actionCount(); n != 2 {
		t.Fatalf("%d actions stored after refused creates, want still 2", n)
	}
}

// A caller granted create on one cluster only neither creates over a
// target on another (not found: the other cluster does not exist for them,
// with or without a request_id) nor learns its actions' ids; nothing is
// made.
func TestCreateActionsOverATargetOnAnotherClusterIsRefused(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.labelNodes()
	ctx := context.Background()
	err := e.st.Update(ctx, func(tx store.Tx) error {
		return tx.PutCluster(ctx, &store.Cluster{ID: "staging", Status: store.ClusterHealthy, UpdatedTS: time.Now().UTC()})
	})
	if err != nil {
		t.Fatal(err)
	}
	e.grant(wire.CreateGrantRequest{Person: "sam", Role: store.RoleOperator, Clusters: "staging"})
	sam, err := e.ops.Identify(ctx, "sam", nil, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, rid := range []string{"", "sam-1"} {
		req := ops.ActionRequest{ClusterID: "prod", Kind: kindSleep, Args: json.RawMessage(`{}`), RequestID: rid}
		recs, _, err := e.ops.CreateActions(ctx, sam, req, target.Labels(map[string]string{"role": "db"}))
		if !errors.Is(err, store.ErrNotFound) && !errors.Is(err, ops.ErrForbidden) {
			t.Errorf("request_id %q: sam creates on prod: %v, want not found or forbidden", rid, err)
		}
		if recs != nil {
			t.Errorf("request_id %q: answered %d actions", rid, len(recs))
		}
	}
	if n := e.actionCount(); n != 0 {
		t.Fatalf("a refused create made %d actions", n)
	}
}

// A create over a target with a request_id is made once: the same call
// again returns its actions (existing) and makes nothing; the same
// request_id once the target picks other nodes, or from another caller, is
// a conflict that makes nothing.
func TestCreateActionsWithARequestIDIsMadeOnce(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.labelNodes()
	ctx := context.Background()
	nb := time.Now().Add(time.Hour).Truncate(time.Microsecond).Add(123 * time.Nanosecond) // stored to the microsecond
	req := ops.ActionRequest{ClusterID: "prod", Kind: kindSleep, Args: []byte(`{"seconds":3}`), RequestID: "deploy-42", NotBefore: &nb}
	db := target.Labels(map[string]string{"role": "db"})
	first, existing, err := e.ops.CreateActions(ctx, operator, req, db)
	if err != nil || existing || len(first) != 2 {
		t.Fatalf("first create: %d actions, existing %v, %v", len(first), existing, err)
	}
	if first[0].ID != ops.RequestActionID("deploy-42", "prod", "db-1") {
		t.Fatalf("id %s is not derived from the request_id", first[0].ID)
	}
	again, existing, err := e.ops.CreateActions(ctx, operator, req, db)
	if err != nil || !existing || len(again) != 2 || again[0].ID != first[0].ID || again[1].ID != first[1].ID {
		t.Fatalf("the same create again: %+v, existing %v, %v", again, existing, err)
	}
	if _, _, err := e.ops.CreateActions(ctx, operator, req, target.All()); !errors.Is(err, ops.ErrConflict) {
		t.Errorf("the same request_id over other nodes: %v, want a conflict", err)
	}
	if _, _, err := e.ops.CreateActions(ctx, admin, req, db); !errors.Is(err, ops.ErrConflict) {
		t.Errorf("the same request_id from another caller: %v, want a conflict", err)
	}
	if n := e.actionCount(); n != 2 {
		t.Fatalf("%d actions, want the 2 of the first create", n)
	}
}
