// Package api serves the agent's local HTTP API (docs/architecture.md, "The
// agent"): queue an action, list what changed since a cursor, show one action,
// cancel, and the health and metrics probes. Every answer that reports a change
// is sent after the change is committed. The same handlers answer the core over
// TCP and the node's users over a Unix socket, where the caller is named by its
// uid (docs/architecture.md, "Who may call an agent"; ConnContext).
package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/labstack/echo/v5"
	"github.com/labstack/echo/v5/middleware"

	"github.com/musterhq/muster/agent/exposition"
	"github.com/musterhq/muster/agent/handlers"
	"github.com/musterhq/muster/agent/queue"
	"github.com/musterhq/muster/shared/action"
	"github.com/musterhq/muster/shared/apiserver"
	"github.com/musterhq/muster/shared/jsonbody"
	"github.com/musterhq/muster/shared/labels"
	"github.com/musterhq/muster/shared/tlsutil"
	"github.com/musterhq/muster/shared/wire"
)

// Queue is what the API needs of the action queue.
type Queue interface {
	Enqueue(ctx context.Context, a *action.Action, actor string) (*action.Action, bool, error)
	Get(ctx context.Context, id string) (*action.Action, error)
	Changes(ctx context.Context, since int64, limit int) ([]action.Action, int64, bool, error)
	// Changed returns a channel closed by the next committed change.
	Changed() <-chan struct{}
	Ack(ctx context.Context, cursor int64) error
	Cancel(ctx context.Context, id, actor string) (*action.Action, bool, error)
	Counts(ctx context.Context) (map[action.State]int, error)
	Tombstoned(ctx context.Context, id string) (bool, error)
	StoreID() string
	// ChangeCount moves after every committed change (GET /api/v1/changes).
	ChangeCount() uint64
}

var _ Queue = (*queue.Queue)(nil)

// Runner is what the API needs of the runner.
//
//go:generate go tool mockgen -destination runner_mock_test.go -package api . Runner
type Runner interface {
	Wake()
	Cancel(id string)
}

// Kinds is what the API needs of the handler registry.
type Kinds interface {
	Get(kind string) (handlers.Handler, bool)
	Kinds() []string
	Timeout(kind string) time.Duration
	// Schemas are the args_schema of the kinds that declare one.
	Schemas() map[string]json.RawMessage
}

var _ Kinds = (*handlers.Registry)(nil)

// Limits of the API.
const (
	MaxBody      = 1 << 20
	DefaultLimit = 500
	MaxLimit     = 5000
	// MaxWait bounds the wait of a blocking GET /api/v1/actions: a longer
	// wait is cut to it (and to Config.MaxWait).
	MaxWait = 30 * time.Second
	// MaxWaitsPerUser caps the blocking GETs one user holds over the Unix
	// socket at once, and MaxSocketWaits those of every user but root and
	// the agent's own (who count only against their own cap): a wait over
	// a cap is answered at once, as without wait (no wait_ms), so that
	// one member of the socket's group cannot take the socket from root
	// or the others. The core's over TCP are not counted.
	MaxWaitsPerUser = 8
	MaxSocketWaits  = 64
)

// Config configures the API.
type Config struct {
	NodeID, ClusterID, Version string
	// Labels are the node's labels, shown by info.
	Labels map[string]string
	// DefaultTimeout applies to actions without timeout_s whose kind has none.
	DefaultTimeout time.Duration
	Queue          Queue
	Runner         Runner
	Kinds          Kinds
	// Metrics, when set, is served at /metrics and receives the API's own
	// metrics.
	Metrics *exposition.Registry
	Log     *slog.Logger
	// Caller, when set, is the only identity allowed to call the API over
	// TCP: every such request must come over TLS with a verified client
	// certificate naming it (403 otherwise). The agent sets it to the core's
	// identity when api.tls.client_ca_file is configured. Requests over the
	// Unix socket (see ConnContext) are the node's users': the socket's file
	// mode let them in, and they are recorded by uid.
	Caller *tlsutil.Identity
	// Hosts are the names, beside IP literals and localhost, that a request
	// over TCP may carry in its Host header (api.hosts, the host of api.addr
	// and of gossip.advertise_api, the machine's name). Any other is refused:
	// a web page whose name resolves to this agent (DNS rebinding) sends its
	// own.
	Hosts []string
	// MaxWait, when positive and below MaxWait, bounds the wait of a
	// blocking GET /api/v1/actions (the agent keeps it below the server's
	// write timeout: WaitBound).
	MaxWait time.Duration
	// Secrets, when set, lists the names (never the values) of the
	// secrets the agent can resolve, announced in info.
	Secrets func() []string
	// Renewals, when set, counts the agent's certificate renewals since it
	// started: each moves the change counter (GET /api/v1/changes).
	Renewals func() int64
}

