package core

import (
	"fmt"
	"maps"
	"net"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/musterhq/muster/core/approval"
	"github.com/musterhq/muster/core/budget"
	"github.com/musterhq/muster/core/discovery"
	"github.com/musterhq/muster/core/enroll"
	"github.com/musterhq/muster/core/nodes"
	"github.com/musterhq/muster/core/notify"
	"github.com/musterhq/muster/core/policy"
	"github.com/musterhq/muster/core/probe"
	"github.com/musterhq/muster/core/retention"
	"github.com/musterhq/muster/core/schedule"
	"github.com/musterhq/muster/core/sso"
	"github.com/musterhq/muster/core/streams"
	"github.com/musterhq/muster/core/tracing"
	"github.com/musterhq/muster/core/ui"
	"github.com/musterhq/muster/shared/config"
	"github.com/musterhq/muster/shared/gossip"
	"github.com/musterhq/muster/shared/labels"
	"github.com/musterhq/muster/shared/limit"
	"github.com/musterhq/muster/shared/names"
)

// Config is the core's configuration (docs/architecture.md, "Configuration").
type Config struct {
	// DataDir holds core.db (with the sqlite driver) and admin.token.
	DataDir   string          `mapstructure:"data_dir" yaml:"data_dir"`
	Store     StoreConfig     `mapstructure:"store" yaml:"store"`
	API       APIConfig       `mapstructure:"api" yaml:"api"`
	AgentsTLS AgentsTLSConfig `mapstructure:"agents_tls" yaml:"agents_tls"`
	// AgentsCA signs the certificates of agents that enroll with a join
	// token (docs/architecture.md, "Installing on a fleet").
	AgentsCA    AgentsCAConfig          `mapstructure:"agents_ca" yaml:"agents_ca"`
	Clusters    []discovery.ClusterSpec `mapstructure:"clusters" yaml:"clusters"`
	Orchestrate OrchestrateConfig       `mapstructure:"orchestrate" yaml:"orchestrate"`
	Approval    approval.Policy         `mapstructure:"approval" yaml:"approval"`
	// Kinds marks kinds (by glob) as disruptive: they count against the clusters'
	// disruption budgets (docs/architecture.md, "Labels, targets and the
	// disruption budget").
	Kinds  []budget.KindRule `mapstructure:"kinds" yaml:"kinds"`
	Gossip GossipConfig      `mapstructure:"gossip" yaml:"gossip"`
	UI     UIConfig          `mapstructure:"ui" yaml:"ui"`
	HA     HAConfig          `mapstructure:"ha" yaml:"ha"`
	// Retention: finished actions (with their history) and events older
	// than this are purged in the background.
	Retention time.Duration `mapstructure:"retention" yaml:"retention"`
	// RetentionRuns: finished runs that ended longer ago are purged whole,
	// with their stages, children and the playbook versions nothing refers
	// to any more. 0: Retention.
	RetentionRuns time.Duration `mapstructure:"retention_runs" yaml:"retention_runs"`
	Log           config.Log    `mapstructure:"log" yaml:"log"`
	// Teams and Grants seed the store's access at start (source
	// "config"; docs/configuration.md, "Access").
	Teams  []TeamSpec  `mapstructure:"teams" yaml:"teams"`
	Grants []GrantSpec `mapstructure:"grants" yaml:"grants"`
	// OIDC is single sign-on through an OpenID provider (off when its
	// issuer is empty; docs/configuration.md, "oidc").
	OIDC sso.Config `mapstructure:"oidc" yaml:"oidc"`
	// Notify lists the notification destinations (docs/notifications.md).
	Notify []notify.Destination `mapstructure:"notify" yaml:"notify"`
	// NotifyAllowLoopback lets destinations be plain http and on loopback
	// or link-local addresses (`muster dev` sets it).
	NotifyAllowLoopback bool `mapstructure:"notify_allow_loopback" yaml:"notify_allow_loopback"`
	// CoreSteps configures the gates and calls the core runs for runs'
	// procedures: loopback targets, and the secrets of calls
	// (docs/runs-and-playbooks.md, "Core-side steps").
	CoreSteps probe.Config `mapstructure:"core_steps" yaml:"core_steps"`
	// ShutdownTimeout bounds the whole stop, every part together.
	ShutdownTimeout time.Duration `mapstructure:"shutdown_timeout" yaml:"shutdown_timeout"`
	// Tracing sends OpenTelemetry traces of runs and actions over
	// OTLP/HTTP; off while its endpoint is empty (docs/operations.md,
	// "Tracing").
	Tracing tracing.Config `mapstructure:"tracing" yaml:"tracing"`

	// DevLogins maps one-time sign-in nonces to token names, for the links
	// `muster dev` prints. It is never read from a configuration source.
	DevLogins map[string]string `mapstructure:"-" yaml:"-"`
	// DevLoginsExpire is when the DevLogins links stop working.
	DevLoginsExpire time.Time `mapstructure:"-" yaml:"-"`
	// MinWindow, when set, replaces the 1-minute minimum of a maintenance
	// window's duration (never below a second). Only the end-to-end tests
	// set it, through a hidden flag; it is never read from a
	// configuration source.
	MinWindow time.Duration `mapstructure:"-" yaml:"-"`
	// MinEvery, when set, replaces the 1-minute minimum of a schedule's
	// @every (schedule.MinEvery; never below a second, robfig's own
	// floor). Only the end-to-end tests set it, through a hidden flag.
	MinEvery time.Duration `mapstructure:"-" yaml:"-"`
	// LoopbackUncapped lifts api.max_connections_per_client for loopback
	// clients. Only `muster dev` sets it; it is never read from a
	// configuration source.
	LoopbackUncapped bool `mapstructure:"-" yaml:"-"`
}

