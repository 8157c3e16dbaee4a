package api

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/musterhq/muster/core/actions"
	"github.com/musterhq/muster/core/approval"
	"github.com/musterhq/muster/core/auth"
	"github.com/musterhq/muster/core/enroll"
	"github.com/musterhq/muster/core/nodes"
	"github.com/musterhq/muster/core/notify"
	"github.com/musterhq/muster/core/ops"
	"github.com/musterhq/muster/core/ops/opstest"
	"github.com/musterhq/muster/core/runs"
	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/core/store/sqlite"
	"github.com/musterhq/muster/shared/action"
	"github.com/musterhq/muster/shared/apicontract"
	"github.com/musterhq/muster/shared/client"
	"github.com/musterhq/muster/shared/live"
	"github.com/musterhq/muster/shared/wire"
)

// Kinds known by node prod/db-1. prod/db-2 has not reported its kinds yet.
const (
	kindPing  = "muster.io/debug.ping"
	kindSleep = "muster.io/debug.sleep"
)

// db1Sync is a sync of node prod/db-1, where e.create makes its actions.
var db1Sync = opstest.Node("prod", "db-1")

// syncBuffer is a bytes.Buffer safe for the logger and the test to share.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

var contract struct {
	once sync.Once
	spec *apicontract.Spec
	err  error
}

// loadContract loads openapi.yaml once for every test.
func loadContract(t *testing.T) *apicontract.Spec {
	t.Helper()
	contract.once.Do(func() { contract.spec, contract.err = apicontract.Load(OpenAPIDocument) })
	if contract.err != nil {
		t.Fatal(contract.err)
	}
	return contract.spec
}

type env struct {
	t      *testing.T
	st     *sqlite.Store
	srv    *Server
	ts     *httptest.Server
	nudges *opstest.Syncs
	engine *runs.Engine
	// opsCfg built the server's operations; enroll is its enrollment.
	opsCfg ops.Config
	enroll *enroll.Service
	logs   *syncBuffer
	reg    *prometheus.Registry
	// secrets by token name: viewer, op, appr, admin, and self (operator+approver).
	secrets map[string]string
}

