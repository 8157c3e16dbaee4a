// Package core wires the central service: the store, node discovery, the
// orchestrator and the REST API. New checks the configuration and builds
// nothing else; Run opens, starts and serves until its context ends, then
// stops everything in reverse order.
package core

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/musterhq/muster/core/actions"
	"github.com/musterhq/muster/core/api"
	"github.com/musterhq/muster/core/approval"
	"github.com/musterhq/muster/core/auth"
	"github.com/musterhq/muster/core/budget"
	"github.com/musterhq/muster/core/discovery"
	"github.com/musterhq/muster/core/enroll"
	"github.com/musterhq/muster/core/monitor"
	"github.com/musterhq/muster/core/nodes"
	"github.com/musterhq/muster/core/notify"
	"github.com/musterhq/muster/core/onalert"
	"github.com/musterhq/muster/core/ops"
	"github.com/musterhq/muster/core/orchestrate"
	policyrec "github.com/musterhq/muster/core/policy"
	"github.com/musterhq/muster/core/probe"
	"github.com/musterhq/muster/core/retention"
	"github.com/musterhq/muster/core/runs"
	"github.com/musterhq/muster/core/schedule"
	"github.com/musterhq/muster/core/schedule/recur"
	"github.com/musterhq/muster/core/sso"
	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/core/store/postgres"
	"github.com/musterhq/muster/core/store/sqlite"
	"github.com/musterhq/muster/core/streams"
	"github.com/musterhq/muster/core/tracing"
	"github.com/musterhq/muster/core/ui"
	"github.com/musterhq/muster/shared/apiserver"
	"github.com/musterhq/muster/shared/config"
	"github.com/musterhq/muster/shared/gossip"
	"github.com/musterhq/muster/shared/live"
	"github.com/musterhq/muster/shared/startstop"
	"github.com/musterhq/muster/shared/tlsutil"
	"github.com/musterhq/muster/shared/version"
	"github.com/musterhq/muster/shared/wire"
)

// Core is the central service.
type Core struct {
	cfg Config
	log *slog.Logger

	mu        sync.Mutex
	addr      net.Addr
	ready     chan struct{}
	running   *reloadable // set while Run serves: what Reload changes
	reloaders []Reloader
	// pairs are the certificates ReloadTLS reads again.
	pairs map[string]*tlsutil.KeyPair
	// drift is where this replica's configuration and the policy in the
	// store disagree (seedPolicy).
	drift []string
}

func (c *Core) setDrift(d []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.drift = d
}

// policyDrift is where this replica's configuration and the policy in the
// store disagree, one line each (none: they agree).
func (c *Core) policyDrift() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.drift)
}

// New checks cfg and returns a core; it opens and starts nothing.
func New(cfg Config, log *slog.Logger) (*Core, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err // config.Errors: every bad field
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Core{cfg: cfg, log: log, ready: make(chan struct{})}, nil
}

// Addr returns the API's bound address once Ready is closed (nil before).
func (c *Core) Addr() net.Addr {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.addr
}

// Ready is closed once the API listens.
func (c *Core) Ready() <-chan struct{} { return c.ready }