// UIConfig is the web UI served at /ui/ beside the API.
type UIConfig struct {
	Enabled bool `mapstructure:"enabled" yaml:"enabled"`
	// SessionTTL is how long a browser stays signed in.
	SessionTTL time.Duration `mapstructure:"session_ttl" yaml:"session_ttl"`
	// MaxSessionsPerToken caps the sessions of one token: signing in once
	// more ends its oldest.
	MaxSessionsPerToken int `mapstructure:"max_sessions_per_token" yaml:"max_sessions_per_token"`
	// PublicURL is the core's address as people reach it, for the links
	// of notifications; empty: http(s)://api.addr.
	PublicURL string `mapstructure:"public_url" yaml:"public_url"`
}

// DevLoginTTL is how long the DevLogins links work (`muster dev`).
const DevLoginTTL = ui.DevLoginTTL

// DefaultHeaderTimeout is api.header_timeout's default.
const DefaultHeaderTimeout = 5 * time.Second

// Store drivers.
const (
	DriverSQLite   = "sqlite"
	DriverPostgres = "postgres"
)

// StoreConfig chooses the store. With the sqlite driver, DSN is the database
// file and defaults to <data_dir>/core.db. With the postgres driver, DSN is
// required: a postgres:// URL or key=value pairs, shared by every replica.
type StoreConfig struct {
	Driver string `mapstructure:"driver" yaml:"driver"`
	DSN    string `mapstructure:"dsn" yaml:"dsn"`
}

// APIConfig is the REST API's listener and its limits.
type APIConfig struct {
	config.API `mapstructure:",squash" yaml:",inline"`
	// MaxEventStreams caps the streams open at once, the API's event
	// streams and the web UI's live updates together, over all tokens (503
	// beyond). At most half of max_connections, so that streams never take
	// every connection.
	MaxEventStreams int `mapstructure:"max_event_streams" yaml:"max_event_streams"`
	// MaxStreamsPerToken caps the streams of one token over all its
	// sessions, API and web UI together (429 beyond).
	MaxStreamsPerToken int `mapstructure:"max_streams_per_token" yaml:"max_streams_per_token"`
	// HeaderTimeout: a connection that has not sent a whole request's
	// headers this long after it opened (or after it began the next
	// request) is closed; read_timeout when that is shorter.
	HeaderTimeout time.Duration `mapstructure:"header_timeout" yaml:"header_timeout"`
}

// AgentsTLSConfig is how the core reaches agents over TLS: the CA that signs
// their certificates and, for agents that require client certificates, the
// core's own. Unset, the core speaks plain HTTP to agents.
type AgentsTLSConfig struct {
	CAFile   string `mapstructure:"ca_file" yaml:"ca_file"`
	CertFile string `mapstructure:"cert_file" yaml:"cert_file"`
	KeyFile  string `mapstructure:"key_file" yaml:"key_file"`
}

