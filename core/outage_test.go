package core_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/musterhq/muster/core"
	"github.com/musterhq/muster/core/approval"
	"github.com/musterhq/muster/core/auth"
	"github.com/musterhq/muster/core/discovery"
	"github.com/musterhq/muster/core/store/pglocal"
	"github.com/musterhq/muster/shared/action"
	"github.com/musterhq/muster/shared/apiserver/apiservertest"
	"github.com/musterhq/muster/shared/client"
	"github.com/musterhq/muster/shared/testwait"
	"github.com/musterhq/muster/shared/wire"
)

// TestPostgresOutage: while its database is down, a core on PostgreSQL
// answers 503 to writes and reads, and changes nothing; when the database
// comes back it recovers by itself: writes succeed, passes run again, and
// everything it answered 2xx for is there.
func TestPostgresOutage(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	// A server of its own: this test crashes it.
	srv, err := pglocal.Start(ctx, pglocal.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Stop() })
	// A name no other server has: once this one is killed, its port is free,
	// and another test's server may take it before the restart.
	db := fmt.Sprintf("outage%d", time.Now().UnixNano())
	if err := srv.CreateDatabase(ctx, db, ""); err != nil {
		t.Fatal(err)
	}
	agentAddr := startAgent(t, "db", "db-1")
	cfg := core.DefaultConfig()
	cfg.DataDir = t.TempDir()
	cfg.API.Addr = "127.0.0.1:0"
	cfg.Store = core.StoreConfig{Driver: core.DriverPostgres, DSN: srv.DSN(db) + "&connect_timeout=2"}
	cfg.HA.LeaseTTL = time.Second
	cfg.Clusters = []discovery.ClusterSpec{{ID: "db", Nodes: []discovery.NodeSpec{{ID: "db-1", Addr: agentAddr}}}}
	cfg.Orchestrate.Interval = time.Hour // passes come from lease takeovers and nudges
	cfg.Approval.Default = approval.None
	c, err := core.New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	apiservertest.Run(t, c)
	secret, err := os.ReadFile(filepath.Join(cfg.DataDir, auth.AdminTokenFile))
	if err != nil {
		t.Fatal(err)
	}
	cl := client.NewCore(c.Addr().String(), strings.TrimSpace(string(secret)), &http.Client{Timeout: 10 * time.Second})
	create := func() (*action.Action, error) {
		return cl.CreateAction(ctx, &wire.CreateActionRequest{ClusterID: "db", NodeID: "db-1", Kind: "muster.io/debug.ping"})
	}
	done1 := func(id string) func() bool {
		return func() bool {
			a, err := cl.Action(ctx, id)
			if err == nil && a.State != action.Done {
				_ = cl.Orchestrate(ctx, "db")
			}
			return err == nil && a.State == action.Done
		}
	}
	before, err := create()
	if err != nil {
		t.Fatal(err)
	}
	testwait.For(t, "the first action DONE", done1(before.ID))

	if err := srv.Kill(); err != nil {
		t.Fatal(err)
	}
	if _, err := create(); client.StatusOf(err) != http.StatusServiceUnavailable || !strings.Contains(err.Error(), "database is unavailable") {
		t.Fatalf("create while the database is down: %v, want 503", err)
	}
	if _, err := cl.Action(ctx, before.ID); client.StatusOf(err) != http.StatusServiceUnavailable {
		t.Fatalf("read while the database is down: %v, want 503", err)
	}
	if err := cl.Health(ctx); err != nil {
		t.Fatalf("health while the database is down: %v", err)
	}

	if err := srv.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	var after *action.Action
	testwait.For(t, "a write accepted again", func() bool {
		after, err = create()
		return err == nil
	})
	testwait.For(t, "the action made after the outage DONE", done1(after.ID))
	list, err := cl.Actions(ctx, client.ActionFilter{Cluster: "db"})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Actions) != 2 {
		t.Fatalf("%d actions stored, want the 2 answered 201 (none from the refused create)", len(list.Actions))
	}
}
