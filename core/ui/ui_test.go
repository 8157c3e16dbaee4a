package ui

import (
	"bufio"
	"context"
	"fmt"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/musterhq/muster/core/actions"
	"github.com/musterhq/muster/core/approval"
	"github.com/musterhq/muster/core/auth"
	corenodes "github.com/musterhq/muster/core/nodes"
	"github.com/musterhq/muster/core/ops"
	"github.com/musterhq/muster/core/policy"
	"github.com/musterhq/muster/core/runs"
	"github.com/musterhq/muster/core/runs/playbook"
	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/core/streams"
	"github.com/musterhq/muster/shared/action"
	"github.com/musterhq/muster/shared/live"
	"github.com/musterhq/muster/shared/wire"
)

// The callers of the role table: no session, then a session per role, and
// stg: a token without roles whose team holds admin on staging-* alone
// (every route opens to it, every prod object is 404 to it, what is global
// 403).
var callers = []string{"none", "viewer", "op", "appr", "admin", "stg"}

// roleTable gives, for every UI route, the status each caller gets for an
// otherwise valid request (with the session's CSRF token on a POST): a
// redirect to sign-in (303) without a session, 403 without the permission.
// The permissions are the API's: see core/api/roles_test.go. Every registered
// route must have a line here (TestUIRoleTable fails otherwise).
var roleTable = map[string][6]int{ //    none viewer  op   appr admin stg
	"GET /ui/{$}":                                      {303, 303, 303, 303, 303, 303},
	"GET /ui/static/{file}":                            {200, 200, 200, 200, 200, 200},
	"GET /ui/login":                                    {200, 303, 303, 303, 303, 303},
	"POST /ui/login":                                   {303, 303, 303, 303, 303, 303},
	"GET /ui/dev-login":                                {303, 303, 303, 303, 303, 303},
	"GET /ui/oidc/login":                               {404, 404, 404, 404, 404, 404}, // single sign-on off; on: TestOIDCSignIn
	"GET /ui/oidc/callback":                            {404, 404, 404, 404, 404, 404},
	"POST /ui/logout":                                  {303, 303, 303, 303, 303, 303},
	"GET /ui/approvals":                                {303, 200, 200, 200, 200, 200},
	"GET /ui/actions":                                  {303, 200, 200, 200, 200, 200},
	"GET /ui/actions/new":                              {303, 403, 200, 403, 200, 200}, // stg: the form, with no cluster to choose
	"POST /ui/actions/new":                             {303, 403, 303, 403, 303, 404},
	"GET /ui/actions/{id}":                             {303, 200, 200, 200, 200, 404},
	"POST /ui/actions/{id}/cancel":                     {303, 403, 303, 403, 303, 404},
	"POST /ui/actions/{id}/retry":                      {303, 403, 303, 403, 303, 404},
	"POST /ui/actions/{id}/approve":                    {303, 403, 403, 303, 303, 404},
	"POST /ui/actions/{id}/reject":                     {303, 403, 403, 303, 303, 404},
	"POST /ui/actions/{id}/urgent":                     {303, 403, 403, 303, 303, 404},
	"GET /ui/runs":                                     {303, 200, 200, 200, 200, 200},
	"GET /ui/runs/new":                                 {303, 403, 200, 403, 200, 200}, // stg: the form, with no cluster to choose
	"POST /ui/runs/new":                                {303, 403, 200, 403, 200, 404}, // a plan (do=plan) answers the form with it
	"GET /ui/runs/{id}":                                {303, 200, 200, 200, 200, 404},
	"POST /ui/runs/{id}/approve":                       {303, 403, 403, 303, 303, 404},
	"POST /ui/runs/{id}/reject":                        {303, 403, 403, 303, 303, 404},
	"POST /ui/runs/{id}/pause":                         {303, 403, 303, 403, 303, 404},
	"POST /ui/runs/{id}/resume":                        {303, 403, 303, 403, 303, 404}, // a manual pause: the approver's 403 is the engine's (TestRunResumeFollowsTheAPIsRule)
	"POST /ui/runs/{id}/cancel":                        {303, 403, 303, 403, 303, 404},
	"POST /ui/runs/{id}/promote":                       {303, 403, 403, 303, 303, 404}, // a canary asked by someone else
	"POST /ui/runs/{id}/abort":                         {303, 403, 403, 303, 303, 404}, // the same: an approver's, or the requester's
	"POST /ui/runs/{id}/urgent":                        {303, 403, 403, 303, 303, 404},
	"POST /ui/runs/{id}/retry":                         {303, 403, 303, 403, 303, 404}, // as the API's: create
	"GET /ui/dashboard":                                {303, 200, 200, 200, 200, 200},
	"GET /ui/playbooks":                                {303, 200, 200, 200, 200, 200},
	"GET /ui/playbooks/{name}":                         {303, 200, 200, 200, 200, 200},
	"POST /ui/playbooks/{name}/start":                  {303, 403, 303, 403, 303, 404},
	"GET /ui/schedules":                                {303, 200, 200, 200, 200, 200},
	"GET /ui/schedules/-/new":                          {303, 403, 200, 403, 200, 200},
	"POST /ui/schedules/-/new":                         {303, 403, 303, 403, 303, 404},
	"GET /ui/schedules/{name}":                         {303, 200, 200, 200, 200, 404},
	"POST /ui/schedules/{name}/approve":                {303, 403, 403, 303, 303, 404},
	"POST /ui/schedules/{name}/reject":                 {303, 403, 403, 303, 303, 404},
	"POST /ui/schedules/{name}/pause":                  {303, 403, 303, 403, 303, 404},
	"POST /ui/schedules/{name}/resume":                 {303, 403, 303, 303, 303, 404},
	"POST /ui/schedules/{name}/delete":                 {303, 403, 303, 403, 303, 404},
	"GET /ui/clusters":                                 {303, 200, 200, 200, 200, 200},
	"GET /ui/clusters/{cluster}/nodes/{node}":          {303, 200, 200, 200, 200, 404},
	"POST /ui/clusters/{cluster}/nodes/{node}/drain":   {303, 403, 303, 403, 303, 404},
	"POST /ui/clusters/{cluster}/nodes/{node}/undrain": {303, 403, 303, 403, 303, 404},
	"POST /ui/clusters/{cluster}/freeze":               {303, 403, 303, 303, 303, 404},
	"POST /ui/freezes/{id}/lift":                       {303, 403, 403, 303, 303, 404},
	"POST /ui/clusters/{cluster}/windows":              {303, 403, 303, 303, 303, 404}, // a first window; another: TestClustersPageWindowAndBudgetForms
	"POST /ui/windows/{id}/remove":                     {303, 403, 403, 303, 303, 404},
	"POST /ui/clusters/{cluster}/budget":               {303, 403, 303, 303, 303, 404}, // not wider; wider: TestClustersPageWindowAndBudgetForms
	"POST /ui/clusters/{cluster}/on-alert/approve":     {303, 403, 403, 303, 303, 404},
	"GET /ui/events":                                   {303, 200, 200, 200, 200, 200},
	"GET /ui/notifications":                            {303, 403, 403, 403, 200, 403},
	"GET /ui/stream":                                   {401, 200, 200, 200, 200, 200},
}

