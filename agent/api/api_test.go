package api

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/mock/gomock"

	"github.com/musterhq/muster/agent/exposition"
	"github.com/musterhq/muster/agent/handlers"
	"github.com/musterhq/muster/agent/queue"
	"github.com/musterhq/muster/agent/runner"
	"github.com/musterhq/muster/shared/action"
	"github.com/musterhq/muster/shared/apicontract"
	"github.com/musterhq/muster/shared/testwait"
	"github.com/musterhq/muster/shared/wire"
)

type fixture struct {
	url string
	q   *queue.Queue
	// client checks every exchange against openapi.yaml.
	client *http.Client
}

var contract struct {
	once sync.Once
	spec *apicontract.Spec
	err  error
}

// newFixture serves h and checks, when the test ends, that every exchange
// of f.client was as openapi.yaml describes it.
func newFixture(t *testing.T, h http.Handler, q *queue.Queue) (*fixture, *httptest.Server) {
	t.Helper()
	contract.once.Do(func() { contract.spec, contract.err = apicontract.Load(OpenAPIDocument) })
	if contract.err != nil {
		t.Fatal(contract.err)
	}
	ts := httptest.NewServer(h)
	tr := contract.spec.Transport(ts.Client().Transport)
	t.Cleanup(func() {
		for _, p := range tr.Problems() {
			t.Errorf("openapi contract: %s", p)
		}
	})
	return &fixture{url: ts.URL, q: q, client: &http.Client{Transport: tr}}, ts
}

func setup(t *testing.T) *fixture {
	t.Helper()
	return setupKinds(t, nil)
}

