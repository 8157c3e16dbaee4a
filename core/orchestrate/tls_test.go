package orchestrate_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/musterhq/muster/agent"
	"github.com/musterhq/muster/agent/agenttest"
	"github.com/musterhq/muster/core/orchestrate"
	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/core/store/sqlite"
	"github.com/musterhq/muster/shared/action"
	"github.com/musterhq/muster/shared/client"
	"github.com/musterhq/muster/shared/config"
	"github.com/musterhq/muster/shared/tlsutil"
)

// runTLSAgent runs a real agent as nodeID serving the certificate
// dir/agent-<certNode>.pem, requiring client certificates of dir's CA.
func runTLSAgent(t *testing.T, nodeID, certNode, dir string) *realAgent {
	t.Helper()
	cfg := agent.DefaultConfig()
	cfg.NodeID, cfg.ClusterID, cfg.DataDir, cfg.API.Addr = nodeID, cluster, t.TempDir(), "127.0.0.1:0"
	base := filepath.Join(dir, "agent-"+certNode)
	cfg.API.TLS = config.TLS{CertFile: base + ".pem", KeyFile: base + "-key.pem", ClientCAFile: filepath.Join(dir, "ca.pem")}
	r := agenttest.Start(t, cfg)
	return &realAgent{addr: r.Addr, stop: r.Stop}
}

func makeCerts(t *testing.T, dir string, ids ...tlsutil.Identity) {
	t.Helper()
	if _, err := tlsutil.CreateCA(dir, time.Now(), tlsutil.CAValidity); err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		if _, err := tlsutil.CreateCert(dir, id, nil, time.Now(), tlsutil.LeafValidity); err != nil {
			t.Fatal(err)
		}
	}
}

// setupTLS is setup with agents over mutual TLS: nodes maps each node id to
// the agent answering at its address.
func setupTLS(t *testing.T, caDir string, nodes map[string]*realAgent) *env {
	t.Helper()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	e := &env{t: t, st: st, agents: nodes}
	e.update(func(ctx context.Context, tx store.Tx) error {
		if err := tx.PutCluster(ctx, &store.Cluster{ID: cluster, Status: store.ClusterHealthy}); err != nil {
			return err
		}
		for id, a := range nodes {
			if err := tx.PutNode(ctx, &store.Node{ClusterID: cluster, ID: id, Addr: a.addr, Source: store.SourceGossip,
				Status: store.NodeUnknown}); err != nil {
				return err
			}
		}
		return nil
	})
	tc, err := tlsutil.ClientConfig(filepath.Join(caDir, "ca.pem"), filepath.Join(caDir, "core.pem"), filepath.Join(caDir, "core-key.pem"))
	if err != nil {
		t.Fatal(err)
	}
	e.o, err = orchestrate.New(orchestrate.Config{AgentTLS: tc, CompareIDsEvery: 1000}, st, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.o.Stop)
	return e
}

func (e *env) node(id string) store.Node {
	e.t.Helper()
	var n *store.Node
	ctx := context.Background()
	if err := e.st.Read(ctx, func(r store.Reader) error {
		var err error
		n, err = r.Node(ctx, cluster, id)
		return err
	}); err != nil {
		e.t.Fatal(err)
	}
	return *n
}

// Over mutual TLS an action goes through, and a node whose address answers
// with another node's certificate is DOWN for identity mismatch and gets
// nothing, even when that agent claims the node's id in its info.
func TestPassOverMutualTLSChecksEachAgentsIdentity(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "tls")
	makeCerts(t, dir, tlsutil.Agent("n1"), tlsutil.Core())
	n1 := runTLSAgent(t, "n1", "n1", dir)
	// A machine holding n1's certificate announces itself as n9.
	impostor := runTLSAgent(t, "n9", "n1", dir)
	e := setupTLS(t, dir, map[string]*realAgent{"n1": n1, "n9": impostor})

	good := e.create("n1", "muster.io/debug.ping", `{}`)
	stolen := e.create("n9", "muster.io/debug.ping", `{}`)
	e.fullSyncUntil("n1's action done", func() bool { return e.record(good).State == action.Done })

	n9 := e.node("n9")
	want := orchestrate.ReasonIdentityMismatch + ": the certificate at this address is spiffe://muster/agent/n1"
	if n9.Status != store.NodeDown || n9.StatusReason != want {
		t.Fatalf("n9: %s %q, want DOWN %q", n9.Status, n9.StatusReason, want)
	}
	if rec := e.record(stolen); rec.State != action.PendingSchedule || rec.SeenOnAgent {
		t.Fatalf("n9's action: %s (seen on agent %v), want PENDING_SCHEDULE and never pushed", rec.State, rec.SeenOnAgent)
	}
	if n := e.node("n1"); n.Status != store.NodeUp {
		t.Fatalf("n1: %s %q", n.Status, n.StatusReason)
	}
	// The impostor's queue is empty: nothing reached it.
	imp := runAgentClient(t, impostor.addr, dir)
	page, err := imp.Changes(context.Background(), 0, 10, false)
	if err != nil || len(page.Actions) != 0 {
		t.Fatalf("the impostor holds %d actions (%v)", len(page.Actions), err)
	}
}