// Run opens the store, gives an empty store its first admin token, syncs the
// configured nodes, starts the orchestrator, joins the gossip pool when
// enabled, and serves the API until ctx ends. Then it stops those parts in
// reverse order within shutdown_timeout, reports every part that failed to
// stop cleanly, and closes the store.
func (c *Core) Run(ctx context.Context) error {
	cfg := c.cfg
	if err := config.CheckKeyFiles(keyFiles(cfg)); err != nil {
		return err
	}
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return fmt.Errorf("data_dir: %w", err)
	}
	st, coord, err := openStore(ctx, cfg)
	if err != nil {
		return err
	}
	defer st.Close()
	// Every event a destination wants is enqueued with it.
	st.SetOutbox(notify.Route(cfg.Notify))
	if err := auth.Bootstrap(ctx, st, cfg.DataDir, c.log); err != nil {
		return err
	}
	static := discovery.Static(cfg.Clusters)
	if _, err := discovery.Sync(ctx, st, static.Clusters(), static); err != nil {
		return err
	}

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	// The fleet's state at each scrape, and every write timed, for the
	// shipped alerts and dashboard (docs/operations.md, "Monitoring").
	if err := monitor.Register(reg, st, c.log); err != nil {
		return err
	}
	timed, err := monitor.NewTimed(st, reg)
	if err != nil {
		return err
	}
	st = timed
	atls, agentsPair, err := agentsTLS(cfg.AgentsTLS)
	if err != nil {
		return err
	}
	// Declared membership reloads (SIGHUP): enrollment and the loop read
	// it through this one holder at each decision.
	members := live.New(cfg.Membership())
	enr, err := newEnroll(cfg, members, st, c.log)
	if err != nil {
		return err
	}
	if atls != nil {
		// Every connection to an agent (a sync, a gossip claim check)
		// refuses a certificate on the revocation list.
		atls.VerifyConnection = tlsutil.CheckSerials(enr.Revoked)
	}
	// One set of rules for every action change, whether the API, the
	// orchestrator or the run engine makes it.
	// The approval policy, the budgets and the calendars are read through
	// their live.Value holders at each decision; Reload replaces them
	// (SIGHUP). SIGHUP also reloads the notification destinations: the
	// worker's and the store's outbox (see Reload).
	// The calendars are the configuration's windows and the store's
	// freezes (seeded from the configuration, then followed).
	// The windows, budgets and approval rules are records too
	// (docs/policy-as-data.md): the configuration seeds them, and every
	// replica composes its policies from the store's.
	cals := schedule.NewHolder(nil)
	pol := policyrec.NewHolder(cfg.policySettings(), cals, c.log)
	// A stored record this replica cannot read is an event, not only a
	// log line: what is kept instead (its last good version, a cluster
	// closed) is a decision people must see.
	pol.OnUnreadable(func(problems []string) {
		if len(problems) == 0 {
			return
		}
		msg := "policy records this replica cannot read: " + strings.Join(problems, "; ")
		if err := appendCoreEvent(ctx, st, store.EventCorePolicyUnreadable, msg, map[string]any{"problems": problems}); err != nil {
			c.log.Error("policy: recording the unreadable records", "err", err)
		}
	})
	lv := &reloadable{approval: pol.Approval(), budget: pol.Budget(), members: members,
		calendar: cals.Value(), cals: cals, pol: pol, st: st}
	drift, err := seedPolicy(ctx, st, nil, cfg, nil)
	if err != nil {
		return err
	}
	c.setDrift(drift)
	if recs, err := policyrec.Load(ctx, st); err != nil {
		return fmt.Errorf("policy records: %w", err)
	} else {
		pol.SetRecords(recs)
	}
	if fs, err := schedule.LoadFreezes(ctx, st, time.Now()); err != nil {
		return fmt.Errorf("freezes: %w", err)
	} else {
		cals.SetFreezes(fs)
	}
	policy, budgets := lv.approval, lv.budget
	rules := &actions.Rules{Policy: policy, ScheduleTTL: cfg.Orchestrate.ScheduleTTL}
	engine := runs.NewEngine(policy, rules, nil)
	engine.SetProber(probe.New(cfg.CoreSteps))
	engine.SetKindLocks(budgets)
	engine.SetStaticLabels(discovery.StaticLabels(cfg.Clusters))
	schedules := &recur.Service{Policy: policy, MinEvery: cfg.MinEvery, KindLocks: engine.KindLocks}
	ln, guard, apiPair, gate, err := listen(cfg, enr)
	if err != nil {
		return err
	}
	c.mu.Lock()
	c.pairs = map[string]*tlsutil.KeyPair{}
	if apiPair != nil {
		c.pairs["api.tls"] = apiPair
	}
	if agentsPair != nil {
		c.pairs["agents_tls"] = agentsPair
	}
	c.mu.Unlock()
	repl, err := newReplication(cfg, coord, ln.Addr().String(), c.log, reg)
	if err != nil {
		ln.Close()
		return err
	}
	repl.st = st // replica joins and losses are events
	repl.drift = c.policyDrift
	fullEvery, compareEvery := cfg.Orchestrate.Orchestration()
	if cfg.Orchestrate.OldFullSyncEvery() {
		c.log.Warn(OldFullSyncEveryWarning, "full_sync_every", int64(cfg.Orchestrate.FullSyncEvery), "compare_ids_every", compareEvery)
	}
	ocfg := orchestrate.Config{
		Rules:            rules,
		Interval:         cfg.Orchestrate.Interval,
		Workers:          cfg.Orchestrate.Workers,
		MaxQueuedPerNode: cfg.Orchestrate.MaxQueuedPerNode,
		FullSyncEvery:    fullEvery,
		CounterEvery:     cfg.Orchestrate.CounterEvery,
		CompareIDsEvery:  compareEvery,
		AgentIdleConns:   cfg.Orchestrate.AgentIdleConns,
		AgentTimeout:     cfg.Orchestrate.AgentTimeout,
		ScheduleTTL:      cfg.Orchestrate.ScheduleTTL,
		RunPoll:          cfg.Orchestrate.RunPoll,
		NoRunWatch:       !cfg.Orchestrate.RunWatch,
		MaxWatches:       cfg.Orchestrate.MaxWatches,
		ReapAfter:        cfg.Orchestrate.ReapAfter,
		AgentTLS:         atls,
		StaticLabels:     discovery.StaticLabels(cfg.Clusters),
		Budget:           budgets,
		Members:          lv.members,
		Calendars:        lv.calendar,
		Runs:             engine,
		Leases:           repl.orchestrateLeases(),
	}
	// Traces (docs/operations.md, "Tracing"): nil when off.
	tracer, err := tracing.New(cfg.Tracing)
	if err != nil {
		ln.Close()
		return err
	}
	defer func() {
		shutCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := tracer.Shutdown(shutCtx); err != nil {
			c.log.Warn("tracing: sending the last spans", "err", err)
		}
	}()
	ocfg.Tracer = tracer
	// The rule of gossipOptions, applied to the address actually dialled.
	ocfg.RefuseInternalGossip = cfg.Gossip.Enabled && !allowInternalGossip(cfg)
	orch, err := orchestrate.New(ocfg, st, c.log, reg)
	if err != nil {
		ln.Close()
		return err
	}
	// With several replicas, the one holding the outbox's lease delivers.
	var notifier *notify.Worker
	notifier, err = notify.New(notify.Config{Destinations: cfg.Notify, PublicURL: cfg.PublicURL(),
		AllowLoopback: cfg.NotifyAllowLoopback, Lease: repl.outboxLease(func() { notifier.Nudge() })}, st, c.log, reg)
	if err != nil {
		ln.Close()
		return err
	}
	lv.notify = notifier
	// The API's event streams and the web UI's live updates share one cap
	// per token and one in all.
	lim := streams.New(cfg.API.MaxEventStreams, cfg.API.MaxStreamsPerToken)
	// One operations layer for the API and the web UI: every user verb.
	op := ops.New(ops.Config{Store: st, Policy: policy, Budget: budgets, Members: lv.members, Rules: rules, Runs: engine,
		Schedules: schedules, Enroll: enr, Notify: notifier, Nudge: repl, MinWindow: cfg.MinWindow})
	if err := seedAccess(ctx, st, op, cfg); err != nil {
		ln.Close()
		return err
	}
	// Single sign-on (docs/architecture.md, "Single sign-on"): read at
	// start, a reload keeps it.
	var idp *sso.Provider
	if cfg.OIDC.Enabled() {
		if idp, err = sso.New(cfg.OIDC, nil, nil); err != nil {
			ln.Close()
			return err
		}
	}
	apiSrv := api.New(api.Config{Policy: policy, Ops: op, Budget: budgets, Calendars: lv.calendar, Gatherer: reg,
		Registerer: reg, Replicas: repl, Streams: lim, Enroll: enr, Notify: notifier,
		StreamWriteTimeout: cfg.API.WriteTimeout, SSO: idp}, st, repl, c.log)
	handler, closeUI, err := withUI(cfg, policy, budgets, apiSrv, op, st, lim, lv.calendar, notifier, idp, c.log)
	if err != nil {
		ln.Close()
		return err
	}
	// Refused TLS handshakes (no or a wrong client certificate) land in
	// the error log.
	httpSrv := apiserver.NewServer(withHSTS(gate(handler)), cfg.API.Server,
		slog.NewLogLogger(c.log.With("component", "api").Handler(), slog.LevelWarn))
	httpSrv.ReadHeaderTimeout = min(cfg.API.HeaderTimeout, cfg.API.ReadTimeout)
	guard.Attach(httpSrv)
	httpSrv.RegisterOnShutdown(apiSrv.Close) // event streams end, so Shutdown can finish
	httpSrv.RegisterOnShutdown(closeUI)

	// Started in this order (docs/architecture.md, "The core"), stopped in
	// the reverse one under one deadline (shutdown_timeout): the API stops
	// taking requests, gossip leaves the pool, the discovery watch ends,
	// enrollment, schedules, notify and retention stop, replication gives
	// up the leases, the orchestrator cancels its syncs (they write
	// nothing once cancelled), the store stops listening to other
	// replicas; then the store closes.
	var parts startstop.Group
	stopAll := func() error {
		shutCtx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownTimeout)
		defer cancel()
		err := parts.Shutdown(shutCtx)
		if err != nil {
			c.log.Error("core stopped with errors", "err", err)
		}
		return err
	}
	if coord != nil {
		// Stopped last: it hears the other replicas' commits and nudges.
		if err := parts.Start(ctx, "store listener", coord); err != nil {
			ln.Close()
			return errors.Join(err, stopAll())
		}
	}
	if err := parts.Start(ctx, "orchestrator", orch); err != nil {
		ln.Close()
		return errors.Join(err, stopAll())
	}
	// Stopped before the orchestrator: it gives up the leases first.
	repl.deliver(orch.Nudge, orch.NudgeNode)
	if err := parts.Start(ctx, "replication", repl); err != nil {
		ln.Close()
		return errors.Join(err, stopAll())
	}
	purger := retention.New(retention.Config{Retention: cfg.Retention, Runs: cfg.RetentionRuns}, st, c.log)
	if err := parts.Start(ctx, "retention", purger); err != nil {
		ln.Close()
		return errors.Join(err, stopAll())
	}
	if err := parts.Start(ctx, "notify", notifier); err != nil {
		ln.Close()
		return errors.Join(err, stopAll())
	}
	if err := parts.Start(ctx, "tracing", tracing.NewRecorder(tracer, st, c.log, 0)); err != nil {
		ln.Close()
		return errors.Join(err, stopAll())
	}
	// Every replica looks at the schedules: one run per occurrence is the
	// store's to keep (docs/architecture.md, "Windows and schedules").
	occurrences := recur.New(recur.Config{Runs: engine, Nudge: repl.Nudge}, st, c.log)
	if err := parts.Start(ctx, "schedules", occurrences); err != nil {
		ln.Close()
		return errors.Join(err, stopAll())
	}
	// Every replica looks at the clusters' on_alert playbooks: one run per
	// alert is the store's to keep (docs/architecture.md, "Declared
	// membership").
	recovery := onalert.New(onalert.Config{Runs: engine, Members: lv.members, Nudge: repl.Nudge}, st, c.log)
	if err := parts.Start(ctx, "on_alert", recovery); err != nil {
		ln.Close()
		return errors.Join(err, stopAll())
	}
	sources := []discovery.Source{static}
	var pool *discovery.GossipSource
	if cfg.Gossip.Enabled {
		opts := append(gossipOptions(cfg, atls), discovery.RefuseRevoked(enr.RevokedNode))
		pool = discovery.NewGossipSource(c.log, opts...)
		sources = append(sources, pool)
	}
	// A revocation ends the kept connections to agents and has the gossip
	// claims judged again, on every replica as soon as it reads the list.
	enr.OnChange(orch.DropAgentConnections)
	if pool != nil {
		enr.OnChange(pool.Recheck)
	}
	// Every replica follows the store's freezes as soon as a commit (its
	// own or another replica's) shows one made or lifted.
	watchFreezes := func(ctx context.Context) {
		schedule.Watch(ctx, st, cals, c.log, func(clusters []string) {
			for _, id := range clusters {
				repl.nudgeLocal(id)
			}
		})
	}
	if err := parts.Start(ctx, "freezes", startstop.NewFunc(watchFreezes)); err != nil {
		ln.Close()
		return errors.Join(err, stopAll())
	}
	watchPolicy := func(ctx context.Context) {
		policyrec.Watch(ctx, st, pol, c.log, func(clusters []string) {
			for _, id := range clusters {
				repl.nudgeLocal(id)
			}
		})
	}
	if err := parts.Start(ctx, "policy", startstop.NewFunc(watchPolicy)); err != nil {
		ln.Close()
		return errors.Join(err, stopAll())
	}
	if err := parts.Start(ctx, "enroll", startstop.NewFunc(enr.Run)); err != nil {
		ln.Close()
		return errors.Join(err, stopAll())
	}
	watch := discovery.NewWatcher(st, c.log, repl.Nudge, static.Clusters(), sources...)
	if err := parts.Start(ctx, "discovery", watch); err != nil {
		ln.Close()
		return errors.Join(err, stopAll())
	}
	gs, err := newGossip(cfg.Gossip, ln.Addr().String(), pool, orch.NudgeNode, c.log)
	if err == nil && gs != nil {
		err = parts.Start(ctx, "gossip", gs)
	}
	if err != nil {
		ln.Close()
		return errors.Join(err, stopAll())
	}
	srvPart := apiserver.NewService(httpSrv, ln)
	if err := parts.Start(ctx, "api", srvPart); err != nil {
		ln.Close()
		return errors.Join(err, stopAll())
	}
	c.mu.Lock()
	c.addr = ln.Addr()
	lv.nudge = orch.Nudge
	c.running = lv
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		c.running = nil
		c.mu.Unlock()
	}()
	close(c.ready)
	c.log.Info("core started", "api", ln.Addr().String(), "clusters", len(cfg.Clusters),
		"data_dir", cfg.DataDir, "store", cfg.Store.Driver, "replica", repl.self.ID, "version", version.Version)

	var runErr error
	select {
	case <-ctx.Done():
	case err := <-srvPart.Failed():
		runErr = fmt.Errorf("api: %w", err)
	}
	c.log.Info("core stopping")
	return errors.Join(runErr, stopAll()) // then the deferred Close of the store
}

