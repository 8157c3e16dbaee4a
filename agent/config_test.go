package agent

import (
	"slices"
	"testing"
	"time"

	"github.com/musterhq/muster/shared/config"
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
		{"default timeout over the longest", func(c *Config) { c.Actions.DefaultTimeout = 8 * 24 * time.Hour }, []string{"actions.default_timeout"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg := DefaultConfig()
			cfg.NodeID, cfg.ClusterID, cfg.DataDir, cfg.API.Addr = "db-1", "eu", t.TempDir(), "" // the socket only
			tc.edit(&cfg)
			_, err := New(cfg, nil)
			if got := config.FieldsOf(err); !slices.Equal(got, tc.fields) {
				t.Fatalf("bad fields %q, want %q (%v)", got, tc.fields, err)
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
