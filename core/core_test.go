package core_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/musterhq/muster/agent"
	"github.com/musterhq/muster/agent/agenttest"
	"github.com/musterhq/muster/core"
	"github.com/musterhq/muster/core/approval"
	"github.com/musterhq/muster/core/auth"
	"github.com/musterhq/muster/core/discovery"
	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/core/store/pgtest"
	"github.com/musterhq/muster/core/store/postgres"
	"github.com/musterhq/muster/core/store/sqlite"
	"github.com/musterhq/muster/shared/action"
	"github.com/musterhq/muster/shared/apiserver/apiservertest"
	"github.com/musterhq/muster/shared/client"
	"github.com/musterhq/muster/shared/config"
	"github.com/musterhq/muster/shared/gossip"
	"github.com/musterhq/muster/shared/testwait"
	"github.com/musterhq/muster/shared/tlsutil"
	"github.com/musterhq/muster/shared/wire"
)

// startAgent runs a real agent on a loopback port until the test ends.
func startAgent(t *testing.T, clusterID, nodeID string) string {
	t.Helper()
	cfg := agent.DefaultConfig()
	cfg.NodeID, cfg.ClusterID, cfg.DataDir = nodeID, clusterID, t.TempDir()
	cfg.API.Addr, cfg.API.Insecure = "127.0.0.1:0", true
	return agenttest.Start(t, cfg).Addr
}

func TestNewRefusesABadConfiguration(t *testing.T) {
	t.Parallel()
	if _, err := core.New(core.DefaultConfig(), nil); !slices.Equal(config.FieldsOf(err), []string{"data_dir"}) {
		t.Fatalf("New without data_dir: %v", err)
	}
}

// TestRunReportsAPartThatDoesNotStopInTime: a request that never completes
// keeps the API from stopping; Run gives up at shutdown_timeout, says which
// part failed, and still closes the store.
func TestRunReportsAPartThatDoesNotStopInTime(t *testing.T) {
	t.Parallel()
	cfg := core.DefaultConfig()
	cfg.DataDir = t.TempDir()
	cfg.API.Addr = "127.0.0.1:0"
	cfg.ShutdownTimeout = 300 * time.Millisecond
	c, err := core.New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	select {
	case <-c.Ready():
	case err := <-done:
		t.Fatalf("Run: %v", err)
	}
	conn, err := net.Dial("tcp", c.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	secret, err := os.ReadFile(filepath.Join(cfg.DataDir, auth.AdminTokenFile))
	if err != nil {
		t.Fatal(err)
	}
	apiservertest.HoldRequest(t, conn, strings.TrimSpace(string(secret)))
	start := time.Now()
	cancel()
	select {
	case err = <-done:
	case <-time.After(testwait.Timeout):
		t.Fatal("Run did not return")
	}
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "stop api") {
		t.Fatalf("Run = %v, want the api's deadline", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("Run took %s to give up, with a shutdown_timeout of 300ms", d)
	}
	st, err := sqlite.Open(context.Background(), cfg.DataDir)
	if err != nil {
		t.Fatalf("the store does not open again: %v", err)
	}
	st.Close()
}

func TestMain(m *testing.M) { pgtest.Main(m) }

// TestRunWithARealAgent runs a core on each store driver.
func TestRunWithARealAgent(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		store func(t *testing.T, dataDir string) core.StoreConfig
		open  func(ctx context.Context, cfg core.Config) (store.Store, error)
	}{
		{"sqlite", func(*testing.T, string) core.StoreConfig { return core.StoreConfig{Driver: core.DriverSQLite} },
			func(ctx context.Context, cfg core.Config) (store.Store, error) { return sqlite.Open(ctx, cfg.DataDir) }},
		{"postgres", func(t *testing.T, _ string) core.StoreConfig {
			return core.StoreConfig{Driver: core.DriverPostgres, DSN: pgtest.NewDatabase(t)}
		}, func(ctx context.Context, cfg core.Config) (store.Store, error) {
			return postgres.Open(ctx, cfg.Store.DSN)
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			runWithARealAgent(t, c.store, c.open)
		})
	}
}