// Enabled reports whether agents are reached over TLS.
func (t AgentsTLSConfig) Enabled() bool { return t.CAFile != "" || t.CertFile != "" || t.KeyFile != "" }

// AgentsCAConfig is the CA the core signs enrolled agents' certificates
// with, and how long those last (agents renew at two thirds of it).
type AgentsCAConfig struct {
	CertFile string        `mapstructure:"cert_file" yaml:"cert_file"`
	KeyFile  string        `mapstructure:"key_file" yaml:"key_file"`
	Lifetime time.Duration `mapstructure:"lifetime" yaml:"lifetime"`
}

// Enabled reports whether the core enrolls agents.
func (c AgentsCAConfig) Enabled() bool { return c.CertFile != "" || c.KeyFile != "" }

// OldFullSyncEvery reports whether full_sync_every holds an integer with no
// unit, its meaning before it became a duration (every Nth pass compared
// id sets): read as nanoseconds, below a microsecond.
func (o OrchestrateConfig) OldFullSyncEvery() bool {
	return o.FullSyncEvery > 0 && o.FullSyncEvery < time.Microsecond
}

// OldFullSyncEveryWarning is what the core says, at start and in check,
// of an integer full_sync_every.
const OldFullSyncEveryWarning = "orchestrate.full_sync_every is an integer, its meaning before this release " +
	"(every Nth pass compares id sets): read as orchestrate.compare_ids_every; full_sync_every is now a duration " +
	"(every node fully synced once per period; 0: scaled with the fleet): rename the key"

// Orchestration returns the full-sync period and the compare period the
// orchestrator runs with: an old integer full_sync_every N is read as
// compare_ids_every N (the full-sync period then scales with the fleet).
func (o OrchestrateConfig) Orchestration() (fullSyncEvery time.Duration, compareIDsEvery int) {
	if o.OldFullSyncEvery() {
		return 0, int(o.FullSyncEvery)
	}
	return o.FullSyncEvery, o.CompareIDsEvery
}

// OrchestrateConfig tunes the orchestrator's syncs.
type OrchestrateConfig struct {
	Interval         time.Duration `mapstructure:"interval" yaml:"interval"`
	Workers          int           `mapstructure:"workers" yaml:"workers"`
	MaxQueuedPerNode int           `mapstructure:"max_queued_per_node" yaml:"max_queued_per_node"`
	// FullSyncEvery: every node is fully synced at least this often, its
	// turn spread evenly over the period; between turns a pass asks its
	// change counter alone (DESIGN §27). 0: scaled with the cluster, 10 s
	// at 1,000 nodes up to 5 min (orchestrate.ScaledFullSyncEvery). An
	// integer with no unit, this key's meaning before, is read as
	// compare_ids_every with a warning (OldFullSyncEvery).
	FullSyncEvery time.Duration `mapstructure:"full_sync_every" yaml:"full_sync_every"`
	// CounterEvery: between its full turns, a node's change counter is
	// asked once this often, the asks spread evenly; a node with work in
	// flight or due is synced at every pass, a nudged one at once. 0:
	// scaled with the cluster, the interval or 1 ms a node when longer
	// (orchestrate.ScaledCounterEvery): about 1,000 asks a second at most.
	CounterEvery time.Duration `mapstructure:"counter_every" yaml:"counter_every"`
	// CompareIDsEvery: every this many full turns of a node (every this
	// many passes when every node takes its turn at every pass), its
	// records are listed and compared with the core's (LOST detection).
	CompareIDsEvery int           `mapstructure:"compare_ids_every" yaml:"compare_ids_every"`
	AgentTimeout    time.Duration `mapstructure:"agent_timeout" yaml:"agent_timeout"`
	// ScheduleTTL: an approved action that has not reached its agent this
	// long after it was scheduled is CANCELLED ("schedule timeout").
	ScheduleTTL time.Duration `mapstructure:"schedule_ttl" yaml:"schedule_ttl"`
	// RunPoll: how often the nodes holding an unfinished child of a running
	// run are synced, so that its next wave does not wait for the interval.
	RunPoll time.Duration `mapstructure:"run_poll" yaml:"run_poll"`
	// RunWatch: the nodes holding an unfinished child of a run are watched
	// with blocking GETs of their agents' changes, so that the child's end
	// is seen at once without gossip (docs/architecture.md, "Node syncs and
	// reactive progress").
	RunWatch bool `mapstructure:"run_watch" yaml:"run_watch"`
	// MaxWatches bounds the watches held at once (a goroutine and a
	// connection each); nodes beyond it are synced at every pass instead.
	// 0: orchestrate.DefaultMaxWatches.
	MaxWatches int `mapstructure:"max_watches" yaml:"max_watches"`
	// ReapAfter: a node its cluster does not declare, DOWN this long, is
	// forgotten with a node.reaped event, never below a declared count's
	// floor (docs/architecture.md, "Declared membership"). 0: never;
	// otherwise at least nodes.MinReapAfter.
	ReapAfter time.Duration `mapstructure:"reap_after" yaml:"reap_after"`
	// AgentIdleConns bounds the connections to agents kept open between
	// syncs, over all nodes (plain HTTP; with agents_tls every node has
	// its own): 0 keeps one per node, which a fleet past the process's
	// descriptor limit (LimitNOFILE) cannot.
	AgentIdleConns int `mapstructure:"agent_idle_conns" yaml:"agent_idle_conns"`
}