// WaitBound is the longest wait a server whose answers must be written
// within writeTimeout may hold a GET /api/v1/actions for: MaxWait, or three
// quarters of writeTimeout when that is shorter.
func WaitBound(writeTimeout time.Duration) time.Duration {
	return min(MaxWait, writeTimeout-writeTimeout/4)
}

// Server is the agent API.
type Server struct {
	cfg   Config
	echo  *echo.Echo
	hosts map[string]bool
	// ownUID is the agent's own user: like root, it may cancel any action
	// over the socket.
	ownUID int
	// maxWait bounds the wait of a blocking GET actions; ending is closed
	// by EndWaits.
	maxWait time.Duration
	endOnce sync.Once
	ending  chan struct{}
	// waits counts the blocking GETs held over the socket.
	waits waitSlots
	// epoch is new at every New: the change counter's (GET
	// /api/v1/changes); identity counts IdentityChanged calls and the
	// changes of the secret names (secretsMoved).
	epoch    string
	identity atomic.Uint64
	// secretsMu guards secrets: the secret names the counter last saw.
	secretsMu sync.Mutex
	secrets   []string
	secretsOK bool
}

// waitSlots counts the blocking GETs held over the socket, per uid and in
// all (MaxWaitsPerUser, MaxSocketWaits).
type waitSlots struct {
	mu    sync.Mutex
	byUID map[int]int
	// shared counts the waits of every uid but root's and the agent's own.
	shared int
}

// take holds a slot for a wait of uid; ok is false when a cap is reached.
// own is the agent's uid.
func (w *waitSlots) take(uid, own int) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	exempt := uid == 0 || uid == own
	if w.byUID[uid] >= MaxWaitsPerUser || !exempt && w.shared >= MaxSocketWaits {
		return false
	}
	if w.byUID == nil {
		w.byUID = map[int]int{}
	}
	w.byUID[uid]++
	if !exempt {
		w.shared++
	}
	return true
}

// release gives back a slot take held.
func (w *waitSlots) release(uid, own int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.byUID[uid]--; w.byUID[uid] <= 0 {
		delete(w.byUID, uid)
	}
	if uid != 0 && uid != own {
		w.shared--
	}
}

// New builds the API; serving it is the caller's job (Handler).
func New(cfg Config) *Server {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	s := &Server{cfg: cfg, echo: echo.New(), hosts: map[string]bool{"localhost": true}, ownUID: os.Getuid(),
		maxWait: MaxWait, ending: make(chan struct{}), epoch: action.NewID()}
	if cfg.MaxWait > 0 && cfg.MaxWait < MaxWait {
		s.maxWait = cfg.MaxWait
	}
	for _, h := range cfg.Hosts {
		s.hosts[normalHost(h)] = true
	}
	s.echo.Logger = cfg.Log
	s.echo.HTTPErrorHandler = s.handleError
	s.echo.Use(newMetrics(cfg.Metrics).middleware)
	s.echo.Use(middleware.Recover())
	s.echo.Use(s.checkCaller)
	s.echo.Use(s.refuseBrowsers)
	s.echo.Use(requireJSON)
	s.echo.GET("/api/v1/health", s.health)
	s.echo.GET("/api/v1/info", s.info)
	s.echo.GET("/api/v1/changes", s.changeCounter)
	s.echo.GET("/api/v1/actions", s.changes)
	s.echo.POST("/api/v1/actions", s.push)
	s.echo.POST("/api/v1/actions/ack", s.ack)
	s.echo.GET("/api/v1/actions/:id", s.show)
	s.echo.POST("/api/v1/actions/:id/cancel", s.cancel)
	s.echo.GET("/api/v1/openapi.json", apiserver.ServeOpenAPI(OpenAPIDocument))
	if cfg.Metrics != nil {
		s.echo.GET("/metrics", echo.WrapHandler(cfg.Metrics))
	}
	return s
}