// withUI serves the web UI at /ui/ beside the API when it is enabled, and
// returns the handler of both and the UI's Close.
func withUI(cfg Config, policy *live.Value[approval.Policy], budgets *live.Value[budget.Policy], apiSrv *api.Server, op *ops.Ops, st store.Store,
	lim *streams.Limiter, cals *live.Value[schedule.Calendars], notifier *notify.Worker, idp *sso.Provider, log *slog.Logger) (http.Handler, func(), error) {
	if !cfg.UI.Enabled {
		return apiSrv.Handler(), func() {}, nil
	}
	uiSrv, err := ui.New(ui.Config{
		SessionTTL:          cfg.UI.SessionTTL,
		MaxSessionsPerToken: cfg.UI.MaxSessionsPerToken,
		Policy:              policy,
		Ops:                 op,
		DevLogins:           cfg.DevLogins,
		DevLoginsExpire:     cfg.DevLoginsExpire,
		Streams:             lim,
		Budget:              budgets,
		Calendars:           cals,
		Notify:              notifier.Destinations,
		SSO:                 idp,
	}, st, log)
	if err != nil {
		return nil, nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("/ui/", uiSrv.Handler())
	mux.Handle("/", apiSrv.Handler())
	return mux, uiSrv.Close, nil
}

// ReloadTLS reads the core's certificates again (api.tls, agents_tls) from
// their files: new connections use them, without a restart (SIGHUP). A pair
// that fails to load keeps the one in use, and the error names it.
func (c *Core) ReloadTLS() error {
	c.mu.Lock()
	pairs := maps.Clone(c.pairs)
	c.mu.Unlock()
	var errs []error
	for _, key := range slices.Sorted(maps.Keys(pairs)) {
		if err := pairs[key].Reload(); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", key, err))
			continue
		}
		c.log.Info("certificate reloaded", "key", key, "not_after", pairs[key].Leaf().NotAfter)
	}
	return errors.Join(errs...)
}

