package agent

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/musterhq/muster/agent/handlers"
	"github.com/musterhq/muster/shared/action"
	"github.com/musterhq/muster/shared/argschema"
	"github.com/musterhq/muster/shared/config"
	"github.com/musterhq/muster/shared/gossip"
	"github.com/musterhq/muster/shared/labels"
	"github.com/musterhq/muster/shared/names"
	"github.com/musterhq/muster/shared/secret"
	"github.com/musterhq/muster/shared/wire"
)

// Config is the agent's configuration (docs/architecture.md, "Configuration").
type Config struct {
	NodeID    string `mapstructure:"node_id" yaml:"node_id"`
	ClusterID string `mapstructure:"cluster_id" yaml:"cluster_id"`
	// Labels describe the node (role: replica, zone: eu-1): shown in info,
	// announced in gossip, selected by targets (docs/architecture.md, "Labels,
	// targets and the disruption budget").
	Labels  map[string]string `mapstructure:"labels" yaml:"labels"`
	DataDir string            `mapstructure:"data_dir" yaml:"data_dir"`
	API     APIConfig         `mapstructure:"api" yaml:"api"`
	Actions ActionsConfig     `mapstructure:"actions" yaml:"actions"`
	Gossip  GossipConfig      `mapstructure:"gossip" yaml:"gossip"`
	// Secrets names the files of the secrets that args may reference as
	// {{ secret "NAME" }}, read just before a command runs
	// (docs/architecture.md, "Secrets").
	Secrets secret.Config `mapstructure:"secrets" yaml:"secrets,omitempty"`
	// Enroll, with core set, enrolls the agent at its first start (when
	// no certificate exists) and renews its certificate after.
	Enroll EnrollConfig `mapstructure:"enroll" yaml:"enroll"`
	Log    config.Log   `mapstructure:"log" yaml:"log"`
	// ShutdownTimeout bounds the whole stop, every part together.
	ShutdownTimeout time.Duration `mapstructure:"shutdown_timeout" yaml:"shutdown_timeout"`
}

// APIConfig is the agent API: its TCP listener, for the core, and the Unix
// socket people and scripts on the node use (docs/architecture.md, "Who may
// call an agent").
type APIConfig struct {
	config.API `mapstructure:",squash" yaml:",inline"`
	// Socket is the Unix socket's path (default <data_dir>/agent.sock).
	Socket string `mapstructure:"socket" yaml:"socket"`
	// SocketGroup is the group (name or gid) whose members may use the
	// socket; empty: the agent's own group.
	SocketGroup string `mapstructure:"socket_group" yaml:"socket_group"`
	// Hosts are DNS names the core reaches this agent by, accepted in the
	// Host header over TCP beside IP literals, localhost, the machine's
	// name and the hosts of api.addr and gossip.advertise_api.
	Hosts []string `mapstructure:"hosts" yaml:"hosts"`
}

// SocketFile is the name of the socket in data_dir when api.socket is unset.
const SocketFile = "agent.sock"

// maxSocketPath is the longest path a Unix socket can bind (sun_path, less
// its terminating NUL).
const maxSocketPath = 107

// SocketPath returns the path of the API's Unix socket.
func (c *Config) SocketPath() string {
	if c.API.Socket != "" {
		return c.API.Socket
	}
	return filepath.Join(c.DataDir, SocketFile)
}

// ActionsConfig holds timeouts, retention and the external kinds.
type ActionsConfig struct {
	DefaultTimeout     time.Duration `mapstructure:"default_timeout" yaml:"default_timeout"`
	Retention          time.Duration `mapstructure:"retention" yaml:"retention"`
	RetentionMax       time.Duration `mapstructure:"retention_max" yaml:"retention_max"`
	TombstoneRetention time.Duration `mapstructure:"tombstone_retention" yaml:"tombstone_retention"`
	// PurgeInterval is how often retention runs.
	PurgeInterval time.Duration `mapstructure:"purge_interval" yaml:"purge_interval"`
	// KillGrace is how long an external command has between SIGTERM and SIGKILL.
	KillGrace time.Duration       `mapstructure:"kill_grace" yaml:"kill_grace"`
	External  []handlers.External `mapstructure:"external" yaml:"external"`
	// SystemdRun and Systemctl are the programs that run the commands of a
	// kind with privileges in a transient unit, and stop it
	// (docs/operations.md, "Privilege profiles").
	SystemdRun string `mapstructure:"systemd_run" yaml:"systemd_run"`
	Systemctl  string `mapstructure:"systemctl" yaml:"systemctl"`
}