func TestUIRoleTable(t *testing.T) {
	t.Parallel()
	nonces := map[string]string{}
	for i := range callers {
		nonces[strings.Repeat(string(rune('a'+i)), 32)] = "viewer"
	}
	e := setup(t, func(c *Config) { c.DevLogins = nonces })
	sec, err := auth.CreateToken(context.Background(), e.st, "stg", nil, "test", "")
	if err != nil {
		t.Fatal(err)
	}
	e.secrets["stg"] = sec
	e.runChange(func(ctx context.Context, tx store.Tx) error {
		if err := tx.InsertTeam(ctx, &store.Team{Name: "stg", Members: []string{"stg"}}); err != nil {
			return err
		}
		return tx.InsertGrant(ctx, &store.Grant{ID: "g-stg", Team: "stg", Role: store.RoleAdmin, Clusters: "staging-*"})
	})
	e.applyPlaybook(sleepPlaybook, "admin")
	e.addNodes("db-9")
	e.ui.ops.Members().Store(corenodes.Membership{"prod": {OnAlert: &corenodes.OnAlert{Playbook: "heal"}}})
	registered := map[string]bool{}
	for _, r := range e.ui.routes {
		key := r.Method + " " + r.Pattern
		registered[key] = true
		if _, ok := roleTable[key]; !ok {
			t.Errorf("route %s has no line in the role table", key)
		}
	}
	for key := range roleTable {
		if !registered[key] {
			t.Errorf("the role table names %s, which is not registered", key)
		}
	}
	if t.Failed() {
		t.FailNow()
	}
	for route, want := range roleTable {
		for i, who := range callers {
			t.Run(route+" as "+who, func(t *testing.T) {
				b := e.browser()
				if who != "none" {
					b.signIn(who)
				}
				method, path, _ := strings.Cut(route, " ")
				form := url.Values{"csrf": {b.csrf}}
				switch route {
				case "GET /ui/{$}":
					path = "/ui/"
				case "GET /ui/static/{file}":
					path = "/ui/static/ui.css"
				case "GET /ui/dev-login":
					path = "/ui/dev-login?nonce=" + strings.Repeat(string(rune('a'+i)), 32)
				case "POST /ui/login":
					// A signed-in browser is not shown the form: take a
					// form token from a fresh one.
					fresh := e.browser()
					fresh.get("/ui/login")
					u, _ := url.Parse(e.ts.URL + "/ui/")
					b.c.Jar.SetCookies(u, fresh.c.Jar.Cookies(u))
					form = url.Values{"csrf": {fresh.csrf}, "token": {e.secrets["viewer"]}}
				case "GET /ui/clusters/{cluster}/nodes/{node}", "POST /ui/clusters/{cluster}/nodes/{node}/drain",
					"POST /ui/clusters/{cluster}/nodes/{node}/undrain":
					// A node of its own: a drained db-1 would hold the runs of
					// the other lines.
					path = strings.NewReplacer("{cluster}", "prod", "{node}", "db-9").Replace(path)
					form.Set("reason", "checked")
				case "POST /ui/clusters/{cluster}/freeze":
					path = strings.Replace(path, "{cluster}", "prod", 1)
					form.Set("for", "1h")
					form.Set("reason", "checked")
				case "POST /ui/clusters/{cluster}/windows", "POST /ui/windows/{id}/remove", "POST /ui/clusters/{cluster}/budget":
					// A cluster of their own, with no window but the one
					// to remove: each line makes the change its role may.
					id := fmt.Sprintf("w-%d", scheduleSeq.Add(1))
					e.runChange(func(ctx context.Context, tx store.Tx) error {
						if err := tx.PutCluster(ctx, &store.Cluster{ID: "roles", Status: store.ClusterHealthy, UpdatedTS: time.Now()}); err != nil {
							return err
						}
						ws, err := tx.Policies(ctx, store.PolicyQuery{Kind: store.PolicyWindow, ClusterID: "roles", Live: true})
						if err != nil {
							return err
						}
						for _, w := range ws {
							if _, err := policy.Delete(ctx, tx, store.PolicyWindow, w.ID, store.Now(), "someone", "", "clean"); err != nil {
								return err
							}
						}
						if route != "POST /ui/windows/{id}/remove" {
							return nil
						}
						rec, err := policy.CheckWindow(wire.WindowSpec{Cluster: "roles", Cron: "0 2 * * *", Duration: "4h"}, 0)
						if err != nil {
							return err
						}
						_, err = policy.Put(ctx, tx, &store.PolicyRecord{Kind: store.PolicyWindow, ID: id, ClusterID: "roles", Spec: rec.Spec,
							Reason: "x"}, "someone", "")
						return err
					})
					path = strings.NewReplacer("{cluster}", "roles", "{id}", id).Replace(path)
					form.Set("cron", "0 2 * * *")
					form.Set("duration", "4h")
					form.Set("max_unavailable", "1")
					form.Set("reason", "checked")
				case "POST /ui/clusters/{cluster}/on-alert/approve":
					// A new version of the playbook each time: any
					// approval before is void.
					n := scheduleSeq.Add(1)
					doc := fmt.Sprintf("name: heal\ndescription: v%d\nparams: [{name: missing, type: string}]\nstages:\n  - {name: a, kind: muster.io/debug.ping, target: {all: true}}\n", n)
					e.runChange(func(ctx context.Context, tx store.Tx) error {
						return tx.InsertPlaybook(ctx, &store.Playbook{Name: "heal", Version: int(n), Document: doc, Digest: playbook.Digest(doc), CreatedBy: "root"})
					})
					if err := e.st.Read(context.Background(), func(r store.Reader) error {
						v, err := e.ui.ops.OnAlertView(context.Background(), r, "prod")
						if err == nil {
							form.Set("digest", v.Digest)
						}
						return err
					}); err != nil {
						t.Fatal(err)
					}
					path = strings.Replace(path, "{cluster}", "prod", 1)
				case "POST /ui/freezes/{id}/lift":
					id := fmt.Sprintf("frz-%d", scheduleSeq.Add(1))
					e.runChange(func(ctx context.Context, tx store.Tx) error {
						return tx.InsertFreeze(ctx, &store.Freeze{ID: id, ClusterID: "prod", From: time.Now(), To: time.Now().Add(time.Hour),
							Reason: "incident", CreatedBy: "someone"})
					})
					path = strings.Replace(path, "{id}", id, 1)
					form.Set("reason", "checked")
				case "GET /ui/playbooks/{name}", "POST /ui/playbooks/{name}/start":
					path = strings.Replace(path, "{name}", "nap", 1)
					version, digest := e.planDigest("nap", map[string]string{"node": "db-1", "loud": "false"})
					form.Set("cluster", "prod")
					form.Set("version", strconv.Itoa(version))
					form.Set("digest", digest)
					form.Set("p.node", "db-1")
					form.Set("p.loud", "false")
				case "GET /ui/schedules/{name}", "POST /ui/schedules/{name}/approve", "POST /ui/schedules/{name}/reject",
					"POST /ui/schedules/{name}/pause", "POST /ui/schedules/{name}/resume", "POST /ui/schedules/{name}/delete":
					sc := e.createSchedule(fmt.Sprintf("sch-%d", scheduleSeq.Add(1)), "someone")
					switch route {
					case "POST /ui/schedules/{name}/pause", "POST /ui/schedules/{name}/delete":
						e.approveSchedule(sc.Name)
					case "POST /ui/schedules/{name}/resume":
						e.approveSchedule(sc.Name)
						e.pauseSchedule(sc.Name)
					}
					form.Set("confirm", "yes")
					path = strings.Replace(path, "{name}", sc.Name, 1)
					form.Set("reason", "checked")
					form.Set("digest", sc.Digest)
				case "POST /ui/runs/new":
					form.Set("cluster", "prod")
					form.Set("do", "plan")
					form.Set("document", "name: adhoc\nstages:\n  - name: s\n    kind: muster.io/debug.sleep\n    target: {nodes: [db-1]}\n")
				case "POST /ui/actions/new":
					form.Set("cluster", "prod")
					form.Set("node", "db-1")
					form.Set("kind", "muster.io/debug.sleep")
					form.Set("args", `{"seconds":1}`)
				case "POST /ui/schedules/-/new":
					form.Set("do", "create")
					form.Set("name", fmt.Sprintf("new-%d", scheduleSeq.Add(1)))
					form.Set("cluster", "prod")
					form.Set("playbook", "nap")
					form.Set("params", "node=db-1\nloud=false")
					form.Set("cron", "0 2 * * *")
				case "POST /ui/actions/{id}/cancel", "POST /ui/actions/{id}/retry":
					a := e.create("someone", `{"seconds":1}`)
					if route == "POST /ui/actions/{id}/retry" {
						if _, _, err := e.ui.ops.CancelAction(context.Background(), ops.Caller{Name: "admin", Roles: []string{store.RoleAdmin}}, a.ID, ""); err != nil {
							t.Fatal(err)
						}
					}
					path = strings.Replace(path, "{id}", a.ID, 1)
					form.Set("reason", "checked")
				case "GET /ui/actions/{id}", "POST /ui/actions/{id}/approve", "POST /ui/actions/{id}/reject", "POST /ui/actions/{id}/urgent":
					a := e.create("someone", `{"seconds":1}`)
					path = strings.Replace(path, "{id}", a.ID, 1)
					form.Set("reason", "checked")
				case "POST /ui/runs/{id}/retry":
					r := procedureRun("someone", store.RunFailed, "stage upgrade failed", "db-1", "db-2")
					e.storeRun(r)
					path = strings.Replace(path, "{id}", r.ID, 1)
					form.Set("from", "failed")
				case "POST /ui/runs/{id}/promote", "POST /ui/runs/{id}/abort":
					form.Set("confirm", "yes")
					form.Set("reason", "checked")
					r := procedureRun("someone", store.RunPaused, fmt.Sprintf(runs.ReasonCanary, "upgrade", 1, 0), "db-1", "db-2")
					e.storeRun(r)
					path = strings.Replace(path, "{id}", r.ID, 1)
				case "GET /ui/runs/{id}", "POST /ui/runs/{id}/approve", "POST /ui/runs/{id}/reject",
					"POST /ui/runs/{id}/pause", "POST /ui/runs/{id}/resume", "POST /ui/runs/{id}/cancel", "POST /ui/runs/{id}/urgent":
					// A run in the state the change needs, asked by someone else.
					r := e.createRun("someone")
					switch route {
					case "POST /ui/runs/{id}/pause", "POST /ui/runs/{id}/cancel":
						e.approveRun(r.ID, "appr")
					case "POST /ui/runs/{id}/resume":
						e.approveRun(r.ID, "appr")
						e.pauseRun(r.ID)
					}
					path = strings.Replace(path, "{id}", r.ID, 1)
					form.Set("reason", "checked")
					form.Set("digest", r.Digest)
					form.Set("confirm", "yes")
				}
				var status int
				switch {
				case route == "GET /ui/stream":
					status = streamStatus(t, b, path)
				case method == http.MethodGet:
					status, _, _ = b.get(path)
				default:
					status, _, _ = b.post(path, form)
				}
				if status != want[i] {
					t.Fatalf("status %d, want %d", status, want[i])
				}
			})
		}
	}
}