// Handler returns the HTTP handler.
func (s *Server) Handler() http.Handler { return s.echo }

// EndWaits answers every blocking GET /api/v1/actions now, and every later
// one at once, so that a server shutting down is not held by them
// (http.Server.RegisterOnShutdown). It is idempotent.
func (s *Server) EndWaits() { s.endOnce.Do(func() { close(s.ending) }) }

// checkCaller lets in a request over the Unix socket whose caller the
// kernel named, and over TCP, when Config.Caller is set, only a verified
// client certificate naming that identity (403 otherwise): a person's or
// another agent's certificate, even one signed by the same CA, may not drive
// this agent.
func (s *Server) checkCaller(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c *echo.Context) error {
		if _, onSocket, err := peerOf(c.Request().Context()); onSocket {
			if err != nil {
				return apiErr(http.StatusForbidden, wire.CodeForbidden, err.Error())
			}
			return next(c)
		}
		if s.cfg.Caller == nil {
			return next(c)
		}
		want := *s.cfg.Caller
		got, err := tlsutil.PeerIdentity(c.Request().TLS)
		if err != nil {
			return apiErr(http.StatusForbidden, wire.CodeForbidden, fmt.Sprintf("this agent only answers %s: %v", want, err))
		}
		if got != want {
			s.cfg.Log.Warn("agent api call refused: wrong client identity", "identity", got.String(),
				"client", c.Request().RemoteAddr, "path", c.Request().URL.Path)
			return apiErr(http.StatusForbidden, wire.CodeForbidden,
				fmt.Sprintf("this agent only answers %s; the client certificate is %s", want, got))
		}
		return next(c)
	}
}

// refuseBrowsers refuses, over TCP, what only a web page sends: an Origin
// header, and, unless the core's certificate is required, a Host that is
// neither an IP literal nor a name this agent was given (docs/architecture.md,
// "Who may call an agent"). The node's users on the socket are not browsers.
func (s *Server) refuseBrowsers(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c *echo.Context) error {
		r := c.Request()
		if _, onSocket, _ := peerOf(r.Context()); onSocket {
			return next(c)
		}
		if o := r.Header.Get("Origin"); o != "" {
			return apiErr(http.StatusForbidden, wire.CodeForbidden,
				fmt.Sprintf("a request from a web page (Origin %.100q) is refused: this API is for the core and the node's users", o))
		}
		// With the core's certificate required (checkCaller), a page cannot
		// get a request through, and the core may name the agent by any DNS
		// name its certificate allows: the Host is checked without it.
		if s.cfg.Caller == nil && !s.hostAllowed(r.Host) {
			return apiErr(http.StatusForbidden, wire.CodeForbidden,
				fmt.Sprintf("Host %.100q is not an IP address or a name of this agent (add it to api.hosts)", r.Host))
		}
		return next(c)
	}
}

// requireJSON refuses (415) a write not declared JSON. Over TCP every write
// declares it, a body-less one included (apiserver.RequireJSONWrites): with
// the Origin and Host checks, that is what keeps a web page from driving an
// api.insecure agent. No browser reaches the socket, so there only a body
// must be declared JSON (apiserver.RequireJSON), and a person on the node
// cancels with a body-less POST.
func requireJSON(next echo.HandlerFunc) echo.HandlerFunc {
	tcp, socket := apiserver.RequireJSONWrites(next), apiserver.RequireJSON(next)
	return func(c *echo.Context) error {
		if _, onSocket, _ := peerOf(c.Request().Context()); onSocket {
			return socket(c)
		}
		return tcp(c)
	}
}

// hostAllowed reports whether a Host header names this agent: an IP
// literal, localhost or one of its configured names, with any port.
func (s *Server) hostAllowed(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if host == "" {
		return false
	}
	if net.ParseIP(host) != nil {
		return true
	}
	return s.hosts[normalHost(host)]
}

// normalHost is a host name as compared: lower case, no trailing dot.
func normalHost(h string) string { return strings.ToLower(strings.TrimSuffix(h, ".")) }

func (s *Server) health(c *echo.Context) error {
	return c.JSON(http.StatusOK, wire.Health{Status: "ok"})
}