// newEnroll builds enrollment (declared places read through members, as
// reloaded): with agents_ca, the CA that signs agents,
// the bundle they are given and the gossip key; without, only the
// revocation list.
func newEnroll(cfg Config, members *live.Value[nodes.Membership], st store.Store, log *slog.Logger) (*enroll.Service, error) {
	ec := enroll.Config{Lifetime: cfg.AgentsCA.Lifetime, Configured: map[string]bool{},
		Declared:   func(clusterID, nodeID string) bool { return slices.Contains(members.Load()[clusterID].Nodes, nodeID) },
		HoldLabels: nodes.Enrolled}
	for _, cl := range cfg.Clusters {
		for _, n := range cl.Nodes {
			ec.Configured[cl.ID+"/"+n.ID] = n.Enroll
		}
	}
	if a := cfg.AgentsCA; a.Enabled() {
		certPEM, err := os.ReadFile(a.CertFile)
		if err != nil {
			return nil, fmt.Errorf("agents_ca.cert_file: %w", err)
		}
		keyPEM, err := os.ReadFile(a.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("agents_ca.key_file: %w", err)
		}
		ca, err := tlsutil.ParseCA(tlsutil.Pair{CertPEM: certPEM, KeyPEM: keyPEM})
		if err != nil {
			return nil, fmt.Errorf("agents_ca: %w", err)
		}
		ec.CA, ec.Bundle = ca, certPEM
		if cfg.Gossip.Enabled && cfg.Gossip.KeyFile != "" {
			key, err := os.ReadFile(cfg.Gossip.KeyFile)
			if err != nil {
				return nil, fmt.Errorf("gossip.key_file: %w", err)
			}
			ec.GossipKey = strings.TrimSpace(string(key))
		}
	}
	return enroll.New(ec, st, log.With("component", "enroll")), nil
}