// GossipConfig is the agent's membership in the gossip pool.
type GossipConfig struct {
	Enabled  bool   `mapstructure:"enabled" yaml:"enabled"`
	BindAddr string `mapstructure:"bind_addr" yaml:"bind_addr"`
	// AdvertiseAPI is the API address announced to the core (default: the
	// address the API listens on).
	AdvertiseAPI string   `mapstructure:"advertise_api" yaml:"advertise_api"`
	Join         []string `mapstructure:"join" yaml:"join"`
	// KeyFile holds the pool's base64 key (muster gossip keygen).
	KeyFile string `mapstructure:"key_file" yaml:"key_file"`
	// Insecure allows gossip without a key (development only).
	Insecure bool `mapstructure:"insecure" yaml:"insecure"`
	// Timing: profile, probe_interval, probe_timeout, suspicion_mult.
	gossip.Timing `mapstructure:",squash" yaml:",inline"`
}

// EnrollConfig is how the agent joins the fleet with a join token
// (docs/architecture.md, "Installing on a fleet").
type EnrollConfig struct {
	// Core is the core's API URL (https://host:port).
	Core string `mapstructure:"core" yaml:"core"`
	// TokenFile holds the join token, read at the first start only.
	TokenFile string `mapstructure:"token_file" yaml:"token_file"`
	// CAPin is the SHA-256 pin of the core's CA ('muster tls ca create'
	// prints it).
	CAPin string `mapstructure:"ca_pin" yaml:"ca_pin"`
	// Dir holds the certificate, key, CA bundle and gossip key (default:
	// the directory of api.tls.cert_file when it holds the enrollment
	// state, else <data_dir>/tls).
	Dir string `mapstructure:"dir" yaml:"dir"`
	// Replaces names a node of the cluster this one asks to replace: it
	// takes that node's declared place and labels once an admin approves
	// (muster node replace OLD --with NODE).
	Replaces string `mapstructure:"replaces" yaml:"replaces"`
}

// EnrollDir is the directory of the enrolled agent's files: enroll.dir;
// else the directory of api.tls.cert_file when that is an enrolled
// agent.pem with the enrollment state beside it; else <data_dir>/tls.
func (c *Config) EnrollDir() string {
	if c.Enroll.Dir != "" {
		return c.Enroll.Dir
	}
	// 'agent enroll --dir D' then api.tls naming D's files: the state is
	// beside the certificate served, and renewal must find it.
	if cert := c.API.TLS.CertFile; filepath.Base(cert) == "agent.pem" {
		d := filepath.Dir(cert)
		if _, err := os.Stat(filepath.Join(d, "enrolled.json")); err == nil {
			return d
		}
	}
	if c.DataDir == "" {
		return ""
	}
	return filepath.Join(c.DataDir, "tls")
}

// Enrolled reports whether the agent runs on certificates from enrollment:
// an enroll block, or an earlier 'muster agent enroll' into EnrollDir.
func (c *Config) Enrolled() bool {
	if c.Enroll.Core != "" {
		return true
	}
	d := c.EnrollDir()
	if d == "" {
		return false
	}
	_, err := os.Stat(filepath.Join(d, "enrolled.json"))
	return err == nil
}

// WithEnrollment returns c with the files of enrollment as the defaults of
// api.tls (certificate, key, and the CA bundle as client CA: the core's
// client certificate is signed by it) and of gossip.key_file, when the
// agent is enrolled.
func (c Config) WithEnrollment() Config {
	if !c.Enrolled() {
		return c
	}
	d := c.EnrollDir()
	t := &c.API.TLS
	if t.CertFile == "" && t.KeyFile == "" {
		t.CertFile, t.KeyFile = filepath.Join(d, "agent.pem"), filepath.Join(d, "agent-key.pem")
		if t.ClientCAFile == "" {
			t.ClientCAFile = filepath.Join(d, "ca.pem")
		}
	}
	if c.Gossip.Enabled && c.Gossip.KeyFile == "" && !c.Gossip.Insecure {
		c.Gossip.KeyFile = filepath.Join(d, "gossip.key")
	}
	return c
}