// A core whose agents_tls CA is not the agents' finds them DOWN with a
// reason that says so, and pushes nothing.
func TestPassWithAnotherCAMarksNodesDownWithTheReason(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "tls")
	other := filepath.Join(t.TempDir(), "other")
	makeCerts(t, dir, tlsutil.Agent("n1"), tlsutil.Core())
	makeCerts(t, other, tlsutil.Core())
	n1 := runTLSAgent(t, "n1", "n1", dir)
	e := setupTLS(t, other, map[string]*realAgent{"n1": n1})
	id := e.create("n1", "muster.io/debug.ping", `{}`)
	e.fullSync()
	n := e.node("n1")
	if n.Status != store.NodeDown || n.StatusReason != "tls: the agent's certificate is not signed by agents_tls.ca_file" {
		t.Fatalf("n1: %s %q, want DOWN with a tls reason", n.Status, n.StatusReason)
	}
	if rec := e.record(id); rec.State != action.PendingSchedule || rec.SeenOnAgent {
		t.Fatalf("action %s, want PENDING_SCHEDULE", rec.State)
	}
}

// runAgentClient is a client of the agent at addr with the core's
// certificate of dir, accepting n1's certificate.
func runAgentClient(t *testing.T, addr, dir string) *client.Agent {
	t.Helper()
	tc, err := tlsutil.ClientConfig(filepath.Join(dir, "ca.pem"), filepath.Join(dir, "core.pem"), filepath.Join(dir, "core-key.pem"))
	if err != nil {
		t.Fatal(err)
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = tlsutil.ForPeer(tc, tlsutil.Agent("n1"))
	t.Cleanup(tr.CloseIdleConnections)
	return client.NewAgent("https://"+addr, &http.Client{Transport: tr})
}

// With agents_tls, an address that names plain HTTP is still reached over
// https with the identity check (issue 9, item 1): an agent without TLS
// answering there as the node gets nothing, and the node is DOWN.
func TestGossipCannotBypassAgentsTLS(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "tls")
	makeCerts(t, dir, tlsutil.Core())
	plain := runAgent(t, "n2", "127.0.0.1:0", t.TempDir())
	e := setupTLS(t, dir, map[string]*realAgent{"n2": {addr: "http://" + plain.addr, stop: plain.stop}})
	id := e.create("n2", "muster.io/debug.ping", `{}`)
	e.fullSync()
	e.fullSync()
	n := e.node("n2")
	if n.Status != store.NodeDown {
		t.Fatalf("n2: %s %q, want DOWN", n.Status, n.StatusReason)
	}
	if rec := e.record(id); rec.State != action.PendingSchedule || rec.SeenOnAgent {
		t.Fatalf("n2's action: %s (seen on agent %v), want PENDING_SCHEDULE and never pushed", rec.State, rec.SeenOnAgent)
	}
	page, err := client.NewAgent(plain.addr, nil).Changes(context.Background(), 0, 10, false)
	if err != nil || len(page.Actions) != 0 {
		t.Fatalf("the plain agent holds %d actions (%v), want none", len(page.Actions), err)
	}
}

// An agent address that answers with a redirect does not lead the core
// elsewhere (issue 9, item 6): the target of the redirect, here a service
// on the core's loopback, gets no request, and the node's reason is a
// fixed text with the status, never what the address answered.
func TestAgentRedirectIsNotFollowed(t *testing.T) {
	t.Parallel()
	var hits atomic.Int64
	internal := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		_, _ = w.Write([]byte(`{"node_id":"n1","cluster_id":"prod","store_id":"s"}`))
	}))
	t.Cleanup(internal.Close)
	redirect := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Location", internal.URL+"/internal/admin?q=")
		w.WriteHeader(http.StatusFound)
		_, _ = w.Write([]byte(`{"error":{"code":"x","message":"internal admin console"}}`))
	}))
	t.Cleanup(redirect.Close)
	e := setup(t, orchestrate.Config{})
	e.update(func(ctx context.Context, tx store.Tx) error {
		return tx.PutNode(ctx, &store.Node{ClusterID: cluster, ID: "n1", Addr: strings.TrimPrefix(redirect.URL, "http://"),
			Source: store.SourceGossip, Status: store.NodeUnknown})
	})
	e.fullSync()
	n := e.node("n1")
	if n.Status != store.NodeDown || n.StatusReason != "agent answered 302 Found" {
		t.Fatalf("n1: %s %q, want DOWN: agent answered 302 Found", n.Status, n.StatusReason)
	}
	if h := hits.Load(); h != 0 {
		t.Fatalf("the redirect's target got %d requests", h)
	}
}

