package agent

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/musterhq/muster/agent/handlers"
	"github.com/musterhq/muster/shared/argschema"
	"github.com/musterhq/muster/shared/config"
	"github.com/musterhq/muster/shared/secret"
)

func TestConfigRefusesWhatTheCoreRefuses(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		edit   func(*Config)
		fields []string
	}{
		{"valid", func(*Config) {}, nil},
		{"node id with a space", func(c *Config) { c.NodeID = "db 1" }, []string{"node_id"}},
		{"node id with a slash", func(c *Config) { c.NodeID = "db/1" }, []string{"node_id"}},
		{"node id ..", func(c *Config) { c.NodeID = ".." }, []string{"node_id"}},
		{"cluster id with a space", func(c *Config) { c.ClusterID = "eu west" }, []string{"cluster_id"}},
		{"enroll over plain http, without a pin", func(c *Config) { c.Enroll.Core = "http://core:7410" }, []string{"enroll.ca_pin", "enroll.core"}},
		// With an enroll block, api.tls defaults to the enrolled files:
		// a TCP API needs nothing more.
		{"enroll with a TCP API", func(c *Config) {
			c.API.Addr, c.Enroll.Core, c.Enroll.CAPin = "127.0.0.1:7420", "https://core:7410", "sha256:00"
		}, nil},
		{"default timeout over the longest", func(c *Config) { c.Actions.DefaultTimeout = 8 * 24 * time.Hour }, []string{"actions.default_timeout"}},
		{"a bad args schema", func(c *Config) {
			c.Actions.External = []handlers.External{{Kind: "example.com/x", Run: []string{"/bin/true"}, ArgsSchema: `{"type": 3}`}}
		}, []string{"actions.external[0].args_schema"}},
		{"args schemas past what the core takes", func(c *Config) {
			big := handlers.SchemaText(`{"description": "` + strings.Repeat("x", argschema.MaxBytes-100) + `"}`)
			for i := range 5 {
				c.Actions.External = append(c.Actions.External, handlers.External{Kind: fmt.Sprintf("example.com/k%d", i), Run: []string{"/bin/true"}, ArgsSchema: big})
			}
		}, []string{"actions.external"}},
		{"privilege profiles", func(c *Config) {
			c.Actions.External = []handlers.External{
				{Kind: "example.com/pkg", Run: []string{"/usr/bin/apt-get"}, Privileges: "package-manager"},
				{Kind: "example.com/fw", Run: []string{"/bin/true"}, Privileges: "root"},
				{Kind: "example.com/up", Run: []string{"/bin/true"}, Privileges: "package-manager", RestartsAgent: true},
			}
		}, nil},
		{"an unknown privilege profile", func(c *Config) {
			c.Actions.External = []handlers.External{{Kind: "example.com/x", Run: []string{"/bin/true"}, Privileges: "admin"}}
		}, []string{"actions.external[0].privileges"}},
		{"privileges with a user", func(c *Config) {
			c.Actions.External = []handlers.External{{Kind: "example.com/x", Run: []string{"/bin/true"}, Privileges: "root", User: "root"}}
		}, []string{"actions.external[0].user"}},
		{"restarts_agent without privileges, with a check, idempotent", func(c *Config) {
			c.Actions.External = []handlers.External{{Kind: "example.com/x", Run: []string{"/bin/true"}, Check: []string{"/bin/true"}, RestartsAgent: true, Idempotent: true}}
		}, []string{"actions.external[0].check", "actions.external[0].idempotent", "actions.external[0].restarts_agent"}},
		{"a relative systemd-run", func(c *Config) { c.Actions.SystemdRun = "systemd-run" }, []string{"actions.systemd_run"}},
		{"secrets", func(c *Config) {
			c.Secrets = secret.Config{Dir: "/etc/muster/secrets", Files: map[string]string{"db-password": "/run/db"}}
		}, nil},
		{"secrets: a relative dir, a name not plain, a relative file", func(c *Config) {
			c.Secrets = secret.Config{Dir: "secrets", Files: map[string]string{"Db.Password": "/run/db", "ok": "run/ok"}}
		}, []string{"secrets.dir", "secrets.files", "secrets.files.ok"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg := DefaultConfig()
			cfg.NodeID, cfg.ClusterID, cfg.DataDir, cfg.API.Addr = "db-1", "eu", t.TempDir(), "" // the socket only
			tc.edit(&cfg)
			_, err := New(cfg, nil)
			if got := config.FieldsOf(err); !slices.Equal(got, tc.fields) {
				t.Fatalf("New: bad fields %q, want %q (%v)", got, tc.fields, err)
			}
			// What 'muster agent' and 'muster agent check' run before New.
			err = cfg.Validate()
			if got := config.FieldsOf(err); !slices.Equal(got, tc.fields) {
				t.Fatalf("Validate: bad fields %q, want %q (%v)", got, tc.fields, err)
			}
		})
	}
}

