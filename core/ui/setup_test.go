package ui

import (
	"context"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/musterhq/muster/core/actions"
	"github.com/musterhq/muster/core/api"
	"github.com/musterhq/muster/core/approval"
	"github.com/musterhq/muster/core/auth"
	"github.com/musterhq/muster/core/ops"
	"github.com/musterhq/muster/core/ops/opstest"
	"github.com/musterhq/muster/core/runs"
	"github.com/musterhq/muster/core/schedule/recur"
	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/core/store/sqlite"
	"github.com/musterhq/muster/core/streams"
	"github.com/musterhq/muster/shared/action"
	"github.com/musterhq/muster/shared/live"
)

// clock is a time the test moves.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

type env struct {
	nudges    *opstest.Syncs
	engine    *runs.Engine
	schedules *recur.Service
	t         testing.TB
	st        *sqlite.Store
	ui        *Server
	ts        *httptest.Server
	clock     *clock
	secrets   map[string]string // by token name: viewer, op, appr, admin
}

// setup serves the UI (with the API beside it, as the core does) on a fresh
// SQLite store holding cluster prod with node db-1 and one token per role.
func setup(t testing.TB, opts ...func(*Config)) *env {
	t.Helper()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	now := time.Now().UTC()
	if err := st.Update(ctx, func(tx store.Tx) error {
		if err := tx.PutCluster(ctx, &store.Cluster{ID: "prod", Status: store.ClusterHealthy, UpdatedTS: now}); err != nil {
			return err
		}
		return tx.PutNode(ctx, &store.Node{ClusterID: "prod", ID: "db-1", Addr: "127.0.0.1:1", Source: store.SourceStatic,
			Status: store.NodeUp, UpdatedTS: now, LastContact: &now})
	}); err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, st: st, clock: &clock{t: now}, secrets: map[string]string{}, nudges: &opstest.Syncs{}}
	for name, role := range map[string]string{"viewer": store.RoleViewer, "op": store.RoleOperator,
		"appr": store.RoleApprover, "admin": store.RoleAdmin} {
		sec, err := auth.CreateToken(ctx, st, name, []string{role}, "test", "")
		if err != nil {
			t.Fatal(err)
		}
		e.secrets[name] = sec
	}
	// Sign-in limits that the tests signing in many times never reach; the
	// tests of those limits set their own.
	cfg := Config{Policy: live.New(approval.DefaultPolicy()), Now: e.clock.now,
		StreamKeepAlive: time.Second, SignInBurst: 1000, MaxSessionsPerToken: 1000, Streams: streams.New(0, 0)}
	for _, o := range opts {
		o(&cfg)
	}
	// The pages and the changes they make decide with one policy.
	rules := &actions.Rules{Policy: cfg.Policy}
	e.engine = runs.NewEngine(cfg.Policy, rules, nil)
	e.schedules = &recur.Service{Policy: cfg.Policy, KindLocks: e.engine.KindLocks}
	// The API counts its event streams with the UI's, as in the core.
	apiSrv := api.New(api.Config{Policy: live.New(approval.DefaultPolicy()), Streams: cfg.Streams}, st, nil, nil)
	if cfg.Ops == nil {
		cfg.Ops = ops.New(ops.Config{Store: st, Policy: cfg.Policy, Budget: cfg.Budget, Rules: rules, Runs: e.engine,
			Schedules: e.schedules, Nudge: e.nudges, Now: e.clock.now})
	}
	e.ui, err = New(cfg, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/ui/", e.ui.Handler())
	mux.Handle("/", apiSrv.Handler())
	e.ts = httptest.NewServer(mux)
	t.Cleanup(func() {
		e.ui.Close()
		apiSrv.Close()
		e.ts.Close()
	})
	return e
}

// browser is a cookie-keeping client that does not follow redirects.
type browser struct {
	e    *env
	c    *http.Client
	csrf string // the session's CSRF token, read from the last page
}

