package api

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/labstack/echo/v5"

	"github.com/musterhq/muster/core/auth"
	"github.com/musterhq/muster/core/ops"
	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/core/store/sqlite"
	"github.com/musterhq/muster/core/target"
	"github.com/musterhq/muster/shared/action"
	"github.com/musterhq/muster/shared/wire"
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
		`{"cluster_id":"prod","node_id":"db-1","kind":"a/b","args":{"dsn":"pg://u:{{ secret \"db-password\" }}@h"}}`,
		`{"cluster_id":"prod","node_id":"db-1","kind":"a/b","args":{"dsn":"{{ secret \"../x\" }}{{secret}}"}}`,
		`{"cluster_id":"prod","node_id":"db-1","kind":"a/b","kind":"muster.io/debug.ping"}`,
		`{"cluster_id":"prod","Node_ID":"db-1","kind":"a/b"}`,
		`{"cluster_id":"prod","node_id":"db-1","kind":"a/b","args":{"x":1,"x":2}}`,
		`[]`, `null`, ``, `{`, "\x00", `{"args":{"\ud800":1}}`,
		`{"cluster_id":"prod","target":{"labels":{"role":"db"}},"kind":"muster.io/debug.ping"}`,
		`{"cluster_id":"prod","target":{"all":true},"kind":"a/b","args":{"n":1}}`,
		`{"cluster_id":"prod","target":{"nodes":["db-1","db-2"]},"kind":"a/b"}`,
		`{"cluster_id":"prod","node_id":"db-1","target":{"all":true},"kind":"a/b"}`,
		`{"cluster_id":"prod","target":{"labels":{"role":"db"},"all":true},"kind":"a/b"}`,
		`{"cluster_id":"prod","target":{},"kind":"a/b"}`, `{"cluster_id":"prod","target":{"all":false},"kind":"a/b"}`,
		`{"cluster_id":"prod","target":{"labels":{"bad key":"x"}},"kind":"a/b"}`,
		`{"cluster_id":"prod","target":{"nodes":["../x"]},"kind":"a/b"}`, `{"cluster_id":"prod","target":null,"kind":"a/b"}`,
		`{"cluster_id":"prod","target":{"labels":{"a":"b"},"extra":1},"kind":"a/b"}`,
		`{"id":"3f0c8a52-7e4e-4a8e-9a4e-4f5a3b0f2c11","cluster_id":"prod","target":{"all":true},"kind":"a/b"}`,
		`{"cluster_id":"prod","target":{"all":true},"kind":"a/b","request_id":"cli-7f3a"}`,
		`{"cluster_id":"prod","node_id":"db-1","kind":"a/b","request_id":"cli-7f3a"}`,
		`{"cluster_id":"prod","target":{"all":true},"kind":"a/b","request_id":"a b"}`,
		`{"cluster_id":"prod","target":{"all":true},"kind":"a/b","request_id":"\u00e9\n"}`,
		`{"cluster_id":"prod","target":{"all":true},"kind":"a/b","request_id":1}`,
		`{"cluster_id":"prod","target":{"all":true},"kind":"a/b","request_id":"` + strings.Repeat("r", 129) + `"}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		req, tgt, err := decodeCreate(body)
		if err != nil {
			if st := statusOf(err); st != http.StatusBadRequest {
				t.Fatalf("error %v answers %d, not 400", err, st)
			}
			if req != nil || tgt != nil {
				t.Fatal("a request returned with an error")
			}
			return
		}
		if req.ClusterID == "" || (req.NodeID == "") == (tgt == nil) || !action.ValidKind(req.Kind) {
			t.Fatalf("accepted %+v with target %v", req, tgt)
		}
		if tgt != nil && (req.ID != "" || target.Check(*tgt) != nil) {
			t.Fatalf("accepted id %q with target %+v", req.ID, *tgt)
		}
		if req.ID != "" && !action.ValidID(req.ID) {
			t.Fatalf("accepted id %q", req.ID)
		}
		if req.RequestID != "" && (tgt == nil || ops.CheckRequestID(req.RequestID) != nil) {
			t.Fatalf("accepted request_id %q with target %v", req.RequestID, tgt)
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
			case "id", "cluster_id", "node_id", "kind", "args", "timeout_s", "not_before", "target", "request_id":
			default:
				t.Fatalf("accepted a body setting %q", k)
			}
		}
	})
}

// FuzzListQuery decodes the query string of GET /api/v1/actions: any query is
// either a 400 or a list query within every cap, made of known parameters
// only.
func FuzzListQuery(f *testing.F) {
	for _, seed := range []string{
		"", "kind=a/b,c/d&state=running,NEW", "sort=created_ts:desc,id:asc&limit=10",
		"kind=a/b&kind=c/d", "sort=,", "sort=id&sort=id", "state=" + strings.Repeat("DONE,", MaxListValues+1),
		"kind=" + strings.Repeat(",", MaxListValues), strings.Repeat("x=1&", MaxQueryParams+1),
		"marker=nope", "limit=0", "limit=501", "%zz", "kind=%2C%2C", "sort=id:sideways", ";;;",
		"run=3f0c8a52-7e4e-4a8e-9a4e-4f5a3b0f2c11&state=DONE", "run_id=x", "run=&run=", "Run=x", "cluster=a&nodes=b",
	} {
		f.Add(seed)
	}
	e := echo.New()
	f.Fuzz(func(t *testing.T, raw string) {
		req := httptest.NewRequest(http.MethodGet, "/api/v1/actions", nil)
		req.URL.RawQuery = raw
		c := e.NewContext(req, httptest.NewRecorder())
		var q store.ListQuery
		err := checkQuery(onlyParams(func(c *echo.Context) error {
			var err error
			q, err = parseList(c)
			return err
		}, actionListParams...))(c)
		if err != nil {
			if st := statusOf(err); st != http.StatusBadRequest {
				t.Fatalf("query %q: error %v answers %d, not 400", raw, err, st)
			}
			return
		}
		// The sort fields are the store's to check: a sort it refuses is a 400 too.
		if _, err := store.SortKeys(q.Sort); err != nil {
			if st := statusOf(err); st != http.StatusBadRequest {
				t.Fatalf("query %q: sort error %v answers %d, not 400", raw, err, st)
			}
		}
		if len(q.States) > MaxListValues || len(q.Kinds) > MaxListValues || len(q.Sort) > MaxListValues {
			t.Fatalf("query %q: accepted %d states, %d kinds, %d sort keys", raw, len(q.States), len(q.Kinds), len(q.Sort))
		}
		if q.Limit < 1 || q.Limit > MaxListLimit || len(q.Sort) == 0 {
			t.Fatalf("query %q: accepted %+v", raw, q)
		}
		if q.Marker != "" && !action.ValidID(q.Marker) {
			t.Fatalf("query %q: accepted marker %q", raw, q.Marker)
		}
		for name := range c.QueryParams() {
			if !slices.Contains(actionListParams, name) {
				t.Fatalf("query %q: accepted unknown parameter %q", raw, name)
			}
		}
	})
}

// FuzzSmallBodies decodes arbitrary bodies as the token create call and the
// run calls (approve, reject, cancel, abort, retry) do: a refusal is a 400, never a 5xx.
func FuzzSmallBodies(f *testing.F) {
	for _, s := range []string{`{"name":"bob","roles":["approver"]}`, `{"name":"","roles":null}`, `{"digest":"ab"}`,
		`{"reason":"x"}`, `{"reason":1}`, `{"name":"x","roles":["x"],"extra":1}`, `[]`, ``, `{`,
		`{"reason":"x","rollback":true}`, `{"rollback":"yes"}`, `{"from":"failed"}`, `{"from":"verify"}`, `{"from":1}`,
		`{"name":"j","roles":["enroll"],"cluster_id":"prod","labels":{"role":"web","zone":"a"}}`,
		`{"name":"j","roles":["enroll"],"cluster_id":"prod","labels":{"ro le":""}}`, `{"name":"j","roles":["enroll"],"labels":[]}`,
		`{"name":"v","roles":["viewer"],"labels":{"role":"web"}}`, `{"name":"j","roles":["enroll"],"cluster_id":"prod","labels":{"role":1}}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		check := func(err error) {
			if err == nil {
				return
			}
			if st := statusOf(err); st != http.StatusBadRequest {
				t.Fatalf("error %v answers %d, not 400", err, st)
			}
		}
		var tok wire.CreateTokenRequest
		if err := decodeStrict(body, &tok); err == nil {
			roles, err := auth.CheckToken(tok.Name, tok.Roles)
			check(err)
			if err == nil {
				_, err = auth.CheckOptions(roles, auth.Options{ClusterID: tok.ClusterID, Uses: tok.Uses, Labels: tok.Labels})
				check(err)
			}
		} else {
			check(err)
		}
		var ap wire.ApproveRunRequest
		check(decodeStrict(body, &ap))
		var rr wire.ReasonRequest
		check(decodeStrict(body, &rr))
		var cr wire.CancelRunRequest
		check(decodeStrict(body, &cr))
		var re wire.RetryRunRequest
		check(decodeStrict(body, &re))
	})
}