// IdentityChanged moves the change counter: something info tells other
// than the queue changed (a renewed certificate, new secrets), so the core
// reads the node again at its next pass.
func (s *Server) IdentityChanged() { s.identity.Add(1) }

// counter is the change counter as of now (wire.ChangeCounter): the
// queue's changes and the identity's, under the epoch of this start.
func (s *Server) counter() *wire.ChangeCounter {
	s.secretsMoved()
	n := s.cfg.Queue.ChangeCount() + s.identity.Load()
	if s.cfg.Renewals != nil {
		n += uint64(max(s.cfg.Renewals(), 0))
	}
	return &wire.ChangeCounter{Epoch: s.epoch, Counter: n}
}

// secretsMoved moves the identity part of the counter when the names of
// the secrets the agent can resolve (read live from its secrets directory,
// and told in info) differ from those it last saw.
func (s *Server) secretsMoved() {
	if s.cfg.Secrets == nil {
		return
	}
	names := slices.Clone(s.secretNames())
	slices.Sort(names)
	s.secretsMu.Lock()
	defer s.secretsMu.Unlock()
	if s.secretsOK && !slices.Equal(names, s.secrets) {
		s.identity.Add(1)
	}
	s.secrets, s.secretsOK = names, true
}

// changeCounter answers GET /api/v1/changes: one small answer that tells
// the core whether anything changed since it last looked (DESIGN §27).
func (s *Server) changeCounter(c *echo.Context) error {
	return c.JSON(http.StatusOK, s.counter())
}

func (s *Server) info(c *echo.Context) error {
	// Read first: a change committed while info is made moves it past
	// what the core stores from this answer.
	changes := s.counter()
	counts, err := s.cfg.Queue.Counts(c.Request().Context())
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, wire.AgentInfo{
		NodeID: s.cfg.NodeID, ClusterID: s.cfg.ClusterID, Version: s.cfg.Version,
		StoreID: s.cfg.Queue.StoreID(), Kinds: s.cfg.Kinds.Kinds(), Queue: counts,
		Labels: labels.Merge(nil, s.cfg.Labels), ArgsSchemas: s.cfg.Kinds.Schemas(),
		PushFields: append(wire.RunPlaceFields(), wire.TraceFields()...),
		Secrets:    s.secretNames(),
		Changes:    changes,
	})
}

// secretNames lists the names of the secrets the agent can resolve.
func (s *Server) secretNames() []string {
	if s.cfg.Secrets == nil {
		return nil
	}
	if names := s.cfg.Secrets(); len(names) > 0 {
		return names
	}
	return nil
}

// changesQuery is the query of GET /api/v1/actions.
type changesQuery struct {
	since int64
	limit int
	// wait: hold the request up to this long while nothing changed after
	// since (0: answer at once).
	wait time.Duration
}

// parseChangesQuery decodes and checks the query of GET /api/v1/actions; an
// error maps to a 400. A wait longer than maxWait is cut to it.
func parseChangesQuery(v url.Values, maxWait time.Duration) (changesQuery, error) {
	q := changesQuery{limit: DefaultLimit}
	bad := func(msg string) error { return apiErr(http.StatusBadRequest, wire.CodeBadRequest, msg) }
	if s := v.Get("since"); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n < 0 {
			return changesQuery{}, bad("since must be a non-negative integer cursor")
		}
		q.since = n
	}
	if s := v.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > MaxLimit {
			return changesQuery{}, bad(fmt.Sprintf("limit must be between 1 and %d", MaxLimit))
		}
		q.limit = n
	}
	// A GET changes nothing: acknowledging is POST /api/v1/actions/ack.
	// ack=1, which cores of the previous release send, is accepted and
	// ignored for one release, so that they keep pulling while the agents are
	// upgraded first (finished records then wait for retention_max).
	switch v.Get("ack") {
	case "", "0", "1":
	default:
		return changesQuery{}, bad("ack must be 0 or 1")
	}
	if s := v.Get("wait"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil || d < 0 || (s[0] != '.' && (s[0] < '0' || s[0] > '9')) {
			return changesQuery{}, bad(fmt.Sprintf("wait must be a non-negative duration such as 20s (at most %s is held)", maxWait))
		}
		q.wait = min(d, maxWait)
	}
	return q, nil
}