// GossipConfig is the core's membership in the gossip pool, where agents
// announce themselves.
type GossipConfig struct {
	Enabled  bool     `mapstructure:"enabled" yaml:"enabled"`
	BindAddr string   `mapstructure:"bind_addr" yaml:"bind_addr"`
	Join     []string `mapstructure:"join" yaml:"join"`
	// KeyFile holds the pool's base64 key (muster gossip keygen).
	KeyFile string `mapstructure:"key_file" yaml:"key_file"`
	// Insecure allows gossip without a key (development only).
	Insecure bool `mapstructure:"insecure" yaml:"insecure"`
	// Timing: profile, probe_interval, probe_timeout, suspicion_mult.
	gossip.Timing `mapstructure:",squash" yaml:",inline"`
}

// HAConfig tunes several core replicas sharing one PostgreSQL database
// (docs/architecture.md, "Several core replicas"); it has no effect on SQLite.
type HAConfig struct {
	// LeaseTTL is how long a cluster lease lasts unless renewed (every
	// third of it). A replica that cannot renew stops its syncs within it;
	// another takes the cluster after it.
	LeaseTTL time.Duration `mapstructure:"lease_ttl" yaml:"lease_ttl"`
	// ReplicaID names this replica among the others; empty: the host name
	// and a random suffix, new at every start.
	ReplicaID string `mapstructure:"replica_id" yaml:"replica_id"`
}

// DefaultConfig returns the defaults (docs/architecture.md, "Configuration").
func DefaultConfig() Config {
	return Config{
		Store: StoreConfig{Driver: DriverSQLite},
		API: APIConfig{API: config.API{Addr: "127.0.0.1:7410", Server: config.DefaultServer()},
			MaxEventStreams: streams.DefaultMax, MaxStreamsPerToken: streams.DefaultPerToken,
			HeaderTimeout: DefaultHeaderTimeout},
		Clusters: []discovery.ClusterSpec{},
		Kinds:    []budget.KindRule{},
		Orchestrate: OrchestrateConfig{
			Interval:         10 * time.Second,
			Workers:          8,
			MaxQueuedPerNode: 16,
			CompareIDsEvery:  6,
			AgentTimeout:     5 * time.Second,
			ScheduleTTL:      24 * time.Hour,
			RunPoll:          250 * time.Millisecond,
			RunWatch:         true,
			ReapAfter:        nodes.DefaultReapAfter,
		},
		AgentsCA:        AgentsCAConfig{Lifetime: enroll.DefaultLifetime},
		Approval:        approval.DefaultPolicy(),
		Retention:       retention.DefaultConfig().Retention,
		Notify:          []notify.Destination{},
		Gossip:          GossipConfig{BindAddr: "0.0.0.0:7946", Join: []string{}, Timing: gossip.Timing{Profile: gossip.ProfileLAN}},
		UI:              UIConfig{Enabled: true, SessionTTL: 12 * time.Hour, MaxSessionsPerToken: ui.DefaultMaxSessionsPerToken},
		HA:              HAConfig{LeaseTTL: 10 * time.Second},
		Log:             config.DefaultLog(),
		ShutdownTimeout: config.DefaultShutdownTimeout,
		Tracing:         tracing.DefaultConfig(),
	}
}

