package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"

	"github.com/musterhq/muster/shared/action"
	"github.com/musterhq/muster/shared/client"
	"github.com/musterhq/muster/shared/gossip"
	"github.com/musterhq/muster/shared/testwait"
	"github.com/musterhq/muster/shared/tlsutil"
	"github.com/musterhq/muster/shared/wire"
)

// rogue is a member of the gossip pool that holds the key and nothing else:
// it announces whatever metadata it is given, bytes as they are, the way an
// attacker's own memberlist would (no muster codec checks them).
type rogue struct {
	ml *memberlist.Memberlist

	mu   sync.Mutex
	meta []byte
}

func (r *rogue) NodeMeta(int) []byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.meta
}
func (r *rogue) NotifyMsg([]byte)                  {}
func (r *rogue) GetBroadcasts(int, int) [][]byte   { return nil }
func (r *rogue) LocalState(bool) []byte            { return nil }
func (r *rogue) MergeRemoteState(b []byte, j bool) {}

// announce changes the rogue's metadata and tells the pool.
func (r *rogue) announce(t testing.TB, meta string) {
	t.Helper()
	r.mu.Lock()
	r.meta = []byte(meta)
	r.mu.Unlock()
	if err := r.ml.UpdateNode(5 * time.Second); err != nil {
		t.Fatal(err)
	}
}

// startRogue joins the pool at join with the key in keyFile, announcing meta.
func startRogue(t testing.TB, name, keyFile, join, meta string) *rogue {
	t.Helper()
	key, err := gossip.ReadKeyFile(keyFile)
	if err != nil {
		t.Fatal(err)
	}
	r := &rogue{meta: []byte(meta)}
	c := memberlist.DefaultLocalConfig()
	c.Name, c.BindAddr, c.BindPort, c.AdvertisePort = name, "127.0.0.1", 0, 0
	c.Label, c.SecretKey = gossip.Label, key
	c.GossipVerifyIncoming, c.GossipVerifyOutgoing = true, true
	c.ProbeInterval, c.ProbeTimeout = 500*time.Millisecond, 200*time.Millisecond
	c.Delegate = r
	c.Logger = log.New(io.Discard, "", 0)
	if r.ml, err = memberlist.Create(c); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.ml.Shutdown() })
	if _, err := r.ml.Join([]string{join}); err != nil {
		t.Fatal(err)
	}
	return r
}

// fakeAgent is a plain-HTTP server that answers as agent node of cluster
// e2e would, queues what it is pushed, and counts every request it gets.
func fakeAgent(t testing.TB, node string) (string, *atomic.Int64) {
	t.Helper()
	var hits atomic.Int64
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.URL.Path == "/api/v1/info":
			_ = json.NewEncoder(w).Encode(wire.AgentInfo{NodeID: node, ClusterID: "e2e", StoreID: "forged", Kinds: []string{"muster.io/debug.ping"}})
		case r.URL.Path == "/api/v1/actions" && r.Method == http.MethodGet:
			_ = json.NewEncoder(w).Encode(wire.ChangesPage{})
		default:
			w.WriteHeader(http.StatusCreated)
			_ = json.NewEncoder(w).Encode(action.Action{ID: "forged", State: action.Done, Output: "forged"})
		}
	}))
	t.Cleanup(ts.Close)
	return strings.TrimPrefix(ts.URL, "http://"), &hits
}

// securePool is a core with agents_tls and an encrypted gossip pool, and
// one real agent, node-1, with its certificate, found through gossip.
type securePool struct {
	*pool
	pki string
}

