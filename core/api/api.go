// Package api serves the core's REST API (docs/architecture.md, "The core"):
// clusters, nodes, actions and their approval, the event log and its live
// stream, and API tokens. Every route but /health, /metrics and
// /api/v1/openapi.json (the API's contract, openapi.yaml) needs a bearer
// token whose roles grant the route's permission (see core/auth).
//
// Handlers decode, call the operations layer (core/ops: one function per
// user verb, which authorizes, changes the store in one transaction and
// nudges) and encode; they read the store for what they show and never
// write it.
package api

import (
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/labstack/echo/v5"
	"github.com/labstack/echo/v5/middleware"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/musterhq/muster/core/approval"
	"github.com/musterhq/muster/core/auth"
	"github.com/musterhq/muster/core/budget"
	"github.com/musterhq/muster/core/enroll"
	"github.com/musterhq/muster/core/ops"
	"github.com/musterhq/muster/core/schedule"
	"github.com/musterhq/muster/core/sso"
	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/core/streams"
	"github.com/musterhq/muster/shared/apiserver"
	"github.com/musterhq/muster/shared/live"
)

// Limits of the API.
const (
	// MaxBody is the largest request body accepted (413 beyond).
	MaxBody = 1 << 20
	// DefaultListLimit and MaxListLimit bound GET /api/v1/actions.
	DefaultListLimit = 50
	MaxListLimit     = 500
	// DefaultEventLimit and MaxEventLimit bound GET /api/v1/events.
	DefaultEventLimit = 100
	MaxEventLimit     = 1000
	// DefaultMaxSSEPerToken caps concurrent event streams of one token when
	// Config.MaxSSEPerToken is zero.
	DefaultMaxSSEPerToken = 8
	// DefaultStreamKeepAlive is Config.StreamKeepAlive when zero.
	DefaultStreamKeepAlive = 15 * time.Second
	// DefaultMaxStreams caps the event streams of all tokens together when
	// Config.MaxStreams is zero.
	DefaultMaxStreams = 256
	// DefaultStreamWriteTimeout is Config.StreamWriteTimeout when zero.
	DefaultStreamWriteTimeout = 30 * time.Second
)

// Config is what the API needs beyond the store.
type Config struct {
	// Ops runs every user verb and holds the policies the API shows (the
	// core shares one with the web UI). When nil, New builds one from
	// Policy, Budget, Enroll, Notify and its Nudger; those four are read
	// only then.
	Ops *ops.Ops
	// Policy decides which actions need approval and who may approve them
	// (nil: the default).
	Policy *live.Value[approval.Policy]
	// MaxSSEPerToken caps the concurrent /events/stream connections of one
	// token (429 beyond). Zero means DefaultMaxSSEPerToken.
	MaxSSEPerToken int
	// StreamKeepAlive is how often an idle event stream sends a comment
	// line, so that proxies keep it open and a vanished client is noticed.
	// Zero means DefaultStreamKeepAlive.
	StreamKeepAlive time.Duration
	// MaxStreams caps the event streams open at once over all tokens (503
	// beyond). Zero means DefaultMaxStreams.
	MaxStreams int
	// StreamWriteTimeout bounds each write of an event stream (the server's
	// WriteTimeout would end every stream): a client that stops reading is
	// dropped after it. Zero means DefaultStreamWriteTimeout.
	StreamWriteTimeout time.Duration
	// Gatherer is served on /metrics. Nil serves an empty registry.
	Gatherer prometheus.Gatherer
	// Registerer, when set, receives the API's own metrics.
	Registerer prometheus.Registerer
	// Budget is the clusters' disruption budgets (nil: none).
	Budget *live.Value[budget.Policy]
	// Calendars are the clusters' maintenance windows and freezes, shown
	// with each cluster; nil: none.
	Calendars *live.Value[schedule.Calendars]
	// Streams counts the event streams together with the web UI's
	// live-update streams (the core shares one); nil counts the API's alone,
	// MaxStreams in all and MaxSSEPerToken per token.
	Streams *streams.Limiter
	// Replicas answers GET /api/v1/core/replicas; nil lists none.
	Replicas ReplicaLister
	// Notify sends test deliveries and lists the destinations (nil: none).
	Notify Notifier
	// Enroll signs, renews and revokes agent certificates; nil answers
	// its routes 404.
	Enroll *enroll.Service
	// SSO verifies bearers that are ID tokens of the OpenID provider
	// (nil: single sign-on is off, only API tokens are accepted).
	SSO *sso.Provider
}

// Nudger asks the orchestrator for a full sync of one cluster now, or for a
// sync of one node alone (ops.Nudger): the operations New builds when
// Config.Ops is nil nudge it after their transaction committed.
type Nudger = ops.Nudger

