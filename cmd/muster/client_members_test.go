package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/musterhq/muster/core/api"
	"github.com/musterhq/muster/core/approval"
	"github.com/musterhq/muster/core/nodes"
	"github.com/musterhq/muster/core/ops"
	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/live"
	"github.com/musterhq/muster/shared/wire"
)

// Issue 33, item 3 on the command line: cluster show names the missing and
// the unexpected nodes, escaped.
func TestCLIClusterShowsDeclaredMembers(t *testing.T) {
	t.Parallel()
	members := nodes.Membership{"prod": {Nodes: []string{"db-1", "db-2"}}}
	e := setupCLI(t, approval.DefaultPolicy(), func(st store.Store, c *api.Config) {
		c.Ops = ops.New(ops.Config{Store: st, Policy: c.Policy, Members: live.New(members)})
	})
	ctx := context.Background()
	if err := e.st.Update(ctx, func(tx store.Tx) error {
		return tx.PutNode(ctx, &store.Node{ClusterID: "prod", ID: "web\x1b[31m", Addr: "127.0.0.1:1", Source: store.SourceGossip,
			Status: store.NodeUp, UpdatedTS: time.Now().UTC()})
	}); err != nil {
		t.Fatal(err)
	}
	out, msg, code := e.run("op", "cluster", "show", "prod")
	if code != 0 || !strings.Contains(out, "Missing:\n          db-2: never seen\n") ||
		!strings.Contains(out, `Unexpected: web\x1b[31m (seen, not declared)`) {
		t.Fatalf("cluster show: %d %s\n%s", code, msg, out)
	}
	assertSafe(t, "cluster show", out)
	out, _, code = e.run("op", "cluster", "show", "prod", "-o", "json")
	if c := decode[wire.Cluster](t, out); code != 0 || c.Members == nil || len(c.Members.Missing) != 1 || c.Members.Missing[0].ID != "db-2" {
		t.Fatalf("cluster show -o json: %s", out)
	}
}