func newSecurePool(t *testing.T) *securePool {
	t.Helper()
	base := t.TempDir()
	pki := filepath.Join(base, "tls")
	muster(t, nil, "tls", "ca", "create", "--dir", pki)
	muster(t, nil, "tls", "cert", "create", "--dir", pki, "--core")
	muster(t, nil, "tls", "cert", "create", "--dir", pki, "--agent", "node-1")
	file := func(name string) string { return filepath.Join(pki, name) }
	p := &pool{t: t, key: writeKey(t), agents: map[string]*proc{}, coreGossip: fmt.Sprintf("127.0.0.1:%d", freePort(t))}
	dir := filepath.Join(base, "core")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	cfg := fmt.Sprintf(`data_dir: %s
api:
  addr: 127.0.0.1:%d
agents_tls:
  ca_file: %s
  cert_file: %s
  key_file: %s
orchestrate:
  interval: 1s
  agent_timeout: 2s
approval:
  rules:
    - {kind: "muster.io/debug.*", cluster: "*", approval: none}
gossip:
  enabled: true
  bind_addr: %s
  key_file: %s
%s`, filepath.Join(dir, "data"), freePort(t), file("ca.pem"), file("core.pem"), file("core-key.pem"), p.coreGossip, p.key, gossipTiming)
	path := filepath.Join(dir, "core.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	p.core = startIn(t, dir, "core", nil, "core", "--config", path)
	secret, err := os.ReadFile(filepath.Join(dir, "data", "admin.token"))
	if err != nil {
		t.Fatal(err)
	}
	p.admin = client.NewCore("http://"+p.core.Addr(), strings.TrimSpace(string(secret)), &http.Client{Timeout: 10 * time.Second})

	agentDir := filepath.Join(base, "node-1")
	port := freePort(t)
	acfg := fmt.Sprintf(`node_id: node-1
cluster_id: e2e
data_dir: %s
api:
  addr: 127.0.0.1:%d
  tls:
    cert_file: %s
    key_file: %s
    client_ca_file: %s
gossip:
  enabled: true
  bind_addr: 127.0.0.1:%d
  join: [%q]
  key_file: %s
%s`, filepath.Join(agentDir, "data"), port, file("agent-node-1.pem"), file("agent-node-1-key.pem"), file("ca.pem"),
		freePort(t), p.coreGossip, p.key, gossipTiming)
	if err := os.MkdirAll(agentDir, 0o700); err != nil {
		t.Fatal(err)
	}
	apath := filepath.Join(agentDir, "agent.yaml")
	if err := os.WriteFile(apath, []byte(acfg), 0o600); err != nil {
		t.Fatal(err)
	}
	want := tlsutil.Agent("node-1")
	p.agents["node-1"] = startProbed(t, agentDir, "node-1", nil, probe(tlsClient(t, pki, pki, "core", &want), "https://%s/api/v1/health"),
		"agent", "--config", apath)
	testwait.Within(t, 30*time.Second, "node-1 UP over mutual TLS", func() bool {
		s, _ := p.status("node-1")
		return s == "UP"
	})
	return &securePool{pool: p, pki: pki}
}

// pingDone creates a ping on node and waits for it to be DONE: passes of
// the cluster ran after whatever came before.
func (p *pool) pingDone(node string) {
	p.t.Helper()
	a := p.create(node, "muster.io/debug.ping", `{}`)
	testwait.Within(p.t, 30*time.Second, "a ping on "+node+" DONE", func() bool {
		got, err := p.admin.Action(ctxT(p.t), a.ID)
		return err == nil && got.State == action.Done
	})
}

// Issue 9, items 1 and 7, with real processes: gossip key holders without
// a certificate announce a real node id. One names plain HTTP (refused at
// decode); one announces another node at a bare address (reached over https,
// so it fails the handshake and gets nothing); one claims node-1, which is
// UP (a refused claim: an event, and node-1 stays UP and keeps its work).
// None of them ever receives a request, a push or changes a record.
func TestGossipCannotBypassAgentsTLS(t *testing.T) {
	t.Parallel()
	p := newSecurePool(t)
	fake, hits := fakeAgent(t, "node-2")
	node1 := p.nodes()["node-1"]

	startRogue(t, "rogue-scheme", p.key, p.coreGossip,
		`{"v":1,"role":"agent","cluster":"e2e","node":"node-2","api":"http://`+fake+`"}`)
	testwait.Within(t, 20*time.Second, "the core to ignore the announcement with a scheme", func() bool {
		return strings.Contains(p.core.logs(), "rogue-scheme") && strings.Contains(p.core.logs(), "unreadable metadata")
	})

	startRogue(t, "rogue-bare", p.key, p.coreGossip, `{"v":1,"role":"agent","cluster":"e2e","node":"node-3","api":"`+fake+`"}`)
	testwait.Within(t, 20*time.Second, "node-3 found and DOWN", func() bool {
		s, _ := p.status("node-3")
		return s == "DOWN"
	})
	stolen := p.create("node-3", "muster.io/debug.ping", `{"secret":"s3cr3t"}`)

	startRogue(t, "rogue-claim", p.key, p.coreGossip, `{"v":1,"role":"agent","cluster":"e2e","node":"node-1","api":"`+fake+`"}`)
	testwait.Within(t, 20*time.Second, "the rogue's claim on node-1 refused", func() bool {
		return strings.Contains(strings.Join(p.nodeEvents("node-1"), ","), "node.claim_refused")
	})
	p.pingDone("node-1") // passes ran after all three announcements

	if n := hits.Load(); n != 0 {
		t.Fatalf("the certificate-less agent got %d requests", n)
	}
	ns := p.nodes()
	if _, ok := ns["node-2"]; ok {
		t.Fatalf("node-2 appeared from an announcement with a scheme: %+v", ns["node-2"])
	}
	if n := ns["node-1"]; n.Status != "UP" || n.Addr != node1.Addr {
		t.Fatalf("node-1 is %s at %s, want UP at %s", n.Status, n.Addr, node1.Addr)
	}
	for _, ev := range p.nodeEvents("node-1") {
		if strings.HasPrefix(ev, "node.down") {
			t.Fatalf("the rogue's claim made node-1 DOWN: %v", p.nodeEvents("node-1"))
		}
	}
	if a, err := p.admin.Action(ctxT(t), stolen.ID); err != nil || a.State != action.PendingSchedule {
		t.Fatalf("node-3's action: %+v, %v; want PENDING_SCHEDULE", a, err)
	}
	list, err := p.admin.Actions(ctxT(t), client.ActionFilter{Cluster: "e2e"})
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range list.Actions {
		if a.ID == "forged" || a.Output == "forged" || a.Origin == action.OriginAgent {
			t.Fatalf("a forged record reached the core: %+v", a)
		}
	}
}

// Issue 9, item 6, with real processes: a core whose API is not on loopback
// ignores gossip agents announcing loopback or link-local addresses (the
// SSRF of a key holder aiming the core at its own host's services), with
// or without agents_tls. An announcement of a routable address is taken.
func TestGossipRefusesLoopbackAddrs(t *testing.T) {
	t.Parallel()
	fake, hits := fakeAgent(t, "node-9")
	key := writeKey(t)
	coreGossip := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	dir := t.TempDir()
	port := freePort(t)
	cfg := fmt.Sprintf(`data_dir: %s
api:
  addr: 0.0.0.0:%d
  insecure: true
orchestrate:
  interval: 1s
  agent_timeout: 1s
gossip:
  enabled: true
  bind_addr: %s
  key_file: %s
%s`, filepath.Join(dir, "data"), port, coreGossip, key, gossipTiming)
	path := filepath.Join(dir, "core.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	core := startProbed(t, dir, "core", nil, func(string) bool {
		resp, err := http.Get("http://127.0.0.1:" + strconv.Itoa(port) + "/health")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, "core", "--config", path)
	secret, err := os.ReadFile(filepath.Join(dir, "data", "admin.token"))
	if err != nil {
		t.Fatal(err)
	}
	admin := client.NewCore("http://"+net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), strings.TrimSpace(string(secret)),
		&http.Client{Timeout: 10 * time.Second})

	// One member moves through three announcements of node-9; only the
	// last, a routable (if unreachable) address, is taken.
	ignored := func(api string) func() bool {
		return func() bool {
			for _, l := range strings.Split(core.logs(), "\n") {
				if strings.Contains(l, "loopback or link-local API address ignored") && strings.Contains(l, "api="+api) {
					return true
				}
			}
			return false
		}
	}
	r := startRogue(t, "rogue", key, coreGossip, `{"v":1,"role":"agent","cluster":"e2e","node":"node-9","api":"`+fake+`"}`)
	testwait.Within(t, 20*time.Second, "the loopback announcement ignored", ignored(fake))
	r.announce(t, `{"v":1,"role":"agent","cluster":"e2e","node":"node-9","api":"169.254.169.254:80"}`)
	testwait.Within(t, 20*time.Second, "the link-local announcement ignored", ignored("169.254.169.254:80"))
	if ns, err := admin.Nodes(ctxT(t), ""); err != nil || len(ns) != 0 {
		t.Fatalf("nodes %+v (%v), want none yet", ns, err)
	}
	r.announce(t, `{"v":1,"role":"agent","cluster":"e2e","node":"node-9","api":"192.0.2.1:7420"}`)
	testwait.Within(t, 20*time.Second, "node-9 at its routable address", func() bool {
		ns, err := admin.Nodes(ctxT(t), "e2e")
		return err == nil && len(ns) == 1 && ns[0].Addr == "192.0.2.1:7420"
	})
	evs, err := admin.Events(ctxT(t), 0, 1000, client.EventFilter{Cluster: "e2e"})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range evs.Events {
		if strings.Contains(e.Message, "127.0.0.1") || strings.Contains(e.Message, "169.254") {
			t.Fatalf("an event names an internal address: %+v", e)
		}
	}
	if n := hits.Load(); n != 0 {
		t.Fatalf("the service on the core's loopback got %d requests", n)
	}
}
