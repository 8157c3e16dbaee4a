// Package agent wires one node's agent: the SQLite action queue, the runner
// and its handlers, retention, the local API and its metrics. New builds it;
// Run serves until its context ends, then stops in reverse order.
package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/musterhq/muster/agent/api"
	"github.com/musterhq/muster/agent/enroll"
	"github.com/musterhq/muster/agent/exposition"
	"github.com/musterhq/muster/agent/handlers"
	"github.com/musterhq/muster/agent/queue"
	"github.com/musterhq/muster/agent/runner"
	"github.com/musterhq/muster/shared/action"
	"github.com/musterhq/muster/shared/apiserver"
	"github.com/musterhq/muster/shared/config"
	"github.com/musterhq/muster/shared/startstop"
	"github.com/musterhq/muster/shared/tlsutil"
	"github.com/musterhq/muster/shared/version"
)

// Agent is one node's agent.
type Agent struct {
	cfg Config
	log *slog.Logger

	mu      sync.Mutex
	addr    net.Addr
	socket  string
	ready   chan struct{}
	renewer *enroll.Renewer
}

// Renewals counts the certificate renewals since Run started (0 when the
// agent is not enrolled).
func (a *Agent) Renewals() int64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.renewer == nil {
		return 0
	}
	return a.renewer.Renewed()
}

// New checks cfg and returns an agent; it opens and starts nothing.
func New(cfg Config, log *slog.Logger) (*Agent, error) {
	cfg = cfg.WithEnrollment()
	if err := cfg.Validate(); err != nil {
		return nil, err // config.Errors: every bad field
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Agent{cfg: cfg, log: log.With("node", cfg.NodeID), ready: make(chan struct{})}, nil
}

// Addr returns the TCP API's bound address once Ready is closed (nil when
// api.addr is empty: the socket only).
func (a *Agent) Addr() net.Addr {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.addr
}

// Socket returns the path of the API's Unix socket once Ready is closed.
func (a *Agent) Socket() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.socket
}

// Ready is closed once the API listens.
func (a *Agent) Ready() <-chan struct{} { return a.ready }