func (e *env) browser() *browser {
	jar, _ := cookiejar.New(nil)
	return &browser{e: e, c: &http.Client{Jar: jar, Timeout: 10 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

var csrfRE = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// get fetches a page and returns its status, Location and body.
func (b *browser) get(path string) (int, string, string) {
	b.e.t.Helper()
	resp, err := b.c.Get(b.e.ts.URL + path)
	if err != nil {
		b.e.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if m := csrfRE.FindSubmatch(body); m != nil {
		b.csrf = string(m[1])
	}
	return resp.StatusCode, resp.Header.Get("Location"), string(body)
}

// post sends a form and returns its status, Location and body.
func (b *browser) post(path string, form url.Values, header ...string) (int, string, string) {
	b.e.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, b.e.ts.URL+path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := b.c.Do(req)
	if err != nil {
		b.e.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("Location"), string(body)
}

// signIn signs the browser in as who through the sign-in form.
func (b *browser) signIn(who string) *browser {
	b.e.t.Helper()
	b.get("/ui/login")
	status, loc, body := b.post("/ui/login", url.Values{"token": {b.e.secrets[who]}, "csrf": {b.csrf}})
	if status != http.StatusSeeOther || loc != "/ui/dashboard" {
		b.e.t.Fatalf("sign in as %s: %d to %q\n%s", who, status, loc, body)
	}
	b.get("/ui/approvals") // reads the session's CSRF token
	return b
}

// create stores an action waiting for approval, asked by requester.
func (e *env) create(requester string, args string) action.Action {
	e.t.Helper()
	ctx := context.Background()
	t := action.UTC(time.Now())
	rec := &store.Record{Action: action.Action{ID: action.NewID(), ClusterID: "prod", NodeID: "db-1",
		Kind: "muster.io/debug.sleep", Args: []byte(args), State: action.PendingApprove, Progress: []byte("{}"),
		Origin: action.OriginCore, Requester: requester, CreatedTS: t, UpdatedTS: t}}
	if err := e.st.Update(ctx, func(tx store.Tx) error {
		if err := tx.InsertAction(ctx, rec); err != nil {
			return err
		}
		if err := tx.AppendHistory(ctx, rec.ID, action.Transition{TS: t, To: rec.State, Actor: requester, Reason: "created"}); err != nil {
			return err
		}
		return tx.AppendEvent(ctx, &store.Event{Type: store.EventActionCreated, Actor: requester, ClusterID: "prod",
			NodeID: "db-1", ActionID: rec.ID, Message: "created"})
	}); err != nil {
		e.t.Fatal(err)
	}
	return rec.Action
}

// edit changes a stored record as the orchestrator would.
func (e *env) edit(id string, fn func(r *store.Record)) {
	e.t.Helper()
	ctx := context.Background()
	if err := e.st.Update(ctx, func(tx store.Tx) error {
		rec, err := tx.Action(ctx, id)
		if err != nil {
			return err
		}
		fn(rec)
		if err := tx.UpdateAction(ctx, rec); err != nil {
			return err
		}
		return tx.AppendEvent(ctx, &store.Event{Type: store.EventActionStateChanged, Actor: "core", ClusterID: "prod",
			NodeID: "db-1", ActionID: rec.ID, Message: "changed"})
	}); err != nil {
		e.t.Fatal(err)
	}
}

// record reads an action with its history.
func (e *env) record(id string) action.Action {
	e.t.Helper()
	ctx := context.Background()
	var a action.Action
	if err := e.st.Read(ctx, func(r store.Reader) error {
		rec, err := r.Action(ctx, id)
		if err != nil {
			return err
		}
		a = rec.Action
		a.History, err = r.History(ctx, id)
		return err
	}); err != nil {
		e.t.Fatal(err)
	}
	return a
}

// sessionCount returns how many sessions the store holds.
func (e *env) sessionCount() int {
	e.t.Helper()
	var n int
	if err := e.st.Read(context.Background(), func(r store.Reader) error {
		var err error
		n, err = r.SessionCount(context.Background())
		return err
	}); err != nil {
		e.t.Fatal(err)
	}
	return n
}
