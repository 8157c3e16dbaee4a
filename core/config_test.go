package core

import (
	"slices"
	"testing"
	"time"

	"github.com/musterhq/muster/core/budget"
	"github.com/musterhq/muster/core/discovery"
	"github.com/musterhq/muster/core/nodes"
	"github.com/musterhq/muster/core/schedule"
	"github.com/musterhq/muster/core/sso"
	"github.com/musterhq/muster/shared/config"
)

func validConfig() Config {
	c := DefaultConfig()
	c.DataDir = "/var/lib/muster"
	c.Clusters = []discovery.ClusterSpec{{ID: "db", Nodes: []discovery.NodeSpec{
		{ID: "db-1", Addr: "10.0.0.1:7420"}, {ID: "db-2", Addr: "https://db-2.example:7420"},
	}}}
	return c
}

// TestOldFullSyncEveryIsReadAsCompareIDsEvery: an integer full_sync_every
// (decoded as nanoseconds) keeps its meaning before: compare id sets every
// Nth pass, the full-sync period then scaled with the fleet.
func TestOldFullSyncEveryIsReadAsCompareIDsEvery(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		in          OrchestrateConfig
		old         bool
		full        time.Duration
		compareWant int
	}{
		{OrchestrateConfig{FullSyncEvery: 6, CompareIDsEvery: 9}, true, 0, 6},
		{OrchestrateConfig{FullSyncEvery: 5 * time.Minute, CompareIDsEvery: 9}, false, 5 * time.Minute, 9},
		{OrchestrateConfig{CompareIDsEvery: 4}, false, 0, 4},
	} {
		full, compare := c.in.Orchestration()
		if c.in.OldFullSyncEvery() != c.old || full != c.full || compare != c.compareWant {
			t.Errorf("%+v: old %v, (%s, %d); want %v, (%s, %d)", c.in, c.in.OldFullSyncEvery(), full, compare, c.old, c.full, c.compareWant)
		}
	}
}

func TestDefaultConfig(t *testing.T) {
	t.Parallel()
	c := DefaultConfig()
	if c.API.Addr != "127.0.0.1:7410" || c.Store.Driver != DriverSQLite || c.Orchestrate.Interval != 10*time.Second ||
		c.Orchestrate.Workers != 8 || c.Orchestrate.MaxQueuedPerNode != 16 || c.Orchestrate.CompareIDsEvery != 6 || c.Orchestrate.FullSyncEvery != 0 ||
		c.Orchestrate.AgentTimeout != 5*time.Second || c.Approval.TTL != 24*time.Hour {
		t.Fatalf("defaults %+v", c)
	}
	if c := validConfig(); c.Validate() != nil {
		t.Fatalf("a valid configuration is refused: %v", c.Validate())
	}
}

