package agent

import (
	"net"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/musterhq/muster/shared/apiserver/apiservertest"
	"github.com/musterhq/muster/shared/config"
)

func TestConfigOfTheSocket(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		edit func(*Config)
		want string // the one bad field; "" when valid
	}{
		{"default path", func(*Config) {}, ""},
		{"own path", func(c *Config) { c.API.Socket = "/run/muster/agent.sock" }, ""},
		{"too long for a socket", func(c *Config) { c.DataDir = "/" + strings.Repeat("d", 100) }, "api.socket"},
		{"gossip without TCP", func(c *Config) {
			c.API.Addr, c.Gossip.Enabled, c.Gossip.Insecure, c.Gossip.AdvertiseAPI = "", true, true, "10.0.0.1:7420"
		}, "gossip.enabled"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			cfg := DefaultConfig()
			cfg.NodeID, cfg.ClusterID, cfg.DataDir, cfg.API.Insecure = "n1", "c1", "/var/lib/muster", true
			c.edit(&cfg)
			err := cfg.Validate()
			if c.want == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if got := config.FieldsOf(err); !slices.Equal(got, []string{c.want}) {
				t.Fatalf("bad fields %q (%v), want %q", got, err, c.want)
			}
		})
	}
}

// The socket is 0660 and of the configured group; a socket left by a killed
// agent is replaced, one another process answers is not, nor is a file.
func TestListenSocket(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "agent.sock")
	g, err := user.LookupGroupId(strconv.Itoa(os.Getgid()))
	if err != nil {
		t.Fatal(err)
	}
	ln, err := listenSocket(path, g.Name, dir)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o660 {
		t.Fatalf("socket mode %v, %v", fi.Mode(), err)
	}
	if di, err := os.Stat(dir); err != nil || di.Mode().Perm() != 0o710 {
		t.Fatalf("data_dir mode %v, %v: members of the group cannot reach the socket", di.Mode(), err)
	}
	if _, err := listenSocket(path, "", dir); err == nil || !strings.Contains(err.Error(), "another process answers") {
		t.Fatalf("a live socket was taken over: %v", err)
	}
	// A killed agent leaves its socket behind: nobody answers it.
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	ln.Close()
	ln, err = listenSocket(path, "", dir)
	if err != nil {
		t.Fatalf("a stale socket was not replaced: %v", err)
	}
	ln.Close()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := listenSocket(file, "", dir); err == nil || !strings.Contains(err.Error(), "not a socket") {
		t.Fatalf("a file was replaced: %v", err)
	}
	if _, err := listenSocket(filepath.Join(dir, "b.sock"), "no-such-group-here", dir); err == nil || !strings.Contains(err.Error(), "api.socket_group") {
		t.Fatalf("an unknown group: %v", err)
	}
}

// Item 13 of the attack review: agent.db and its WAL files are 0600, also in
// a data_dir that already existed with a looser mode, whatever the umask.
func TestQueueFilesArePrivateInAnExistingDataDir(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "data")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.NodeID, cfg.ClusterID, cfg.DataDir, cfg.API.Addr = "n1", "c1", dir, "" // the socket only
	ag, err := New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	apiservertest.Run(t, ag)
	for _, f := range []string{"agent.db", "agent.db-wal", "agent.db-shm"} {
		fi, err := os.Stat(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		if m := fi.Mode().Perm(); m != 0o600 {
			t.Errorf("%s has mode %04o, want 0600", f, m)
		}
	}
}