// setup starts the API on a fresh SQLite store holding cluster prod (nodes
// db-1, which knows ping and sleep, and db-2, whose kinds are unknown),
// cluster stage (node s-1), and one token per role.
func setup(t *testing.T, opts ...func(*Config)) *env {
	t.Helper()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	logs := &syncBuffer{}
	reg := prometheus.NewRegistry()
	cfg := Config{Policy: live.New(approval.DefaultPolicy()), Gatherer: reg, Registerer: reg}
	// One notification destination, a real receiver answering 204.
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) }))
	t.Cleanup(hook.Close)
	dests := []notify.Destination{{Name: "hook", URL: hook.URL + "/in?key=TOPSECRET", Format: notify.FormatSlack, Events: []string{"notify.test.*"}}}
	st.SetOutbox(notify.Route(dests))
	notifier, err := notify.New(notify.Config{Destinations: dests, AllowLoopback: true}, st, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Notify = notifier
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.Enroll == nil {
		ca := testCA(t)
		cfg.Enroll = enroll.New(enroll.Config{CA: ca.CA, Bundle: ca.pem, GossipKey: "Z29zc2lw", HoldLabels: nodes.Enrolled}, st, nil)
	}
	n := &opstest.Syncs{}
	rules := &actions.Rules{Policy: cfg.Policy}
	engine := runs.NewEngine(cfg.Policy, rules, nil)
	opsCfg := ops.Config{Store: st, Policy: cfg.Policy, Budget: cfg.Budget, Rules: rules, Runs: engine,
		Enroll: cfg.Enroll, Notify: cfg.Notify, Nudge: n}
	if cfg.Ops == nil {
		cfg.Ops = ops.New(opsCfg)
	}
	srv := New(cfg, st, n, slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	ts := httptest.NewServer(srv.Handler())
	// Every exchange through the test server's client is checked against
	// the OpenAPI document (openapi.yaml).
	contract := loadContract(t).Transport(ts.Client().Transport)
	ts.Client().Transport = contract
	t.Cleanup(func() {
		srv.Close()
		ts.Close()
		for _, p := range contract.Problems() {
			t.Errorf("openapi contract: %s", p)
		}
	})
	e := &env{t: t, st: st, srv: srv, ts: ts, nudges: n, engine: engine, logs: logs, reg: reg, secrets: map[string]string{},
		opsCfg: opsCfg, enroll: cfg.Enroll}

	now := time.Now().UTC()
	err = st.Update(ctx, func(tx store.Tx) error {
		for _, c := range []string{"prod", "stage"} {
			if err := tx.PutCluster(ctx, &store.Cluster{ID: c, Status: store.ClusterHealthy, UpdatedTS: now}); err != nil {
				return err
			}
		}
		for _, n := range []store.Node{
			{ClusterID: "prod", ID: "db-1", Addr: "127.0.0.1:1", Source: store.SourceStatic, Status: store.NodeUp, Kinds: []string{kindPing, kindSleep}, UpdatedTS: now,
				Labels: map[string]string{"role": "primary", "zone": "a"}},
			{ClusterID: "prod", ID: "db-2", Addr: "127.0.0.1:2", Source: store.SourceGossip, Status: store.NodeDown, UpdatedTS: now,
				Labels: map[string]string{"role": "replica", "zone": "a"}},
			{ClusterID: "stage", ID: "s-1", Addr: "127.0.0.1:3", Source: store.SourceStatic, Status: store.NodeUnknown, UpdatedTS: now,
				Labels: map[string]string{"role": "replica"}},
		} {
			if err := tx.PutNode(ctx, &n); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for name, roles := range map[string][]string{
		"viewer": {store.RoleViewer}, "op": {store.RoleOperator}, "appr": {store.RoleApprover},
		"admin": {store.RoleAdmin}, "self": {store.RoleOperator, store.RoleApprover},
	} {
		secret, err := auth.CreateToken(ctx, st, name, roles, "test", "")
		if err != nil {
			t.Fatal(err)
		}
		e.secrets[name] = secret
	}
	// stg holds no role of its own: its team holds admin on stage* alone.
	secret, err := auth.CreateToken(ctx, st, "stg", nil, "test", "")
	if err != nil {
		t.Fatal(err)
	}
	e.secrets["stg"] = secret
	err = st.Update(ctx, func(tx store.Tx) error {
		if err := tx.InsertTeam(ctx, &store.Team{Name: "stage-admins", Members: []string{"stg"}}); err != nil {
			return err
		}
		return tx.InsertGrant(ctx, &store.Grant{ID: "stg-admin", Team: "stage-admins", Role: store.RoleAdmin, Clusters: "stage*"})
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// No secret ever reaches the log.
		out := logs.String()
		for name, s := range e.secrets {
			if strings.Contains(out, s) {
				t.Errorf("the log contains the secret of %s", name)
			}
		}
	})
	return e
}

// do sends a request with the token of who ("" for none) and returns the
// status and the body. body may be a string (sent as is) or a value (JSON).
func (e *env) do(method, path, who string, body any) (int, []byte) {
	e.t.Helper()
	var r io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		r = strings.NewReader(b)
	case []byte:
		r = bytes.NewReader(b)
	default:
		j, err := json.Marshal(b)
		if err != nil {
			e.t.Fatal(err)
		}
		r = bytes.NewReader(j)
	}
	req, err := http.NewRequest(method, e.ts.URL+path, r)
	if err != nil {
		e.t.Fatal(err)
	}
	if r != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if who != "" {
		req.Header.Set("Authorization", "Bearer "+e.secrets[who])
	}
	resp, err := e.ts.Client().Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, out
}

// call is do, failing unless the status is want, decoding the body into out.
func (e *env) call(method, path, who string, body any, want int, out any) {
	e.t.Helper()
	status, b := e.do(method, path, who, body)
	if status != want {
		e.t.Fatalf("%s %s as %s: %d %s, want %d", method, path, who, status, b, want)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			e.t.Fatalf("%s %s: decode %s: %v", method, path, b, err)
		}
	}
}

// fail is do for an error answer: it checks the status and returns the envelope.
func (e *env) fail(method, path, who string, body any, want int) wire.ErrorDetail {
	e.t.Helper()
	status, b := e.do(method, path, who, body)
	if status != want {
		e.t.Fatalf("%s %s as %s: %d %s, want %d", method, path, who, status, b, want)
	}
	var env wire.ErrorBody
	if err := json.Unmarshal(b, &env); err != nil || env.Error.Code == "" || env.Error.Message == "" {
		e.t.Fatalf("%s %s: %d answer %s is not the error envelope", method, path, status, b)
	}
	return env.Error
}

// create makes an action on prod/db-1 as who.
func (e *env) create(who string, req wire.CreateActionRequest) action.Action {
	e.t.Helper()
	if req.ClusterID == "" {
		req.ClusterID, req.NodeID = "prod", "db-1"
	}
	if req.Kind == "" {
		req.Kind = kindPing
	}
	var a action.Action
	e.call(http.MethodPost, "/api/v1/actions", who, req, http.StatusCreated, &a)
	return a
}

// record reads an action as stored.
func (e *env) record(id string) *store.Record {
	e.t.Helper()
	var rec *store.Record
	err := e.st.Read(context.Background(), func(r store.Reader) error {
		var err error
		rec, err = r.Action(context.Background(), id)
		return err
	})
	if err != nil {
		e.t.Fatal(err)
	}
	return rec
}

// setState moves an action as the orchestrator would (the agent's report).
func (e *env) setState(id string, s action.State) {
	e.t.Helper()
	e.edit(id, func(r *store.Record) { r.State = s })
}

// update runs fn in one store transaction.
func (e *env) update(fn func(ctx context.Context, tx store.Tx) error) {
	e.t.Helper()
	ctx := context.Background()
	if err := e.st.Update(ctx, func(tx store.Tx) error { return fn(ctx, tx) }); err != nil {
		e.t.Fatal(err)
	}
}

// edit changes a stored record the way the orchestrator would.
func (e *env) edit(id string, fn func(r *store.Record)) {
	e.t.Helper()
	ctx := context.Background()
	err := e.st.Update(ctx, func(tx store.Tx) error {
		rec, err := tx.Action(ctx, id)
		if err != nil {
			return err
		}
		fn(rec)
		return tx.UpdateAction(ctx, rec)
	})
	if err != nil {
		e.t.Fatal(err)
	}
}

// events returns every event of the log.
func (e *env) events() []store.Event {
	e.t.Helper()
	var evs []store.Event
	err := e.st.Read(context.Background(), func(r store.Reader) error {
		var err error
		evs, err = r.Events(context.Background(), 0, 10000)
		return err
	})
	if err != nil {
		e.t.Fatal(err)
	}
	return evs
}

// eventsOf returns the events about one action, of the given types.
func (e *env) eventsOf(id string, types ...string) []store.Event {
	var out []store.Event
	for _, ev := range e.events() {
		if ev.ActionID == id && (len(types) == 0 || slices.Contains(types, ev.Type)) {
			out = append(out, ev)
		}
	}
	return out
}

// client returns a typed client with the token of who.
func (e *env) client(who string) *client.Core {
	return client.NewCore(e.ts.URL, e.secrets[who], e.ts.Client())
}

// classify is the status and the code the API answers for err.
func classify(err error) (int, string) {
	p := describe(err)
	return p.Status, p.Code
}

// useEnroll makes svc the enrollment the server's operations use.
func (e *env) useEnroll(svc *enroll.Service) {
	e.opsCfg.Enroll, e.enroll = svc, svc
	e.srv.ops = ops.New(e.opsCfg)
}