func TestValidate(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		edit func(c *Config)
		keys []string // the bad fields, in order
	}{
		{"no data dir", func(c *Config) { c.DataDir = "" }, []string{"data_dir"}},
		{"postgres without dsn", func(c *Config) { c.Store.Driver = DriverPostgres }, []string{"store.dsn"}},
		{"postgres", func(c *Config) { c.Store.Driver, c.Store.DSN = DriverPostgres, "postgres://muster@db:5432/muster" }, nil},
		{"short lease ttl", func(c *Config) { c.HA.LeaseTTL = 100 * time.Millisecond }, []string{"ha.lease_ttl"}},
		{"bad replica id", func(c *Config) { c.HA.ReplicaID = "a/b" }, []string{"ha.replica_id"}},
		{"unknown driver", func(c *Config) { c.Store.Driver = "mysql" }, []string{"store.driver"}},
		{"bad api addr", func(c *Config) { c.API.Addr = "7410" }, []string{"api.addr"}},
		{"plaintext outside loopback", func(c *Config) { c.API.Addr = "0.0.0.0:7410" }, []string{"api.addr"}},
		{"plaintext outside loopback, insecure", func(c *Config) { c.API.Addr, c.API.Insecure = "0.0.0.0:7410", true }, nil},
		{"cert without key", func(c *Config) { c.API.TLS.CertFile = "c.pem" }, []string{"api.tls"}},
		{"agents cert without key", func(c *Config) { c.AgentsTLS.CertFile, c.AgentsTLS.CAFile = "c.pem", "ca.pem" }, []string{"agents_tls"}},
		{"agents cert without CA", func(c *Config) { c.AgentsTLS.CertFile, c.AgentsTLS.KeyFile = "c.pem", "k.pem" }, []string{"agents_tls.ca_file"}},
		{"agents_ca without TLS", func(c *Config) {
			c.AgentsCA = AgentsCAConfig{CertFile: "ca.pem", KeyFile: "ca-key.pem", Lifetime: time.Hour}
		},
			[]string{"agents_ca"}},
		{"agents_ca half set, short lifetime", func(c *Config) {
			c.API.TLS.CertFile, c.API.TLS.KeyFile = "core.pem", "core-key.pem"
			c.AgentsTLS = AgentsTLSConfig{CAFile: "ca.pem", CertFile: "core.pem", KeyFile: "core-key.pem"}
			c.AgentsCA = AgentsCAConfig{CertFile: "ca.pem", Lifetime: time.Second}
		}, []string{"agents_ca", "agents_ca.lifetime"}},
		{"agents_ca", func(c *Config) {
			c.API.TLS.CertFile, c.API.TLS.KeyFile = "core.pem", "core-key.pem"
			c.AgentsTLS = AgentsTLSConfig{CAFile: "ca.pem", CertFile: "core.pem", KeyFile: "core-key.pem"}
			c.AgentsCA = AgentsCAConfig{CertFile: "ca.pem", KeyFile: "ca-key.pem", Lifetime: 30 * time.Second}
		}, nil},
		{"client CA without a certificate", func(c *Config) { c.API.TLS.ClientCAFile = "ca.pem" }, []string{"api.tls.client_ca_file"}},
		{"cluster without id", func(c *Config) { c.Clusters[0].ID = "" }, []string{"clusters[0].id"}},
		{"cluster twice", func(c *Config) { c.Clusters = append(c.Clusters, c.Clusters[0]) }, []string{"clusters[1].id"}},
		{"bad cluster id", func(c *Config) { c.Clusters[0].ID = "a b" }, []string{"clusters[0].id"}},
		{"bad node id", func(c *Config) { c.Clusters[0].Nodes[0].ID = "db 1" }, []string{"clusters[0].nodes[0].id"}},
		{"node id not starting with a letter or digit", func(c *Config) { c.Clusters[0].Nodes[0].ID = ".." }, []string{"clusters[0].nodes[0].id"}},
		{"node twice", func(c *Config) { c.Clusters[0].Nodes[1].ID = "db-1" }, []string{"clusters[0].nodes[1].id"}},
		{"node without addr", func(c *Config) { c.Clusters[0].Nodes[0].Addr = "" }, []string{"clusters[0].nodes[0].addr"}},
		{"node addr without port", func(c *Config) { c.Clusters[0].Nodes[0].Addr = "db-1" }, []string{"clusters[0].nodes[0].addr"}},
		{"node addr bad scheme", func(c *Config) { c.Clusters[0].Nodes[0].Addr = "ftp://db-1:21" }, []string{"clusters[0].nodes[0].addr"}},
		{"plain http node with agents_tls", func(c *Config) {
			c.AgentsTLS = AgentsTLSConfig{CAFile: "ca.pem", CertFile: "c.pem", KeyFile: "k.pem"}
			c.Clusters[0].Nodes[0].Addr = "http://db-1:7420"
		}, []string{"clusters[0].nodes[0].addr"}},
		{"orchestrate zeros", func(c *Config) { c.Orchestrate = OrchestrateConfig{} }, []string{
			"orchestrate.agent_timeout", "orchestrate.compare_ids_every", "orchestrate.interval",
			"orchestrate.max_queued_per_node", "orchestrate.run_poll", "orchestrate.schedule_ttl", "orchestrate.workers",
		}},
		{"retention_runs negative", func(c *Config) { c.RetentionRuns = -time.Hour }, []string{"retention_runs"}},
		{"retention_runs", func(c *Config) { c.RetentionRuns = 24 * time.Hour }, nil},
		{"reap_after off", func(c *Config) { c.Orchestrate.ReapAfter = 0 }, nil},
		{"reap_after at the floor", func(c *Config) { c.Orchestrate.ReapAfter = 10 * time.Minute }, nil},
		{"reap_after below the floor", func(c *Config) { c.Orchestrate.ReapAfter = 9 * time.Minute }, []string{"orchestrate.reap_after"}},
		{"reap_after negative", func(c *Config) { c.Orchestrate.ReapAfter = -time.Hour }, []string{"orchestrate.reap_after"}},
		{"agent_idle_conns bounded", func(c *Config) { c.Orchestrate.AgentIdleConns = 16384 }, nil},
		{"agent_idle_conns negative", func(c *Config) { c.Orchestrate.AgentIdleConns = -1 }, []string{"orchestrate.agent_idle_conns"}},
		{"approval", func(c *Config) { c.Approval.Default = "maybe" }, []string{"approval.default"}},
		{"node labels", func(c *Config) { c.Clusters[0].Nodes[0].Labels = map[string]string{"role": "replica"} }, nil},
		{"bad node label", func(c *Config) { c.Clusters[0].Nodes[0].Labels = map[string]string{"role": "<b>"} }, []string{"clusters[0].nodes[0].labels"}},
		{"budget count", func(c *Config) { c.Clusters[0].Budget.MaxUnavailable = "1" }, nil},
		{"budget percentage", func(c *Config) { c.Clusters[0].Budget.MaxUnavailable = "10%" }, nil},
		{"budget over 100%", func(c *Config) { c.Clusters[0].Budget.MaxUnavailable = "101%" }, []string{"clusters[0].budget.max_unavailable"}},
		{"budget not a number", func(c *Config) { c.Clusters[0].Budget.MaxUnavailable = "one" }, []string{"clusters[0].budget.max_unavailable"}},
		{"window and freeze", func(c *Config) {
			c.Clusters[0].Windows = []schedule.WindowSpec{{Cron: "0 2 * * *", Duration: 4 * time.Hour, Timezone: "Europe/Berlin"}}
			c.Clusters[0].Freezes = []schedule.FreezeSpec{{From: "2026-12-24T00:00:00+01:00", To: "2026-12-27T00:00:00+01:00", Reason: "holidays"}}
		}, nil},
		{"bad windows and freezes, all at once", func(c *Config) {
			c.Clusters[0].Windows = []schedule.WindowSpec{
				{Cron: "61 * * * *", Duration: time.Hour},
				{Cron: "0 2 * * *", Duration: time.Hour, Timezone: "Mars/Olympus"},
				{Cron: "0 2 * * *", Duration: 30 * time.Second},
				{Cron: "0 2 * * *", Duration: 8 * 24 * time.Hour},
			}
			c.Clusters[0].Freezes = []schedule.FreezeSpec{{From: "2026-12-27T00:00:00Z", To: "2026-12-24T00:00:00Z"}, {From: "soon", To: "2026-12-24T00:00:00Z"}}
		}, []string{"clusters[0].freezes[0].to", "clusters[0].freezes[1].from", "clusters[0].windows[0].cron",
			"clusters[0].windows[1].timezone", "clusters[0].windows[2].duration", "clusters[0].windows[3].duration"}},
		{"disruptive kinds", func(c *Config) {
			c.Kinds = []budget.KindRule{{Kind: "example.com/db.*", Disruptive: true}, {Kind: "*"}}
		}, nil},
		{"bad kind glob", func(c *Config) { c.Kinds = []budget.KindRule{{Kind: "[", Disruptive: true}, {}} }, []string{"kinds[0].kind", "kinds[1].kind"}},
		{"gossip without key", func(c *Config) { c.Gossip.Enabled = true }, []string{"gossip.key_file"}},
		{"gossip with key file", func(c *Config) { c.Gossip.Enabled, c.Gossip.KeyFile = true, "/gossip.key" }, nil},
		{"gossip insecure", func(c *Config) { c.Gossip.Enabled, c.Gossip.Insecure = true, true }, nil},
		{"gossip bad join and profile", func(c *Config) {
			c.Gossip.Enabled, c.Gossip.Insecure, c.Gossip.Join, c.Gossip.Profile = true, true, []string{"core"}, "wan"
		}, []string{"gossip.join[0]", "gossip.profile"}},
		{"log", func(c *Config) { c.Log.Level = "loud" }, []string{"log.level"}},
		{"server limits zero", func(c *Config) {
			c.API = APIConfig{API: config.API{Addr: c.API.Addr}}
		}, []string{
			"api.header_timeout", "api.idle_timeout", "api.max_connections", "api.max_connections_per_client",
			"api.max_event_streams", "api.max_header_bytes", "api.max_streams_per_token",
			"api.read_timeout", "api.write_timeout",
		}},
		// Issue 17, items 2 and 4: streams never take more than half the
		// connections; the caps per token and per client fit in the whole.
		{"streams over half the connections", func(c *Config) { c.API.MaxEventStreams = c.API.MaxConnections/2 + 1 },
			[]string{"api.max_event_streams"}},
		{"streams per token over all streams", func(c *Config) { c.API.MaxStreamsPerToken = c.API.MaxEventStreams + 1 },
			[]string{"api.max_streams_per_token"}},
		{"connections per client over all", func(c *Config) { c.API.MaxConnectionsPerClient = c.API.MaxConnections + 1 },
			[]string{"api.max_connections_per_client"}},
		{"header timeout zero", func(c *Config) { c.API.HeaderTimeout = 0 }, []string{"api.header_timeout"}},
		{"ui sessions per token zero", func(c *Config) { c.UI.MaxSessionsPerToken = 0 }, []string{"ui.max_sessions_per_token"}},
		{"ui session ttl", func(c *Config) { c.UI.SessionTTL = 0 }, []string{"ui.session_ttl"}},
		{"ui off, no ttl", func(c *Config) { c.UI = UIConfig{} }, nil},
		{"teams and grants", func(c *Config) {
			c.Clusters[0].Labels = map[string]string{"tier": "prod"}
			c.Teams = []TeamSpec{{Name: "db", Members: []string{"dana"}, Groups: []string{"db-oncall"}}}
			c.Grants = []GrantSpec{{Team: "db", Role: "approver", Clusters: "prod-db-*"},
				{Person: "dana", Role: "viewer", Labels: map[string]string{"tier": "prod"}}}
		}, nil},
		{"bad cluster labels", func(c *Config) { c.Clusters[0].Labels = map[string]string{"": "x"} }, []string{"clusters[0].labels"}},
		{"expect declaring nothing", func(c *Config) { c.Clusters[0].Expect = &nodes.Expect{} }, []string{"clusters[0].expect.nodes"}},
		{"expect with ids and a count", func(c *Config) { c.Clusters[0].Expect = &nodes.Expect{Nodes: []string{"db-1"}, Count: 2} },
			[]string{"clusters[0].expect.nodes"}},
		{"expect bad node id", func(c *Config) { c.Clusters[0].Expect = &nodes.Expect{Nodes: []string{"db 1"}} }, []string{"clusters[0].expect.nodes"}},
		{"expect on_alert without a playbook", func(c *Config) {
			c.Clusters[0].Expect = &nodes.Expect{Nodes: []string{"db-1"}, OnAlert: &nodes.OnAlert{Params: map[string]string{"missing": "x"}}}
		}, []string{"clusters[0].expect.on_alert.params", "clusters[0].expect.on_alert.playbook"}},
		{"expect negative count and grace", func(c *Config) { c.Clusters[0].Expect = &nodes.Expect{Count: -2, Grace: -time.Second} },
			[]string{"clusters[0].expect.count", "clusters[0].expect.grace"}},
		{"expect bad selector", func(c *Config) {
			c.Clusters[0].Expect = &nodes.Expect{Count: 2, Selector: map[string]string{"role": "<b>"}}
		}, []string{"clusters[0].expect.selector"}},
		{"expect selector without count", func(c *Config) {
			c.Clusters[0].Expect = &nodes.Expect{Selector: map[string]string{"role": "web"}}
		}, []string{"clusters[0].expect.count", "clusters[0].expect.nodes"}},
		{"bad teams", func(c *Config) {
			c.Teams = []TeamSpec{{Name: "a b"}, {Name: "db", Members: []string{"no spaces"}, Groups: []string{" "}}, {Name: "db"}}
		}, []string{"teams[0].name", "teams[1].groups[0]", "teams[1].members[0]", "teams[2].name"}},
		{"bad grants", func(c *Config) {
			c.Grants = []GrantSpec{{Role: "viewer", Clusters: "*"}, {Team: "nope", Role: "viewer", Clusters: "*"},
				{Person: "dana", Role: "root", Clusters: "*"}, {Person: "dana", Role: "viewer"}}
		}, []string{"grants[0]", "grants[1].team", "grants[2]", "grants[3]"}},
		// Issue 32, item 4: single sign-on is off without an issuer, and
		// checked field by field with one.
		{"oidc off", func(c *Config) { c.OIDC.ClientID = "muster" }, nil},
		{"oidc", func(c *Config) {
			c.OIDC = sso.Config{Issuer: "https://idp.example", ClientID: "muster", RedirectURL: "https://m.example/ui/oidc/callback"}
		}, nil},
		{"oidc half set", func(c *Config) { c.OIDC = sso.Config{Issuer: "http://idp.example"} },
			[]string{"oidc.client_id", "oidc.issuer", "oidc.redirect_url"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			cfg := validConfig()
			c.edit(&cfg)
			err := cfg.Validate()
			if got := config.FieldsOf(err); !slices.Equal(got, c.keys) {
				t.Fatalf("bad fields %q, want %q (%v)", got, c.keys, err)
			}
		})
	}
}

func TestBudgetPolicy(t *testing.T) {
	t.Parallel()
	cfg := validConfig()
	cfg.Clusters[0].Budget.MaxUnavailable = "25%"
	cfg.Kinds = []budget.KindRule{{Kind: "example.com/db.*", Disruptive: true}}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	p := cfg.BudgetPolicy()
	l, ok := p.Limit(cfg.Clusters[0].ID)
	if !ok || l.String() != "25%" || !p.Disruptive("example.com/db.restart") || p.Disruptive("example.com/web.restart") {
		t.Fatalf("policy %+v", p)
	}
	if _, ok := p.Limit("other"); ok {
		t.Fatal("a cluster without a budget has one")
	}
}