// setupKinds is setup with external kinds besides the built-in ones.
func setupKinds(t *testing.T, external []handlers.External) *fixture {
	t.Helper()
	q, err := queue.Open(context.Background(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	reg, err := handlers.NewRegistry(external, handlers.Env{NodeID: "n1", ClusterID: "c1"})
	if err != nil {
		t.Fatal(err)
	}
	prom := exposition.NewRegistry()
	run := runner.New(runner.Config{Queue: q, Handlers: reg, Actor: "n1", Idle: 20 * time.Millisecond, Metrics: runner.NewMetrics(prom)})
	_ = run.Start(context.Background())
	srv := New(Config{NodeID: "n1", ClusterID: "c1", Version: "test", DefaultTimeout: time.Hour,
		Labels: map[string]string{"role": "replica", "zone": "eu-1"},
		Queue:  q, Runner: run, Kinds: reg, Metrics: prom})
	f, ts := newFixture(t, srv.Handler(), q)
	t.Cleanup(func() { ts.Close(); run.Stop(); q.Close() })
	return f
}

func (f *fixture) do(t *testing.T, method, path, body string) (int, []byte) {
	t.Helper()
	st, b, err := f.try(method, path, body)
	if err != nil {
		t.Fatal(err)
	}
	return st, b
}

// try is do for a goroutine other than the test's: it returns the error.
func (f *fixture) try(method, path, body string) (int, []byte, error) {
	req, _ := http.NewRequest(method, f.url+path, strings.NewReader(body))
	if body != "" || method == http.MethodPost {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := f.client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

func decode[T any](t *testing.T, b []byte) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("decode %s: %v", b, err)
	}
	return v
}

func (f *fixture) count(t *testing.T) int {
	t.Helper()
	acts, _, _, err := f.q.Changes(context.Background(), 0, 10000)
	if err != nil {
		t.Fatal(err)
	}
	return len(acts)
}

func TestPushStatusCodes(t *testing.T) {
	t.Parallel()
	f := setup(t)
	id := action.NewID()
	body := fmt.Sprintf(`{"id":%q,"kind":"muster.io/debug.sleep","args":{"seconds":3600}}`, id)

	st, b := f.do(t, "POST", "/api/v1/actions", body)
	if st != http.StatusCreated {
		t.Fatalf("first push: %d %s", st, b)
	}
	rec := decode[action.Action](t, b)
	if rec.ID != id || rec.State != action.New || rec.NodeID != "n1" || rec.ClusterID != "c1" || rec.TimeoutS != 3600 {
		t.Fatalf("record %+v", rec)
	}
	// Same id, same content (other key order and spacing): 200 with the record.
	st, b = f.do(t, "POST", "/api/v1/actions", fmt.Sprintf(`{"id":%q,"kind":"muster.io/debug.sleep","args":{ "seconds" : 3600 }}`, id))
	if st != http.StatusOK || decode[action.Action](t, b).ID != id {
		t.Fatalf("repeat push: %d %s", st, b)
	}
	// Same id, other content: 409 with the agent's record.
	st, b = f.do(t, "POST", "/api/v1/actions", fmt.Sprintf(`{"id":%q,"kind":"muster.io/debug.sleep","args":{"seconds":1}}`, id))
	env := decode[wire.ErrorBody](t, b)
	if st != http.StatusConflict || env.Error.Code != wire.CodeConflict || env.Error.Record == nil || string(env.Error.Record.Args) != `{"seconds":3600}` {
		t.Fatalf("conflicting push: %d %s", st, b)
	}
	// Unknown kind: 422.
	st, b = f.do(t, "POST", "/api/v1/actions", `{"kind":"example.com/nope"}`)
	if st != http.StatusUnprocessableEntity || decode[wire.ErrorBody](t, b).Error.Code != wire.CodeUnprocessable {
		t.Fatalf("unknown kind: %d %s", st, b)
	}
	// Bad args for a known kind: 422.
	st, _ = f.do(t, "POST", "/api/v1/actions", `{"kind":"muster.io/debug.sleep","args":{"seconds":"x"}}`)
	if st != http.StatusUnprocessableEntity {
		t.Fatalf("bad args: %d", st)
	}
	// Another node's action: 422.
	st, _ = f.do(t, "POST", "/api/v1/actions", `{"kind":"muster.io/debug.ping","node_id":"other"}`)
	if st != http.StatusUnprocessableEntity {
		t.Fatalf("other node: %d", st)
	}
	if n := f.count(t); n != 1 {
		t.Fatalf("%d actions stored, want 1", n)
	}
}

func TestPushOfTombstonedIDIsGone(t *testing.T) {
	t.Parallel()
	f := setup(t)
	now := time.Now()
	f.q.SetClock(func() time.Time { return now })
	id := action.NewID()
	st, _ := f.do(t, "POST", "/api/v1/actions", fmt.Sprintf(`{"id":%q,"kind":"muster.io/debug.ping"}`, id))
	if st != http.StatusCreated {
		t.Fatal(st)
	}
	waitFinal(t, f, id)
	now = now.Add(31 * 24 * time.Hour)
	if n, _, err := f.q.Purge(context.Background(), queue.Retention{Retention: 24 * time.Hour, Max: 30 * 24 * time.Hour, Tombstones: 90 * 24 * time.Hour}); err != nil || n != 1 {
		t.Fatalf("purge %d %v", n, err)
	}
	st, b := f.do(t, "POST", "/api/v1/actions", fmt.Sprintf(`{"id":%q,"kind":"muster.io/debug.ping"}`, id))
	if st != http.StatusGone || decode[wire.ErrorBody](t, b).Error.Code != wire.CodeGone {
		t.Fatalf("push of a purged id: %d %s", st, b)
	}
}

func waitFinal(t *testing.T, f *fixture, id string) action.Action {
	t.Helper()
	return testwait.Value(t, "action "+id+" final", func() (action.Action, bool) {
		st, b := f.do(t, "GET", "/api/v1/actions/"+id, "")
		if st != http.StatusOK {
			return action.Action{}, false
		}
		a := decode[action.Action](t, b)
		return a, a.State.Final()
	})
}

func TestBadInputIsRefusedAndStoresNothing(t *testing.T) {
	t.Parallel()
	f := setup(t)
	cases := []struct {
		name, body string
		status     int
	}{
		{"invalid json", `{"kind":`, 400},
		{"not an object", `[1,2]`, 400},
		{"empty body", ``, 400},
		{"unknown field", `{"kind":"muster.io/debug.ping","state":"DONE"}`, 400},
		{"missing kind", `{"args":{}}`, 400},
		{"malformed kind", `{"kind":"ping"}`, 400},
		{"args not an object", `{"kind":"muster.io/debug.ping","args":[1]}`, 400},
		{"args a string", `{"kind":"muster.io/debug.ping","args":"x"}`, 400},
		{"id not a uuid", `{"id":"abc","kind":"muster.io/debug.ping"}`, 400},
		{"negative timeout", `{"kind":"muster.io/debug.ping","timeout_s":-1}`, 400},
		{"absurd timeout", `{"kind":"muster.io/debug.ping","timeout_s":999999999}`, 400},
		{"bad origin", `{"kind":"muster.io/debug.ping","origin":"mars"}`, 400},
		{"trailing data", `{"kind":"muster.io/debug.ping"} {}`, 400},
		{"too large", `{"kind":"muster.io/debug.ping","args":{"x":"` + strings.Repeat("a", MaxBody) + `"}}`, 413},
		{"unknown kind", `{"kind":"example.com/unknown"}`, 422},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			st, b := f.do(t, "POST", "/api/v1/actions", c.body)
			if st != c.status {
				t.Fatalf("status %d, want %d (%s)", st, c.status, b)
			}
			env := decode[wire.ErrorBody](t, b)
			if env.Error.Code == "" || env.Error.Message == "" {
				t.Fatalf("no error envelope: %s", b)
			}
		})
	}
	if n := f.count(t); n != 0 {
		t.Fatalf("bad input stored %d actions", n)
	}
}

