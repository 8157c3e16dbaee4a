// Package ui serves the core's web UI at /ui/ (docs/architecture.md, "Web UI"):
// server-rendered pages (html/template, so everything shown is escaped) with
// their assets embedded in the binary, and a little plain JavaScript that
// refreshes a page's live region when the event stream says something changed.
//
// A person signs in with an API token; the UI then keeps a server-side
// session (a random id stored only as its hash) in an HttpOnly,
// SameSite=Strict cookie, Secure under TLS. Every state-changing form carries
// a synchronizer token bound to the session. Each route needs the same
// permission as its API counterpart, checked against the token's current
// roles on every request, and every change goes through the operations
// layer the API calls (core/ops): pages decode, call and render.
package ui

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/musterhq/muster/core/approval"
	"github.com/musterhq/muster/core/auth"
	"github.com/musterhq/muster/core/budget"
	"github.com/musterhq/muster/core/notify"
	"github.com/musterhq/muster/core/ops"
	"github.com/musterhq/muster/core/schedule"
	"github.com/musterhq/muster/core/sso"
	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/core/streams"
	"github.com/musterhq/muster/shared/live"
)

// Defaults of Config.
const (
	DefaultSessionTTL      = 12 * time.Hour
	DefaultMaxSessions     = 10000
	DefaultStreamKeepAlive = 15 * time.Second
	// DevLoginTTL is how long `muster dev`'s sign-in links work.
	DevLoginTTL = 10 * time.Minute
	// MaxStreamsPerSession caps the live-update streams of one session
	// (one per open tab); Config.Streams caps them per token, over every
	// session and the API's event streams, and in all.
	MaxStreamsPerSession = 16
	// maxForm is the largest form body accepted (formLimit).
	maxForm = 64 << 10
	// maxActionForm is the largest body of the New action form: its args
	// may be maxArgsField bytes of JSON, each of which a browser may send
	// as three (%7B for {), beside the other fields.
	maxActionForm = 3*maxArgsField + maxForm
	// maxRunForm is the largest body of the New run form: its document,
	// twice (the Start form carries the document planned), each byte of
	// which a browser may send as three.
	maxRunForm = 2*3*maxDocumentField + maxForm
)

// formLimit is the largest form body accepted on the route of path.
func formLimit(path string) int64 {
	switch path {
	case "/ui/actions/new":
		return maxActionForm
	case newRunPath:
		return maxRunForm
	}
	return maxForm
}

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// Config is what the UI needs beyond the store.
type Config struct {
	// SessionTTL is how long a session lasts after sign-in (ui.session_ttl).
	SessionTTL time.Duration
	// Policy is the approval policy, to show who may approve what, as it
	// is at each request (a reload replaces it); nil: the default.
	Policy *live.Value[approval.Policy]
	// Ops makes every change a page offers (the core shares one with the
	// API); nil builds one over the store, Policy and Budget, which nudges
	// nothing.
	Ops *ops.Ops
	// DevLogins maps one-time sign-in nonces to token names. Set only by
	// `muster dev`: each nonce signs in once, from a loopback address.
	DevLogins map[string]string
	// MaxSessions caps the sessions held at once, but admins' (an admin
	// can always sign in).
	MaxSessions int
	// MaxSessionsPerToken caps the sessions of one token: signing in once
	// more ends its oldest.
	MaxSessionsPerToken int
	// SignInBurst sign-ins at once, then one every SignInEvery, per client
	// address (every attempt but an admin's) and per token.
	SignInBurst int
	SignInEvery time.Duration
	// DevLoginsExpire is when the DevLogins links stop working; zero is
	// ten minutes after New.
	DevLoginsExpire time.Time
	// StreamKeepAlive is how often an idle live-update stream sends a comment.
	StreamKeepAlive time.Duration
	// Now returns the time (tests move it); nil is time.Now.
	Now func() time.Time
	// Streams counts the live-update streams with the API's event streams
	// (the core shares one limiter); nil counts the UI's alone, with the
	// default caps.
	Streams *streams.Limiter
	// Budget is the disruption budget of the clusters, to show the budget
	// in use, as it is at each request (nil: no cluster has one).
	Budget *live.Value[budget.Policy]
	// Calendars are the clusters' maintenance windows and freezes, shown on
	// the clusters page; nil: none.
	Calendars *live.Value[schedule.Calendars]
	// Notify returns the notification destinations in use (the
	// Notifications page, admin); a reload may change them. nil: none.
	Notify func() []notify.Destination
	// SSO signs people in through the OpenID provider (nil: single
	// sign-on is off; its routes answer 404).
	SSO *sso.Provider
}

