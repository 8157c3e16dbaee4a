package e2e

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/musterhq/muster/shared/action"
	"github.com/musterhq/muster/shared/client"
	"github.com/musterhq/muster/shared/testwait"
	"github.com/musterhq/muster/shared/wire"
)

// accessCore starts a core with the config cfg (its data_dir and api.addr
// filled in) and returns it with an admin client.
func accessCore(t *testing.T, cfg func(dataDir string, port int) string) (*proc, *client.Core) {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "core.yaml")
	core := startOnFreePort(t, dir, "core", func(port int) []string {
		if err := os.WriteFile(path, []byte(cfg(filepath.Join(dir, "data"), port)), 0o600); err != nil {
			t.Fatal(err)
		}
		return []string{"core", "--config", path}
	})
	b, err := os.ReadFile(filepath.Join(dir, "data", "admin.token"))
	if err != nil {
		t.Fatal(err)
	}
	return core, client.NewCore("http://"+core.Addr(), strings.TrimSpace(string(b)), &http.Client{Timeout: 10 * time.Second})
}

// clientAs makes a token (roles nil: none, it holds its person's grants)
// and returns a client with it.
func clientAs(t *testing.T, core *proc, admin *client.Core, name string, roles ...string) *client.Core {
	c, _ := clientSecret(t, core, admin, name, roles...)
	return c
}

// clientSecret is clientAs with the token's secret.
func clientSecret(t *testing.T, core *proc, admin *client.Core, name string, roles ...string) (*client.Core, string) {
	t.Helper()
	if roles == nil {
		roles = []string{}
	}
	sec, err := admin.CreateTokenWith(ctxT(t), wire.CreateTokenRequest{Name: name, Roles: roles})
	if err != nil {
		t.Fatal(err)
	}
	return client.NewCore("http://"+core.Addr(), sec.Token, &http.Client{Timeout: 10 * time.Second}), sec.Token
}

// clusterAgent is agentAttempt's agent of node in cluster.
func clusterAgent(t *testing.T, cluster, node string) func() *proc {
	dir := t.TempDir()
	path := filepath.Join(dir, "agent.yaml")
	return func() *proc {
		cfg := fmt.Sprintf("node_id: %s\ncluster_id: %s\ndata_dir: %s\napi:\n  addr: 127.0.0.1:%d\n  insecure: true\n", node, cluster,
			filepath.Join(dir, "data"), freePort(t))
		if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
			t.Fatal(err)
		}
		return &proc{t: t, bin: binary, name: node, args: []string{"agent", "--config", path}, logPath: filepath.Join(dir, node+".log")}
	}
}

func statusOf(err error) int {
	var ae *client.APIError
	if errors.As(err, &ae) {
		return ae.Status
	}
	return 0
}

