package e2e

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/musterhq/muster/shared/client"
	"github.com/musterhq/muster/shared/limit"
	"github.com/musterhq/muster/shared/testwait"
	"github.com/musterhq/muster/shared/wire"
)

// Issue 33, item 5 (scenario 4) on real processes: two rolling upgrades of
// role=web over four enrolled agents, one with follow and one without,
// each holding after its canary node; a fifth agent enrolls with a join
// token meanwhile, its agent announcing role=web itself. A stage with
// follow takes a joining node only by the labels the core holds for it
// (its configuration, a replace: covered in core/runs), never by those an
// agent announces, which whoever holds a join token chooses: neither run
// touches the fifth, and both show it "not in this run", through the API
// and `muster run show`.
func TestAFollowingUpgradeTakesNoNodeByItsAgentsLabels(t *testing.T) {
	t.Parallel()
	start := time.Now()
	f := newEnrollFleetWith(t, time.Hour, enrollFleetOptions{
		orchestrate: "  interval: 1s\n  full_sync_every: 1\n  agent_timeout: 2s\n"})
	f.agentYAML = map[string]string{}
	for _, n := range []string{"node-1", "node-2", "node-3", "node-4", "node-5"} {
		f.agentYAML[n] = "labels: {role: web}\n"
	}
	tokenFile, _ := f.joinToken("join", "--ttl", "1h", "--cluster", "prod", "--uses", "5")
	sec, err := f.admin.CreateToken(ctxT(t), "bob", []string{"approver"})
	if err != nil {
		t.Fatal(err)
	}
	bob := client.NewCore(f.url, sec.Token, tlsClient(t, f.pki, "", "", nil))
	f.agentsAll(tokenFile, "node-1", "node-2", "node-3", "node-4")
	up := func(ids ...string) func() bool {
		return func() bool {
			for _, id := range ids {
				if n, ok := f.node(id); !ok || n.Status != "UP" || n.Labels["role"] != "web" {
					return false
				}
			}
			return true
		}
	}
	testwait.Within(t, 30*time.Second, "node-1…4 UP with role=web", up("node-1", "node-2", "node-3", "node-4"))

	one := limit.MustParse("1")
	upgrade := func(follow bool) string {
		r, err := f.admin.CreateRun(ctxT(t), &wire.CreateRunRequest{ClusterID: "prod", Stages: []wire.StageSpec{{
			Name: "upgrade", Kind: "muster.io/debug.sleep", Args: []byte(`{"seconds":0.2}`),
			Target: wire.Target{Labels: map[string]string{"role": "web"}}, MaxConcurrency: &one, Canary: 1, Follow: follow}}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := bob.ApproveRun(ctxT(t), r.ID, r.Digest); err != nil {
			t.Fatal(err)
		}
		return r.ID
	}
	following, fixed := upgrade(true), upgrade(false)
	paused := func(id string) func() bool {
		return func() bool {
			r, err := f.admin.Run(ctxT(t), id)
			return err == nil && r.State == "PAUSED"
		}
	}
	testwait.Within(t, 20*time.Second, "the following run held after its canary", paused(following))
	testwait.Within(t, 20*time.Second, "the fixed run held after its canary", paused(fixed))

	f.agent("node-5", tokenFile)
	testwait.Within(t, 30*time.Second, "node-5 UP with role=web", up("node-5"))
	for _, id := range []string{following, fixed} {
		if _, err := bob.RunVerb(ctxT(t), id, "promote", "canary fine"); err != nil {
			t.Fatal(err)
		}
	}
	done := func(id string) func() bool {
		return func() bool {
			r, err := f.admin.Run(ctxT(t), id)
			return err == nil && r.State == "DONE"
		}
	}
	testwait.Within(t, 30*time.Second, "the following run DONE", done(following))
	testwait.Within(t, 30*time.Second, "the fixed run DONE", done(fixed))

	r, err := f.admin.Run(ctxT(t), following)
	if err != nil {
		t.Fatal(err)
	}
	st := r.Stages[0]
	if !st.Follow || slices.Contains(st.Nodes, "node-5") || len(st.Joined) != 0 || !slices.Equal(st.NotInRun, []string{"node-5"}) {
		t.Fatalf("the following run's stage: %+v", st)
	}
	for _, c := range r.Children {
		if c.NodeID == "node-5" {
			t.Fatalf("node-5 joined the following run by the labels its agent announced: %+v", c)
		}
	}
	if evs := f.events("run.node_joined", ""); len(evs) != 0 {
		t.Fatalf("run.node_joined events %+v", evs)
	}
	if out := muster(t, f.env, "run", "show", following); !strings.Contains(out, "not in this run: node-5") ||
		!strings.Contains(out, "follow: the nodes matching role=web") {
		t.Fatalf("run show of the following run:\n%s", out)
	}

	r, err = f.admin.Run(ctxT(t), fixed)
	if err != nil {
		t.Fatal(err)
	}
	if st := r.Stages[0]; slices.Contains(st.Nodes, "node-5") || !slices.Equal(st.NotInRun, []string{"node-5"}) {
		t.Fatalf("the fixed run's stage: %+v", st)
	}
	for _, c := range r.Children {
		if c.NodeID == "node-5" {
			t.Fatalf("node-5 has a child in the run without follow: %+v", c)
		}
	}
	if out := muster(t, f.env, "run", "show", fixed); !strings.Contains(out, "not in this run: node-5") {
		t.Fatalf("run show of the fixed run:\n%s", out)
	}
	t.Logf("scenario 4 took %s", time.Since(start).Round(time.Millisecond))
}