// keyFiles are the key files of cfg, by configuration key.
func keyFiles(cfg Config) map[string]string {
	files := map[string]string{"api.tls.key_file": cfg.API.TLS.KeyFile, "agents_tls.key_file": cfg.AgentsTLS.KeyFile,
		"agents_ca.key_file": cfg.AgentsCA.KeyFile}
	if cfg.Gossip.Enabled {
		files["gossip.key_file"] = cfg.Gossip.KeyFile
	}
	return files
}

// openStore opens the configured store, and returns with it the
// coordination of several replicas when the store has one (PostgreSQL).
func openStore(ctx context.Context, cfg Config) (store.Store, coordination, error) {
	var (
		st  store.Store
		err error
	)
	switch {
	case cfg.Store.Driver == DriverPostgres:
		pg, err := postgres.Open(ctx, cfg.Store.DSN)
		if err != nil {
			return nil, nil, fmt.Errorf("open store: %w", err)
		}
		return pg, pg, nil
	case postgres.LooksLikeDSN(cfg.Store.DSN):
		// Shown redacted: the string may hold a password.
		return nil, nil, fmt.Errorf("store.dsn looks like a PostgreSQL connection string (%s), but store.driver is %q: set store.driver: %s (MUSTER_STORE_DRIVER=%s)",
			postgres.Describe(cfg.Store.DSN), cfg.Store.Driver, DriverPostgres, DriverPostgres)
	case cfg.Store.DSN != "":
		st, err = sqlite.OpenFile(ctx, cfg.Store.DSN)
	default:
		st, err = sqlite.Open(ctx, cfg.DataDir)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("open store: %w", err)
	}
	return st, nil, nil
}