func TestChangesCursorAndAck(t *testing.T) {
	t.Parallel()
	f := setup(t)
	for i := 0; i < 3; i++ {
		if st, _ := f.do(t, "POST", "/api/v1/actions", `{"kind":"muster.io/debug.sleep","args":{"seconds":3600}}`); st != 201 {
			t.Fatal(st)
		}
	}
	st, b := f.do(t, "GET", "/api/v1/actions?limit=2", "")
	page := decode[wire.ChangesPage](t, b)
	if st != 200 || len(page.Actions) != 2 || !page.More {
		t.Fatalf("page 1: %d %s", st, b)
	}
	if st, b := f.do(t, "POST", "/api/v1/actions/ack", fmt.Sprintf(`{"cursor":%d}`, page.NextCursor)); st != http.StatusNoContent {
		t.Fatalf("ack: %d %s", st, b)
	}
	_, b = f.do(t, "GET", fmt.Sprintf("/api/v1/actions?since=%d", page.NextCursor), "")
	page2 := decode[wire.ChangesPage](t, b)
	if len(page2.Actions) == 0 || page2.More {
		t.Fatalf("page 2: %s", b)
	}
	for _, bad := range []string{`{"cursor":-1}`, `{"cursor":"x"}`, `{}x`, ``} {
		if st, _ := f.do(t, "POST", "/api/v1/actions/ack", bad); st != 400 {
			t.Errorf("ack %s: status %d, want 400", bad, st)
		}
	}
	for _, bad := range []string{"since=-1", "since=x", "limit=0", "limit=100000", "ack=2&since=1"} {
		if st, _ := f.do(t, "GET", "/api/v1/actions?"+bad, ""); st != 400 {
			t.Errorf("%s: status %d, want 400", bad, st)
		}
	}
}

func TestShowAndCancel(t *testing.T) {
	t.Parallel()
	f := setup(t)
	_, b := f.do(t, "POST", "/api/v1/actions", `{"kind":"muster.io/debug.sleep","args":{"seconds":3600}}`)
	id := decode[action.Action](t, b).ID
	_, b = f.do(t, "POST", "/api/v1/actions", `{"kind":"muster.io/debug.ping"}`)
	queued := decode[action.Action](t, b).ID

	// The sleep runs; the ping waits behind it. Cancel the waiting one: at once.
	st, b := f.do(t, "POST", "/api/v1/actions/"+queued+"/cancel", "")
	if st != http.StatusAccepted || decode[action.Action](t, b).State != action.Cancelled {
		t.Fatalf("cancel NEW: %d %s", st, b)
	}
	// Cancel the running one: it ends CANCELLED once the handler returns.
	st, _ = f.do(t, "POST", "/api/v1/actions/"+id+"/cancel", "")
	if st != http.StatusAccepted {
		t.Fatalf("cancel RUNNING: %d", st)
	}
	if a := waitFinal(t, f, id); a.State != action.Cancelled {
		t.Fatalf("state %s", a.State)
	}
	// Again: 409 with the state.
	st, b = f.do(t, "POST", "/api/v1/actions/"+id+"/cancel", "")
	if env := decode[wire.ErrorBody](t, b); st != http.StatusConflict || env.Error.State != string(action.Cancelled) {
		t.Fatalf("cancel final: %d %s", st, b)
	}
	// Show has the history.
	st, b = f.do(t, "GET", "/api/v1/actions/"+id, "")
	a := decode[action.Action](t, b)
	if st != 200 || len(a.History) != 3 || a.History[2].To != action.Cancelled {
		t.Fatalf("show: %d %+v", st, a.History)
	}
	if st, _ := f.do(t, "GET", "/api/v1/actions/"+action.NewID(), ""); st != 404 {
		t.Fatalf("unknown id: %d", st)
	}
	if st, _ := f.do(t, "POST", "/api/v1/actions/"+action.NewID()+"/cancel", ""); st != 404 {
		t.Fatalf("cancel unknown id: %d", st)
	}
}