// The built-in defaults with the three settings every node must give start:
// no TCP listener (it needs TLS), the Unix socket only.
func TestMinimalConfigStarts(t *testing.T) {
	t.Parallel()
	c := DefaultConfig()
	c.NodeID, c.ClusterID, c.DataDir = "db-1", "prod", t.TempDir()
	if err := c.Validate(); err != nil {
		t.Fatalf("a minimal config is refused: %v", err)
	}
	if c.API.Addr != "" {
		t.Fatalf("default api.addr %q needs TLS to start", c.API.Addr)
	}
}

// TestEnrollmentDefaults: an enrolled agent serves its enrolled
// certificate, requires the core's client certificate of the enrolled CA
// bundle and gossips with the enrolled key, unless configured otherwise.
func TestEnrollmentDefaults(t *testing.T) {
	t.Parallel()
	cfg := DefaultConfig()
	cfg.NodeID, cfg.ClusterID, cfg.DataDir = "db-1", "eu", "/var/lib/muster"
	cfg.Gossip.Enabled = true
	if got := cfg.WithEnrollment(); got.API.TLS.CertFile != "" || got.Gossip.KeyFile != "" {
		t.Fatalf("not enrolled, yet %+v", got.API.TLS)
	}
	cfg.Enroll.Core = "https://core:7410"
	got := cfg.WithEnrollment()
	want := config.TLS{CertFile: "/var/lib/muster/tls/agent.pem", KeyFile: "/var/lib/muster/tls/agent-key.pem",
		ClientCAFile: "/var/lib/muster/tls/ca.pem"}
	if got.API.TLS != want || got.Gossip.KeyFile != "/var/lib/muster/tls/gossip.key" {
		t.Fatalf("defaults %+v, gossip key %q", got.API.TLS, got.Gossip.KeyFile)
	}
	cfg.API.TLS = config.TLS{CertFile: "/etc/x.pem", KeyFile: "/etc/x-key.pem", ClientCAFile: "/etc/ca.pem"}
	if got := cfg.WithEnrollment(); got.API.TLS != cfg.API.TLS {
		t.Fatalf("configured files were replaced: %+v", got.API.TLS)
	}
}

// Issue 36, defect 0: an agent enrolled with 'agent enroll --dir D' and
// started with api.tls naming the files in D (and no enroll.dir) is
// enrolled in D: it finds the enrollment state beside the certificate it
// serves, so it renews it.
func TestEnrollDirFoundBesideTheServedCertificate(t *testing.T) {
	t.Parallel()
	d := t.TempDir()
	cfg := DefaultConfig()
	cfg.NodeID, cfg.ClusterID, cfg.DataDir = "db-1", "eu", filepath.Join(t.TempDir(), "data")
	cfg.API.TLS = config.TLS{CertFile: filepath.Join(d, "agent.pem"), KeyFile: filepath.Join(d, "agent-key.pem"),
		ClientCAFile: filepath.Join(d, "ca.pem")}
	if cfg.Enrolled() {
		t.Fatal("enrolled before any enrollment state exists")
	}
	if err := os.WriteFile(filepath.Join(d, "enrolled.json"), []byte(`{"core":"https://core:7410"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if !cfg.Enrolled() || cfg.EnrollDir() != d {
		t.Fatalf("enrolled %v in %q, want true in %q", cfg.Enrolled(), cfg.EnrollDir(), d)
	}
	// A certificate of another name beside it is not the enrolled one.
	cfg.API.TLS.CertFile = filepath.Join(d, "other.pem")
	if cfg.EnrollDir() == d {
		t.Fatal("a certificate that is not the enrolled one made its directory the enrollment's")
	}
	// enroll.dir, when set, wins.
	cfg.API.TLS.CertFile = filepath.Join(d, "agent.pem")
	cfg.Enroll.Dir = "/elsewhere"
	if cfg.EnrollDir() != "/elsewhere" {
		t.Fatalf("enroll.dir %q was not used", cfg.EnrollDir())
	}
}