// listen opens the API listener, with TLS when configured; with
// api.tls.client_ca_file, clients must present a certificate of that CA (the
// bearer token is still required). Its guard holds api.max_connections
// open, api.max_connections_per_client from one address (loopback
// uncapped under `muster dev` alone), making room by closing the oldest
// connection that does nothing; attach it to the server. Its certificate
// is read from a KeyPair (ReloadTLS); with enrollment, agents'
// certificates are asked for (renewal checks them). With enrollment and
// api.tls.client_ca_file, the handshake lets a caller without a
// certificate through (an agent enrolling has none yet), and gate, to
// wrap the handler with, refuses every request but enrollment's without a
// verified one; otherwise gate changes nothing.
func listen(cfg Config, enr *enroll.Service) (ln net.Listener, guard *apiserver.Guard, kp *tlsutil.KeyPair,
	gate func(http.Handler) http.Handler, err error) {
	gate = func(h http.Handler) http.Handler { return h }
	c := cfg.API
	var opts []tlsutil.ListenOption
	if c.TLS.Enabled() {
		if kp, err = tlsutil.LoadKeyPair(c.TLS.CertFile, c.TLS.KeyFile); err != nil {
			return nil, nil, nil, nil, fmt.Errorf("api.tls.%w", err)
		}
		opts = append(opts, tlsutil.ServeKeyPair(kp))
		if enr.Enabled() {
			certs, err := tlsutil.ParseCerts(enr.Bundle())
			if err != nil {
				return nil, nil, nil, nil, fmt.Errorf("agents_ca.cert_file: %w", err)
			}
			pool := x509.NewCertPool()
			for _, ca := range certs {
				pool.AddCert(ca)
			}
			opts = append(opts, tlsutil.RequestAgentCerts(pool, certs, enr.Revoked))
		}
	}
	tc, err := tlsutil.ListenConfig("api", c.TLS.CertFile, c.TLS.KeyFile, c.TLS.ClientCAFile, opts...)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	if tc != nil && tc.ClientAuth == tls.RequireAndVerifyClientCert && enr.Enabled() {
		tc.ClientAuth = tls.VerifyClientCertIfGiven // a certificate given is still verified
		gate = func(h http.Handler) http.Handler { return requireClientCert(h, api.WithoutClientCert) }
	}
	raw, err := net.Listen("tcp", c.Addr)
	if err != nil {
		return nil, nil, nil, nil, fmt.Errorf("api.addr: %w", err)
	}
	// The caps count connections before their handshake: one that never
	// completes it goes first when room is needed.
	guard = apiserver.NewGuard(raw, apiserver.GuardConfig{Max: c.MaxConnections,
		PerClient: c.MaxConnectionsPerClient, ExemptLoopback: cfg.LoopbackUncapped})
	if tc == nil {
		return guard, guard, kp, gate, nil
	}
	return tls.NewListener(guard, tc), guard, kp, gate, nil
}