// streamStatus opens the live-update stream and returns its status.
func streamStatus(t *testing.T, b *browser, path string) int {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, b.e.ts.URL+path, nil)
	resp, err := b.c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func TestWrongTokenGetsAMessageAndNoSession(t *testing.T) {
	t.Parallel()
	e := setup(t)
	for name, tok := range map[string]string{
		"unknown":   "mst_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
		"malformed": "not-a-token",
		"truncated": e.secrets["appr"][:20],
	} {
		t.Run(name, func(t *testing.T) {
			b := e.browser()
			b.get("/ui/login")
			before := e.sessionCount()
			resp, err := b.c.PostForm(e.ts.URL+"/ui/login", url.Values{"token": {tok}, "csrf": {b.csrf}})
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body := readAll(t, resp)
			if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(body, "That token was not accepted") {
				t.Fatalf("status %d, want 401 with a clear message:\n%s", resp.StatusCode, body)
			}
			for _, c := range resp.Cookies() {
				if c.Name == sessionCookie && c.Value != "" {
					t.Fatalf("a wrong token got a session cookie")
				}
			}
			if strings.Contains(body, tok) {
				t.Fatal("the page repeats the token")
			}
			if e.sessionCount() != before {
				t.Fatal("a session was made for a wrong token")
			}
			if status, loc, _ := b.get("/ui/approvals"); status != http.StatusSeeOther || !strings.HasPrefix(loc, "/ui/login") {
				t.Fatalf("after a wrong token, /ui/approvals answered %d to %q", status, loc)
			}
		})
	}
}