// Run opens the queue, starts the runner, retention and the API, joins the
// gossip pool when enabled, and serves until ctx ends. Then it leaves the
// pool, stops taking requests, lets the step in progress commit, and closes
// the queue.
func (a *Agent) Run(ctx context.Context) error {
	cfg := a.cfg
	// Whoever owns the agent's state can swap its queue, its key or its
	// socket under it: an agent running as root must own them alone.
	if err := checkOwner("data_dir", cfg.DataDir); err != nil {
		return err
	}
	if err := a.enrollFirst(ctx); err != nil {
		return err
	}
	keys := map[string]string{"api.tls.key_file": cfg.API.TLS.KeyFile, "gossip.key_file": gossipKeyFile(cfg.Gossip)}
	if err := config.CheckKeyFiles(keys); err != nil {
		return err
	}
	for _, key := range []string{"api.tls.key_file", "gossip.key_file"} {
		if err := checkOwner(key, keys[key]); err != nil {
			return err
		}
	}
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return fmt.Errorf("data_dir: %w", err)
	}
	q, err := queue.Open(ctx, cfg.DataDir)
	if err != nil {
		return fmt.Errorf("open queue: %w", err)
	}
	defer q.Close()

	// The files of restarts_agent actions are kept until the action's end
	// is committed: removed here, at the start after it.
	if err := handlers.CleanDetached(cfg.DataDir, func(id string) bool {
		rec, err := q.Get(ctx, id)
		return errors.Is(err, queue.ErrNotFound) || err == nil && rec.State.Final()
	}); err != nil {
		a.log.Warn("remove the files of finished detached actions", "err", err)
	}
	reg, err := handlers.NewRegistry(cfg.Actions.External, handlers.Env{
		NodeID: cfg.NodeID, ClusterID: cfg.ClusterID, Grace: cfg.Actions.KillGrace,
		Secrets: cfg.Secrets.Read, Version: version.Version,
		SystemdRun: cfg.Actions.SystemdRun, Systemctl: cfg.Actions.Systemctl, StateDir: cfg.DataDir,
	})
	if err != nil {
		return err
	}

	prom := exposition.NewRegistry()
	registerQueueGauge(prom, q)

	var rq runner.Queue = q
	var note *notifier
	var onOutput func()
	if cfg.Gossip.Enabled {
		// With gossip, every state change is told to the cores at once
		// (its sender starts with the gossip service, below).
		note = newNotifier(cfg.ClusterID, cfg.NodeID, NoteGap, a.log)
		rq = notifyingQueue{Queue: q, changed: note.Changed}
		// A running action's output, committed as it grows (at most once
		// a second), is told too: the core pulls it in a sync of this node.
		onOutput = note.Changed
	}
	run := runner.New(runner.Config{
		Queue: rq, Handlers: reg, Actor: cfg.NodeID, DefaultTimeout: cfg.Actions.DefaultTimeout,
		Log: a.log, Metrics: runner.NewMetrics(prom), OnOutput: onOutput,
	})
	ret := newRetention(q, queue.Retention{
		Retention: cfg.Actions.Retention, Max: cfg.Actions.RetentionMax, Tombstones: cfg.Actions.TombstoneRetention,
	}, cfg.Actions.PurgeInterval, a.log)

	srv := api.New(api.Config{
		NodeID: cfg.NodeID, ClusterID: cfg.ClusterID, Version: version.Version, Labels: cfg.Labels,
		DefaultTimeout: cfg.Actions.DefaultTimeout,
		Queue:          q, Runner: run, Kinds: reg, Metrics: prom, Log: a.log,
		Caller: apiCaller(cfg.API), Hosts: apiHosts(cfg), MaxWait: api.WaitBound(cfg.API.WriteTimeout),
		Secrets: cfg.Secrets.Names, Renewals: a.Renewals,
	})
	// Refused TLS handshakes (no or a wrong client certificate) land in
	// the error log.
	httpSrv := apiserver.NewServer(srv.Handler(), cfg.API.Server,
		slog.NewLogLogger(a.log.With("component", "api").Handler(), slog.LevelWarn))
	// Requests over the socket carry the caller's uid.
	httpSrv.ConnContext = api.ConnContext
	// A blocking GET of the changes is answered as the server shuts down,
	// not held until its wait ends.
	httpSrv.RegisterOnShutdown(srv.EndWaits)
	var lns []net.Listener
	closeAll := func() {
		for _, ln := range lns {
			ln.Close()
		}
	}
	var (
		tcp   net.Listener
		guard *apiserver.Guard
		pair  *tlsutil.KeyPair
	)
	if cfg.API.Addr != "" {
		if tcp, guard, pair, err = a.listen(cfg.API); err != nil {
			return err
		}
		guard.Attach(httpSrv)
		lns = append(lns, tcp)
		if cfg.API.Insecure {
			a.log.Warn("api.insecure: the TCP API answers anyone who reaches it, without TLS identity checks (development only)",
				"api", tcp.Addr().String())
		}
	}
	sock, err := listenSocket(cfg.SocketPath(), cfg.API.SocketGroup, cfg.DataDir)
	if err != nil {
		closeAll()
		return err
	}
	// On the socket, every caller has the same address: the guard caps
	// each user (uid) instead.
	sockGuard := apiserver.NewGuard(sock, apiserver.GuardConfig{Max: cfg.API.MaxConnections,
		PerClient: cfg.API.MaxConnectionsPerClient, ClientOf: api.SocketClient})
	sockGuard.Attach(httpSrv)
	lns = append(lns, sockGuard)

	// Started in this order, stopped in the reverse one under one deadline
	// (shutdown_timeout): gossip leaves first, so the core sees a clean
	// leave; the API stops taking requests; retention, then the runner (its
	// step in progress commits); then the queue closes.
	var parts startstop.Group
	stopAll := func() error {
		shutCtx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownTimeout)
		defer cancel()
		err := parts.Shutdown(shutCtx)
		if err != nil {
			a.log.Error("agent stopped with errors", "err", err)
		}
		return err
	}
	if err := parts.Start(ctx, "runner", run); err != nil {
		closeAll()
		return errors.Join(err, stopAll())
	}
	if err := parts.Start(ctx, "retention", ret); err != nil {
		closeAll()
		return errors.Join(err, stopAll())
	}
	srvPart := apiserver.NewService(httpSrv, lns...)
	if err := parts.Start(ctx, "api", srvPart); err != nil {
		closeAll()
		return errors.Join(err, stopAll())
	}
	if r := a.newRenewer(pair); r != nil {
		if err := parts.Start(ctx, "renewal", r); err != nil {
			closeAll()
			return errors.Join(err, stopAll())
		}
		a.mu.Lock()
		a.renewer = r
		a.mu.Unlock()
	}
	apiAddr := ""
	a.mu.Lock()
	if tcp != nil {
		a.addr = tcp.Addr()
		apiAddr = tcp.Addr().String()
	}
	a.socket = cfg.SocketPath()
	a.mu.Unlock()
	close(a.ready)
	// Announced once the API answers.
	gs, err := newGossip(cfg, apiAddr, a.log)
	if err == nil && gs != nil {
		err = parts.Start(ctx, "gossip", gs)
	}
	if err != nil {
		return errors.Join(err, stopAll())
	}
	if gs != nil {
		// Stopped before the pool is left.
		note.to = gs
		if err := parts.Start(ctx, "notifier", note); err != nil {
			return errors.Join(err, stopAll())
		}
	}
	a.log.Info("agent started", "api", apiAddr, "socket", cfg.SocketPath(), "cluster", cfg.ClusterID,
		"store_id", q.StoreID(), "kinds", len(reg.Kinds()), "version", version.Version)

	var runErr error
	select {
	case <-ctx.Done():
	case err := <-srvPart.Failed():
		runErr = fmt.Errorf("api: %w", err)
	}
	a.log.Info("agent stopping")
	return errors.Join(runErr, stopAll()) // then the deferred Close of the queue
}

