package agent

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/musterhq/muster/shared/tlsutil"
)

// Issue 30, item 6: the agent refuses a data directory or a key file that
// another uid owns (whoever owns them can swap the queue or the key under
// the agent, which runs as root), with a one-line error naming the key.
func TestAgentRefusesStateAnotherUserOwns(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("needs root to give files to another uid")
	}
	for _, tc := range []struct {
		name, key string
		edit      func(t *testing.T, cfg *Config)
	}{
		{"data directory", "data_dir", func(t *testing.T, cfg *Config) {
			if err := os.Chown(cfg.DataDir, 65534, 65534); err != nil {
				t.Fatal(err)
			}
		}},
		{"key file", "api.tls.key_file", func(t *testing.T, cfg *Config) {
			dir := t.TempDir()
			cfg.API.TLS.CertFile, cfg.API.TLS.KeyFile = writeCert(t, dir)
			cfg.API.TLS.ClientCAFile, cfg.API.Addr = filepath.Join(dir, "ca.pem"), "127.0.0.1:0"
			if err := os.Chown(cfg.API.TLS.KeyFile, 65534, 65534); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg := DefaultConfig()
			cfg.NodeID, cfg.ClusterID, cfg.DataDir = "n1", "c1", filepath.Join(t.TempDir(), "data")
			if err := os.Mkdir(cfg.DataDir, 0o700); err != nil {
				t.Fatal(err)
			}
			tc.edit(t, &cfg)
			ag, err := New(cfg, nil)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			done := make(chan error, 1)
			go func() { done <- ag.Run(ctx) }()
			select {
			case <-ag.Ready():
				cancel()
				<-done
				t.Fatalf("the agent started with its %s owned by uid 65534", tc.key)
			case err = <-done:
			}
			if err == nil || !strings.HasPrefix(err.Error(), tc.key+": ") || !strings.Contains(err.Error(), "uid 65534") ||
				strings.Contains(err.Error(), "\n") {
				t.Fatalf("Run: %v; want one line refusing %s, owned by uid 65534", err, tc.key)
			}
			if _, err := os.Stat(filepath.Join(cfg.DataDir, "agent.db")); !os.IsNotExist(err) {
				t.Fatalf("the queue was opened in a directory another uid owns (%v)", err)
			}
		})
	}
}

// writeCert makes a CA and the agent n1's certificate in dir and returns
// the certificate's and the key's paths; the CA is ca.pem.
func writeCert(t *testing.T, dir string) (string, string) {
	t.Helper()
	if _, err := tlsutil.CreateCA(dir, time.Now(), tlsutil.CAValidity); err != nil {
		t.Fatal(err)
	}
	p, err := tlsutil.CreateCert(dir, tlsutil.Agent("n1"), nil, time.Now(), tlsutil.LeafValidity)
	if err != nil {
		t.Fatal(err)
	}
	return p.Cert, p.Key
}