func TestInfoHealthMetrics(t *testing.T) {
	t.Parallel()
	f := setup(t)
	_, b := f.do(t, "POST", "/api/v1/actions", `{"kind":"muster.io/debug.ping"}`)
	waitFinal(t, f, decode[action.Action](t, b).ID)
	st, b := f.do(t, "GET", "/api/v1/info", "")
	info := decode[wire.AgentInfo](t, b)
	if st != 200 || info.NodeID != "n1" || info.ClusterID != "c1" || !action.ValidID(info.StoreID) || len(info.Kinds) != 3 || info.Queue[action.Done] != 1 ||
		len(info.Labels) != 2 || info.Labels["role"] != "replica" || info.Labels["zone"] != "eu-1" {
		t.Fatalf("info: %d %s", st, b)
	}
	if st, _ := f.do(t, "GET", "/api/v1/health", ""); st != 200 {
		t.Fatalf("health %d", st)
	}
	st, b = f.do(t, "GET", "/metrics", "")
	if st != 200 || !bytes.Contains(b, []byte(`muster_agent_actions_finished_total{kind="muster.io/debug.ping",state="DONE"} 1`)) ||
		!bytes.Contains(b, []byte("muster_agent_step_duration_seconds")) {
		t.Fatalf("metrics: %d\n%s", st, b)
	}
	st, b = f.do(t, "GET", "/api/v1/nope", "")
	if st != 404 || decode[wire.ErrorBody](t, b).Error.Code != wire.CodeNotFound {
		t.Fatalf("unknown route: %d %s", st, b)
	}
}

// An external kind's args_schema is announced in info, and args it
// refuses are a 422 naming the field, with nothing queued.
func TestArgsSchemaIsAnnouncedAndEnforced(t *testing.T) {
	t.Parallel()
	f := setupKinds(t, []handlers.External{{Kind: "example.com/pkg.upgrade", Run: []string{"/bin/true"},
		ArgsSchema: "type: object\nrequired: [version]\nproperties:\n  version: {type: string, minLength: 1}\n"}})
	st, b := f.do(t, "GET", "/api/v1/info", "")
	info := decode[wire.AgentInfo](t, b)
	if st != 200 || len(info.ArgsSchemas) != 1 || !strings.Contains(string(info.ArgsSchemas["example.com/pkg.upgrade"]), `"minLength":1`) {
		t.Fatalf("info: %d %s", st, b)
	}
	if err := info.Check(); err != nil {
		t.Fatalf("the agent announces what the core refuses: %v", err)
	}
	for _, args := range []string{`{}`, `{"version": 2}`, `{"version": ""}`} {
		st, b = f.do(t, "POST", "/api/v1/actions", `{"kind":"example.com/pkg.upgrade","args":`+args+`}`)
		e := decode[wire.ErrorBody](t, b)
		if st != http.StatusUnprocessableEntity || e.Error.Code != wire.CodeUnprocessable || !strings.Contains(e.Error.Message, "args.version") {
			t.Fatalf("args %s: %d %s, want 422 naming args.version", args, st, b)
		}
	}
	if _, b := f.do(t, "GET", "/api/v1/actions?since=0", ""); len(decode[wire.ChangesPage](t, b).Actions) != 0 {
		t.Fatalf("a refused push was queued: %s", b)
	}
	if st, b := f.do(t, "POST", "/api/v1/actions", `{"kind":"example.com/pkg.upgrade","args":{"version":"2.0"}}`); st != http.StatusCreated {
		t.Fatalf("good args: %d %s", st, b)
	}
}

// Issue 17, hardening: a push body with a key twice, or a key that names a
// field only when case is ignored, is a 400: a proxy or a log reading the
// body must not see another action than the agent queues.
func TestPushRefusesDuplicateAndCaseFoldedKeys(t *testing.T) {
	t.Parallel()
	for _, body := range []string{
		`{"kind":"muster.io/debug.ping","kind":"muster.io/debug.sleep"}`,
		`{"KIND":"muster.io/debug.ping"}`,
		`{"kind":"muster.io/debug.ping","Requester":"root"}`,
		`{"kind":"muster.io/debug.ping","args":{"x":1,"x":2}}`,
	} {
		a, err := DecodePush([]byte(body), "n1", "c1")
		if a != nil || classify(err).status != 400 {
			t.Errorf("DecodePush(%s) = %+v, %v; want a 400", body, a, err)
		}
	}
}

