package api

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/musterhq/muster/core/ops"
	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/core/store/sqlite"
	"github.com/musterhq/muster/shared/names"
	"github.com/musterhq/muster/shared/wire"
)

// FuzzReplaceBody decodes arbitrary bodies as a replace does and acts on
// what decodes: a refusal is a 4xx, never a 5xx; what decodes names a
// valid node id.
func FuzzReplaceBody(f *testing.F) {
	for _, s := range []string{`{"with":"web-4"}`, `{"with":"web-1"}`, `{"with":""}`, `{}`, `{"with":"a b"}`,
		`{"with":"web-4","extra":1}`, `{"with":1}`, `{"with":"web-4"}{}`, `[]`, ``, `{`, `null`, `{"with":"<b>"}`,
		`{"with":"web-9"}`} {
		f.Add([]byte(s))
	}
	st, err := sqlite.Open(context.Background(), f.TempDir())
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { st.Close() })
	ctx := context.Background()
	if err := st.Update(ctx, func(tx store.Tx) error {
		if err := tx.PutCluster(ctx, &store.Cluster{ID: "prod", Status: store.ClusterHealthy}); err != nil {
			return err
		}
		for _, id := range []string{"web-1", "web-4"} {
			if err := tx.PutNode(ctx, &store.Node{ClusterID: "prod", ID: id, Source: store.SourceGossip, Status: store.NodeDown}); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		f.Fatal(err)
	}
	o := ops.New(ops.Config{Store: st})
	admin := ops.Caller{Name: "root", Roles: []string{store.RoleAdmin}}
	f.Fuzz(func(t *testing.T, body []byte) {
		req, err := decodeReplace(body)
		if err != nil {
			if s := statusOf(err); s != http.StatusBadRequest {
				t.Fatalf("error %v answers %d, not 400", err, s)
			}
			return
		}
		if names.CheckID(req.With) != nil {
			t.Fatalf("accepted %+v", req)
		}
		// web-9 (unknown) with web-1, or web-1 with itself: refused, a
		// 4xx, never a 5xx.
		for _, old := range []string{"web-9", req.With} {
			if _, _, err := o.ReplaceNode(ctx, admin, "prod", old, req.With); err != nil {
				if s := statusOf(err); s < 400 || s >= 500 {
					t.Fatalf("replace %s with %s: %v answers %d", old, req.With, err, s)
				}
			}
		}
	})
}

// The route answers each refusal with its status and the JSON error
// envelope, and a replace with what it did.
func TestReplaceRouteAnswers(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.update(func(ctx context.Context, tx store.Tx) error {
		for _, id := range []string{"old-1", "new-1", "new-2"} {
			err := tx.PutNode(ctx, &store.Node{ClusterID: "prod", ID: id, Addr: "127.0.0.1:9", Source: store.SourceGossip,
				Status: store.NodeUnknown, Labels: map[string]string{"n": id}})
			if err != nil {
				return err
			}
		}
		return nil
	})
	var out wire.ReplaceResult
	e.call(http.MethodPost, "/api/v1/clusters/prod/nodes/old-1/replace", "admin", wire.ReplaceNodeRequest{With: "new-1"}, http.StatusOK, &out)
	if out.Place != "old-1" || out.With != "new-1" || out.Labels["n"] != "old-1" {
		t.Fatalf("answer %+v", out)
	}
	var list wire.NodeList
	var n wire.Node
	e.call(http.MethodGet, "/api/v1/nodes?cluster=prod", "viewer", nil, http.StatusOK, &list)
	for _, x := range list.Nodes {
		if x.ID == "new-1" {
			n = x
		}
	}
	if n.Replaces != "old-1" || n.CoreLabels["n"] != "old-1" || n.Labels["n"] != "old-1" {
		t.Fatalf("new-1 shown as %+v", n)
	}
	for _, tc := range []struct {
		name, path string
		body       any
		status     int
		code       string
	}{
		{"NEW already replacing", "/api/v1/clusters/prod/nodes/new-2/replace", wire.ReplaceNodeRequest{With: "new-1"}, http.StatusConflict, wire.CodeConflict},
		{"NEW unknown", "/api/v1/clusters/prod/nodes/new-2/replace", wire.ReplaceNodeRequest{With: "nope"}, http.StatusNotFound, wire.CodeNotFound},
		{"NEW is OLD", "/api/v1/clusters/prod/nodes/new-2/replace", wire.ReplaceNodeRequest{With: "new-2"}, http.StatusBadRequest, wire.CodeBadRequest},
		{"OLD not in the cluster", "/api/v1/clusters/prod/nodes/old-1/replace", wire.ReplaceNodeRequest{With: "new-2"}, http.StatusNotFound, wire.CodeNotFound},
		{"no body", "/api/v1/clusters/prod/nodes/new-2/replace", nil, http.StatusBadRequest, wire.CodeBadRequest},
		{"unknown field", "/api/v1/clusters/prod/nodes/new-2/replace", `{"with":"new-1","force":true}`, http.StatusBadRequest, wire.CodeBadRequest},
	} {
		status, b := e.do(http.MethodPost, tc.path, "admin", tc.body)
		var env wire.ErrorBody
		if status != tc.status || json.Unmarshal(b, &env) != nil || env.Error.Code != tc.code || env.Error.Message == "" {
			t.Errorf("%s: %d %s, want %d %s", tc.name, status, b, tc.status, tc.code)
		}
	}
}