// changes lists the actions changed after a cursor. With wait, when none
// changed, it holds the request until one does (Queue.Changed, taken before
// each read so that no commit between the read and the wait is missed),
// the wait ends, the caller leaves or the server shuts down (EndWaits), and
// then answers as without it: an empty page when nothing changed
// (docs/architecture.md, "The agent").
func (s *Server) changes(c *echo.Context) error {
	ctx := c.Request().Context()
	q, err := parseChangesQuery(c.QueryParams(), s.maxWait)
	if err != nil {
		return err
	}
	if p, onSocket, _ := peerOf(ctx); onSocket && q.wait > 0 {
		if !s.waits.take(p.UID, s.ownUID) {
			q.wait = 0 // over a cap: answered at once, without wait_ms
		} else {
			defer s.waits.release(p.UID, s.ownUID)
		}
	}
	var timeout <-chan time.Time
	if q.wait > 0 {
		t := time.NewTimer(q.wait)
		defer t.Stop()
		timeout = t.C
	}
	for {
		var changed <-chan struct{}
		if timeout != nil {
			changed = s.cfg.Queue.Changed()
		}
		acts, next, more, err := s.cfg.Queue.Changes(ctx, q.since, q.limit)
		if err != nil {
			return err
		}
		page := wire.ChangesPage{Actions: acts, NextCursor: next, More: more, WaitMS: q.wait.Milliseconds()}
		if len(acts) > 0 || timeout == nil {
			return c.JSON(http.StatusOK, page)
		}
		select {
		case <-changed:
			continue
		case <-timeout:
		case <-ctx.Done():
		case <-s.ending:
		}
		return c.JSON(http.StatusOK, page)
	}
}