// Validate returns one error per bad field, named by its configuration key.
func (c *Config) Validate() error {
	var errs config.Errors
	add := errs.Add
	if c.DataDir == "" {
		add("data_dir", "required (the core keeps core.db and admin.token there)")
	}
	switch c.Store.Driver {
	case DriverSQLite:
	case DriverPostgres:
		if c.Store.DSN == "" {
			add("store.dsn", "required with store.driver %q (such as postgres://muster@db.example:5432/muster)", DriverPostgres)
		}
	default:
		add("store.driver", "%q is not %q or %q", c.Store.Driver, DriverSQLite, DriverPostgres)
	}

	if bad := config.ValidateAddr("api.addr", c.API.Addr); bad != nil {
		errs = append(errs, bad...)
	} else if !c.API.TLS.Enabled() && !c.API.Insecure && !config.IsLoopback(c.API.Addr) {
		add("api.addr", "%s is not a loopback address; configure api.tls or set api.insecure: true", c.API.Addr)
	}
	errs = append(errs, c.API.TLS.Validate("api.tls")...)
	errs = append(errs, c.API.Server.Validate("api")...)
	if c.API.MaxEventStreams < 1 || c.API.MaxEventStreams > c.API.MaxConnections/2 {
		add("api.max_event_streams", "must be from 1 to half of api.max_connections (%d), got %d",
			c.API.MaxConnections/2, c.API.MaxEventStreams)
	}
	if c.API.MaxStreamsPerToken < 1 || c.API.MaxStreamsPerToken > c.API.MaxEventStreams {
		add("api.max_streams_per_token", "must be from 1 to api.max_event_streams (%d), got %d",
			c.API.MaxEventStreams, c.API.MaxStreamsPerToken)
	}
	if c.API.HeaderTimeout <= 0 {
		add("api.header_timeout", "must be a positive duration such as 5s, got %s", c.API.HeaderTimeout)
	}
	if (c.AgentsTLS.CertFile == "") != (c.AgentsTLS.KeyFile == "") {
		add("agents_tls", "cert_file and key_file must be set together")
	}
	if c.AgentsTLS.Enabled() && c.AgentsTLS.CAFile == "" {
		add("agents_tls.ca_file", "required with agents_tls (the CA that signs the agents' certificates)")
	}
	if c.API.TLS.ClientCAFile != "" && !c.API.TLS.Enabled() {
		add("api.tls.client_ca_file", "needs api.tls.cert_file and api.tls.key_file")
	}
	if a := c.AgentsCA; a.Enabled() {
		if a.CertFile == "" || a.KeyFile == "" {
			add("agents_ca", "cert_file and key_file must be set together")
		}
		if !c.API.TLS.Enabled() {
			add("agents_ca", "needs api.tls: agents enroll over TLS and check the core against their CA pin")
		}
		if c.AgentsTLS.CertFile == "" {
			add("agents_ca", "needs agents_tls (ca_file, cert_file, key_file): enrolled agents require the core's client certificate")
		}
		if a.Lifetime < enroll.MinLifetime {
			add("agents_ca.lifetime", "must be at least %s, got %s", enroll.MinLifetime, a.Lifetime)
		}
	}

	c.validateAccess(add)

	clusters := map[string]bool{}
	for i, cl := range c.Clusters {
		key := fmt.Sprintf("clusters[%d]", i)
		switch {
		case cl.ID == "":
			add(key+".id", "required")
		case names.CheckID(cl.ID) != nil:
			add(key+".id", "%v", names.CheckID(cl.ID))
		case clusters[cl.ID]:
			add(key+".id", "cluster %q is listed twice", cl.ID)
		}
		clusters[cl.ID] = true
		if err := labels.Set(cl.Labels).Validate(); err != nil {
			add(key+".labels", "%v", err)
		}
		bad := cl.Expect.Validate(names.CheckID, func(l map[string]string) error { return labels.Set(l).Validate() })
		for _, f := range slices.Sorted(maps.Keys(bad)) {
			add(key+".expect."+f, "%s", bad[f])
		}
		nodes := map[string]bool{}
		for j, n := range cl.Nodes {
			nkey := fmt.Sprintf("%s.nodes[%d]", key, j)
			switch {
			case n.ID == "":
				add(nkey+".id", "required")
			case names.CheckID(n.ID) != nil:
				add(nkey+".id", "%v", names.CheckID(n.ID))
			case nodes[n.ID]:
				add(nkey+".id", "node %q is listed twice in cluster %q", n.ID, cl.ID)
			}
			nodes[n.ID] = true
			if err := validAgentAddr(n.Addr); err != nil {
				add(nkey+".addr", "%v", err)
			} else if c.AgentsTLS.Enabled() && strings.HasPrefix(strings.ToLower(n.Addr), "http://") {
				add(nkey+".addr", "%q names plain HTTP, but with agents_tls every node is reached over https: give host:port", n.Addr)
			}
			if err := labels.Set(n.Labels).Validate(); err != nil {
				add(nkey+".labels", "%v", err)
			}
		}
		if m := cl.Budget.MaxUnavailable; m != "" {
			if _, err := limit.Parse(m); err != nil {
				add(key+".budget.max_unavailable", "%v", err)
			}
		}
		if _, bad := schedule.ParseCalendar(cl.Windows, cl.Freezes, c.MinWindow); len(bad) > 0 {
			for _, b := range bad {
				add(key+"."+b.Field, "%v", b.Err)
			}
		}
	}

	o := c.Orchestrate
	for key, d := range map[string]time.Duration{
		"orchestrate.interval":      o.Interval,
		"orchestrate.agent_timeout": o.AgentTimeout,
		"orchestrate.schedule_ttl":  o.ScheduleTTL,
		"orchestrate.run_poll":      o.RunPoll,
		"retention":                 c.Retention,
	} {
		if d <= 0 {
			add(key, "must be a positive duration such as 10s, got %s", d)
		}
	}
	if c.RetentionRuns < 0 {
		add("retention_runs", "must not be negative (0: as retention), got %s", c.RetentionRuns)
	}
	if o.MaxWatches < 0 {
		add("orchestrate.max_watches", "must not be negative (0: 4096), got %d", o.MaxWatches)
	}
	if o.AgentIdleConns < 0 {
		add("orchestrate.agent_idle_conns", "must not be negative (0: one per node), got %d", o.AgentIdleConns)
	}
	if d := o.FullSyncEvery; d < 0 || (d > 0 && !o.OldFullSyncEvery() && d < time.Second) {
		add("orchestrate.full_sync_every", "must be 0 (scaled with the fleet) or a duration of at least 1s such as 5m, got %s", d)
	}
	if d := o.CounterEvery; d < 0 || (d > 0 && d < time.Second) {
		add("orchestrate.counter_every", "must be 0 (scaled with the fleet) or a duration of at least 1s such as 30s, got %s", d)
	}
	if r := o.ReapAfter; r < 0 || (r > 0 && r < nodes.MinReapAfter) {
		add("orchestrate.reap_after", "must be 0 (never reap) or at least %s, got %s", nodes.MinReapAfter, r)
	}
	for key, n := range map[string]int{
		"orchestrate.workers":             o.Workers,
		"orchestrate.max_queued_per_node": o.MaxQueuedPerNode,
		"orchestrate.compare_ids_every":   o.CompareIDsEvery,
	} {
		if n <= 0 {
			add(key, "must be at least 1, got %d", n)
		}
	}
	errs = append(errs, c.Approval.Validate()...)
	errs = append(errs, budget.ValidateKinds(c.Kinds)...)
	if g := c.Gossip; g.Enabled {
		if g.KeyFile == "" && !g.Insecure {
			add("gossip.key_file", "required when gossip is enabled (or set gossip.insecure: true)")
		}
		errs = append(errs, config.ValidateAddr("gossip.bind_addr", g.BindAddr)...)
		errs = append(errs, gossip.ValidateJoin("gossip.join", g.Join)...)
		errs = append(errs, g.Timing.Validate("gossip")...)
	}
	errs = append(errs, c.OIDC.Validate("oidc")...)
	if c.UI.Enabled && c.UI.SessionTTL <= 0 {
		add("ui.session_ttl", "must be a positive duration such as 12h, got %s", c.UI.SessionTTL)
	}
	if c.UI.Enabled && c.UI.MaxSessionsPerToken < 1 {
		add("ui.max_sessions_per_token", "must be at least 1, got %d", c.UI.MaxSessionsPerToken)
	}
	if c.HA.LeaseTTL < time.Second {
		add("ha.lease_ttl", "must be at least 1s, got %s", c.HA.LeaseTTL)
	}
	if c.HA.ReplicaID != "" {
		if err := names.CheckID(c.HA.ReplicaID); err != nil {
			add("ha.replica_id", "%v", err)
		}
	}
	known := notify.Known{Dynamic: c.Gossip.Enabled}
	for _, cl := range c.Clusters {
		known.Clusters = append(known.Clusters, cl.ID)
	}
	errs = append(errs, notify.Validate(c.Notify, c.NotifyAllowLoopback, known)...)
	errs = append(errs, c.CoreSteps.Validate("core_steps")...)
	errs = append(errs, c.Tracing.Validate()...)
	if u := c.UI.PublicURL; u != "" {
		if pu, err := url.Parse(u); err != nil || (pu.Scheme != "http" && pu.Scheme != "https") || pu.Host == "" {
			add("ui.public_url", "%q is not an http(s) URL with a host", u)
		}
	}
	errs = append(errs, c.Log.Validate()...)
	errs = append(errs, config.ValidateShutdownTimeout(c.ShutdownTimeout)...)
	return errs.Err()
}