// requireClientCert refuses (401) a request that came without a verified
// client certificate, unless exempt says it may.
func requireClientCert(h http.Handler, exempt func(*http.Request) bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.TLS == nil || len(r.TLS.VerifiedChains) == 0 {
			if !exempt(r) {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusUnauthorized)
				_ = json.NewEncoder(w).Encode(wire.ErrorBody{Error: wire.ErrorDetail{Code: wire.CodeUnauthorized,
					Message: "a client certificate of api.tls.client_ca_file is required"}})
				return
			}
		}
		h.ServeHTTP(w, r)
	})
}

// hstsMaxAge is how long a browser that reached the core over TLS keeps to
// TLS for it (a year).
const hstsMaxAge = "max-age=31536000"

// withHSTS tells browsers that reached the core over TLS to use nothing
// else for it (Strict-Transport-Security).
func withHSTS(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.TLS != nil {
			w.Header().Set("Strict-Transport-Security", hstsMaxAge)
		}
		h.ServeHTTP(w, r)
	})
}

// agentsTLS returns the TLS client configuration the orchestrator reaches
// agents with (nil: plain HTTP), and the KeyPair of its client certificate
// (ReloadTLS). The orchestrator adds, per node, the check that the agent's
// certificate names that node.
func agentsTLS(c AgentsTLSConfig) (*tls.Config, *tlsutil.KeyPair, error) {
	if !c.Enabled() {
		return nil, nil, nil
	}
	tc, err := tlsutil.ClientConfig(c.CAFile, "", "")
	if err != nil {
		return nil, nil, fmt.Errorf("agents_tls.%w", err)
	}
	var kp *tlsutil.KeyPair
	if c.CertFile != "" || c.KeyFile != "" {
		if kp, err = tlsutil.LoadKeyPair(c.CertFile, c.KeyFile); err != nil {
			return nil, nil, fmt.Errorf("agents_tls.%w", err)
		}
		tc.GetClientCertificate = kp.GetClientCertificate
	}
	tc.MinVersion = tlsutil.LinkVersion // Go on both ends: TLS 1.3 only
	return tc, kp, nil
}