func TestSignInWithoutTheFormsCSRFTokenIsRefused(t *testing.T) {
	t.Parallel()
	e := setup(t)
	b := e.browser()
	b.get("/ui/login")
	status, _, _ := b.post("/ui/login", url.Values{"token": {e.secrets["appr"]}})
	if status != http.StatusForbidden {
		t.Fatalf("sign-in without the form's token: %d, want 403", status)
	}
	status, _, _ = b.post("/ui/login", url.Values{"token": {e.secrets["appr"]}, "csrf": {b.csrf}},
		"Origin", "http://evil.example")
	if status != http.StatusForbidden {
		t.Fatalf("sign-in from another origin: %d, want 403", status)
	}
	if e.sessionCount() != 0 {
		t.Fatal("a refused sign-in made a session")
	}
}

func TestSessionCookieFlags(t *testing.T) {
	t.Parallel()
	e := setup(t)
	tlsSrv := httptest.NewTLSServer(e.ui.Handler())
	t.Cleanup(tlsSrv.Close)
	for name, base := range map[string]string{"plain": e.ts.URL, "tls": tlsSrv.URL} {
		t.Run(name, func(t *testing.T) {
			hc := tlsSrv.Client()
			hc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
			resp, err := hc.Get(base + "/ui/login")
			if err != nil {
				t.Fatal(err)
			}
			body := readAll(t, resp)
			var login *http.Cookie
			for _, c := range resp.Cookies() {
				if strings.TrimPrefix(c.Name, hostPrefix) == loginCookie {
					login = c
				}
			}
			csrf := csrfRE.FindStringSubmatch(body)
			if login == nil || csrf == nil {
				t.Fatal("no sign-in form token")
			}
			req, _ := http.NewRequest(http.MethodPost, base+"/ui/login",
				strings.NewReader(url.Values{"token": {e.secrets["viewer"]}, "csrf": {csrf[1]}}.Encode()))
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			req.AddCookie(login)
			resp, err = hc.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			// Under TLS the cookie is __Host-: Secure, for path /, no Domain.
			name_, path := sessionCookie, "/ui/"
			if name == "tls" {
				name_, path = hostPrefix+sessionCookie, "/"
			}
			var sess *http.Cookie
			for _, c := range resp.Cookies() {
				if c.Name == name_ {
					sess = c
				}
			}
			if sess == nil {
				t.Fatalf("no session cookie %s (status %d)", name_, resp.StatusCode)
			}
			if !sess.HttpOnly || sess.SameSite != http.SameSiteStrictMode || sess.Path != path || sess.Domain != "" {
				t.Fatalf("cookie %+v: want HttpOnly, SameSite=Strict, Path=%s, no Domain", sess, path)
			}
			if sess.Secure != (name == "tls") {
				t.Fatalf("cookie Secure=%v under %s", sess.Secure, name)
			}
			if sess.MaxAge != int(DefaultSessionTTL/time.Second) {
				t.Fatalf("cookie Max-Age %d, want the session TTL", sess.MaxAge)
			}
			// Only the hash of the id is kept.
			var raw, hashed bool
			_ = e.st.Read(context.Background(), func(r store.Reader) error {
				_, err := r.Session(context.Background(), sess.Value)
				raw = err == nil
				_, err = r.Session(context.Background(), ops.HashSessionID(sess.Value))
				hashed = err == nil
				return nil
			})
			if raw || !hashed {
				t.Fatalf("sessions are not kept by the hash of their id (raw %v, hashed %v)", raw, hashed)
			}
		})
	}
}

func TestExpiredSessionGoesToSignInAndBack(t *testing.T) {
	t.Parallel()
	e := setup(t, func(c *Config) { c.SessionTTL = time.Hour })
	b := e.browser().signIn("viewer")
	if status, _, _ := b.get("/ui/events?type=action.*"); status != http.StatusOK {
		t.Fatalf("events: %d", status)
	}
	e.clock.add(time.Hour)
	status, loc, _ := b.get("/ui/events?type=action.*")
	if status != http.StatusSeeOther {
		t.Fatalf("expired session: %d, want 303", status)
	}
	u, _ := url.Parse(loc)
	if u.Path != "/ui/login" || !strings.HasPrefix(u.Query().Get("next"), "/ui/events?type=action.") || u.Query().Get("expired") != "1" {
		t.Fatalf("expired session went to %q", loc)
	}
	// The page's script asks for the live part; sign-in comes back to the page.
	if _, loc, _ := b.get("/ui/events?type=action.*&part=live"); strings.Contains(loc, "part") {
		t.Fatalf("sign-in after expiry would come back to the live part only: %q", loc)
	}
	_, _, body := b.get(loc)
	if !strings.Contains(body, "Your session has ended") {
		t.Fatalf("the sign-in page does not say the session ended:\n%s", body)
	}
	status, loc, _ = b.post("/ui/login", url.Values{"token": {e.secrets["viewer"]}, "csrf": {b.csrf}, "next": {u.Query().Get("next")}})
	if status != http.StatusSeeOther || !strings.HasPrefix(loc, "/ui/events?type=action.") {
		t.Fatalf("sign-in after expiry went to %d %q, want back to the events page", status, loc)
	}
}

func TestSignOutEndsTheSessionOnTheServer(t *testing.T) {
	t.Parallel()
	e := setup(t)
	b := e.browser().signIn("viewer")
	u, _ := url.Parse(e.ts.URL + "/ui/")
	var cookie *http.Cookie
	for _, c := range b.c.Jar.Cookies(u) {
		if c.Name == sessionCookie {
			cookie = c
		}
	}
	if status, loc, _ := b.post("/ui/logout", url.Values{"csrf": {b.csrf}}); status != http.StatusSeeOther || loc != "/ui/login?signed_out=1" {
		t.Fatalf("sign out: %d %q", status, loc)
	}
	// Replaying the old cookie does not work: the session is gone.
	replay := e.browser()
	replay.c.Jar.SetCookies(u, []*http.Cookie{{Name: sessionCookie, Value: cookie.Value, Path: "/ui/"}})
	if status, loc, _ := replay.get("/ui/approvals"); status != http.StatusSeeOther || !strings.HasPrefix(loc, "/ui/login") {
		t.Fatalf("the old cookie after sign-out: %d %q, want sign-in", status, loc)
	}
	if e.sessionCount() != 0 {
		t.Fatalf("%d sessions left after sign-out", e.sessionCount())
	}
}

