package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/musterhq/muster/shared/action"
	"github.com/musterhq/muster/shared/client"
	"github.com/musterhq/muster/shared/testwait"
	"github.com/musterhq/muster/shared/wire"
)

// Issue 33, item 4 (scenario 5) on real processes: a cluster declares
// node-1…node-3, enrolled agents that join through gossip; node-3's agent
// is killed with SIGKILL and the cluster goes ALERT; a new agent node-4
// enrolls, and `muster node replace node-3 --with node-4` makes the
// cluster HEALTHY again: node-4 holds node-3's labels over its own after
// the next sync, node-3's certificates are revoked, its action stays
// readable, and one node.replaced event names the admin.
func TestNodeReplaceTakesTheDeclaredPlace(t *testing.T) {
	t.Parallel()
	f := newEnrollFleetWith(t, time.Hour, enrollFleetOptions{
		orchestrate: "  interval: 1s\n  compare_ids_every: 1\n  agent_timeout: 2s\n",
		extra: `clusters:
  - id: prod
    expect:
      nodes: [node-1, node-2, node-3]
      grace: 2s
`})
	f.agentYAML = map[string]string{
		"node-3": "labels: {role: db, zone: a}\n",
		"node-4": "labels: {zone: b, disk: ssd}\n",
	}
	tokenFile, _ := f.joinToken("join", "--ttl", "1h", "--cluster", "prod", "--uses", "4")
	sec, err := f.admin.CreateToken(ctxT(t), "bob", []string{"approver"})
	if err != nil {
		t.Fatal(err)
	}
	bob := client.NewCore(f.url, sec.Token, tlsClient(t, f.pki, "", "", nil))
	healthy := func() bool {
		c, err := f.admin.Cluster(ctxT(t), "prod")
		return err == nil && c.Status == "HEALTHY" && c.Members != nil && len(c.Members.Missing) == 0
	}

	f.agentsAll(tokenFile, "node-1", "node-2", "node-3")
	testwait.Within(t, 30*time.Second, "prod HEALTHY with node-1…3 UP", healthy)
	// An action of node-3's, to read after it is replaced.
	a, err := f.admin.CreateAction(ctxT(t), &wire.CreateActionRequest{ClusterID: "prod", NodeID: "node-3", Kind: "muster.io/debug.ping"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bob.Approve(ctxT(t), a.ID); err != nil {
		t.Fatal(err)
	}
	testwait.Within(t, 20*time.Second, "node-3's ping DONE", func() bool {
		got, err := f.admin.Action(ctxT(t), a.ID)
		return err == nil && got.State == action.Done
	})

	f.agents["node-3"].kill()
	testwait.Within(t, 30*time.Second, "prod ALERT with node-3 missing", func() bool {
		c, err := f.admin.Cluster(ctxT(t), "prod")
		return err == nil && c.Status == "ALERT" && c.Members != nil && len(c.Members.Missing) == 1 && c.Members.Missing[0].ID == "node-3"
	})
	f.agent("node-4", tokenFile)
	testwait.Within(t, 30*time.Second, "node-4 UP", func() bool {
		n, ok := f.node("node-4")
		return ok && n.Status == "UP"
	})

	out := muster(t, f.env, "node", "replace", "node-3", "--with", "node-4")
	if !strings.Contains(out, "Node prod/node-3 replaced by node-4, which holds its labels role=db,zone=a.") ||
		!strings.Contains(out, "1 certificate(s) revoked") {
		t.Fatalf("node replace said:\n%s", out)
	}
	testwait.Within(t, 30*time.Second, "prod HEALTHY again", healthy)
	// The full sync that made prod HEALTHY synced node-4 too: its labels
	// are node-3's over its own.
	n, ok := f.node("node-4")
	if !ok || n.Labels["role"] != "db" || n.Labels["zone"] != "a" || n.Labels["disk"] != "ssd" {
		t.Fatalf("node-4 after the replace and a sync: %+v", n)
	}
	if _, ok := f.node("node-3"); ok {
		t.Fatal("node-3 is still a node")
	}
	got, err := f.admin.Action(ctxT(t), a.ID)
	if err != nil || got.NodeID != "node-3" || got.State != action.Done {
		t.Fatalf("node-3's action after the replace: %+v, %v", got, err)
	}
	replaced := f.events("node.replaced", "node-3")
	if len(replaced) != 1 || replaced[0].Actor == "" || !strings.Contains(replaced[0].Message, "replaced node node-3 with node-4") {
		t.Fatalf("node.replaced events %+v", replaced)
	}
	if revoked := f.events("node.revoked", "node-3"); len(revoked) != 1 {
		t.Fatalf("node.revoked events of node-3: %+v", revoked)
	}
}

// Issue 33, item 4, the join-token path on real processes: node-3 of a
// cluster declaring node-1…node-3 dies; node-4 enrolls with
// `enroll.replaces: node-3` and joins, but takes nothing: the cluster
// stays ALERT and `muster cluster show` lists the request. An admin's
// `muster node replace node-3 --with node-4` approves it: the cluster is
// HEALTHY again, the request gone, the node.replaced event saying it
// approved the request.
func TestEnrollingWithReplacesWaitsForAnAdmin(t *testing.T) {
	t.Parallel()
	f := newEnrollFleetWith(t, time.Hour, enrollFleetOptions{
		orchestrate: "  interval: 1s\n  full_sync_every: 1\n  agent_timeout: 2s\n",
		extra: `clusters:
  - id: prod
    expect:
      nodes: [node-1, node-2, node-3]
      grace: 2s
`})
	f.agentYAML = map[string]string{"node-3": "labels: {role: db}\n"}
	f.replaces = map[string]string{"node-4": "node-3"}
	tokenFile, _ := f.joinToken("join", "--ttl", "1h", "--cluster", "prod", "--uses", "4")
	cluster := func() *wire.Cluster {
		c, err := f.admin.Cluster(ctxT(t), "prod")
		if err != nil {
			return &wire.Cluster{}
		}
		return c
	}
	f.agentsAll(tokenFile, "node-1", "node-2", "node-3")
	testwait.Within(t, 30*time.Second, "prod HEALTHY", func() bool { return cluster().Status == "HEALTHY" })
	f.agents["node-3"].kill()
	testwait.Within(t, 30*time.Second, "prod ALERT with node-3 missing", func() bool {
		c := cluster()
		return c.Status == "ALERT" && c.Members != nil && len(c.Members.Missing) == 1 && c.Members.Missing[0].ID == "node-3"
	})
	f.agent("node-4", tokenFile)
	testwait.Within(t, 30*time.Second, "node-4 UP", func() bool {
		n, ok := f.node("node-4")
		return ok && n.Status == "UP"
	})
	c := cluster()
	if len(c.ReplaceRequests) != 1 || c.ReplaceRequests[0].NodeID != "node-4" || c.ReplaceRequests[0].Replaces != "node-3" {
		t.Fatalf("replace requests %+v", c.ReplaceRequests)
	}
	// Held: node-4 counts for nothing, node-3's place stays missing (the
	// grace counts from node-3's record's last change, so wait for it).
	testwait.Within(t, 30*time.Second, "prod ALERT with node-3 missing while the request waits", func() bool {
		c := cluster()
		return c.Status == "ALERT" && c.Members != nil && len(c.Members.Missing) == 1 && c.Members.Missing[0].ID == "node-3" &&
			len(c.ReplaceRequests) == 1
	})
	if n, _ := f.node("node-4"); n.Labels["role"] == "db" {
		t.Fatalf("node-4 took node-3's labels before the approval: %+v", n.Labels)
	}
	if evs := f.events("node.replace_requested", "node-4"); len(evs) != 1 {
		t.Fatalf("replace_requested events %+v", evs)
	}
	if out := muster(t, f.env, "cluster", "show", "prod"); !strings.Contains(out,
		"Request:  node-4 enrolled asking to replace node-3; approve with: muster node replace node-3 --with node-4 --cluster prod") {
		t.Fatalf("cluster show:\n%s", out)
	}

	muster(t, f.env, "node", "replace", "node-3", "--with", "node-4")
	testwait.Within(t, 30*time.Second, "prod HEALTHY again", func() bool {
		c := cluster()
		return c.Status == "HEALTHY" && len(c.ReplaceRequests) == 0
	})
	if evs := f.events("node.replaced", "node-3"); len(evs) != 1 || !strings.Contains(evs[0].Message, "approving the request node-4 made at its enrollment") {
		t.Fatalf("replaced events %+v", evs)
	}
}
