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
	sc := followScenario(t, nil)
	f := sc.f

	r, err := f.admin.Run(ctxT(t), sc.following)
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
	if out := muster(t, f.env, "run", "show", sc.following); !strings.Contains(out, "not in this run: node-5") ||
		!strings.Contains(out, "follow: the nodes matching role=web") {
		t.Fatalf("run show of the following run:\n%s", out)
	}
	sc.fixedLeavesNode5(t)
	t.Logf("scenario 4 took %s", time.Since(start).Round(time.Millisecond))
}

// Issue 33, scenario 4 on real processes: the same two rolling upgrades
// of role=web over four agents; the fifth enrolls with a join token that
// carries role=web (`muster token create … --labels role=web`), its agent
// announcing no labels at all: the core holds role=web for it, so the
// upgrade with follow takes it (a run.node_joined event, its child DONE,
// `run show` says it joined), and the one without follow shows it "not in
// this run".
func TestAFollowingUpgradeTakesANodeEnrolledWithItsTokensLabels(t *testing.T) {
	t.Parallel()
	start := time.Now()
	sc := followScenario(t, []string{"--labels", "role=web"})
	f := sc.f

	r, err := f.admin.Run(ctxT(t), sc.following)
	if err != nil {
		t.Fatal(err)
	}
	st := r.Stages[0]
	if !st.Follow || !slices.Contains(st.Nodes, "node-5") || !slices.Equal(st.Joined, []string{"node-5"}) || len(st.NotInRun) != 0 {
		t.Fatalf("the following run's stage: %+v", st)
	}
	upgraded := false
	for _, c := range r.Children {
		if c.NodeID == "node-5" {
			if c.State != "DONE" {
				t.Fatalf("node-5's child: %+v", c)
			}
			upgraded = true
		}
	}
	if !upgraded {
		t.Fatalf("node-5 has no child in the following run: %+v", r.Children)
	}
	if evs := f.events("run.node_joined", ""); len(evs) != 1 || evs[0].RunID != sc.following {
		t.Fatalf("run.node_joined events %+v", evs)
	}
	if out := muster(t, f.env, "run", "show", sc.following); !strings.Contains(out, "joined: node-5") ||
		strings.Contains(out, "not in this run") {
		t.Fatalf("run show of the following run:\n%s", out)
	}
	if evs := f.events("node.enrolled", "node-5"); len(evs) != 1 || !strings.Contains(evs[0].Message, "role=web") {
		t.Fatalf("node-5's node.enrolled events %+v", evs)
	}
	sc.fixedLeavesNode5(t)
	t.Logf("scenario 4 took %s", time.Since(start).Round(time.Millisecond))
}

// followRuns is scenario 4 after its two runs ended.
type followRuns struct {
	f                *enrollFleet
	following, fixed string
}

// followScenario runs scenario 4 up to the end of both runs: four agents
// that announce role=web enrolled with a plain join token; two rolling
// upgrades of role=web, with and without follow, each held after its
// canary; a fifth agent, announcing role=web unless node5Token (the
// arguments of its own join token) is given, enrolls meanwhile with its
// own join token; both runs promoted and DONE.
func followScenario(t *testing.T, node5Token []string) *followRuns {
	t.Helper()
	f := newEnrollFleetWith(t, time.Hour, enrollFleetOptions{
		orchestrate: "  interval: 1s\n  full_sync_every: 1\n  agent_timeout: 2s\n"})
	f.agentYAML = map[string]string{}
	for _, n := range []string{"node-1", "node-2", "node-3", "node-4", "node-5"} {
		f.agentYAML[n] = "labels: {role: web}\n"
	}
	tokenFile, _ := f.joinToken("join", "--ttl", "1h", "--cluster", "prod", "--uses", "5")
	node5File := tokenFile
	if node5Token != nil {
		delete(f.agentYAML, "node-5")
		var tok wire.Token
		node5File, tok = f.joinToken("join-5", append([]string{"--ttl", "1h", "--cluster", "prod", "--uses", "1"}, node5Token...)...)
		if len(tok.Labels) == 0 {
			t.Fatalf("node-5's join token: %+v", tok)
		}
	}
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
	sc := &followRuns{f: f}
	sc.following, sc.fixed = upgrade(true), upgrade(false)
	paused := func(id string) func() bool {
		return func() bool {
			r, err := f.admin.Run(ctxT(t), id)
			return err == nil && r.State == "PAUSED"
		}
	}
	testwait.Within(t, 20*time.Second, "the following run held after its canary", paused(sc.following))
	testwait.Within(t, 20*time.Second, "the fixed run held after its canary", paused(sc.fixed))

	f.agent("node-5", node5File)
	testwait.Within(t, 30*time.Second, "node-5 UP with role=web", up("node-5"))
	for _, id := range []string{sc.following, sc.fixed} {
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
	testwait.Within(t, 30*time.Second, "the following run DONE", done(sc.following))
	testwait.Within(t, 30*time.Second, "the fixed run DONE", done(sc.fixed))
	return sc
}

// fixedLeavesNode5 checks the run without follow: node-5 is not among its
// nodes, has no child in it, and the run shows it "not in this run".
func (sc *followRuns) fixedLeavesNode5(t *testing.T) {
	t.Helper()
	r, err := sc.f.admin.Run(ctxT(t), sc.fixed)
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
	if out := muster(t, sc.f.env, "run", "show", sc.fixed); !strings.Contains(out, "not in this run: node-5") {
		t.Fatalf("run show of the fixed run:\n%s", out)
	}
}
