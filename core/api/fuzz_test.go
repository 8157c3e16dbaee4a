package api

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/musterhq/muster/shared/action"
)

func FuzzCreateDecode(f *testing.F) {
	for _, seed := range []string{
		`{"cluster_id":"prod","node_id":"db-1","kind":"muster.io/debug.ping"}`,
		`{"cluster_id":"prod","node_id":"db-1","kind":"muster.io/debug.sleep","args":{"seconds":30},"timeout_s":60}`,
		`{"id":"3f0c8a52-7e4e-4a8e-9a4e-4f5a3b0f2c11","cluster_id":"c","node_id":"n","kind":"a/b","args":null}`,
		`{"cluster_id":"prod","node_id":"db-1","kind":"muster.io/debug.ping","state":"DONE"}`,
		`{"cluster_id":"prod","node_id":"db-1","kind":"muster.io/debug.ping","requester":"x"}`,
		`{"cluster_id":"prod","node_id":"db-1","kind":"muster.io/debug.ping","args":[1,2]}`,
		`{"cluster_id":"prod","node_id":"db-1","kind":"muster.io/debug.ping","args":{"n":1e400}}`,
		`{"cluster_id":"prod","node_id":"db-1","kind":"muster.io/debug.ping","args":{"a":{"b":{"c":[{}]}}}}`,
		`{"cluster_id":"prod","node_id":"db-1","kind":"muster.io/debug.ping"} trailing`,
		`{"cluster_id":1}`, `{"CLUSTER_ID":"prod","node_id":"db-1","kind":"a/b"}`,
		`[]`, `null`, ``, `{`, "\x00", `{"args":{"\ud800":1}}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		req, err := decodeCreate(body)
		if err != nil {
			if st, _ := classify(err); st != http.StatusBadRequest {
				t.Fatalf("error %v answers %d, not 400", err, st)
			}
			if req != nil {
				t.Fatal("a request returned with an error")
			}
			return
		}
		if req.ClusterID == "" || req.NodeID == "" || !action.ValidKind(req.Kind) {
			t.Fatalf("accepted %+v", req)
		}
		if req.ID != "" && !action.ValidID(req.ID) {
			t.Fatalf("accepted id %q", req.ID)
		}
		if req.TimeoutS < 0 || req.TimeoutS > action.MaxTimeoutS {
			t.Fatalf("accepted timeout %d", req.TimeoutS)
		}
		if len(req.Args) > action.MaxArgs {
			t.Fatalf("accepted %d bytes of args", len(req.Args))
		}
		var obj map[string]any
		dec := json.NewDecoder(bytes.NewReader(req.Args))
		dec.UseNumber()
		if err := dec.Decode(&obj); err != nil || obj == nil {
			t.Fatalf("accepted args %s that are not an object", req.Args)
		}
		again, err := action.NormalizeArgs(req.Args)
		if err != nil || !bytes.Equal(again, req.Args) {
			t.Fatalf("args %s are not canonical", req.Args)
		}
		// Only the fields a caller may set came through: a body naming any
		// other field (state, requester, approved_by...) was refused.
		var top map[string]json.RawMessage
		if err := json.Unmarshal(body, &top); err != nil {
			t.Fatalf("accepted a body that is not one object: %v", err)
		}
		for k := range top {
			switch strings.ToLower(k) {
			case "id", "cluster_id", "node_id", "kind", "args", "timeout_s":
			default:
				t.Fatalf("accepted a body setting %q", k)
			}
		}
	})
}