// With RefuseInternalGossip, a gossip node is never dialled at a loopback
// address, whatever name it was announced under (issue 9, item 6): the
// check sees the address dialled after resolution. A static node on
// loopback is still reached.
func TestGossipRefusesLoopbackAddrsWhenDialling(t *testing.T) {
	t.Parallel()
	e := setup(t, orchestrate.Config{RefuseInternalGossip: true}, "static-1")
	hidden := runAgent(t, "gossip-1", "127.0.0.1:0", t.TempDir())
	_, port, _ := strings.Cut(hidden.addr, ":")
	e.update(func(ctx context.Context, tx store.Tx) error {
		return tx.PutNode(ctx, &store.Node{ClusterID: cluster, ID: "gossip-1", Addr: "localhost:" + port,
			Source: store.SourceGossip, Status: store.NodeUnknown})
	})
	id := e.create("gossip-1", "muster.io/debug.ping", `{}`)
	e.fullSync()
	if n := e.node("gossip-1"); n.Status != store.NodeDown || n.StatusReason != orchestrate.ReasonInternalAddr {
		t.Fatalf("gossip-1 at localhost: %s %q, want DOWN %q", n.Status, n.StatusReason, orchestrate.ReasonInternalAddr)
	}
	if n := e.node("static-1"); n.Status != store.NodeUp {
		t.Fatalf("static-1 on loopback: %s %q, want UP", n.Status, n.StatusReason)
	}
	if rec := e.record(id); rec.State != action.PendingSchedule || rec.SeenOnAgent {
		t.Fatalf("gossip-1's action: %s, want PENDING_SCHEDULE and never pushed", rec.State)
	}
	page, err := client.NewAgent(hidden.addr, nil).Changes(context.Background(), 0, 10, false)
	if err != nil || len(page.Actions) != 0 {
		t.Fatalf("the agent behind localhost holds %d actions (%v), want none", len(page.Actions), err)
	}
}

// An agent whose info is larger than the client's limit is DOWN with a
// reason that says so (issue 9, item 2), and the core reads no more of it.
func TestClientBodyLimitMarksTheNodeDown(t *testing.T) {
	t.Parallel()
	var written atomic.Int64
	huge := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"node_id":"n1","cluster_id":"prod","kinds":["`))
		chunk := []byte(strings.Repeat("k", 32<<10))
		for written.Load() < 400<<20 {
			n, err := w.Write(chunk)
			written.Add(int64(n))
			if err != nil {
				return
			}
		}
	}))
	t.Cleanup(huge.Close)
	e := setup(t, orchestrate.Config{})
	e.update(func(ctx context.Context, tx store.Tx) error {
		return tx.PutNode(ctx, &store.Node{ClusterID: cluster, ID: "n1", Addr: strings.TrimPrefix(huge.URL, "http://"),
			Source: store.SourceGossip, Status: store.NodeUnknown})
	})
	e.fullSync()
	if n := e.node("n1"); n.Status != store.NodeDown || n.StatusReason != orchestrate.ReasonTooLarge {
		t.Fatalf("n1: %s %q, want DOWN %q", n.Status, n.StatusReason, orchestrate.ReasonTooLarge)
	}
	huge.CloseClientConnections()
	if w := written.Load(); w > 64<<20 {
		t.Fatalf("the agent wrote %d bytes before the core stopped reading", w)
	}
}

// An agent enrolled as n1 of another cluster does not pass for n1 of this
// cluster: the node is DOWN with a reason naming both clusters and gets
// nothing.
func TestAgentCertificateOfAnotherClusterIsRefused(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "tls")
	makeCerts(t, dir, tlsutil.Core())
	ca, err := tlsutil.LoadCA(dir)
	if err != nil {
		t.Fatal(err)
	}
	csrPEM, keyPEM, err := tlsutil.NewAgentCSR("n1")
	if err != nil {
		t.Fatal(err)
	}
	csr, _ := tlsutil.ParseAgentCSR(csrPEM, "n1")
	certPEM, _, err := ca.SignAgent(csr, "n1", "dev", time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "agent-n1.pem"), certPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "agent-n1-key.pem"), keyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	e := setupTLS(t, dir, map[string]*realAgent{"n1": runTLSAgent(t, "n1", "n1", dir)})
	id := e.create("n1", "muster.io/debug.ping", `{}`)
	e.fullSync()
	n := e.node("n1")
	if n.Status != store.NodeDown || !strings.Contains(n.StatusReason, "cluster dev, not prod") {
		t.Fatalf("n1: %s %q, want DOWN naming cluster dev", n.Status, n.StatusReason)
	}
	if rec := e.record(id); rec.SeenOnAgent {
		t.Fatal("the action reached the agent of another cluster")
	}
}
