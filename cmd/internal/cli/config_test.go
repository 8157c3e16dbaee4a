package cli

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/musterhq/muster/agent"
	"github.com/musterhq/muster/shared/config"
)

// loadAgent runs LoadConfig the way `muster agent` does, with a config file
// holding yaml and the given command-line arguments.
func loadAgent(t *testing.T, yaml string, args ...string) (agent.Config, error) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "agent.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := agent.DefaultConfig()
	var loadErr error
	cmd := &cobra.Command{RunE: func(cmd *cobra.Command, _ []string) error {
		loadErr = LoadConfig(cmd, &cfg, map[string]string{"data-dir": "data_dir", "api-addr": "api.addr"})
		return nil
	}}
	cmd.Flags().String("config", "", "")
	cmd.Flags().String("data-dir", "", "")
	cmd.Flags().String("api-addr", "", "")
	cmd.SetArgs(append([]string{"--config", path}, args...))
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	return cfg, loadErr
}

// Not parallel: it sets environment variables.
func TestConfigPrecedenceFileEnvFlags(t *testing.T) {
	yaml := "node_id: from-file\ncluster_id: c\ndata_dir: /file\napi:\n  addr: 127.0.0.1:1111\nactions:\n  retention: 48h\n"

	cfg, err := loadAgent(t, yaml)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.NodeID != "from-file" || cfg.API.Addr != "127.0.0.1:1111" || cfg.Actions.Retention != 48*time.Hour {
		t.Fatalf("file values not applied: %+v", cfg)
	}
	if cfg.Actions.RetentionMax != 30*24*time.Hour {
		t.Fatalf("a default was lost: retention_max %s", cfg.Actions.RetentionMax)
	}

	t.Setenv("MUSTER_NODE_ID", "from-env")
	t.Setenv("MUSTER_API_ADDR", "127.0.0.1:2222")
	t.Setenv("MUSTER_ACTIONS_RETENTION", "72h")
	cfg, err = loadAgent(t, yaml, "--api-addr", "127.0.0.1:3333")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.NodeID != "from-env" || cfg.Actions.Retention != 72*time.Hour {
		t.Fatalf("environment did not override the file: %+v", cfg)
	}
	if cfg.API.Addr != "127.0.0.1:3333" {
		t.Fatalf("the flag did not override the environment: %s", cfg.API.Addr)
	}
}

func TestConfigRefusesUnknownKeysAndBadValuesByField(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, yaml string
		env        map[string]string
		fields     []string
	}{
		{"unknown key", "node_id: a\nnot_a_key: 1\n", nil, []string{"not_a_key"}},
		{"unknown nested", "api:\n  adr: 127.0.0.1:1\n", nil, []string{"api.adr"}},
		{"unknown in a list", "actions:\n  external:\n    - kind: a.b/c\n      run: [x]\n      tmeout: 1s\n", nil, []string{"actions.external[0].tmeout"}},
		{"bad duration", "actions:\n  retention: soon\n", nil, []string{"actions.retention"}},
		{"bad number", "gossip:\n  suspicion_mult: many\n", nil, []string{"gossip.suspicion_mult"}},
		{"all at once", "nope: 1\nactions:\n  retention: soon\n  purge_interval: later\n", nil,
			[]string{"actions.purge_interval", "actions.retention", "nope"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := loadAgent(t, tc.yaml)
			if ExitCode(err) != 2 {
				t.Fatalf("error %v, want an exit-2 configuration error", err)
			}
			if got := config.FieldsOf(err); !slices.Equal(got, tc.fields) {
				t.Fatalf("fields %q, want %q (%v)", got, tc.fields, err)
			}
		})
	}
}

func TestConfigFileThatIsNotYAMLIsRefused(t *testing.T) {
	t.Parallel()
	_, err := loadAgent(t, "node_id: [")
	if ExitCode(err) != 2 {
		t.Fatalf("error %v, want an exit-2 configuration error", err)
	}
}

func TestConfigErrorsOneLinePerField(t *testing.T) {
	t.Parallel()
	cfg := agent.DefaultConfig()
	cfg.Actions.Retention = -time.Second
	cfg.API.Insecure = true
	err := cfg.Validate()
	want := []string{"actions.retention", "cluster_id", "data_dir", "node_id"}
	if got := config.FieldsOf(err); !slices.Equal(got, want) {
		t.Fatalf("fields %q, want %q", got, want)
	}
	if lines := strings.Split(err.Error(), "\n"); len(lines) != 1+len(want) {
		t.Fatalf("want a header and one line per field, got:\n%s", err)
	}
}

// A kind's env keeps the case of its names through configuration loading,
// whose keys are case-insensitive.
func TestExternalEnvKeepsItsCase(t *testing.T) {
	t.Parallel()
	cfg, err := loadAgent(t, "actions:\n  external:\n    - kind: example.com/x\n      run: [/bin/true]\n      env: [\"BACKUP_Bucket=s3://X\"]\n")
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.Actions.External[0].Env; !slices.Equal(got, []string{"BACKUP_Bucket=s3://X"}) {
		t.Fatalf("env %q", got)
	}
}