// listen opens the API listener, with TLS when configured. With
// api.tls.client_ca_file, the handshake requires a client certificate of that
// CA (and the API then requires the core's identity in it).
// Its certificate is read from a KeyPair, which renewal reloads. Its guard
// (api.max_connections, api.max_connections_per_client from one address,
// the oldest connection doing nothing closed first, before the handshake)
// must be attached to the server.
func (a *Agent) listen(c APIConfig) (net.Listener, *apiserver.Guard, *tlsutil.KeyPair, error) {
	if !c.TLS.Enabled() {
		ln, guard, err := apiserver.Listen("api", c.API, tlsutil.OnlyTLS13)
		return ln, guard, nil, err
	}
	kp, err := tlsutil.LoadKeyPair(c.TLS.CertFile, c.TLS.KeyFile)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("api.tls.%w", err)
	}
	ln, guard, err := apiserver.Listen("api", c.API, tlsutil.OnlyTLS13, tlsutil.ServeKeyPair(kp))
	return ln, guard, kp, err
}

// enrollFirst recovers an interrupted renewal of an enrolled agent, and
// enrolls the agent when its configuration has an enroll block and no
// certificate exists yet (the first start).
func (a *Agent) enrollFirst(ctx context.Context) error {
	e := a.cfg.Enroll
	p := enroll.PathsIn(a.cfg.EnrollDir())
	if p.Dir != "" && a.cfg.Enrolled() {
		// A renewal a crash interrupted is finished (or undone) before
		// the pair is loaded.
		if err := enroll.Recover(p); err != nil {
			return fmt.Errorf("enroll: recover the renewed certificate: %w", err)
		}
	}
	if e.Core == "" || p.Enrolled() {
		return nil
	}
	if e.TokenFile == "" {
		return fmt.Errorf("enroll.token_file: required at the first start (no certificate in %s yet)", p.Dir)
	}
	tok, err := enroll.ReadToken(e.TokenFile)
	if err != nil {
		return fmt.Errorf("enroll.token_file: %w", err)
	}
	st, err := enroll.Enroll(ctx, enroll.Options{Core: e.Core, Token: tok, CAPin: e.CAPin, Replaces: e.Replaces,
		NodeID: a.cfg.NodeID, ClusterID: a.cfg.ClusterID, Paths: p})
	if err != nil {
		return fmt.Errorf("enroll: %w", err)
	}
	a.log.Info("enrolled", "core", st.Core, "cluster", st.ClusterID, "serial", st.Serial, "not_after", st.NotAfter, "dir", p.Dir)
	return nil
}

// newRenewer returns the renewer of an enrolled agent serving its enrolled
// certificate (nil otherwise).
func (a *Agent) newRenewer(pair *tlsutil.KeyPair) *enroll.Renewer {
	if pair == nil || !a.cfg.Enrolled() {
		return nil
	}
	p := enroll.PathsIn(a.cfg.EnrollDir())
	if filepath.Clean(a.cfg.API.TLS.CertFile) != filepath.Clean(p.Cert) {
		// api.tls names other files: renewed by whoever made them. Said
		// loudly, since an enrolled certificate copied there expires.
		a.log.Warn("no renewal: api.tls.cert_file is not the enrolled certificate, so muster does not renew it",
			"cert_file", a.cfg.API.TLS.CertFile, "enrolled", p.Cert)
		return nil
	}
	core := a.cfg.Enroll.Core
	if core == "" {
		st, err := enroll.ReadState(p)
		if err != nil {
			a.log.Warn("no renewal: the enrollment state cannot be read", "err", err)
			return nil
		}
		core = st.Core
	}
	return enroll.NewRenewer(core, a.cfg.NodeID, p, pair, a.log.With("component", "renewal"))
}