// DefaultConfig returns the defaults (docs/architecture.md, "Configuration").
func DefaultConfig() Config {
	return Config{
		Labels: map[string]string{},
		// No TCP listener by default: it serves the core only, over mutual
		// TLS that must be configured first; the Unix socket needs nothing.
		API: APIConfig{API: config.API{Server: config.DefaultServer()}},
		Actions: ActionsConfig{
			DefaultTimeout:     time.Hour,
			Retention:          7 * 24 * time.Hour,
			RetentionMax:       30 * 24 * time.Hour,
			TombstoneRetention: 90 * 24 * time.Hour,
			PurgeInterval:      time.Minute,
			KillGrace:          10 * time.Second,
			External:           []handlers.External{},
			SystemdRun:         handlers.DefaultSystemdRun,
			Systemctl:          handlers.DefaultSystemctl,
		},
		Gossip:          GossipConfig{BindAddr: "0.0.0.0:7946", Join: []string{}, Timing: gossip.Timing{Profile: gossip.ProfileLAN}},
		Log:             config.DefaultLog(),
		ShutdownTimeout: config.DefaultShutdownTimeout,
	}
}

// Validate returns nil, or config.Errors naming every bad field. The ids
// follow the core's rule (shared/names): an agent the core would ignore does
// not start.
func (c *Config) Validate() error {
	// An enrolled agent (or one with an enroll block, acted on at its first
	// start) gets api.tls and gossip.key_file from enrollment's files.
	e := c.WithEnrollment()
	c = &e
	var errs config.Errors
	if c.NodeID == "" {
		errs.Add("node_id", "required (this node's name, e.g. db-1)")
	} else if err := names.CheckID(c.NodeID); err != nil {
		errs.Add("node_id", "%v", err)
	}
	if c.ClusterID == "" {
		errs.Add("cluster_id", "required (the cluster this node belongs to)")
	} else if err := names.CheckID(c.ClusterID); err != nil {
		errs.Add("cluster_id", "%v", err)
	}
	if c.DataDir == "" {
		errs.Add("data_dir", "required (the queue is <data_dir>/agent.db)")
	}
	if err := labels.Set(c.Labels).Validate(); err != nil {
		errs = append(errs, config.Wrap("labels", err))
	} else if c.Gossip.Enabled {
		// Announced in the gossip metadata, which memberlist bounds.
		api := c.Gossip.AdvertiseAPI
		if api == "" {
			api = c.API.Addr
		}
		if gossip.ValidateAPIAddr(api) != nil {
			api = "255.255.255.255:65535" // reported elsewhere; as long as an address gets
		}
		if _, err := gossip.EncodeMeta(gossipMeta(*c, api)); errors.Is(err, gossip.ErrMetaTooLarge) {
			errs.Add("labels", "too long to announce in the gossip metadata (%v); use fewer or shorter labels", err)
		}
	}
	if c.API.Addr != "" {
		errs = append(errs, config.ValidateAddr("api.addr", c.API.Addr)...)
	}
	for i, h := range c.API.Hosts {
		if h == "" || strings.ContainsAny(h, ":/ ") {
			errs.Add(fmt.Sprintf("api.hosts[%d]", i), "%q is not a host name (no port, no scheme)", h)
		}
	}
	errs = append(errs, c.API.TLS.Validate("api.tls")...)
	errs = append(errs, c.API.Server.Validate("api")...)
	if c.API.TLS.ClientCAFile != "" && !c.API.TLS.Enabled() {
		errs.Add("api.tls.client_ca_file", "needs api.tls.cert_file and api.tls.key_file")
	}
	// The TCP API is the core's (docs/architecture.md, "Who may call an
	// agent"): TLS and the core's client certificate, on loopback too (any
	// user of the host reaches loopback), unless the operator says otherwise.
	// People use the socket.
	if c.API.Addr != "" && !c.API.Insecure {
		switch {
		case !c.API.TLS.Enabled():
			errs.Add("api.addr", "%s serves the core only, over mutual TLS: configure api.tls (cert_file, key_file, client_ca_file), set api.addr to \"\" to serve only the socket, or set api.insecure: true (development)", c.API.Addr)
		case c.API.TLS.ClientCAFile == "":
			errs.Add("api.tls.client_ca_file", "required with api.addr %s (only the core may call the agent over TCP), or set api.insecure: true (development)", c.API.Addr)
		}
	}
	if c.DataDir != "" || c.API.Socket != "" {
		if p := c.SocketPath(); len(p) > maxSocketPath {
			errs.Add("api.socket", "%s is %d bytes, longer than a Unix socket path may be (%d); set api.socket to a shorter path", p, len(p), maxSocketPath)
		}
	}
	a := c.Actions
	for key, d := range map[string]time.Duration{
		"actions.default_timeout":     a.DefaultTimeout,
		"actions.retention":           a.Retention,
		"actions.retention_max":       a.RetentionMax,
		"actions.tombstone_retention": a.TombstoneRetention,
		"actions.purge_interval":      a.PurgeInterval,
		"actions.kill_grace":          a.KillGrace,
	} {
		if d <= 0 {
			errs.Add(key, "must be a positive duration such as 10s or 24h, got %s", d)
		}
	}
	if err := action.CheckTimeout(a.DefaultTimeout); err != nil {
		errs.Add("actions.default_timeout", "%v", err)
	}
	if a.RetentionMax < a.Retention {
		errs.Add("actions.retention_max", "%s is shorter than actions.retention %s", a.RetentionMax, a.Retention)
	}
	for key, p := range map[string]string{"actions.systemd_run": a.SystemdRun, "actions.systemctl": a.Systemctl} {
		if p != "" && !filepath.IsAbs(p) {
			errs.Add(key, "%q must be an absolute path (the agent's PATH is not searched)", p)
		}
	}
	schemaBytes := 0
	for i, e := range a.External {
		errs = append(errs, e.Validate(i)...)
		if strings.TrimSpace(string(e.ArgsSchema)) != "" {
			if raw, err := argschema.Decode(string(e.ArgsSchema)); err == nil {
				schemaBytes += len(raw)
			}
		}
	}
	if schemaBytes > wire.MaxInfoSchemas {
		errs.Add("actions.external", "the kinds' args_schema come to %d bytes as JSON, more than an agent may announce (%d): the core would refuse its info",
			schemaBytes, wire.MaxInfoSchemas)
	}
	errs = append(errs, c.Secrets.Validate("secrets")...)
	if g := c.Gossip; g.Enabled {
		if g.KeyFile == "" && !g.Insecure {
			errs.Add("gossip.key_file", "required when gossip is enabled (or set gossip.insecure: true)")
		}
		errs = append(errs, config.ValidateAddr("gossip.bind_addr", g.BindAddr)...)
		errs = append(errs, gossip.ValidateJoin("gossip.join", g.Join)...)
		errs = append(errs, g.Timing.Validate("gossip")...)
		if c.API.Addr == "" {
			errs.Add("gossip.enabled", "needs api.addr: the core reaches the agent over TCP")
		}
		if g.AdvertiseAPI != "" {
			if err := gossip.ValidateAPIAddr(g.AdvertiseAPI); err != nil {
				errs.Add("gossip.advertise_api", "%v (host:port, no scheme: the core chooses it)", err)
			}
		} else {
			if host, _, err := net.SplitHostPort(c.API.Addr); err == nil && (host == "" || net.ParseIP(host) != nil && net.ParseIP(host).IsUnspecified()) {
				errs.Add("gossip.advertise_api", "required when api.addr %s listens on every interface (the address the core should use)", c.API.Addr)
			}
		}
	}
	if e := c.Enroll; e.Core != "" {
		if u, err := url.Parse(e.Core); err != nil || u.Scheme != "https" || u.Host == "" {
			errs.Add("enroll.core", "%q is not https://host:port (enrollment sends a secret: TLS only)", e.Core)
		}
		if e.CAPin == "" {
			errs.Add("enroll.ca_pin", "required with enroll.core (printed by 'muster tls ca create'): the core is never trusted on first use")
		}
	}
	errs = append(errs, c.Log.Validate()...)
	errs = append(errs, config.ValidateShutdownTimeout(c.ShutdownTimeout)...)
	return errs.Err()
}