// FuzzDecodePush checks that no body makes decoding panic, and that every
// body it accepts yields a queueable action.
func FuzzDecodePush(f *testing.F) {
	for _, s := range []string{
		`{"kind":"muster.io/debug.ping"}`,
		`{"id":"3f0c8a52-7e4e-4a8e-9a4e-4f5a3b0f2c11","kind":"muster.io/debug.sleep","args":{"seconds":30},"timeout_s":60}`,
		`{"kind":"example.com/db.backup","args":{"a":[1,2,{"b":null}]},"origin":"core","requester":"alice","approved_by":"bob","created_ts":"2026-11-22T10:00:00Z"}`,
		`{"kind":"muster.io/debug.ping","node_id":"n1","cluster_id":"c1"}`,
		`{"kind":"muster.io/debug.ping","state":"DONE"}`,
		`{"kind":1}`, `[]`, `null`, ``, `{"args":"x"}`, `{"kind":"a/b","args":{}}{}`,
		`{"kind":"a/b","timeout_s":1e99}`, "{\"kind\":\"a/b\",\"args\":{\"\xff\":1}}",
		`{"kind":"muster.io/debug.ping","kind":"muster.io/debug.sleep"}`, `{"KIND":"muster.io/debug.ping"}`,
		`{"kind":"muster.io/debug.ping","Requester":"root"}`, `{"kind":"a/b","args":{"x":1,"x":2}}`,
		`{"kind":"a/b","run_id":"3f0c8a52-7e4e-4a8e-9a4e-4f5a3b0f2c11","stage":"roll","step":"s.1","wave":2,"attempt":1}`,
		`{"kind":"a/b","stage":"roll"}`, `{"kind":"a/b","run_id":"x","wave":-1}`,
		`{"kind":"a/b","traceparent":"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}`,
		`{"kind":"a/b","traceparent":"00-00000000000000000000000000000000-b7ad6b7169203331-01"}`,
		`{"kind":"a/b","traceparent":"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01\nX=1"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		a, err := DecodePush(body, "n1", "c1")
		if err != nil {
			if a != nil {
				t.Fatal("error with a result")
			}
			if st := classify(err).status; st < 400 || st > 499 {
				t.Fatalf("decode error maps to %d: %v", st, err)
			}
			return
		}
		if action.CheckRunPlace(a) != nil {
			t.Fatalf("accepted a bad place in a run: %+v", a)
		}
		if !action.ValidID(a.ID) || !action.ValidKind(a.Kind) || a.NodeID != "n1" || a.ClusterID != "c1" {
			t.Fatalf("accepted an invalid action %+v", a)
		}
		if a.TimeoutS < 0 || a.TimeoutS > action.MaxTimeoutS {
			t.Fatalf("accepted timeout %d", a.TimeoutS)
		}
		if a.Traceparent != "" && !action.ValidTraceparent(a.Traceparent) {
			t.Fatalf("accepted traceparent %q", a.Traceparent)
		}
		if n, err := action.NormalizeArgs(a.Args); err != nil || !bytes.Equal(n, a.Args) {
			t.Fatalf("accepted args %s are not canonical", a.Args)
		}
	})
}

// The API wakes the runner after queuing a new action (not for a repeat), and
// forwards a cancel to the runner only for the action it runs.
func TestAPIDrivesTheRunner(t *testing.T) {
	t.Parallel()
	ctrl := gomock.NewController(t)
	run := NewMockRunner(ctrl)
	q, err := queue.Open(context.Background(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	reg, _ := handlers.NewRegistry(nil, handlers.Env{})
	f, ts := newFixture(t, New(Config{NodeID: "n1", ClusterID: "c1", DefaultTimeout: time.Hour, Queue: q, Runner: run, Kinds: reg}).Handler(), q)
	defer ts.Close()

	run.EXPECT().Wake().Times(2)
	_, b := f.do(t, "POST", "/api/v1/actions", `{"kind":"muster.io/debug.sleep","args":{"seconds":60}}`)
	first := decode[action.Action](t, b)
	if st, _ := f.do(t, "POST", "/api/v1/actions", fmt.Sprintf(`{"id":%q,"kind":"muster.io/debug.sleep","args":{"seconds":60}}`, first.ID)); st != 200 {
		t.Fatalf("repeat push: %d", st)
	}
	_, b = f.do(t, "POST", "/api/v1/actions", `{"kind":"muster.io/debug.ping"}`)
	second := decode[action.Action](t, b)

	// The first one runs (claimed as the runner would); the second waits.
	if a, _, _, err := q.Claim(context.Background(), "n1"); err != nil || a.ID != first.ID {
		t.Fatalf("claim: %v %v", a, err)
	}
	run.EXPECT().Cancel(first.ID).Times(1)
	if st, _ := f.do(t, "POST", "/api/v1/actions/"+first.ID+"/cancel", ""); st != 202 {
		t.Fatalf("cancel running: %d", st)
	}
	// Cancelling a NEW action needs no runner: no call expected.
	if st, _ := f.do(t, "POST", "/api/v1/actions/"+second.ID+"/cancel", ""); st != 202 {
		t.Fatalf("cancel new: %d", st)
	}
}

// A repeat push of an id the agent already holds, or has purged, is answered
// from the queue even when its kind is no longer configured: the core must
// not take an action that ran for one the agent refused.
func TestRepeatPushOfARemovedKindIsNotRefused(t *testing.T) {
	t.Parallel()
	f := setup(t)
	now := time.Now()
	f.q.SetClock(func() time.Time { return now })
	held := &action.Action{ID: action.NewID(), Kind: "example.com/removed", Args: json.RawMessage(`{}`), Origin: action.OriginCore, TimeoutS: 60}
	if _, _, err := f.q.Enqueue(context.Background(), held, "test"); err != nil {
		t.Fatal(err)
	}
	st, b := f.do(t, "POST", "/api/v1/actions", fmt.Sprintf(`{"id":%q,"kind":"example.com/removed"}`, held.ID))
	if st != http.StatusOK {
		t.Fatalf("repeat push of a held id with a removed kind: %d %s, want 200", st, b)
	}
	// A new id with that kind is still refused.
	if st, _ := f.do(t, "POST", "/api/v1/actions", `{"kind":"example.com/removed"}`); st != http.StatusUnprocessableEntity {
		t.Fatalf("new id with a removed kind: %d, want 422", st)
	}
	// Once purged, the id answers 410, not 422.
	waitFinal(t, f, held.ID) // the runner fails it: unknown kind
	now = now.Add(31 * 24 * time.Hour)
	if _, _, err := f.q.Purge(context.Background(), queue.Retention{Retention: time.Hour, Max: 30 * 24 * time.Hour, Tombstones: 90 * 24 * time.Hour}); err != nil {
		t.Fatal(err)
	}
	if st, b := f.do(t, "POST", "/api/v1/actions", fmt.Sprintf(`{"id":%q,"kind":"example.com/removed"}`, held.ID)); st != http.StatusGone {
		t.Fatalf("push of a purged id with a removed kind: %d %s, want 410", st, b)
	}
}

// TestOpenAPIDocumentNamesEveryRoute: the document names every registered
// route and no other, and GET /api/v1/openapi.json serves it.
func TestOpenAPIDocumentNamesEveryRoute(t *testing.T) {
	t.Parallel()
	f := setup(t)
	srv := New(Config{Metrics: exposition.NewRegistry()})
	registered := map[string]bool{}
	for _, r := range srv.echo.Router().Routes() {
		registered[r.Method+" "+r.Path] = true
	}
	documented := map[string]bool{}
	for _, key := range contract.spec.Operations() {
		documented[key] = true
		if !registered[key] {
			t.Errorf("openapi.yaml documents %s, which is not registered", key)
		}
	}
	for key := range registered {
		if !documented[key] {
			t.Errorf("route %s is missing from openapi.yaml", key)
		}
	}
	status, b := f.do(t, "GET", "/api/v1/openapi.json", "")
	if status != http.StatusOK {
		t.Fatalf("status %d: %s", status, b)
	}
	served, err := apicontract.Load(b)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := served.Operations(), contract.spec.Operations(); !slices.Equal(got, want) {
		t.Fatalf("served operations %q, repository's %q", got, want)
	}
}

// changedSpy tells when a blocking GET of the changes is about to wait.
// changedSpy tells on waiting each read of changes that found none: a
// held GET waits for a change from then on.
type changedSpy struct {
	*queue.Queue
	waiting chan struct{}
}

func (q *changedSpy) Changes(ctx context.Context, since int64, limit int) ([]action.Action, int64, bool, error) {
	acts, next, more, err := q.Queue.Changes(ctx, since, limit)
	if err == nil && len(acts) == 0 {
		select {
		case q.waiting <- struct{}{}:
		default:
		}
	}
	return acts, next, more, err
}

// setupWait serves a queue whose reads of changes that found none are
// told on the returned channel, with maxWait as Config.MaxWait.
func setupWait(t *testing.T, maxWait time.Duration) (*fixture, *Server, chan struct{}) {
	t.Helper()
	q, err := queue.Open(context.Background(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	reg, _ := handlers.NewRegistry(nil, handlers.Env{})
	spy := &changedSpy{Queue: q, waiting: make(chan struct{}, 1)}
	ctrl := gomock.NewController(t)
	run := NewMockRunner(ctrl)
	run.EXPECT().Wake().AnyTimes()
	srv := New(Config{NodeID: "n1", ClusterID: "c1", DefaultTimeout: time.Hour, Queue: spy, Runner: run, Kinds: reg, MaxWait: maxWait})
	f, ts := newFixture(t, srv.Handler(), q)
	t.Cleanup(func() { ts.Close(); q.Close() })
	return f, srv, spy.waiting
}

// TestChangesWaitIsHeldUntilAChange: GET actions with wait, when nothing
// changed after since, answers with the change that comes while it is held,
// not with the empty page it would have answered at once.
func TestChangesWaitIsHeldUntilAChange(t *testing.T) {
	t.Parallel()
	f, _, waiting := setupWait(t, 0)
	type answer struct {
		status int
		page   wire.ChangesPage
		raw    []byte
	}
	got := make(chan answer, 1)
	go func() {
		st, b, err := f.try("GET", "/api/v1/actions?since=0&limit=1&wait=30s", "")
		var p wire.ChangesPage
		if err == nil {
			err = json.Unmarshal(b, &p)
		}
		if err != nil {
			st, b = 0, []byte(err.Error())
		}
		got <- answer{st, p, b}
	}()
	select {
	case <-waiting: // the handler read nothing: only the change's wake-up can answer it now
	case <-time.After(10 * time.Second):
		t.Fatal("the GET never reached the queue")
	}
	st, b := f.do(t, "POST", "/api/v1/actions", `{"kind":"muster.io/debug.sleep","args":{"seconds":60}}`)
	if st != http.StatusCreated {
		t.Fatalf("push: %d %s", st, b)
	}
	pushed := decode[action.Action](t, b)
	select {
	case a := <-got:
		if a.status != http.StatusOK || len(a.page.Actions) != 1 || a.page.Actions[0].ID != pushed.ID || a.page.NextCursor == 0 {
			t.Fatalf("held GET answered %d %s, want the pushed action", a.status, a.raw)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the held GET did not answer the change within 10s of its 30s wait")
	}
}

// TestChangesWaitAnswersEmptyWhenItEnds: a held GET with nothing to report
// answers an empty page at the end of its wait, cut to the server's bound
// (at shutdown: TestEndWaitsAnswersHeldGETs); a GET with changes answers at
// once whatever its wait.
func TestChangesWaitAnswersEmptyWhenItEnds(t *testing.T) {
	t.Parallel()
	f, _, _ := setupWait(t, 200*time.Millisecond)
	if st, b := f.do(t, "POST", "/api/v1/actions", `{"kind":"muster.io/debug.sleep","args":{"seconds":60}}`); st != http.StatusCreated {
		t.Fatalf("push: %d %s", st, b)
	}
	begin := time.Now()
	st, b := f.do(t, "GET", "/api/v1/actions?since=0&wait=1h", "")
	if page := decode[wire.ChangesPage](t, b); st != 200 || len(page.Actions) != 1 {
		t.Fatalf("GET with a change: %d %s", st, b)
	}
	if d := time.Since(begin); d > 10*time.Second {
		t.Fatalf("GET with a change waited %s", d)
	}
	cursor := decode[wire.ChangesPage](t, b).NextCursor
	// The page says the wait applied: a core tells by it an agent that
	// holds its GETs from one of an earlier release, which ignores wait.
	for wait, applied := range map[string]int64{"50ms": 50, "1h": 200} { // 1h is cut to the bound, 200ms
		begin := time.Now()
		st, b := f.do(t, "GET", fmt.Sprintf("/api/v1/actions?since=%d&wait=%s", cursor, wait), "")
		held := time.Since(begin)
		page := decode[wire.ChangesPage](t, b)
		if st != 200 || len(page.Actions) != 0 || page.More || page.NextCursor != cursor || page.WaitMS != applied {
			t.Fatalf("wait=%s: %d %s, want an empty page at cursor %d with wait_ms %d", wait, st, b, cursor, applied)
		}
		if held < 50*time.Millisecond || held > 10*time.Second {
			t.Fatalf("wait=%s: answered after %s", wait, held)
		}
	}
}

// TestEndWaitsAnswersHeldGETs: when the server shuts down (EndWaits), a
// GET held for a change answers its empty page at once, and so does every
// later one, though their waits (30 s, not cut) have far to go.
func TestEndWaitsAnswersHeldGETs(t *testing.T) {
	t.Parallel()
	f, srv, waiting := setupWait(t, 0)
	type answer struct {
		status int
		raw    []byte
		err    error
	}
	got := make(chan answer, 1)
	go func() {
		st, b, err := f.try("GET", "/api/v1/actions?since=0&wait=30s", "")
		got <- answer{st, b, err}
	}()
	select {
	case <-waiting: // held: it read nothing and waits
	case <-time.After(10 * time.Second):
		t.Fatal("the GET never reached the queue")
	}
	srv.EndWaits()
	srv.EndWaits() // idempotent
	select {
	case a := <-got:
		if a.err != nil || a.status != http.StatusOK || len(decode[wire.ChangesPage](t, a.raw).Actions) != 0 {
			t.Fatalf("the held GET answered %d %s %v, want an empty page", a.status, a.raw, a.err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the held GET was not answered within 10s of EndWaits (its wait is 30s)")
	}
	begin := time.Now()
	st, b := f.do(t, "GET", "/api/v1/actions?since=0&wait=30s", "")
	if st != 200 || len(decode[wire.ChangesPage](t, b).Actions) != 0 {
		t.Fatalf("after EndWaits: %d %s", st, b)
	}
	if held := time.Since(begin); held > 10*time.Second {
		t.Fatalf("after EndWaits a GET was held %s", held)
	}
}

// TestChangesRefusesABadWait: wait must be a non-negative Go duration.
func TestChangesRefusesABadWait(t *testing.T) {
	t.Parallel()
	f := setup(t)
	for _, bad := range []string{"wait=x", "wait=-1s", "wait=1", "wait=10", "wait=1s2"} {
		st, b := f.do(t, "GET", "/api/v1/actions?"+bad, "")
		if st != http.StatusBadRequest {
			t.Errorf("%s: status %d, want 400", bad, st)
			continue
		}
		if env := decode[wire.ErrorBody](t, b); env.Error.Code != wire.CodeBadRequest || !strings.Contains(env.Error.Message, "wait") {
			t.Errorf("%s: error %s", bad, b)
		}
	}
	if st, b := f.do(t, "GET", "/api/v1/actions?wait=0", ""); st != 200 {
		t.Errorf("wait=0: %d %s", st, b)
	}
	// The bound stays below the server's write timeout.
	for _, wt := range []time.Duration{time.Second, 10 * time.Second, 60 * time.Second} {
		if b := WaitBound(wt); b <= 0 || b >= wt || b > MaxWait {
			t.Errorf("WaitBound(%s) = %s", wt, b)
		}
	}
}

// FuzzParseChangesQuery checks that no query makes the decoder of GET
// actions panic, that it refuses only with a 4xx, and that what it accepts
// is within bounds: a wait never past the bound it was given.
func FuzzParseChangesQuery(f *testing.F) {
	for _, s := range []string{
		"", "since=0", "since=12&limit=1&wait=20s", "wait=1h", "wait=0", "wait=.5s", "wait=1m30s",
		"wait=-1s", "wait=x", "wait=1", "wait=+1s", "wait=1e9s", "wait=9223372036854775807ns",
		"wait=1.5.5s", "since=-1", "limit=0", "limit=5001", "ack=1&wait=5s", "ack=2", "wait=10s&wait=x",
		"since=9223372036854775808", "wait=%00", "wait=1µs", "since=1&limit=5000&ack=0&wait=30s",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		v, err := url.ParseQuery(raw)
		if err != nil {
			return
		}
		const bound = 7 * time.Second
		q, err := parseChangesQuery(v, bound)
		if err != nil {
			if st := classify(err).status; st != http.StatusBadRequest {
				t.Fatalf("%q refused with %d: %v", raw, st, err)
			}
			return
		}
		if q.since < 0 || q.limit < 1 || q.limit > MaxLimit || q.wait < 0 || q.wait > bound {
			t.Fatalf("%q accepted out of bounds: %+v", raw, q)
		}
	})
}

// The names of the agent's secrets, never their values, are announced in
// info, within what the core takes; a push with a reference that is not
// one is a 422 with nothing queued.
func TestSecretNamesAreAnnounced(t *testing.T) {
	t.Parallel()
	q, err := queue.Open(context.Background(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	reg, err := handlers.NewRegistry([]handlers.External{{Kind: "example.com/db.migrate", Run: []string{"/bin/true"}}}, handlers.Env{NodeID: "n1", ClusterID: "c1"})
	if err != nil {
		t.Fatal(err)
	}
	run := runner.New(runner.Config{Queue: q, Handlers: reg, Actor: "n1", Idle: 20 * time.Millisecond})
	srv := New(Config{NodeID: "n1", ClusterID: "c1", Version: "test", DefaultTimeout: time.Hour, Queue: q, Runner: run, Kinds: reg,
		Secrets: func() []string { return []string{"api-token", "db-password"} }})
	f, ts := newFixture(t, srv.Handler(), q)
	t.Cleanup(func() { ts.Close(); q.Close() })
	st, b := f.do(t, "GET", "/api/v1/info", "")
	info := decode[wire.AgentInfo](t, b)
	if st != 200 || strings.Join(info.Secrets, ",") != "api-token,db-password" {
		t.Fatalf("info: %d %s", st, b)
	}
	if err := info.Check(); err != nil {
		t.Fatalf("the agent announces what the core refuses: %v", err)
	}
	st, b = f.do(t, "POST", "/api/v1/actions", `{"kind":"example.com/db.migrate","args":{"dsn":"{{ secret \"../etc/shadow\" }}"}}`)
	if st != http.StatusUnprocessableEntity || !strings.Contains(string(b), "not a plain name") {
		t.Fatalf("push of a bad reference: %d %s", st, b)
	}
	if n, _ := q.Counts(context.Background()); len(n) != 0 && n[action.New] != 0 {
		t.Fatalf("queued: %v", n)
	}
}
