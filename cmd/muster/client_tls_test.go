package main

import (
	"context"
	"log/slog"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/musterhq/muster/cmd/internal/cli"
	"github.com/musterhq/muster/core/api"
	"github.com/musterhq/muster/core/approval"
	"github.com/musterhq/muster/core/auth"
	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/core/store/sqlite"
	"github.com/musterhq/muster/shared/live"
	"github.com/musterhq/muster/shared/tlsutil"
	"github.com/musterhq/muster/shared/wire"
)

// Not parallel: it sets MUSTER_* variables. The core API serves TLS and
// requires client certificates of its CA; the client reads the CA and its
// certificate from the environment.
func TestCLIOverMutualTLSFromTheEnvironment(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "tls")
	other := filepath.Join(t.TempDir(), "other")
	now := time.Now()
	for _, d := range []string{dir, other} {
		if _, err := tlsutil.CreateCA(d, now, tlsutil.CAValidity); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		dir string
		id  tlsutil.Identity
	}{{dir, tlsutil.Core()}, {dir, tlsutil.Client("alice")}, {other, tlsutil.Client("alice")}} {
		if _, err := tlsutil.CreateCert(c.dir, c.id, nil, now, tlsutil.LeafValidity); err != nil {
			t.Fatal(err)
		}
	}

	ctx := context.Background()
	st, err := sqlite.Open(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if err := st.Update(ctx, func(tx store.Tx) error {
		return tx.PutCluster(ctx, &store.Cluster{ID: "prod", Status: store.ClusterHealthy, UpdatedTS: now})
	}); err != nil {
		t.Fatal(err)
	}
	secret, err := auth.CreateToken(ctx, st, "alice", []string{store.RoleViewer}, "test", "")
	if err != nil {
		t.Fatal(err)
	}
	srv := api.New(api.Config{Policy: live.New(approval.DefaultPolicy())}, st, nil, slog.New(slog.DiscardHandler))
	ts := httptest.NewUnstartedServer(srv.Handler())
	ts.TLS, err = tlsutil.ServerConfig(filepath.Join(dir, "core.pem"), filepath.Join(dir, "core-key.pem"), filepath.Join(dir, "ca.pem"))
	if err != nil {
		t.Fatal(err)
	}
	ts.Config.ErrorLog = slog.NewLogLogger(slog.DiscardHandler, slog.LevelError)
	ts.StartTLS()
	t.Cleanup(func() { srv.Close(); ts.Close() })

	run := func() (string, string, int) {
		t.Helper()
		root := newRootCmd()
		var out lockedBuffer
		root.SetOut(&out)
		root.SetErr(&lockedBuffer{})
		root.SetArgs([]string{"cluster", "list", "-o", "json"})
		if err := root.ExecuteContext(ctx); err != nil {
			return out.String(), err.Error(), cli.ExitCode(err)
		}
		return out.String(), "", 0
	}
	t.Setenv("MUSTER_ADDR", ts.URL)
	t.Setenv("MUSTER_TOKEN", secret)
	t.Setenv("MUSTER_CACERT", filepath.Join(dir, "ca.pem"))
	t.Setenv("MUSTER_CLIENT_CERT", filepath.Join(dir, "client-alice.pem"))
	t.Setenv("MUSTER_CLIENT_KEY", filepath.Join(dir, "client-alice-key.pem"))
	out, msg, code := run()
	if code != 0 {
		t.Fatalf("with the CA and a client certificate: exit %d %s", code, msg)
	}
	if l := decode[wire.ClusterList](t, out); len(l.Clusters) != 1 {
		t.Fatalf("clusters %s", out)
	}

	for _, c := range []struct {
		name string
		env  map[string]string
		code int
		msg  string
	}{
		{"no client certificate", map[string]string{"MUSTER_CLIENT_CERT": "", "MUSTER_CLIENT_KEY": ""}, 1, "core at https://"},
		{"client certificate of another CA", map[string]string{
			"MUSTER_CLIENT_CERT": filepath.Join(other, "client-alice.pem"), "MUSTER_CLIENT_KEY": filepath.Join(other, "client-alice-key.pem"),
		}, 1, "core at https://"},
		{"the core's CA unknown", map[string]string{"MUSTER_CACERT": filepath.Join(other, "ca.pem")}, 1, "certificate"},
		{"certificate without key", map[string]string{"MUSTER_CLIENT_KEY": ""}, 2, "go together"},
		{"missing CA file", map[string]string{"MUSTER_CACERT": filepath.Join(dir, "nope.pem")}, 2, "TLS towards the core"},
	} {
		t.Run(c.name, func(t *testing.T) {
			for k, v := range c.env {
				t.Setenv(k, v)
			}
			_, msg, code := run()
			if code != c.code || !strings.Contains(msg, c.msg) || strings.Contains(msg, "\n") {
				t.Fatalf("exit %d %q; want exit %d and one line with %q", code, msg, c.code, c.msg)
			}
			if strings.Contains(msg, secret) {
				t.Fatalf("the error repeats the token: %s", msg)
			}
		})
	}
}