// gossipOptions says how far the core trusts gossip announcements: agents
// on loopback or link-local addresses only when the core's own API is on
// loopback (a pool on one machine) or gossip.insecure is set; and with
// agents_tls, a node claimed from several addresses goes to the one whose
// agent proves the node's identity.
func gossipOptions(cfg Config, atls *tls.Config) []discovery.GossipOption {
	var opts []discovery.GossipOption
	if allowInternalGossip(cfg) {
		opts = append(opts, discovery.AllowLoopback())
	}
	if atls != nil {
		timeout := cfg.Orchestrate.AgentTimeout
		var d *net.Dialer
		if !allowInternalGossip(cfg) {
			d = &net.Dialer{Control: gossip.RefuseInternal} // as the orchestrator dials gossip nodes
		}
		opts = append(opts, discovery.VerifyClaims(verifyClaim(atls, d, timeout)))
	}
	return opts
}

// verifyClaim checks a gossip claim: the agent at addr must prove, within
// timeout, a certificate of atls's CA naming the node, and naming its
// cluster when the certificate names one (an enrolled one does).
func verifyClaim(atls *tls.Config, d *net.Dialer, timeout time.Duration) discovery.VerifyFunc {
	return func(ctx context.Context, cluster, node, addr string) error {
		ctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		err := tlsutil.ProvePeer(ctx, d, tlsutil.InCluster(atls, cluster), addr, tlsutil.Agent(node))
		if pe := (*tlsutil.ProofError)(nil); errors.As(err, &pe) {
			return &discovery.ClaimError{Reason: pe.Reason}
		}
		return err
	}
}

// allowInternalGossip reports whether gossip agents may be on loopback or
// link-local addresses: when the core's own API is on loopback (a pool on
// one machine) or with gossip.insecure.
func allowInternalGossip(cfg Config) bool {
	return config.IsLoopback(cfg.API.Addr) || cfg.Gossip.Insecure
}