// listenSocket opens the API's Unix socket at path, mode 0660, of group (a name
// or a gid; empty: the agent's own group). The file's permissions decide who on
// the node may use the API (docs/architecture.md, "Who may call an agent"). A
// socket left by a killed agent is replaced; one that another process answers
// is not. When the socket is in dataDir and group is set, dataDir is given that
// group and mode 0710, so that members can reach the socket (and list nothing).
func listenSocket(path, group, dataDir string) (net.Listener, error) {
	gid := -1
	if group != "" {
		g, err := user.LookupGroup(group)
		if err != nil {
			g, err = user.LookupGroupId(group)
		}
		if err != nil {
			return nil, fmt.Errorf("api.socket_group: no group %q on this host", group)
		}
		if gid, err = strconv.Atoi(g.Gid); err != nil {
			return nil, fmt.Errorf("api.socket_group: group %q has gid %q", group, g.Gid)
		}
	}
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode()&os.ModeSocket == 0 {
			return nil, fmt.Errorf("api.socket: %s exists and is not a socket", path)
		}
		if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
			c.Close()
			return nil, fmt.Errorf("api.socket: another process answers on %s", path)
		}
		if err := os.Remove(path); err != nil {
			return nil, fmt.Errorf("api.socket: remove the stale socket: %w", err)
		}
	}
	// The socket is born owner-only (0600 under this umask), so nobody
	// connects in the moment before its mode and group are set below.
	old := syscall.Umask(0o177)
	ln, err := net.Listen("unix", path)
	syscall.Umask(old)
	if err != nil {
		return nil, fmt.Errorf("api.socket: %w", err)
	}
	fail := func(err error) (net.Listener, error) {
		ln.Close()
		return nil, err
	}
	if gid >= 0 {
		if err := os.Chown(path, -1, gid); err != nil {
			return fail(fmt.Errorf("api.socket_group: %w (the agent must be root or a member of %s)", err, group))
		}
		if filepath.Clean(filepath.Dir(path)) == filepath.Clean(dataDir) {
			if err := os.Chown(dataDir, -1, gid); err != nil {
				return fail(fmt.Errorf("api.socket_group: data_dir: %w", err))
			}
			if err := os.Chmod(dataDir, 0o710); err != nil {
				return fail(fmt.Errorf("api.socket_group: data_dir: %w", err))
			}
		}
	}
	if err := os.Chmod(path, 0o660); err != nil {
		return fail(fmt.Errorf("api.socket: %w", err))
	}
	return ln, nil
}

// checkOwner refuses a path (a configuration key's; "" or a missing file
// is skipped) that another uid than the agent's owns.
func checkOwner(key, path string) error {
	if path == "" {
		return nil
	}
	fi, err := os.Stat(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("%s: %w", key, err)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return nil
	}
	if me := os.Geteuid(); int(st.Uid) != me {
		return fmt.Errorf("%s: %s belongs to uid %d, not to the agent's (uid %d): run chown %d %s, or the agent as uid %d",
			key, path, st.Uid, me, me, path, st.Uid)
	}
	return nil
}

// apiCaller is the identity the API requires of its callers: the core's,
// when client certificates are required.
func apiCaller(c APIConfig) *tlsutil.Identity {
	if !c.TLS.Enabled() || c.TLS.ClientCAFile == "" {
		return nil
	}
	id := tlsutil.Core()
	return &id
}

// gossipKeyFile is the key file gossip will read ("" when gossip is off).
func gossipKeyFile(g GossipConfig) string {
	if !g.Enabled {
		return ""
	}
	return g.KeyFile
}

// registerQueueGauge exports the queue depth by state, counted once at
// each scrape.
func registerQueueGauge(reg *exposition.Registry, q *queue.Queue) {
	reg.Family("muster_agent_queue_actions", exposition.Gauge, "Actions in the agent's queue, by state.").
		Gauges(func(gauge func(v uint64, labels ...string)) {
			counts, err := q.Counts(context.Background())
			if err != nil {
				return
			}
			// In the order of their names, as the Prometheus client library lists series.
			for _, s := range []action.State{action.Cancelled, action.Done, action.Failed, action.New, action.Running} {
				gauge(uint64(counts[s]), "state", string(s))
			}
		})
}

// newRetention is the part that purges finished records every interval.
func newRetention(q *queue.Queue, r queue.Retention, interval time.Duration, log *slog.Logger) *startstop.Func {
	return startstop.NewFunc(func(ctx context.Context) {
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			n, tn, err := q.Purge(ctx, r)
			if err != nil && ctx.Err() == nil {
				log.Error("retention", "err", err)
			} else if n+tn > 0 {
				log.Info("retention purged", "records", n, "tombstones", tn)
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	})
}

// apiHosts are the names a request over TCP may give in its Host header
// beside IP literals: those configured, the hosts of the addresses the agent
// listens on and announces, and the machine's name.
func apiHosts(cfg Config) []string {
	hosts := append([]string{}, cfg.API.Hosts...)
	for _, addr := range []string{cfg.API.Addr, cfg.Gossip.AdvertiseAPI} {
		if h, _, err := net.SplitHostPort(addr); err == nil && h != "" {
			hosts = append(hosts, h)
		}
	}
	if h, err := os.Hostname(); err == nil && h != "" {
		hosts = append(hosts, h)
	}
	return hosts
}