// Issue 32, scenario 2: a viewer scoped to staging-* (a team's grant from
// core.yaml) lists clusters, nodes, actions, runs, events and the stream
// and sees nothing of prod-*; asking for a prod id answers 404, not 403.
func TestAccessScopedViewerSeesNothingOfProd(t *testing.T) {
	t.Parallel()
	ps := startAll(t, clusterAgent(t, "prod-db-1", "p-1"), clusterAgent(t, "staging-1", "s-1"))
	core, admin := accessCore(t, func(dataDir string, port int) string {
		return fmt.Sprintf(`data_dir: %s
api:
  addr: 127.0.0.1:%d
clusters:
  - id: prod-db-1
    labels: {tier: prod}
    nodes:
      - {id: p-1, addr: %q}
  - id: staging-1
    labels: {tier: staging}
    nodes:
      - {id: s-1, addr: %q}
orchestrate:
  interval: 1s
approval:
  default: none
teams:
  - name: stg
    members: [sam]
grants:
  - team: stg
    role: viewer
    clusters: "staging-*"
`, dataDir, port, ps[0].Addr(), ps[1].Addr())
	})
	ctx := ctxT(t)
	ops := clientAs(t, core, admin, "olga", "operator")
	sam, samSecret := clientSecret(t, core, admin, "sam")
	testwait.Within(t, 20*time.Second, "both nodes UP", func() bool {
		ns, err := admin.Nodes(ctx, "")
		return err == nil && len(ns) == 2 && ns[0].Status == "UP" && ns[1].Status == "UP"
	})
	prodAct, err := ops.CreateAction(ctx, &wire.CreateActionRequest{ClusterID: "prod-db-1", NodeID: "p-1", Kind: "muster.io/debug.ping"})
	if err != nil {
		t.Fatal(err)
	}
	stgAct, err := ops.CreateAction(ctx, &wire.CreateActionRequest{ClusterID: "staging-1", NodeID: "s-1", Kind: "muster.io/debug.ping"})
	if err != nil {
		t.Fatal(err)
	}
	prodRun, err := ops.CreateRun(ctx, &wire.CreateRunRequest{ClusterID: "prod-db-1",
		Stages: []wire.StageSpec{{Kind: "muster.io/debug.ping", Target: wire.Target{All: true}}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{prodAct.ID, stgAct.ID} {
		testwait.Within(t, 20*time.Second, "action "+id+" done", func() bool {
			a, err := admin.Action(ctx, id)
			return err == nil && a.State == action.Done
		})
	}

	// The stream, opened from the start: the staging action's events come,
	// and no prod event before them.
	streamCtx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	stream, err := sam.Stream(streamCtx, 0, client.EventFilter{})
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Close()
	for {
		ev, err := stream.Next()
		if err != nil {
			t.Fatalf("stream ended before the staging action's end: %v", err)
		}
		if ev.ClusterID != "staging-1" {
			t.Fatalf("the stream shows sam event %d (%s) of cluster %q", ev.Seq, ev.Type, ev.ClusterID)
		}
		if ev.ActionID == stgAct.ID && ev.Type == "action.state_changed" && strings.Contains(ev.Message, "DONE") {
			break
		}
	}

	cs, err := sam.Clusters(ctx)
	if err != nil || len(cs) != 1 || cs[0].ID != "staging-1" {
		t.Errorf("clusters as sam = %+v, %v; want staging-1 alone", cs, err)
	}
	ns, err := sam.Nodes(ctx, "")
	if err != nil || len(ns) != 1 || ns[0].ID != "s-1" {
		t.Errorf("nodes as sam = %+v, %v; want s-1 alone", ns, err)
	}
	acts, err := sam.Actions(ctx, client.ActionFilter{})
	if err != nil || len(acts.Actions) != 1 || acts.Actions[0].ID != stgAct.ID {
		t.Errorf("actions as sam = %+v, %v; want the staging action alone", acts, err)
	}
	runs, err := sam.Runs(ctx, client.RunFilter{})
	if err != nil || len(runs.Runs) != 0 {
		t.Errorf("runs as sam = %+v, %v; want none", runs, err)
	}
	evs, err := sam.Events(ctx, 0, 500, client.EventFilter{})
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range evs.Events {
		if ev.ClusterID != "staging-1" {
			t.Errorf("events as sam show %d (%s) of cluster %q", ev.Seq, ev.Type, ev.ClusterID)
		}
	}
	if _, err := sam.Action(ctx, prodAct.ID); statusOf(err) != http.StatusNotFound {
		t.Errorf("prod action as sam: %v, want 404", err)
	}
	if _, err := sam.Run(ctx, prodRun.ID); statusOf(err) != http.StatusNotFound {
		t.Errorf("prod run as sam: %v, want 404", err)
	}
	for _, path := range []string{"/api/v1/clusters/prod-db-1", "/api/v1/nodes?cluster=prod-db-1"} {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+core.Addr()+path, nil)
		req.Header.Set("Authorization", "Bearer "+samSecret)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("GET %s as sam: %d, want 404", path, resp.StatusCode)
		}
	}
	if _, err := sam.Action(ctx, stgAct.ID); err != nil {
		t.Errorf("staging action as sam: %v", err)
	}
}

// Issue 32, scenario 5: the last release's example core.yaml starts
// unchanged, and tokens with global roles keep their meaning on every
// cluster, across a restart.
func TestAccessLastReleaseConfigAndGlobalRoles(t *testing.T) {
	t.Parallel()
	old, err := os.ReadFile(filepath.Join("testdata", "core-last-release.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	agent := startAll(t, clusterAgent(t, "prod", "n-1"))[0]
	core, admin := accessCore(t, func(dataDir string, port int) string {
		cfg := strings.Replace(string(old), "data_dir: ./.muster/core", "data_dir: "+dataDir, 1)
		cfg = strings.Replace(cfg, "addr: 127.0.0.1:7410", fmt.Sprintf("addr: 127.0.0.1:%d", port), 1)
		// The example has no cluster; a cluster of the same shape the last
		// release took.
		return strings.Replace(cfg, "clusters: []", fmt.Sprintf("clusters:\n  - id: prod\n    nodes:\n      - {id: n-1, addr: %q}", agent.Addr()), 1)
	})
	ctx := ctxT(t)
	viewer := clientAs(t, core, admin, "vic", "viewer")
	op := clientAs(t, core, admin, "otto", "operator")
	appr := clientAs(t, core, admin, "ada", "approver")
	check := func(when string) {
		a, err := op.CreateAction(ctx, &wire.CreateActionRequest{ClusterID: "prod", NodeID: "n-1", Kind: "muster.io/debug.ping"})
		if err != nil {
			t.Fatalf("%s: operator creates: %v", when, err)
		}
		if _, err := viewer.Action(ctx, a.ID); err != nil {
			t.Errorf("%s: viewer reads: %v", when, err)
		}
		if _, err := viewer.Approve(ctx, a.ID); statusOf(err) != http.StatusForbidden {
			t.Errorf("%s: viewer approves: %v, want 403", when, err)
		}
		if _, err := appr.Approve(ctx, a.ID); err != nil {
			t.Errorf("%s: approver approves: %v", when, err)
		}
		if _, err := admin.Tokens(ctx); err != nil {
			t.Errorf("%s: admin lists tokens: %v", when, err)
		}
		if cs, err := viewer.Clusters(ctx); err != nil || len(cs) != 1 {
			t.Errorf("%s: viewer lists clusters: %+v, %v", when, cs, err)
		}
	}
	check("first start")
	core.stop()
	core.restart()
	check("after a restart")
}
