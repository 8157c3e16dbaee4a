package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/musterhq/muster/shared/action"
	"github.com/musterhq/muster/shared/client"
	"github.com/musterhq/muster/shared/gossip"
	"github.com/musterhq/muster/shared/testwait"
	"github.com/musterhq/muster/shared/wire"
)

// gossipTiming tunes failure detection for loopback (docs/gossip.md, "Failure detection timing").
const gossipTiming = "  profile: local\n  probe_interval: 500ms\n  probe_timeout: 200ms\n"

// pool is a core that knows no node but through gossip, and its agents.
type pool struct {
	t          testing.TB
	core       *proc
	admin      *client.Core
	coreGossip string
	key        string // key file
	agents     map[string]*proc
}

func writeKey(t testing.TB) string {
	t.Helper()
	k, err := gossip.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "gossip.key")
	if err := os.WriteFile(path, []byte(k+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// newPool starts a core with gossip and no static list. Debug kinds need no
// approval; passes run every orchestrateEvery, and when nudged.
func newPool(t testing.TB, timing string, orchestrateEvery time.Duration) *pool {
	t.Helper()
	p := &pool{t: t, key: writeKey(t), agents: map[string]*proc{},
		coreGossip: fmt.Sprintf("127.0.0.1:%d", freePort(t))}
	dir := t.TempDir()
	cfg := fmt.Sprintf(`data_dir: %s
api:
  addr: 127.0.0.1:%d
orchestrate:
  interval: %s
  agent_timeout: 2s
approval:
  rules:
    - {kind: "muster.io/debug.*", cluster: "*", approval: none}
gossip:
  enabled: true
  bind_addr: %s
  key_file: %s
%s`, filepath.Join(dir, "data"), freePort(t), orchestrateEvery, p.coreGossip, p.key, timing)
	path := filepath.Join(dir, "core.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	p.core = start(t, "core", nil, "core", "--config", path)
	admin, err := os.ReadFile(filepath.Join(dir, "data", "admin.token"))
	if err != nil {
		t.Fatal(err)
	}
	p.admin = client.NewCore("http://"+p.core.Addr(), strings.TrimSpace(string(admin)), &http.Client{Timeout: 10 * time.Second})
	return p
}

// agent starts an agent of cluster e2e that joins the core's pool with key
// (the pool's when empty), on a gossip port it keeps across restarts.
func (p *pool) agent(node, key, timing string) *proc {
	p.t.Helper()
	if key == "" {
		key = p.key
	}
	extra := fmt.Sprintf("gossip:\n  enabled: true\n  bind_addr: 127.0.0.1:%d\n  join: [%q]\n  key_file: %s\n%s",
		freePort(p.t), p.coreGossip, key, timing)
	a, _, _ := agentProc(p.t, node, extra)
	p.agents[node] = a
	return a
}

func (p *pool) nodes() map[string]wire.Node {
	out := map[string]wire.Node{}
	list, err := p.admin.Nodes(ctxT(p.t), "")
	if err != nil {
		return out
	}
	for _, n := range list {
		out[n.ID] = n
	}
	return out
}

func (p *pool) status(node string) (string, string) {
	n, ok := p.nodes()[node]
	if !ok {
		return "", ""
	}
	return n.Status, n.StatusReason
}

// nodeEvents lists the events of one node as "type reason".
func (p *pool) nodeEvents(node string) []string {
	list, err := p.admin.Events(ctxT(p.t), 0, 1000, client.EventFilter{Cluster: "e2e"})
	if err != nil {
		p.t.Fatal(err)
	}
	var out []string
	for _, e := range list.Events {
		if e.NodeID == node {
			out = append(out, fmt.Sprintf("%s %v", e.Type, e.Data["reason"]))
		}
	}
	return out
}

func (p *pool) create(node, kind, args string) *action.Action {
	p.t.Helper()
	a, err := p.admin.CreateAction(ctxT(p.t), &wire.CreateActionRequest{ClusterID: "e2e", NodeID: node, Kind: kind, Args: json.RawMessage(args)})
	if err != nil {
		p.t.Fatalf("create: %v", err)
	}
	return a
}

func (p *pool) waitAction(id string, within time.Duration, want ...action.State) {
	p.t.Helper()
	testwait.Within(p.t, within, fmt.Sprintf("action %s in %v", id, want), func() bool {
		a, err := p.admin.Action(ctxT(p.t), id)
		if err != nil {
			return false
		}
		for _, w := range want {
			if a.State == w {
				return true
			}
		}
		return false
	})
}

// The scenario: five agents found through gossip alone; SIGKILL is
// a failure seen in seconds; a restart brings the node and its queue back;
// SIGTERM is a clean leave; an agent with another key never appears.
func TestGossipDiscoveryAndFailureDetection(t *testing.T) {
	t.Parallel()
	// Passes every 30 s: what happens sooner is gossip's and its nudges' doing.
	p := newPool(t, gossipTiming, 30*time.Second)
	for i := 1; i <= 5; i++ {
		p.agent(fmt.Sprintf("node-%d", i), "", gossipTiming)
	}
	last := time.Now()
	testwait.Within(t, 30*time.Second, "five nodes UP (how soon is measured in make bench)", func() bool {
		ns := p.nodes()
		up := 0
		for _, n := range ns {
			if n.Status == "UP" && n.Source == "gossip" {
				up++
			}
		}
		return up == 5
	})
	t.Logf("five nodes UP %s after the last agent started", time.Since(last).Round(time.Millisecond))

	stranger := p.agent("stranger", writeKey(t), gossipTiming)
	testwait.Within(t, 20*time.Second, "the stranger's failed join", func() bool {
		return strings.Contains(stranger.logs(), "gossip join failed")
	})

	// node-5 holds a running sleep when it is killed, and gets another
	// action while it is down.
	sleep := p.create("node-5", "muster.io/debug.sleep", `{"seconds":2}`)
	p.waitAction(sleep.ID, 10*time.Second, action.New, action.Running)
	killed := time.Now()
	p.agents["node-5"].kill()
	// The deadlines leave room for memberlist's Lifeguard, which stretches
	// probe timeouts up to 8× when the prober itself is starved (-race on 2
	// cores); the times measured are logged.
	// A sync of node-5 (its agent's note that the sleep started) may find
	// it unreachable first; the pool's verdict, failed, follows.
	testwait.Within(t, 30*time.Second, "node-5 DOWN (failed) after SIGKILL", func() bool {
		s, r := p.status("node-5")
		return s == "DOWN" && r == "failed"
	})
	t.Logf("node-5 DOWN %s after SIGKILL", time.Since(killed).Round(time.Millisecond))
	if s, r := p.status("node-5"); s != "DOWN" || r != "failed" {
		t.Fatalf("node-5 is %s (%s), want DOWN (failed)", s, r)
	}
	ping := p.create("node-5", "muster.io/debug.ping", `{}`)
	p.waitAction(ping.ID, 5*time.Second, action.PendingSchedule)

	p.agents["node-5"].restart()
	restarted := time.Now()
	testwait.Within(t, 30*time.Second, "node-5 UP after its restart", func() bool {
		s, _ := p.status("node-5")
		return s == "UP"
	})
	t.Logf("node-5 UP %s after its restart", time.Since(restarted).Round(time.Millisecond))
	// Its queue resumes: the sleep finishes; the ping, pushed on the
	// rejoin's nudge, runs after it. DONE reaches the core by a pass,
	// which the test asks for rather than wait 30 s.
	p.waitAction(ping.ID, 15*time.Second, action.New, action.Running, action.Done)
	for _, id := range []string{sleep.ID, ping.ID} {
		testwait.Within(t, 20*time.Second, "action "+id+" DONE", func() bool {
			_ = p.admin.Orchestrate(ctxT(t), "e2e") // a pass brings DONE to the core
			a, err := p.admin.Action(ctxT(t), id)
			return err == nil && a.State == action.Done
		})
	}

	// A graceful stop is a leave, not a failure.
	if code := p.agents["node-4"].stop(); code != 0 {
		t.Fatalf("node-4 exited %d", code)
	}
	// A pass may find its API gone first (DOWN, unreachable); the pool's
	// leave then says why.
	testwait.Within(t, 30*time.Second, "node-4 DOWN (left) after SIGTERM", func() bool {
		s, r := p.status("node-4")
		return s == "DOWN" && r == "left"
	})
	ev4 := strings.Join(p.nodeEvents("node-4"), ", ")
	if !strings.Contains(ev4, "node.left left") || strings.Contains(ev4, "failed") {
		t.Fatalf("node-4 events: %s", ev4)
	}
	ev5 := strings.Join(p.nodeEvents("node-5"), ", ")
	for _, want := range []string{"node.joined", "node.down failed", "node.up"} {
		if !strings.Contains(ev5, want) {
			t.Fatalf("node-5 events lack %q: %s", want, ev5)
		}
	}

	// By now the stranger has had every chance.
	if _, ok := p.nodes()["stranger"]; ok {
		t.Fatal("an agent with another key appears in the core")
	}
}