func TestRevokedTokenEndsItsSessions(t *testing.T) {
	t.Parallel()
	e := setup(t)
	b := e.browser().signIn("op")
	ctx := context.Background()
	if err := e.st.Update(ctx, func(tx store.Tx) error { return tx.DeleteToken(ctx, "op") }); err != nil {
		t.Fatal(err)
	}
	if status, loc, _ := b.get("/ui/actions"); status != http.StatusSeeOther || !strings.HasPrefix(loc, "/ui/login") {
		t.Fatalf("after revocation: %d %q, want sign-in", status, loc)
	}
}

func TestStatePostsNeedTheSessionsCSRFToken(t *testing.T) {
	t.Parallel()
	e := setup(t)
	b := e.browser().signIn("appr")
	other := e.browser().signIn("admin")
	a := e.create("op", `{"seconds":1}`)
	for name, tc := range map[string]struct {
		form   url.Values
		header []string
	}{
		"no token":              {url.Values{"reason": {"ok"}}, nil},
		"empty token":           {url.Values{"reason": {"ok"}, "csrf": {""}}, nil},
		"another session's one": {url.Values{"reason": {"ok"}, "csrf": {other.csrf}}, nil},
		"right token, foreign origin": {url.Values{"reason": {"ok"}, "csrf": {b.csrf}},
			[]string{"Origin", "http://evil.example"}},
	} {
		t.Run(name, func(t *testing.T) {
			status, _, body := b.post("/ui/actions/"+a.ID+"/approve", tc.form, tc.header...)
			if status != http.StatusForbidden || !strings.Contains(body, "CSRF") {
				t.Fatalf("status %d, want 403 naming CSRF:\n%s", status, body)
			}
			if got := e.record(a.ID); got.State != action.PendingApprove {
				t.Fatalf("the action became %s", got.State)
			}
		})
	}
	// Sign-out is a state change too.
	if status, _, _ := b.post("/ui/logout", url.Values{}); status != http.StatusForbidden {
		t.Fatalf("sign-out without the token: %d, want 403", status)
	}
}

func TestViewerHasNoApproveButtonAndAForgedPostIs403(t *testing.T) {
	t.Parallel()
	e := setup(t)
	a := e.create("someone", `{"seconds":1}`)
	for _, who := range []string{"viewer", "op"} {
		b := e.browser().signIn(who)
		for _, page := range []string{"/ui/approvals", "/ui/actions/" + a.ID} {
			_, _, body := b.get(page)
			if !strings.Contains(body, a.ID) {
				t.Fatalf("%s: %s does not show the action", who, page)
			}
			if strings.Contains(body, "/approve\"") || strings.Contains(body, ">Approve<") {
				t.Fatalf("%s sees an approve button on %s", who, page)
			}
			if !strings.Contains(body, "do not include approving") {
				t.Fatalf("%s: %s does not say why there is no button", who, page)
			}
		}
		status, _, _ := b.post("/ui/actions/"+a.ID+"/approve", url.Values{"csrf": {b.csrf}})
		if status != http.StatusForbidden {
			t.Fatalf("%s forging an approval: %d, want 403", who, status)
		}
	}
	if got := e.record(a.ID); got.State != action.PendingApprove {
		t.Fatalf("the action became %s", got.State)
	}
}

func TestOwnRequestIsShownButNotApprovable(t *testing.T) {
	t.Parallel()
	e := setup(t)
	a := e.create("appr", `{"seconds":1}`)
	b := e.browser().signIn("appr")
	_, _, body := b.get("/ui/approvals")
	if !strings.Contains(body, a.ID) || !strings.Contains(body, "another approver must decide") {
		t.Fatalf("the approver's own request is not shown as such:\n%s", body)
	}
	if strings.Contains(body, "/ui/actions/"+a.ID+"/approve") {
		t.Fatal("the approver's own request has an approve button")
	}
	status, _, body := b.post("/ui/actions/"+a.ID+"/approve", url.Values{"csrf": {b.csrf}})
	if status != http.StatusForbidden || !strings.Contains(body, "may not approve it too") {
		t.Fatalf("approving one's own request: %d, want 403:\n%s", status, body)
	}
	if got := e.record(a.ID); got.State != action.PendingApprove {
		t.Fatalf("the action became %s", got.State)
	}
}

func TestApproveAndRejectWithAReason(t *testing.T) {
	t.Parallel()
	e := setup(t)
	b := e.browser().signIn("appr")
	a := e.create("op", `{"seconds":1}`)
	status, loc, _ := b.post("/ui/actions/"+a.ID+"/approve", url.Values{"csrf": {b.csrf}, "reason": {"change CH-42"},
		"next": {"/ui/actions/" + a.ID}})
	if status != http.StatusSeeOther || !strings.HasPrefix(loc, "/ui/actions/"+a.ID+"?") {
		t.Fatalf("approve: %d %q", status, loc)
	}
	got := e.record(a.ID)
	if got.State != action.PendingSchedule || got.ApprovedBy != "appr" {
		t.Fatalf("after approve: %s by %q", got.State, got.ApprovedBy)
	}
	// Approving costs one sync of the action's node, not a full sync of
	// its cluster.
	if n := e.nudges.List(); len(n) != 1 || n[0] != "node:prod/"+a.NodeID {
		t.Fatalf("syncs after an approval: %v, want one of node prod/%s", n, a.NodeID)
	}
	if last := got.History[len(got.History)-1]; last.Reason != "approved: change CH-42" || last.Actor != "appr" {
		t.Fatalf("history line %+v", last)
	}
	_, _, body := b.get(loc)
	if !strings.Contains(body, "Approved action "+a.ID) {
		t.Fatal("no confirmation after approving")
	}

	r := e.create("op", `{"seconds":1}`)
	status, _, body = b.post("/ui/actions/"+r.ID+"/reject", url.Values{"csrf": {b.csrf}})
	if status != http.StatusBadRequest || !strings.Contains(body, "needs a reason") {
		t.Fatalf("reject without a reason: %d, want 400", status)
	}
	if got := e.record(r.ID); got.State != action.PendingApprove {
		t.Fatalf("a refused reject changed the action to %s", got.State)
	}
	status, loc, _ = b.post("/ui/actions/"+r.ID+"/reject", url.Values{"csrf": {b.csrf}, "reason": {"not now"}})
	if status != http.StatusSeeOther || !strings.HasPrefix(loc, "/ui/approvals?") {
		t.Fatalf("reject: %d %q", status, loc)
	}
	if got := e.record(r.ID); got.State != action.Cancelled || got.History[len(got.History)-1].Reason != "rejected: not now" {
		t.Fatalf("after reject: %s %+v", got.State, got.History)
	}
	// A second decision on a decided action is a clear 409.
	status, _, body = b.post("/ui/actions/"+r.ID+"/approve", url.Values{"csrf": {b.csrf}})
	if status != http.StatusConflict || !strings.Contains(body, "CANCELLED") {
		t.Fatalf("approve a rejected action: %d\n%s", status, body)
	}
}