// Server is the core API. Build it with New, serve Handler, and call Close
// when the HTTP server shuts down so that event streams end.
type Server struct {
	cfg  Config
	st   store.Store
	ops  *ops.Ops
	log  *slog.Logger
	echo *echo.Echo
	// perms records the permission of every authenticated route, by
	// "METHOD path"; public routes map to "".
	perms map[string]auth.Permission

	mu     sync.Mutex
	done   chan struct{} // closed by Close
	closed bool

	metrics *metrics
}

// New builds the API. It starts nothing.
func New(cfg Config, st store.Store, n Nudger, log *slog.Logger) *Server {
	if cfg.MaxSSEPerToken <= 0 {
		cfg.MaxSSEPerToken = DefaultMaxSSEPerToken
	}
	if cfg.StreamKeepAlive <= 0 {
		cfg.StreamKeepAlive = DefaultStreamKeepAlive
	}
	if cfg.MaxStreams <= 0 {
		cfg.MaxStreams = DefaultMaxStreams
	}
	if cfg.StreamWriteTimeout <= 0 {
		cfg.StreamWriteTimeout = DefaultStreamWriteTimeout
	}
	if cfg.Streams == nil {
		cfg.Streams = streams.New(cfg.MaxStreams, cfg.MaxSSEPerToken)
	}
	if cfg.Policy == nil {
		cfg.Policy = live.New(approval.DefaultPolicy())
	}
	if cfg.Budget == nil {
		cfg.Budget = live.New(budget.Policy{})
	}
	if cfg.Ops == nil {
		cfg.Ops = ops.New(ops.Config{Store: st, Policy: cfg.Policy, Budget: cfg.Budget, Enroll: cfg.Enroll, Notify: cfg.Notify,
			Nudge: n})
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Server{
		cfg:     cfg,
		st:      st,
		ops:     cfg.Ops,
		log:     log,
		perms:   map[string]auth.Permission{},
		done:    make(chan struct{}),
		metrics: newMetrics(cfg.Registerer),
	}
	e := echo.NewWithConfig(echo.Config{
		Logger:                       log,
		HTTPErrorHandler:             s.handleError,
		NoGroupAutoRegister404Routes: true,
	})
	e.Use(s.metrics.middleware)
	e.Use(s.logRequests)
	e.Use(middleware.Recover())
	e.Use(middleware.BodyLimit(MaxBody))
	e.Use(apiserver.RequireJSON)
	s.echo = e
	s.routes()
	return s
}

// Handler returns the http.Handler serving every route.
func (s *Server) Handler() http.Handler { return s.echo }

// Close ends every open event stream and refuses new ones. Call it when the
// HTTP server shuts down (for instance with http.Server.RegisterOnShutdown):
// Shutdown waits for handlers to return, and a stream only returns when its
// client leaves or the API closes. Close is idempotent.
func (s *Server) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.closed {
		s.closed = true
		close(s.done)
	}
}