// route is one registered route and the permission it needs ("" for a page
// open to anyone, such as sign-in).
type route struct {
	Method, Pattern string
	Perm            auth.Permission
}

// Server is the web UI. Build it with New, serve Handler under /ui/, and call
// Close when the HTTP server shuts down so that live-update streams end.
type Server struct {
	cfg      Config
	st       store.Store
	ops      *ops.Ops
	log      *slog.Logger
	mux      *http.ServeMux
	pages    map[string]*template.Template
	sessions *ops.Sessions
	signIns  *signIns
	routes   []route

	mu       sync.Mutex
	devUsed  map[string]bool // dev nonces already used
	streams  map[string]int  // open streams by session hash
	done     chan struct{}
	closed   bool
	staticFS fs.FS
}

// New builds the UI. It starts nothing.
func New(cfg Config, st store.Store, log *slog.Logger) (*Server, error) {
	if cfg.SessionTTL <= 0 {
		cfg.SessionTTL = DefaultSessionTTL
	}
	if cfg.MaxSessions <= 0 {
		cfg.MaxSessions = DefaultMaxSessions
	}
	if cfg.MaxSessionsPerToken <= 0 {
		cfg.MaxSessionsPerToken = DefaultMaxSessionsPerToken
	}
	if cfg.SignInBurst <= 0 {
		cfg.SignInBurst = DefaultSignInBurst
	}
	if cfg.SignInEvery <= 0 {
		cfg.SignInEvery = DefaultSignInEvery
	}
	if cfg.StreamKeepAlive <= 0 {
		cfg.StreamKeepAlive = DefaultStreamKeepAlive
	}
	if cfg.Policy == nil {
		cfg.Policy = live.New(approval.DefaultPolicy())
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Streams == nil {
		cfg.Streams = streams.New(0, 0)
	}
	if cfg.DevLoginsExpire.IsZero() {
		cfg.DevLoginsExpire = cfg.Now().Add(DevLoginTTL)
	}
	if cfg.Budget == nil {
		cfg.Budget = live.New(budget.Policy{})
	}
	if cfg.Ops == nil {
		cfg.Ops = ops.New(ops.Config{Store: st, Policy: cfg.Policy, Budget: cfg.Budget, Now: cfg.Now})
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	pages, err := parsePages()
	if err != nil {
		return nil, err
	}
	static, err := fs.Sub(staticFS, "static")
	if err != nil {
		return nil, err
	}
	s := &Server{
		cfg:      cfg,
		st:       st,
		ops:      cfg.Ops,
		log:      log.With("component", "ui"),
		mux:      http.NewServeMux(),
		pages:    pages,
		sessions: ops.NewSessions(st, cfg.SessionTTL, cfg.MaxSessions, cfg.MaxSessionsPerToken, cfg.Now),
		signIns:  newSignIns(cfg.SignInBurst, cfg.SignInEvery),
		devUsed:  map[string]bool{},
		streams:  map[string]int{},
		done:     make(chan struct{}),
		staticFS: static,
	}
	s.register()
	return s, nil
}

// Handler serves every /ui/ route.
func (s *Server) Handler() http.Handler { return http.HandlerFunc(s.serve) }

// Close ends every live-update stream and refuses new ones. It is idempotent.
func (s *Server) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.closed {
		s.closed = true
		close(s.done)
	}
}

func (s *Server) register() {
	s.public("GET /ui/{$}", s.home)
	s.public("GET /ui/static/{file}", s.static)
	s.public("GET /ui/login", s.loginPage)
	s.public("POST /ui/login", s.login)
	s.public("GET /ui/oidc/login", s.oidcLogin)
	s.public("GET "+sso.CallbackPath, s.oidcCallback)
	if len(s.cfg.DevLogins) > 0 {
		s.public("GET /ui/dev-login", s.devLogin)
	}
	s.add("POST /ui/logout", auth.Read, s.logout)
	s.add("GET /ui/approvals", auth.Read, s.approvals)
	s.add("GET /ui/actions", auth.Read, s.actions)
	s.add("GET /ui/actions/new", auth.Create, s.newActionPage)
	s.add("POST /ui/actions/new", auth.Create, s.createAction)
	s.add("GET /ui/actions/{id}", auth.Read, s.actionDetail)
	s.add("POST /ui/actions/{id}/cancel", auth.Cancel, s.changeAction(actionCancel))
	s.add("POST /ui/actions/{id}/retry", auth.Retry, s.changeAction(actionRetry))
	s.add("POST /ui/actions/{id}/approve", auth.Approve, s.decide(decisionApprove))
	s.add("POST /ui/actions/{id}/reject", auth.Reject, s.decide(decisionReject))
	s.add("POST /ui/actions/{id}/urgent", auth.Approve, s.decide(decisionUrgent))
	s.add("GET /ui/runs", auth.Read, s.runsList)
	s.add("GET "+newRunPath, auth.Create, s.newRunPage)
	s.add("POST "+newRunPath, auth.Create, s.newRun)
	s.add("GET /ui/runs/{id}", auth.Read, s.runDetail)
	s.add("POST /ui/runs/{id}/approve", auth.Approve, s.changeRun(runApprove))
	s.add("POST /ui/runs/{id}/reject", auth.Reject, s.changeRun(runReject))
	s.add("POST /ui/runs/{id}/pause", auth.Cancel, s.changeRun(runPause))
	s.add("POST /ui/runs/{id}/resume", auth.Continue, s.changeRun(runResume))
	s.add("POST /ui/runs/{id}/cancel", auth.Cancel, s.changeRun(runCancel))
	s.add("POST /ui/runs/{id}/promote", auth.Approve, s.changeRun(runPromote))
	s.add("POST /ui/runs/{id}/abort", auth.Continue, s.changeRun(runAbort))
	s.add("POST /ui/runs/{id}/urgent", auth.Approve, s.changeRun(runUrgent))
	s.add("POST /ui/runs/{id}/retry", auth.Create, s.changeRun(runRetry))
	s.add("GET /ui/dashboard", auth.Read, s.dashboard)
	s.add("GET /ui/playbooks", auth.Read, s.playbooks)
	s.add("GET /ui/playbooks/{name}", auth.Read, s.playbookPage)
	s.add("POST /ui/playbooks/{name}/start", auth.Create, s.startPlaybook)
	s.add("GET /ui/schedules", auth.Read, s.schedules)
	s.add("GET "+newSchedulePath, auth.Create, s.newSchedulePage)
	s.add("POST "+newSchedulePath, auth.Create, s.createSchedule)
	s.add("GET /ui/schedules/{name}", auth.Read, s.schedulePage)
	s.add("POST /ui/schedules/{name}/approve", auth.Approve, s.decideSchedule(true))
	s.add("POST /ui/schedules/{name}/reject", auth.Reject, s.decideSchedule(false))
	s.add("POST /ui/schedules/{name}/pause", auth.Cancel, s.operateSchedule(schedulePause))
	s.add("POST /ui/schedules/{name}/resume", auth.Continue, s.operateSchedule(scheduleResume))
	s.add("POST /ui/schedules/{name}/delete", auth.Cancel, s.operateSchedule(scheduleDelete))
	s.add("GET /ui/clusters", auth.Read, s.clusters)
	s.add("POST /ui/clusters/{cluster}/freeze", auth.Freeze, s.freezeCluster)
	s.add("POST /ui/freezes/{id}/lift", auth.Unfreeze, s.liftFreeze)
	s.add("POST /ui/clusters/{cluster}/windows", auth.Freeze, s.addWindow)
	s.add("POST /ui/windows/{id}/remove", auth.Freeze, s.removeWindow)
	s.add("POST /ui/clusters/{cluster}/budget", auth.Freeze, s.setBudget)
	s.add("POST /ui/clusters/{cluster}/on-alert/approve", auth.Approve, s.approveOnAlert)
	s.add("GET /ui/clusters/{cluster}/nodes/{node}", auth.Read, s.nodePage)
	s.add("POST /ui/clusters/{cluster}/nodes/{node}/drain", auth.Drain, s.drainNode(true))
	s.add("POST /ui/clusters/{cluster}/nodes/{node}/undrain", auth.Drain, s.drainNode(false))
	s.add("GET /ui/events", auth.Read, s.events)
	s.add("GET /ui/notifications", auth.Notify, s.notifications)
	s.add("GET /ui/stream", auth.Read, s.stream)
	s.mux.HandleFunc("/ui/", func(w http.ResponseWriter, r *http.Request) {
		s.renderError(w, r, nil, http.StatusNotFound, "There is no such page.")
	})
}

// handlerFunc serves a route for a signed-in person.
type handlerFunc func(w http.ResponseWriter, r *http.Request, v *visitor)

// visitor is the signed-in person behind a request: the session and the
// token as stored now (so a role change or a revocation applies at once).
type visitor struct {
	sess *store.Session
	// tok is the session's token, or for a person's session (single
	// sign-on) a token of their name and roles, never stored.
	tok *store.Token
	// who is the caller as ops.Identify resolved it at this request.
	who ops.Caller
	// vis is the set of clusters who may read, computed once per request
	// at its first use (visible).
	vis *ops.Visible
	// since is the newest event when a page's request began (-1: not
	// read): the page's live stream starts after it.
	since int64
}

// latestSeq is the newest event's number, or -1 when it cannot be read
// (the page's stream then starts from its own start, as before).
func (s *Server) latestSeq(ctx context.Context) int64 {
	var n int64 = -1
	if err := s.st.Read(ctx, func(rd store.Reader) error {
		var err error
		n, err = rd.LatestSeq(ctx)
		return err
	}); err != nil {
		s.log.Warn("read the newest event for a page", "err", err)
		return -1
	}
	return n
}

// can reports whether the visitor holds p on some cluster (a route's
// check); canOn says whether on the cluster of what a page shows.
func (v *visitor) can(p auth.Permission) bool { return v != nil && v.who.Can(p) }

func (v *visitor) canOn(p auth.Permission, clusterID string) bool {
	return v != nil && ops.AuthorizeOn(v.who, p, clusterID) == nil
}

// visible is the set of clusters the visitor may read (ops.Visibility),
// computed with rd at its first use in the request and kept for the rest
// of it: every list, count, picker and single object of a page keeps
// what it holds, objects of other clusters answering 404 (the API's
// rule).
func (v *visitor) visible(ctx context.Context, rd store.Reader) (ops.Visible, error) {
	if v.vis != nil {
		return *v.vis, nil
	}
	vis, err := ops.Visibility(ctx, rd, v.who)
	if err != nil {
		return ops.Visible{}, err
	}
	v.vis = &vis
	return vis, nil
}

// held names the visitor's roles for a page that says why a button is not
// there: a token's roles, and each grant's role on its scope.
func (v *visitor) held() string {
	out := slices.Clone(v.who.Roles)
	for _, g := range v.who.Grants {
		out = append(out, g.Role+" on "+g.Scope.String())
	}
	if len(out) == 0 {
		return "none"
	}
	return strings.Join(out, ", ")
}

// visibleClusters keeps the clusters of cs that vis holds (a form's
// cluster picker, the Clusters page).
func visibleClusters(vis ops.Visible, cs []store.Cluster) []store.Cluster {
	return slices.DeleteFunc(cs, func(c store.Cluster) bool { return !vis.Has(c.ID) })
}

// caller is the signed-in person as the operations know them; r gives the
// peer's address (nil: none, for a decision that only reads).
func (v *visitor) caller(r *http.Request) ops.Caller {
	c := v.who
	c.Addr = ""
	if r != nil {
		c.Addr = clientAddr(r)
	}
	return c
}

func (s *Server) public(pattern string, h http.HandlerFunc) {
	method, path, _ := strings.Cut(pattern, " ")
	s.routes = append(s.routes, route{Method: method, Pattern: path})
	s.mux.HandleFunc(pattern, h)
}

// add registers a route that needs a session whose token grants p; a POST
// also needs the session's CSRF token.
func (s *Server) add(pattern string, p auth.Permission, h handlerFunc) {
	method, path, _ := strings.Cut(pattern, " ")
	s.routes = append(s.routes, route{Method: method, Pattern: path, Perm: p})
	s.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		v, ok := s.signedIn(w, r, path == "/ui/stream")
		if !ok {
			return
		}
		if r.Method == http.MethodPost {
			if err := s.checkPost(w, r, v.sess, formLimit(path)); err != nil {
				s.renderError(w, r, v, http.StatusForbidden, err.Error())
				return
			}
		}
		// Holding p on some cluster opens the route (on "*" for what is
		// global: tokens, notifications); each page then keeps what the
		// visitor may read (visitor.visible) and each change checks p on
		// its cluster in core/ops (docs/web-ui.md, "Access").
		if err := ops.Authorize(v.caller(r), p); err != nil {
			s.renderError(w, r, v, http.StatusForbidden, err.Error()+".")
			return
		}
		// A whole page notes the newest event before it reads anything:
		// its live stream starts after it (Server.stream, ?since=), so
		// that a change committed between the render and the stream's
		// start still refreshes it.
		v.since = -1
		if r.Method == http.MethodGet && path != "/ui/stream" && r.URL.Query().Get("part") == "" {
			v.since = s.latestSeq(r.Context())
		}
		h(w, r, v)
	})
}