func TestNextIsOnlyALocalUIPath(t *testing.T) {
	t.Parallel()
	e := setup(t)
	b := e.browser()
	b.get("/ui/login")
	for _, next := range []string{"https://evil.example/", "//evil.example/ui/", "/\\evil.example", "/ui/../api/v1/tokens",
		"javascript:alert(1)", "/ui/%2e%2e/health"} {
		b2 := e.browser()
		b2.get("/ui/login")
		status, loc, _ := b2.post("/ui/login", url.Values{"token": {e.secrets["viewer"]}, "csrf": {b2.csrf}, "next": {next}})
		if status != http.StatusSeeOther || loc != "/ui/dashboard" {
			t.Errorf("next %q: %d to %q, want /ui/dashboard", next, status, loc)
		}
	}
}

func TestEscapesWhatAgentsAndPeopleWrote(t *testing.T) {
	t.Parallel()
	e := setup(t)
	a := e.create("op", `{"note":"<script>alert(1)</script>\u001b[31mred"}`)
	e.edit(a.ID, func(r *store.Record) {
		r.Output = "<img src=x onerror=alert(1)>\x1b[2J\x1b]0;title\x07done\u202eevil"
	})
	b := e.browser().signIn("viewer")
	for _, page := range []string{"/ui/approvals", "/ui/actions/" + a.ID} {
		_, _, body := b.get(page)
		for _, raw := range []string{"<script>alert", "<img", "\x1b", "\x07", "\u202e"} {
			if strings.Contains(body, raw) {
				t.Errorf("%s contains %q unescaped", page, raw)
			}
		}
		if !strings.Contains(body, "&lt;script&gt;alert(1)&lt;/script&gt;") {
			t.Errorf("%s does not show the args' <script> as text", page)
		}
	}
	_, _, body := b.get("/ui/actions/" + a.ID)
	for _, want := range []string{"&lt;img src=x onerror=alert(1)&gt;", `\x1b[2J`, `\x1b]0;title\x07done`, `\u202eevil`} {
		if !strings.Contains(body, want) {
			t.Errorf("the output does not show %q", want)
		}
	}
}

func TestDevLoginWorksOnceAndOnlyFromLoopback(t *testing.T) {
	t.Parallel()
	nonce := strings.Repeat("n", 32)
	e := setup(t, func(c *Config) { c.DevLogins = map[string]string{nonce: "appr"} })
	// From another address: refused, and the link stays unused.
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodGet, "/ui/dev-login?nonce="+nonce, nil)
	req.RemoteAddr = "192.0.2.7:4000"
	e.ui.Handler().ServeHTTP(rec, req)
	if rec.Code != http.StatusForbidden {
		t.Fatalf("dev login from 192.0.2.7: %d, want 403", rec.Code)
	}
	for _, c := range rec.Result().Cookies() {
		if c.Name == sessionCookie {
			t.Fatal("dev login from 192.0.2.7 set a session cookie")
		}
	}
	b := e.browser()
	if status, _, _ := b.get("/ui/dev-login?nonce=wrong"); status != http.StatusForbidden {
		t.Fatalf("a wrong nonce: %d, want 403", status)
	}
	status, loc, _ := b.get("/ui/dev-login?nonce=" + nonce)
	if status != http.StatusSeeOther || loc != "/ui/dashboard" {
		t.Fatalf("dev login: %d %q", status, loc)
	}
	if _, _, body := b.get("/ui/approvals"); !strings.Contains(body, "appr <small>") {
		t.Fatal("the dev login did not sign in as appr")
	}
	if status, _, _ := e.browser().get("/ui/dev-login?nonce=" + nonce); status != http.StatusForbidden {
		t.Fatalf("the link used twice: %d, want 403", status)
	}
	// Without dev logins (any core but muster dev), the route does not exist.
	plain := setup(t)
	if status, _, _ := plain.browser().get("/ui/dev-login?nonce=" + nonce); status != http.StatusNotFound {
		t.Fatalf("dev-login on a core outside dev mode: %d, want 404", status)
	}
}

func TestStreamSignalsChangesToTheSession(t *testing.T) {
	t.Parallel()
	e := setup(t)
	a := e.create("op", `{"seconds":1}`)
	b := e.browser().signIn("viewer")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, e.ts.URL+"/ui/stream?action="+a.ID, nil)
	resp, err := b.c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("stream: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Scan() // ": stream open"
	other := e.create("op", `{"seconds":2}`)
	e.edit(other.ID, func(r *store.Record) {})
	e.edit(a.ID, func(r *store.Record) { r.Output = "x" })
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "data: ") {
			if !strings.Contains(line, a.ID) || strings.Contains(line, other.ID) {
				t.Fatalf("the stream filtered on %s sent %s", a.ID, line)
			}
			if strings.Contains(line, `"message"`) {
				t.Fatalf("the stream sends event content: %s", line)
			}
			return
		}
	}
	t.Fatalf("no event on the stream: %v", sc.Err())
}

func TestPagesRenderWithCSP(t *testing.T) {
	t.Parallel()
	e := setup(t)
	a := e.create("op", `{"seconds":1}`)
	b := e.browser().signIn("admin")
	for _, page := range []string{"/ui/dashboard", "/ui/clusters/prod/nodes/db-1", "/ui/approvals", "/ui/actions", "/ui/actions?state=PENDING_APPROVE&cluster=prod",
		"/ui/actions/" + a.ID, "/ui/clusters", "/ui/events", "/ui/events?type=action.*&action=" + a.ID, "/ui/login"} {
		c := b.c
		if page == "/ui/login" {
			c = e.browser().c // signed in, the sign-in page is skipped
		}
		resp, err := c.Get(e.ts.URL + page)
		if err != nil {
			t.Fatal(err)
		}
		body := readAll(t, resp)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: %d\n%s", page, resp.StatusCode, body)
		}
		if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") || !strings.Contains(csp, "frame-ancestors 'none'") {
			t.Fatalf("%s: CSP %q", page, csp)
		}
		if strings.Contains(body, "http://") || strings.Contains(body, "https://") {
			t.Fatalf("%s refers to another site", page)
		}
	}
	for page, want := range map[string]int{
		"/ui/actions?state=BOGUS":       http.StatusBadRequest,
		"/ui/actions?marker=nope":       http.StatusBadRequest,
		"/ui/events?type=nope":          http.StatusBadRequest,
		"/ui/actions/not-an-id":         http.StatusNotFound,
		"/ui/actions/" + action.NewID(): http.StatusNotFound,
		"/ui/nowhere":                   http.StatusNotFound,
	} {
		if status, _, _ := b.get(page); status != want {
			t.Errorf("%s: %d, want %d", page, status, want)
		}
	}
}