func (s *Server) routes() {
	s.public(http.MethodGet, "/health", s.health)
	gatherer := s.cfg.Gatherer
	if gatherer == nil {
		gatherer = prometheus.NewRegistry()
	}
	s.public(http.MethodGet, "/metrics", echo.WrapHandler(promhttp.HandlerFor(gatherer, promhttp.HandlerOpts{})))
	s.public(http.MethodGet, "/api/v1/openapi.json", apiserver.ServeOpenAPI(OpenAPIDocument))
	s.public(http.MethodGet, "/api/v1/auth/oidc", onlyParams(s.oidcInfo))

	s.add(http.MethodGet, "/api/v1/clusters", auth.Read, onlyParams(s.listClusters))
	s.add(http.MethodGet, "/api/v1/clusters/:cluster", auth.Read, onlyParams(s.showCluster))
	s.add(http.MethodPost, "/api/v1/clusters/:cluster/orchestrate", auth.Orchestrate, s.orchestrate)
	s.add(http.MethodGet, "/api/v1/nodes", auth.Read, onlyParams(s.listNodes, "cluster", "label"))
	s.add(http.MethodPost, "/api/v1/clusters/:cluster/nodes/:node/drain", auth.Drain, s.drainNode(true))
	s.add(http.MethodPost, "/api/v1/clusters/:cluster/nodes/:node/undrain", auth.Drain, s.drainNode(false))
	s.add(http.MethodPost, "/api/v1/clusters/:cluster/nodes/:node/forget", auth.Forget, s.forgetNode)
	s.add(http.MethodPost, "/api/v1/clusters/:cluster/nodes/:node/replace", auth.Forget, s.replaceNode)
	s.add(http.MethodPost, "/api/v1/clusters/:cluster/on-alert/approve", auth.Approve, s.approveOnAlert)
	s.add(http.MethodGet, "/api/v1/core/replicas", auth.Read, onlyParams(s.listReplicas))
	s.add(http.MethodGet, "/api/v1/version", auth.Read, onlyParams(s.showVersion))

	s.add(http.MethodGet, "/api/v1/actions", auth.Read, onlyParams(s.listActions, actionListParams...))
	s.add(http.MethodPost, "/api/v1/actions", auth.Create, s.createAction)
	s.add(http.MethodGet, "/api/v1/actions/:id", auth.Read, onlyParams(s.showAction))
	s.add(http.MethodPost, "/api/v1/actions/:id/approve", auth.Approve, s.decideAction(s.ops.ApproveAction))
	s.add(http.MethodPost, "/api/v1/actions/:id/reject", auth.Reject, s.decideAction(s.ops.RejectAction))
	s.add(http.MethodPost, "/api/v1/actions/:id/urgent", auth.Approve, s.decideAction(s.ops.MarkActionUrgent))
	s.add(http.MethodPost, "/api/v1/actions/:id/cancel", auth.Cancel, s.cancelAction)
	s.add(http.MethodPost, "/api/v1/actions/:id/retry", auth.Retry, s.retryAction)

	s.add(http.MethodGet, "/api/v1/runs", auth.Read, onlyParams(s.listRuns, "cluster", "state", "limit", "marker"))
	s.add(http.MethodPost, "/api/v1/runs", auth.Create, s.createRun)
	s.add(http.MethodGet, "/api/v1/runs/:id", auth.Read, onlyParams(s.showRun))
	s.add(http.MethodGet, "/api/v1/runs/:id/nodes", auth.Read, onlyParams(s.runNodes, "marker", "limit"))
	s.add(http.MethodPost, "/api/v1/runs/:id/approve", auth.Approve, s.approveRun)
	s.add(http.MethodPost, "/api/v1/runs/:id/reject", auth.Reject, s.runWithReason(s.ops.RejectRun))
	s.add(http.MethodPost, "/api/v1/runs/:id/urgent", auth.Approve, s.runWithReason(s.ops.MarkRunUrgent))
	s.add(http.MethodPost, "/api/v1/runs/:id/pause", auth.Cancel, s.runWithoutBody(s.ops.PauseRun))
	s.add(http.MethodPost, "/api/v1/runs/:id/resume", auth.Continue, s.runWithReason(s.ops.ResumeRun))
	s.add(http.MethodPost, "/api/v1/runs/:id/cancel", auth.Cancel, s.cancelRun)
	s.add(http.MethodPost, "/api/v1/runs/:id/abort", auth.Continue, s.runWithReason(s.ops.AbortRun))
	s.add(http.MethodPost, "/api/v1/runs/:id/retry", auth.Create, s.retryRun)
	s.add(http.MethodPost, "/api/v1/runs/:id/promote", auth.Approve, s.runWithReason(s.ops.PromoteRun))

	s.add(http.MethodPost, "/api/v1/playbooks", auth.Create, s.applyPlaybook)
	s.add(http.MethodGet, "/api/v1/playbooks", auth.Read, onlyParams(s.listPlaybooks))
	s.add(http.MethodGet, "/api/v1/playbooks/:name", auth.Read, onlyParams(s.showPlaybook, "version"))
	s.add(http.MethodPost, "/api/v1/playbooks/:name/plan", auth.Read, s.planPlaybook)
	s.add(http.MethodPost, "/api/v1/playbooks/:name/runs", auth.Create, s.startPlaybook)

	s.add(http.MethodPost, "/api/v1/schedules", auth.Create, s.applySchedule)
	s.add(http.MethodGet, "/api/v1/schedules", auth.Read, onlyParams(s.listSchedules, "cluster", "state", "limit", "marker"))
	s.add(http.MethodGet, "/api/v1/schedules/:name", auth.Read, onlyParams(s.showSchedule))
	s.add(http.MethodDelete, "/api/v1/schedules/:name", auth.Cancel, s.deleteSchedule)
	s.add(http.MethodPost, "/api/v1/schedules/:name/approve", auth.Approve, s.approveSchedule)
	s.add(http.MethodPost, "/api/v1/schedules/:name/reject", auth.Reject, s.rejectSchedule)
	s.add(http.MethodPost, "/api/v1/schedules/:name/pause", auth.Cancel, s.operateSchedule(s.ops.PauseSchedule))
	s.add(http.MethodPost, "/api/v1/schedules/:name/resume", auth.Continue, s.operateSchedule(s.ops.ResumeSchedule))

	s.add(http.MethodGet, "/api/v1/freezes", auth.Read, onlyParams(s.listFreezes, "cluster", "all"))
	s.add(http.MethodPost, "/api/v1/clusters/:cluster/freezes", auth.Freeze, s.createFreeze)
	s.add(http.MethodPost, "/api/v1/freezes/:id/lift", auth.Unfreeze, s.liftFreeze)
	s.add(http.MethodGet, "/api/v1/policies", auth.Read, onlyParams(s.listPolicies, "kind", "cluster", "all"))
	s.add(http.MethodPut, "/api/v1/policies/:kind/:id", auth.Freeze, s.putPolicy)
	s.add(http.MethodPost, "/api/v1/policies/:kind/:id/delete", auth.Freeze, s.deletePolicy)
	s.add(http.MethodGet, "/api/v1/policies/:kind/:id/history", auth.Read, onlyParams(s.policyHistory))
	s.add(http.MethodPost, "/api/v1/policy/apply", auth.Read, s.applyPolicy)

	s.add(http.MethodGet, "/api/v1/events", auth.Read, onlyParams(s.listEvents, "since", "limit", "tail", "action_id", "run_id", "cluster", "node", "type"))
	s.add(http.MethodGet, "/api/v1/events/stream", auth.Read, onlyParams(s.streamEvents, "since", "action_id", "run_id", "cluster", "node", "type"))

	s.add(http.MethodGet, "/api/v1/notify", auth.Notify, onlyParams(s.listNotify))
	s.add(http.MethodPost, "/api/v1/notify/:name/test", auth.Notify, s.testNotify)
	s.add(http.MethodGet, "/api/v1/notify/:name/deliveries", auth.Notify, onlyParams(s.listDeliveries, "state", "before", "limit"))
	s.add(http.MethodPost, "/api/v1/notify/deliveries/:id/redeliver", auth.Notify, s.redeliver)

	s.add(http.MethodPost, "/api/v1/tokens", auth.Tokens, s.createToken)
	s.add(http.MethodGet, "/api/v1/tokens", auth.Tokens, onlyParams(s.listTokens))
	s.add(http.MethodDelete, "/api/v1/tokens/:name", auth.Tokens, s.revokeToken)

	s.add(http.MethodPost, "/api/v1/teams", auth.Grants, s.createTeam)
	s.add(http.MethodGet, "/api/v1/teams", auth.Read, onlyParams(s.listTeams))
	s.add(http.MethodGet, "/api/v1/teams/:name", auth.Read, onlyParams(s.showTeam))
	s.add(http.MethodDelete, "/api/v1/teams/:name", auth.Grants, s.deleteTeam)
	s.add(http.MethodPost, "/api/v1/teams/:name/members", auth.Grants, s.changeTeam(ops.AddMember))
	s.add(http.MethodDelete, "/api/v1/teams/:name/members/:person", auth.Grants, s.changeTeam(ops.RemoveMember))
	s.add(http.MethodPost, "/api/v1/teams/:name/groups", auth.Grants, s.changeTeam(ops.MapGroup))
	s.add(http.MethodDelete, "/api/v1/teams/:name/groups/:group", auth.Grants, s.changeTeam(ops.UnmapGroup))
	s.add(http.MethodPost, "/api/v1/grants", auth.Grants, s.createGrant)
	s.add(http.MethodGet, "/api/v1/grants", auth.Grants, onlyParams(s.listGrants))
	s.add(http.MethodDelete, "/api/v1/grants/:id", auth.Grants, s.revokeGrant)

	// Enrollment: the CA bundle is public (an agent checks it against its
	// pin before sending a secret); enroll authenticates its join token
	// itself, so that refusals carry their reason and an event; renewal
	// authenticates the agent's client certificate.
	s.public(http.MethodGet, enrollCAPath, s.enrollCA)
	s.self(http.MethodPost, enrollPath, auth.Enroll, s.enrollAgent)
	s.self(http.MethodPost, "/api/v1/enroll/renew", "", s.renewAgent)
	s.add(http.MethodPost, "/api/v1/clusters/:cluster/nodes/:node/revoke", auth.Revoke, s.revokeNode)

}

// add registers an authenticated route needing permission p.
func (s *Server) add(method, path string, p auth.Permission, h echo.HandlerFunc) {
	s.perms[method+" "+path] = p
	s.echo.Add(method, path, h, s.authenticate, s.authorize(p), checkQuery)
}

// self registers a route that authenticates its caller itself (p is what
// it grants, "" when no token does).
func (s *Server) self(method, path string, p auth.Permission, h echo.HandlerFunc) {
	s.perms[method+" "+path] = p
	s.echo.Add(method, path, h, checkQuery)
}

// public registers a route open to anyone.
func (s *Server) public(method, path string, h echo.HandlerFunc) {
	s.perms[method+" "+path] = ""
	s.echo.Add(method, path, h)
}