// serve sets the headers every answer carries, then routes.
func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "+
		"connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "same-origin")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
	s.mux.ServeHTTP(w, r)
}

// errCSRF is a state-changing request that did not prove it came from a page
// of this UI.
var errCSRF = errors.New("this form is stale or did not come from this site (missing or wrong CSRF token); reload the page and try again")

// checkPost accepts a form POST only from a page of this UI: the Origin
// header, when sent, names this host, and the form carries the session's
// CSRF token. The body is parsed, up to limit bytes (formLimit).
func (s *Server) checkPost(w http.ResponseWriter, r *http.Request, sess *store.Session, limit int64) error {
	if !sameOrigin(r) {
		return errCSRF
	}
	r.Body = http.MaxBytesReader(w, r.Body, limit)
	if err := r.ParseForm(); err != nil {
		return fmt.Errorf("unreadable form: %w", err)
	}
	if !checkCSRF(sess, r.PostForm.Get("csrf")) {
		return errCSRF
	}
	return nil
}

// sameOrigin reports whether the request's Origin, when present, is this
// host (browsers send it on every POST).
func sameOrigin(r *http.Request) bool {
	o := r.Header.Get("Origin")
	if o == "" {
		return true
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return o == scheme+"://"+r.Host
}

func (s *Server) now() time.Time { return s.cfg.Now().UTC() }

func (s *Server) home(w http.ResponseWriter, r *http.Request) {
	http.Redirect(w, r, "/ui/dashboard", http.StatusSeeOther)
}

func (s *Server) static(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("file")
	b, err := fs.ReadFile(s.staticFS, name)
	if err != nil {
		http.NotFound(w, r)
		return
	}
	switch {
	case strings.HasSuffix(name, ".css"):
		w.Header().Set("Content-Type", "text/css; charset=utf-8")
	case strings.HasSuffix(name, ".js"):
		w.Header().Set("Content-Type", "text/javascript; charset=utf-8")
	case strings.HasSuffix(name, ".svg"):
		w.Header().Set("Content-Type", "image/svg+xml")
	}
	w.Header().Set("Cache-Control", "no-cache")
	_, _ = w.Write(b)
}