func runWithARealAgent(t *testing.T, storeCfg func(t *testing.T, dataDir string) core.StoreConfig,
	open func(ctx context.Context, cfg core.Config) (store.Store, error)) {
	agentAddr := startAgent(t, "db", "db-1")
	cfg := core.DefaultConfig()
	cfg.DataDir = t.TempDir()
	cfg.Store = storeCfg(t, cfg.DataDir)
	cfg.API.Addr = "127.0.0.1:0"
	cfg.Clusters = []discovery.ClusterSpec{{ID: "db", Nodes: []discovery.NodeSpec{{ID: "db-1", Addr: agentAddr}}}}
	cfg.Orchestrate.Interval = time.Hour // passes come from the first one and from nudges
	cfg.Approval.Default = approval.None
	c, err := core.New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	select {
	case <-c.Ready():
	case err := <-done:
		t.Fatalf("Run: %v", err)
	}

	secret, err := os.ReadFile(filepath.Join(cfg.DataDir, auth.AdminTokenFile))
	if err != nil {
		t.Fatalf("admin token: %v", err)
	}
	cl := client.NewCore(c.Addr().String(), strings.TrimSpace(string(secret)), nil)
	bg := context.Background()
	if err := cl.Health(bg); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, "the node to be UP", func() bool {
		cs, err := cl.Cluster(bg, "db")
		return err == nil && cs.NodeCounts.Up == 1
	})
	// The one replica, live; on PostgreSQL it holds the cluster's lease.
	rs, err := cl.Replicas(bg)
	if err != nil || rs.Store != cfg.Store.Driver || len(rs.Replicas) != 1 || rs.Replicas[0].ID != rs.Self ||
		!rs.Replicas[0].Live || rs.Replicas[0].Addr != c.Addr().String() {
		t.Fatalf("replicas %+v, %v", rs, err)
	}
	if leases := rs.Replicas[0].Leases; cfg.Store.Driver == core.DriverPostgres && (len(leases) != 1 || leases[0].ClusterID != "db") {
		t.Fatalf("leases %+v, want db's", leases)
	}

	// An action created through the API runs on the agent; a nudge brings it
	// there and back without waiting for the (hour-long) interval.
	a, err := cl.CreateAction(bg, &wire.CreateActionRequest{ClusterID: "db", NodeID: "db-1", Kind: "muster.io/debug.ping"})
	if err != nil {
		t.Fatal(err)
	}
	testwait.For(t, "the action to be DONE", func() bool {
		got, err := cl.Action(bg, a.ID)
		if err == nil && !got.State.Final() {
			_ = cl.Orchestrate(bg, "db") // the agent may finish it after the pass that pushed it
		}
		return err == nil && got.State == action.Done && strings.TrimSpace(got.Output) == "pong"
	})

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run returned %v", err)
		}
	case <-time.After(cfg.ShutdownTimeout + 5*time.Second):
		t.Fatal("Run did not return after its context ended")
	}
	// The store was closed cleanly: it opens again with what was written.
	st, err := open(bg, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	err = st.Read(bg, func(r store.Reader) error {
		rec, err := r.Action(bg, a.ID)
		if err == nil && rec.State != action.Done {
			return errors.New("action not DONE in the store: " + string(rec.State))
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// The core serves the web UI at /ui/ beside the API, unless ui.enabled is
// false.
func TestRunServesTheUIBesideTheAPI(t *testing.T) {
	t.Parallel()
	for _, enabled := range []bool{true, false} {
		t.Run(fmt.Sprintf("enabled=%v", enabled), func(t *testing.T) {
			t.Parallel()
			cfg := core.DefaultConfig()
			cfg.DataDir = t.TempDir()
			cfg.API.Addr = "127.0.0.1:0"
			cfg.UI.Enabled = enabled
			c, err := core.New(cfg, nil)
			if err != nil {
				t.Fatal(err)
			}
			apiservertest.Run(t, c)
			base := "http://" + c.Addr().String()
			want := map[string]int{"/ui/login": http.StatusOK, "/health": http.StatusOK, "/api/v1/actions": http.StatusUnauthorized}
			if !enabled {
				want["/ui/login"] = http.StatusNotFound
			}
			for path, status := range want {
				resp, err := http.Get(base + path)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				if resp.StatusCode != status {
					t.Errorf("GET %s: %d, want %d", path, resp.StatusCode, status)
				}
			}
		})
	}
}

// TestRunFailsOnAnUnreachableDatabase: a core whose PostgreSQL does not
// answer stops at start with one line naming the database.
func TestRunFailsOnAnUnreachableDatabase(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	cfg := core.DefaultConfig()
	cfg.DataDir = t.TempDir()
	cfg.API.Addr = "127.0.0.1:0"
	cfg.Store = core.StoreConfig{Driver: core.DriverPostgres, DSN: "postgres://muster@" + addr + "/muster?connect_timeout=2"}
	c, err := core.New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = c.Run(context.Background())
	if err == nil || !strings.HasPrefix(err.Error(), "open store: cannot reach PostgreSQL at "+pgWhere(addr)+": ") ||
		strings.Contains(err.Error(), "\n") {
		t.Fatalf("Run = %v", err)
	}
	if _, err := os.Stat(filepath.Join(cfg.DataDir, auth.AdminTokenFile)); !os.IsNotExist(err) {
		t.Fatalf("an admin token was written without a store: %v", err)
	}
}

func TestRunFailsOnABusyAddress(t *testing.T) {
	t.Parallel()
	cfg := core.DefaultConfig()
	cfg.DataDir = t.TempDir()
	cfg.API.Addr = "127.0.0.1:0"
	first, err := core.New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- first.Run(ctx) }()
	<-first.Ready()
	cfg2 := cfg
	cfg2.DataDir = t.TempDir()
	cfg2.API.Addr = first.Addr().String()
	second, err := core.New(cfg2, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := second.Run(context.Background()); err == nil || !strings.Contains(err.Error(), "api.addr") {
		t.Fatalf("second Run on a busy address: %v", err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// Item 13 of the attack review: a TLS or gossip key file its group or others
// may read is refused at start, one error per file naming it and its mode,
// before the store is opened.
func TestKeyFilesReadableByGroupOrOthersAreRefused(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if _, err := tlsutil.CreateCA(dir, time.Now(), tlsutil.CAValidity); err != nil {
		t.Fatal(err)
	}
	if _, err := tlsutil.CreateCert(dir, tlsutil.Core(), nil, time.Now(), tlsutil.LeafValidity); err != nil {
		t.Fatal(err)
	}
	tlsKey := filepath.Join(dir, "core-key.pem")
	gossipKey := filepath.Join(dir, "gossip.key")
	k, _ := gossip.GenerateKey()
	if err := os.WriteFile(gossipKey, []byte(k), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(tlsKey, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(gossipKey, 0o640); err != nil {
		t.Fatal(err)
	}
	cfg := core.DefaultConfig()
	cfg.DataDir = filepath.Join(t.TempDir(), "data")
	cfg.API.Addr = "127.0.0.1:0"
	cfg.API.TLS = config.TLS{CertFile: filepath.Join(dir, "core.pem"), KeyFile: tlsKey}
	cfg.AgentsTLS = core.AgentsTLSConfig{CAFile: filepath.Join(dir, "ca.pem"), CertFile: filepath.Join(dir, "core.pem"), KeyFile: tlsKey}
	cfg.Gossip.Enabled, cfg.Gossip.KeyFile, cfg.Gossip.BindAddr = true, gossipKey, "127.0.0.1:0"
	c, err := core.New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = c.Run(context.Background())
	for _, want := range []string{
		"api.tls.key_file: " + tlsKey + " has mode 0644, readable by group or others",
		"agents_tls.key_file: " + tlsKey + " has mode 0644",
		"gossip.key_file: " + gossipKey + " has mode 0640, readable by group or others",
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Run = %v, want an error with %q", err, want)
		}
	}
	if _, err := os.Stat(cfg.DataDir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the core made its data directory before refusing: %v", err)
	}
}

// Item 13 of the attack review: core.db and its WAL files are 0600, also in
// a data_dir that already existed with a looser mode, whatever the umask.
func TestStoreFilesArePrivateInAnExistingDataDir(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "data")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := core.DefaultConfig()
	cfg.DataDir, cfg.API.Addr = dir, "127.0.0.1:0"
	c, err := core.New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	apiservertest.Run(t, c)
	for _, f := range []string{"core.db", "core.db-wal", "core.db-shm", "admin.token"} {
		fi, err := os.Stat(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		if m := fi.Mode().Perm(); m != 0o600 {
			t.Errorf("%s has mode %04o, want 0600", f, m)
		}
	}
}

// pgWhere is how the store names a server at addr (host:port) in its errors:
// host, port, database and user, never a password.
func pgWhere(addr string) string {
	host, port, _ := net.SplitHostPort(addr)
	return "host=" + host + " port=" + port + " database=muster user=muster"
}