// FuzzAccessBodies decodes arbitrary bodies as the teams' and grants' calls
// do, and checks what decodes as the operations do: a refusal is a 400
// (or the 403 of a grant beyond the caller's scope), never a 5xx.
func FuzzAccessBodies(f *testing.F) {
	for _, s := range []string{`{"name":"db","members":["dana"],"groups":["db-oncall"]}`, `{"name":"a b"}`,
		`{"team":"db","role":"approver","clusters":"prod-db-*"}`, `{"person":"dana","role":"viewer","labels":{"tier":"prod"}}`,
		`{"person":"dana","team":"db","role":"viewer","clusters":"*"}`, `{"role":"admin","clusters":"[","labels":{"":"x"}}`,
		`{"person":"olga"}`, `{"group":"sre"}`, `{"group":""}`, `[]`, ``, `{`} {
		f.Add([]byte(s))
	}
	st, err := sqlite.Open(context.Background(), f.TempDir())
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { st.Close() })
	o := ops.New(ops.Config{Store: st})
	scoped := ops.Caller{Name: "stg", Grants: []auth.Grant{{Role: store.RoleAdmin, Scope: auth.Scope{Clusters: "stage*"}}}}
	f.Fuzz(func(t *testing.T, body []byte) {
		check := func(err error, allowed ...int) {
			if err == nil {
				return
			}
			st := statusOf(err)
			if st != http.StatusBadRequest && !slices.Contains(allowed, st) {
				t.Fatalf("error %v answers %d, not 400", err, st)
			}
		}
		ctx := context.Background()
		if team, err := decodeTeam(body); err == nil {
			_, err := o.CreateTeam(ctx, scoped, team)
			check(err, http.StatusConflict)
		} else {
			check(err)
		}
		if g, err := decodeGrant(body); err == nil {
			_, err := o.CreateGrant(ctx, scoped, g)
			check(err, http.StatusForbidden, http.StatusNotFound)
		} else {
			check(err)
		}
		var m wire.TeamMemberRequest
		check(decodeStrict(body, &m))
		var g wire.TeamGroupRequest
		check(decodeStrict(body, &g))
	})
}