// ack records that the caller (the core) has durably stored every change up
// to the cursor: only acknowledged finished records are purged before
// retention_max.
func (s *Server) ack(c *echo.Context) error {
	body, err := jsonbody.Read(c.Request().Body, MaxBody)
	if err != nil {
		return err
	}
	var req wire.AckRequest
	if err := jsonbody.Decode(body, &req); err != nil {
		return err
	}
	if req.Cursor < 0 {
		return apiErr(http.StatusBadRequest, wire.CodeBadRequest, "cursor must be a non-negative integer")
	}
	if err := s.cfg.Queue.Ack(c.Request().Context(), req.Cursor); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

func (s *Server) push(c *echo.Context) error {
	body, err := jsonbody.Read(c.Request().Body, MaxBody)
	if err != nil {
		return err
	}
	a, err := DecodePush(body, s.cfg.NodeID, s.cfg.ClusterID)
	if err != nil {
		return err
	}
	if p, onSocket, _ := peerOf(c.Request().Context()); onSocket {
		// A person on the node: who they are is the kernel's word, not the
		// body's. The core, and nobody else, names approvers and its own
		// actions, so what a body says of those is dropped, and so is a
		// creation time that would put the action ahead of the queue.
		a.Origin, a.Requester, a.ApprovedBy = action.OriginAgent, p.User, ""
		a.CreatedTS = time.Time{}
		a.RunID, a.Stage, a.Step, a.Wave, a.Attempt = "", "", "", 0, 0 // only the core makes a run's children
	}
	if err := s.checkKind(c.Request().Context(), a); err != nil {
		return err
	}
	if a.TimeoutS == 0 {
		d := s.cfg.Kinds.Timeout(a.Kind)
		if d <= 0 {
			d = s.cfg.DefaultTimeout
		}
		a.TimeoutS = max(1, int(d/time.Second))
	}
	actor := a.Requester
	if actor == "" {
		actor = "api"
	}
	rec, created, err := s.cfg.Queue.Enqueue(c.Request().Context(), a, actor)
	if err != nil {
		return err
	}
	if !created {
		return c.JSON(http.StatusOK, rec)
	}
	s.cfg.Runner.Wake()
	return c.JSON(http.StatusCreated, rec)
}

// checkKind refuses (422) a kind this agent does not know or args it
// refuses, unless the id is already known: a repeat of an accepted id is
// answered from the queue (200, 409 or 410) even after the kind's
// configuration changed, so the core never takes a done action for refused.
func (s *Server) checkKind(ctx context.Context, a *action.Action) error {
	h, ok := s.cfg.Kinds.Get(a.Kind)
	var err error
	if !ok {
		err = apiErr(http.StatusUnprocessableEntity, wire.CodeUnprocessable, fmt.Sprintf("unknown kind %q on this agent", a.Kind))
	} else if verr := h.Validate(a.Args); verr != nil {
		err = apiErr(http.StatusUnprocessableEntity, wire.CodeUnprocessable, verr.Error())
	}
	if err == nil {
		return nil
	}
	if _, gerr := s.cfg.Queue.Get(ctx, a.ID); gerr == nil {
		return nil
	}
	if gone, _ := s.cfg.Queue.Tombstoned(ctx, a.ID); gone {
		return nil
	}
	return err
}

// DecodePush decodes and checks the body of POST /api/v1/actions. It returns
// the action to queue (with a new id when none was given), or an error that
// maps to a 4xx. node and cluster are the agent's own ids.
func DecodePush(body []byte, node, cluster string) (*action.Action, error) {
	var req wire.PushRequest
	if err := jsonbody.Decode(body, &req); err != nil {
		return nil, err
	}
	bad := func(format string, args ...any) error {
		return apiErr(http.StatusBadRequest, wire.CodeBadRequest, fmt.Sprintf(format, args...))
	}
	if req.ID == "" {
		req.ID = action.NewID()
	} else if !action.ValidID(req.ID) {
		return nil, bad("id %q is not a UUID in canonical form", req.ID)
	}
	if req.Kind == "" {
		return nil, bad("kind is required")
	}
	if !action.ValidKind(req.Kind) {
		return nil, bad("kind %q is not of the form domain/name", req.Kind)
	}
	args, err := action.NormalizeArgs(req.Args)
	if err != nil {
		return nil, bad("%v", err)
	}
	if err := action.CheckTimeoutS(req.TimeoutS); err != nil {
		return nil, bad("%v", err)
	}
	switch req.Origin {
	case "":
		req.Origin = action.OriginAgent
	case action.OriginAgent, action.OriginCore:
	default:
		return nil, bad("origin must be %q or %q", action.OriginCore, action.OriginAgent)
	}
	if req.NodeID != "" && req.NodeID != node {
		return nil, apiErr(http.StatusUnprocessableEntity, wire.CodeUnprocessable,
			fmt.Sprintf("this agent is node %q, not %q", node, req.NodeID))
	}
	if req.ClusterID != "" && req.ClusterID != cluster {
		return nil, apiErr(http.StatusUnprocessableEntity, wire.CodeUnprocessable,
			fmt.Sprintf("this agent is in cluster %q, not %q", cluster, req.ClusterID))
	}
	a := &action.Action{
		ID: req.ID, ClusterID: cluster, NodeID: node, Kind: req.Kind, Args: args,
		Origin: req.Origin, Requester: req.Requester, ApprovedBy: req.ApprovedBy, TimeoutS: req.TimeoutS,
		RunID: req.RunID, Stage: req.Stage, Step: req.Step, Wave: req.Wave, Attempt: req.Attempt,
	}
	if err := action.CheckRunPlace(a); err != nil {
		return nil, bad("%v", err)
	}
	if req.Traceparent != "" {
		if !action.ValidTraceparent(req.Traceparent) {
			return nil, bad("traceparent %.100q is not a W3C traceparent (00-<trace id>-<parent id>-<flags>)", req.Traceparent)
		}
		a.Traceparent = req.Traceparent
	}
	if req.CreatedTS != nil {
		a.CreatedTS = action.UTC(*req.CreatedTS)
	}
	return a, nil
}

func (s *Server) show(c *echo.Context) error {
	id := c.Param("id")
	a, err := s.cfg.Queue.Get(c.Request().Context(), id)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, a)
}

func (s *Server) cancel(c *echo.Context) error {
	id := c.Param("id")
	actor := "api"
	if p, onSocket, _ := peerOf(c.Request().Context()); onSocket {
		actor = p.User
		if err := s.mayCancel(c.Request().Context(), p, id); err != nil {
			return err
		}
	}
	a, running, err := s.cfg.Queue.Cancel(c.Request().Context(), id, actor)
	if err != nil {
		if errors.Is(err, queue.ErrFinal) && a != nil {
			return &apiError{status: http.StatusConflict, code: wire.CodeConflict, msg: err.Error(), state: a.State}
		}
		return err
	}
	if running {
		s.cfg.Runner.Cancel(id)
	}
	return c.JSON(http.StatusAccepted, a)
}