func TestEmbeddedAssetsNeedNoOtherSite(t *testing.T) {
	t.Parallel()
	names, err := assets()
	if err != nil || len(names) == 0 {
		t.Fatalf("assets %v: %v", names, err)
	}
	for _, n := range names {
		b, _ := staticFS.ReadFile("static/" + n)
		for _, bad := range []string{"http://", "https://", "@import", "url("} {
			if strings.Contains(string(b), bad) {
				t.Errorf("%s contains %q", n, bad)
			}
		}
	}
}

func readAll(t *testing.T, resp *http.Response) string {
	t.Helper()
	defer resp.Body.Close()
	var b strings.Builder
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		b.WriteString(sc.Text() + "\n")
	}
	return b.String()
}

// assets lists the embedded static files (for tests).
func assets() ([]string, error) {
	var out []string
	err := fs.WalkDir(staticFS, "static", func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			out = append(out, strings.TrimPrefix(p, "static/"))
		}
		return err
	})
	return out, err
}

func TestEventsPageShowsTheNewestMatchesFirst(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	// 1,200 events: every tenth is node.up on db-1, the rest action events.
	if err := e.st.Update(ctx, func(tx store.Tx) error {
		for i := range 1200 {
			ev := &store.Event{Type: store.EventActionCreated, Actor: "op", ClusterID: "prod", Message: fmt.Sprintf("a%d", i)}
			if i%10 == 0 {
				ev = &store.Event{Type: store.EventNodeUp, Actor: "core", ClusterID: "prod", NodeID: "db-1", Message: fmt.Sprintf("up%d", i)}
			}
			if err := tx.AppendEvent(ctx, ev); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	b := e.browser().signIn("viewer")
	_, _, body := b.get("/ui/events?type=node.*&node=db-1")
	var seen []int
	for _, m := range regexp.MustCompile(`>up(\d+)<`).FindAllStringSubmatch(body, -1) {
		n, _ := strconv.Atoi(m[1])
		seen = append(seen, n)
	}
	if len(seen) != 100 {
		t.Fatalf("%d node events shown, want the newest 100", len(seen))
	}
	for i, n := range seen {
		if want := 1190 - 10*i; n != want {
			t.Fatalf("event %d shown is up%d, want up%d (newest first)", i, n, want)
		}
	}
	if strings.Contains(body, ">a1199<") {
		t.Fatal("the filter let an action event through")
	}
}

func TestStreamsPerSessionAreCapped(t *testing.T) {
	t.Parallel()
	e := setup(t, func(c *Config) { c.Streams = streams.New(100, 50) })
	b := e.browser().signIn("viewer")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for i := 0; i <= MaxStreamsPerSession; i++ {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, e.ts.URL+"/ui/stream", nil)
		resp, err := b.c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		want := http.StatusOK
		if i == MaxStreamsPerSession {
			want = http.StatusTooManyRequests
		}
		if resp.StatusCode != want {
			t.Fatalf("stream %d: %d, want %d", i+1, resp.StatusCode, want)
		}
		if want != http.StatusOK {
			resp.Body.Close()
		}
	}
	// Another token's session is not affected.
	if got := streamStatus(t, e.browser().signIn("op"), "/ui/stream"); got != http.StatusOK {
		t.Fatalf("another session's stream: %d", got)
	}
}

func TestSessionsAreCapped(t *testing.T) {
	t.Parallel()
	e := setup(t, func(c *Config) { c.MaxSessions = 2; c.SessionTTL = time.Hour })
	e.browser().signIn("viewer")
	e.browser().signIn("viewer")
	b := e.browser()
	b.get("/ui/login")
	status, _, body := b.post("/ui/login", url.Values{"token": {e.secrets["viewer"]}, "csrf": {b.csrf}})
	if status != http.StatusServiceUnavailable || !strings.Contains(body, "too many sessions") {
		t.Fatalf("a third session: %d, want 503 saying why", status)
	}
	// Once the others have expired, there is room again.
	e.clock.add(time.Hour)
	e.browser().signIn("viewer")
	if n := e.sessionCount(); n != 1 {
		t.Fatalf("%d sessions held, want the expired ones swept", n)
	}
}

func TestClustersPageShowsNodesWithLabels(t *testing.T) {
	t.Parallel()
	e := setup(t)
	b := e.browser().signIn("viewer")
	_, _, body := b.get("/ui/clusters")
	for _, want := range []string{"prod", "HEALTHY", "db-1", "UP", "127.0.0.1:1", "static"} {
		if !strings.Contains(body, want) {
			t.Errorf("the Clusters page lacks %q", want)
		}
	}
	// Labels, when the store has them, are shown sorted and escaped.
	var out strings.Builder
	now := time.Now()
	err := e.ui.pages["clusters"].ExecuteTemplate(&out, "live", &view{Data: []clusterView{{
		Cluster: store.Cluster{ID: "prod", Status: store.ClusterHealthy},
		Nodes: []nodeRow{{Node: store.Node{ClusterID: "prod", ID: "db-1", Status: store.NodeUp, LastContact: &now,
			Labels: map[string]string{"zone": "eu-1", "role": "<b>replica\x1b"}}, Status: store.NodeUp}},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	if want := `<li>role=&lt;b&gt;replica\x1b</li><li>zone=eu-1</li>`; !strings.Contains(out.String(), want) {
		t.Fatalf("labels not shown as %s:\n%s", want, out.String())
	}
}

// A drained node is shown DRAINED, not UP, with who drained it and why
// (escaped), and counted apart from the nodes up.
func TestClustersPageShowsADrainedNodeAsDrained(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	if err := e.st.Update(ctx, func(tx store.Tx) error {
		_, err := corenodes.Drain(ctx, tx, "prod", "db-1", "<b>disk</b>\x1b[31m", actions.Actor{Name: "op"})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	b := e.browser().signIn("viewer")
	_, _, body := b.get("/ui/clusters")
	for _, want := range []string{`<span class="health health-drained">DRAINED</span>`, "drained by op: &lt;b&gt;disk&lt;/b&gt;\\x1b[31m",
		"0 of 1 nodes up, 1 drained"} {
		if !strings.Contains(body, want) {
			t.Errorf("the Clusters page lacks %q:\n%s", want, body)
		}
	}
	if strings.Contains(body, `health-up">UP`) || strings.Contains(body, "<b>disk") {
		t.Error("the drained node is shown UP, or its reason unescaped")
	}
}

// A run's child says on its page which run, stage and wave it belongs to,
// with a link to the run, and the actions list links it to its run.
func TestActionPageShowsTheRunOfAChild(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	runID := action.NewID()
	var kid *store.Record
	if err := e.st.Update(ctx, func(tx store.Tx) error {
		var err error
		kid, err = (&actions.Rules{Policy: live.New(approval.DefaultPolicy())}).CreateChild(ctx, tx, actions.Child{RunID: runID,
			Stage: "<i>canary</i>", Wave: 3, ClusterID: "prod", NodeID: "db-1", Kind: "muster.io/debug.ping",
			Requester: "op", ApprovedBy: "appr"}, actions.Core)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	b := e.browser().signIn("viewer")
	_, _, body := b.get("/ui/actions/" + kid.ID)
	want := `<a href="/ui/runs/` + runID + `" class="id" title="` + runID + `"><code>` + runID[:8] + `</code></a>`
	if !strings.Contains(body, want) || !strings.Contains(body, `data-copy="`+runID+`"`) || !strings.Contains(body, "· stage &lt;i&gt;canary&lt;/i&gt; · wave 3") {
		t.Fatalf("the child's page lacks its run %q (whole on hover and copy), stage and wave:\n%s", want, body)
	}
	own := e.create("op", `{}`)
	if _, _, body := b.get("/ui/actions/" + own.ID); strings.Contains(body, "<dt>Run</dt>") {
		t.Fatal("an action of its own shows a run")
	}
	_, _, body = b.get("/ui/actions")
	if want := `<a class="tag" href="/ui/runs/` + runID + `" title="stage &lt;i&gt;canary&lt;/i&gt;, wave 3">run ` + runID[:8] + `</a>`; !strings.Contains(body, want) {
		t.Fatalf("the actions list lacks %q:\n%s", want, body)
	}
	if strings.Count(body, `class="tag" href="/ui/runs/`) != 1 {
		t.Fatal("the actions list links an action of its own to a run")
	}
}

// Sessions live in the store: a second UI on the same store (another
// replica, or the core after a restart) knows them, and a sign-out on one
// ends the session on both.
func TestSessionsAreSharedThroughTheStore(t *testing.T) {
	t.Parallel()
	e := setup(t)
	b := e.browser().signIn("appr")
	other, err := New(Config{}, e.st, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(other.Close)
	ts2 := httptest.NewServer(other.Handler())
	t.Cleanup(ts2.Close)
	u, _ := url.Parse(e.ts.URL + "/ui/")
	var id string
	for _, c := range b.c.Jar.Cookies(u) {
		if c.Name == sessionCookie {
			id = c.Value
		}
	}
	// The cookie, sent to the other UI (cookies do not tell ports apart;
	// a fresh client makes that explicit).
	status := func() int {
		req, _ := http.NewRequest(http.MethodGet, ts2.URL+"/ui/approvals", nil)
		req.AddCookie(&http.Cookie{Name: sessionCookie, Value: id})
		resp, err := (&http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if got := status(); got != http.StatusOK {
		t.Fatalf("the other UI answered %d for the session, want 200", got)
	}
	if st, _, _ := b.post("/ui/logout", url.Values{"csrf": {b.csrf}}); st != http.StatusSeeOther {
		t.Fatalf("sign out: %d", st)
	}
	if got := status(); got != http.StatusSeeOther {
		t.Fatalf("after signing out on one UI, the other answered %d, want 303 to sign in", got)
	}
}

func TestSignOutEndsTheSessionsLiveStreams(t *testing.T) {
	t.Parallel()
	e := setup(t)
	b := e.browser().signIn("viewer")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, e.ts.URL+"/ui/stream", nil)
	resp, err := b.c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Scan() // ": stream open"
	if status, _, _ := b.post("/ui/logout", url.Values{"csrf": {b.csrf}}); status != http.StatusSeeOther {
		t.Fatalf("sign out: %d", status)
	}
	for sc.Scan() {
		if sc.Text() == "event: signed-out" {
			return
		}
	}
	t.Fatalf("the stream ended without saying the session ended: %v", sc.Err())
}

// TestClustersPageShowsRevokedNodes: a node whose newest certificate is
// revoked shows REVOKED with the reason, escaped; the others do not.
func TestClustersPageShowsRevokedNodes(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	now := time.Now().UTC()
	err := e.st.Update(ctx, func(tx store.Tx) error {
		if err := tx.InsertAgentCert(ctx, &store.AgentCert{Serial: "0a", ClusterID: "prod", NodeID: "db-1",
			NotBefore: now, NotAfter: now.Add(time.Hour), IssuedTS: now, IssuedBy: "join"}); err != nil {
			return err
		}
		_, err := tx.RevokeAgentCerts(ctx, "prod", "db-1", now, "<i>stolen\x1b", "admin")
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	b := e.browser().signIn("viewer")
	_, _, body := b.get("/ui/clusters")
	if !strings.Contains(body, "REVOKED") || !strings.Contains(body, `certificate revoked: &lt;i&gt;stolen\x1b`) {
		t.Fatalf("the Clusters page does not show db-1 revoked, escaped:\n%s", body)
	}
}

// TestSessionEndsWithItsTokensTTL: a session signed in with a token that
// has a TTL ends when the token expires, even before the session would.
func TestSessionEndsWithItsTokensTTL(t *testing.T) {
	t.Parallel()
	e := setup(t, func(c *Config) { c.SessionTTL = 12 * time.Hour })
	secret, _, err := auth.CreateTokenWith(context.Background(), e.st, "brief", []string{store.RoleViewer},
		auth.Options{TTL: time.Hour}, "admin", "")
	if err != nil {
		t.Fatal(err)
	}
	e.secrets["brief"] = secret
	b := e.browser().signIn("brief")
	if status, _, _ := b.get("/ui/events"); status != http.StatusOK {
		t.Fatalf("events: %d", status)
	}
	e.clock.add(2 * time.Hour)
	if status, loc, _ := b.get("/ui/events"); status != http.StatusSeeOther || !strings.HasPrefix(loc, "/ui/login") {
		t.Fatalf("after the token's TTL: %d to %q, want the sign-in page", status, loc)
	}
}