// validAgentAddr accepts host:port or an http(s) URL with a host.
func validAgentAddr(addr string) error {
	if addr == "" {
		return fmt.Errorf("required (host:port of the node's agent API)")
	}
	if strings.Contains(addr, "://") {
		u, err := url.Parse(addr)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("%q is not host:port or an http(s) URL", addr)
		}
		return nil
	}
	if _, port, err := net.SplitHostPort(addr); err != nil || port == "" {
		return fmt.Errorf("%q is not host:port", addr)
	}
	return nil
}

// PublicURL is where people reach the core: ui.public_url, else the API's
// address.
func (c *Config) PublicURL() string {
	if c.UI.PublicURL != "" {
		return c.UI.PublicURL
	}
	if c.API.TLS.Enabled() {
		return "https://" + c.API.Addr
	}
	return "http://" + c.API.Addr
}

// Calendars are the maintenance windows and freezes of every configured
// cluster that has any. Call it on a validated configuration.
func (c *Config) Calendars() schedule.Calendars {
	out := schedule.Calendars{}
	for _, cl := range c.Clusters {
		if cal, _ := schedule.ParseCalendar(cl.Windows, cl.Freezes, c.MinWindow); cal != nil {
			out[cl.ID] = cal
		}
	}
	return out
}

// policySettings is what of the policies the configuration keeps: the
// approval settings, the disruptive kinds, the least window.
func (c *Config) policySettings() policy.Settings {
	return policy.Settings{Approval: c.Approval, Kinds: c.Kinds, MinWindow: c.MinWindow}
}

// BudgetPolicy is the disruption budget of every configured cluster and
// the kinds it counts. Call it on a validated configuration.
// Membership is every cluster's declared membership (its expect block).
func (c *Config) Membership() nodes.Membership {
	out := nodes.Membership{}
	for _, cl := range c.Clusters {
		if cl.Expect.Declared() {
			out[cl.ID] = *cl.Expect
		}
	}
	return out
}

func (c *Config) BudgetPolicy() budget.Policy {
	p := budget.Policy{MaxUnavailable: map[string]limit.Limit{}, Kinds: c.Kinds}
	for _, cl := range c.Clusters {
		if l, err := limit.Parse(cl.Budget.MaxUnavailable); err == nil && cl.Budget.MaxUnavailable != "" {
			p.MaxUnavailable[cl.ID] = l
		}
	}
	return p
}