// mayCancel lets a user on the socket cancel only an action it queued
// itself there (origin agent, requester its user); root and the agent's own
// user may cancel any (docs/architecture.md, "Who may call an agent"). An id
// the queue does not hold is left to Cancel to answer.
func (s *Server) mayCancel(ctx context.Context, p Peer, id string) error {
	if p.UID == 0 || p.UID == s.ownUID {
		return nil
	}
	a, err := s.cfg.Queue.Get(ctx, id)
	if err != nil {
		return nil
	}
	if a.Origin == action.OriginAgent && a.Requester == p.User {
		return nil
	}
	by := "the core"
	if a.Origin == action.OriginAgent {
		by = a.Requester
	}
	return apiErr(http.StatusForbidden, wire.CodeForbidden,
		fmt.Sprintf("user %s may cancel only the actions it queued on this node; %s was queued by %s (root may cancel it)", p.User, id, by))
}

// apiError is an error with its answer.
type apiError struct {
	status int
	code   string
	msg    string
	state  action.State
	record *action.Action
}

func (e *apiError) Error() string { return e.msg }

// StatusCode and ErrorCode are the status and envelope code the API answers
// e with: what another server of the agent API (bench/agentsim) answers
// for DecodePush's errors.
func (e *apiError) StatusCode() int   { return e.status }
func (e *apiError) ErrorCode() string { return e.code }

func apiErr(status int, code, msg string) error {
	return &apiError{status: status, code: code, msg: msg}
}

// handleError is the API's one error handler: it maps errors to a status and
// the JSON envelope.
func (s *Server) handleError(c *echo.Context, err error) {
	if r, _ := echo.UnwrapResponse(c.Response()); r != nil && r.Committed {
		return
	}
	e := classify(err)
	if e.status == http.StatusInternalServerError {
		s.cfg.Log.Error("agent api request failed", "method", c.Request().Method, "path", c.Request().URL.Path, "err", err)
	}
	body := wire.ErrorBody{Error: wire.ErrorDetail{Code: e.code, Message: e.msg, State: string(e.state), Record: e.record}}
	if werr := c.JSON(e.status, body); werr != nil {
		s.cfg.Log.Debug("write error answer", "err", werr)
	}
}

func classify(err error) *apiError {
	var ae *apiError
	if errors.As(err, &ae) {
		return ae
	}
	var ce *queue.ConflictError
	switch {
	case errors.As(err, &ce):
		return &apiError{status: http.StatusConflict, code: wire.CodeConflict,
			msg: "this id is already queued with another kind or args", record: ce.Existing}
	case errors.Is(err, queue.ErrGone):
		return &apiError{status: http.StatusGone, code: wire.CodeGone, msg: err.Error()}
	case errors.Is(err, queue.ErrNotFound):
		return &apiError{status: http.StatusNotFound, code: wire.CodeNotFound, msg: err.Error()}
	case errors.Is(err, queue.ErrFinal):
		return &apiError{status: http.StatusConflict, code: wire.CodeConflict, msg: err.Error()}
	case errors.Is(err, jsonbody.ErrTooLarge):
		return &apiError{status: http.StatusRequestEntityTooLarge, code: wire.CodeTooLarge, msg: err.Error()}
	case errors.Is(err, jsonbody.ErrInvalid):
		return &apiError{status: http.StatusBadRequest, code: wire.CodeBadRequest, msg: err.Error()}
	case errors.Is(err, apiserver.ErrUnsupportedMediaType):
		return &apiError{status: http.StatusUnsupportedMediaType, code: wire.CodeUnsupportedMediaType, msg: err.Error()}
	}
	switch code := echo.StatusCode(err); code {
	case http.StatusNotFound:
		return &apiError{status: code, code: wire.CodeNotFound, msg: "no such route"}
	case http.StatusMethodNotAllowed:
		return &apiError{status: code, code: wire.CodeBadRequest, msg: "method not allowed"}
	}
	return &apiError{status: http.StatusInternalServerError, code: wire.CodeInternal, msg: "internal error"}
}
