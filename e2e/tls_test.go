package e2e

import (
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/musterhq/muster/shared/action"
	"github.com/musterhq/muster/shared/client"
	"github.com/musterhq/muster/shared/testwait"
	"github.com/musterhq/muster/shared/tlsutil"
	"github.com/musterhq/muster/shared/wire"
)

// muster runs the real binary and fails the test unless it exits 0.
func muster(t *testing.T, env []string, args ...string) string {
	t.Helper()
	cmd := exec.Command(binary, args...)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("muster %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// tlsClient is an HTTP client trusting caDir's CA that presents
// certDir/base.pem ("" for none) and, when peer is set, accepts only a server
// certificate naming it.
func tlsClient(t *testing.T, caDir, certDir, base string, peer *tlsutil.Identity) *http.Client {
	t.Helper()
	cert, key := "", ""
	if base != "" {
		cert, key = filepath.Join(certDir, base+".pem"), filepath.Join(certDir, base+"-key.pem")
	}
	tc, err := tlsutil.ClientConfig(filepath.Join(caDir, "ca.pem"), cert, key)
	if err != nil {
		t.Fatal(err)
	}
	if len(tc.Certificates) == 1 {
		c := tc.Certificates[0] // presented even when the server asks for another CA's
		tc.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &c, nil }
	}
	if peer != nil {
		tc = tlsutil.ForPeer(tc, *peer)
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = tc
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 10 * time.Second}
}

func probe(hc *http.Client, url string) func(string) bool {
	return func(addr string) bool {
		resp, err := hc.Get(fmt.Sprintf(url, addr))
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}
}

// A core and three agents with mutual TLS everywhere, every certificate made
// by `muster tls`: an action goes through; the agents refuse a plaintext
// client and a client whose certificate comes from another CA; the client
// commands reach the core with MUSTER_CACERT and a client certificate.
func TestMutualTLSEverywhere(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	pki, other := filepath.Join(base, "tls"), filepath.Join(base, "other")
	muster(t, nil, "tls", "ca", "create", "--dir", pki)
	muster(t, nil, "tls", "ca", "create", "--dir", other)
	muster(t, nil, "tls", "cert", "create", "--dir", pki, "--core")
	muster(t, nil, "tls", "cert", "create", "--dir", pki, "--client", "alice")
	muster(t, nil, "tls", "cert", "create", "--dir", other, "--core")
	file := func(name string) string { return filepath.Join(pki, name) }

	var nodes strings.Builder
	agentAddr := map[string]string{}
	for i := 1; i <= 3; i++ {
		id := fmt.Sprintf("node-%d", i)
		muster(t, nil, "tls", "cert", "create", "--dir", pki, "--agent", id)
		dir := filepath.Join(base, id)
		cfg := fmt.Sprintf(`node_id: %s
cluster_id: e2e
data_dir: %s
api:
  addr: 127.0.0.1:%d
  tls:
    cert_file: %s
    key_file: %s
    client_ca_file: %s
`, id, filepath.Join(dir, "data"), freePort(t), file("agent-"+id+".pem"), file("agent-"+id+"-key.pem"), file("ca.pem"))
		if err := os.MkdirAll(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, "agent.yaml")
		if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
			t.Fatal(err)
		}
		want := tlsutil.Agent(id)
		p := startProbed(t, dir, id, nil, probe(tlsClient(t, pki, pki, "core", &want), "https://%s/api/v1/health"),
			"agent", "--config", path)
		agentAddr[id] = p.Addr()
		fmt.Fprintf(&nodes, "      - {id: %s, addr: %q}\n", id, p.Addr())
	}

	dir := filepath.Join(base, "core")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	cfg := fmt.Sprintf(`data_dir: %s
api:
  addr: 127.0.0.1:%d
  tls:
    cert_file: %s
    key_file: %s
    client_ca_file: %s
agents_tls:
  ca_file: %s
  cert_file: %s
  key_file: %s
clusters:
  - id: e2e
    nodes:
%sorchestrate:
  interval: 1s
  agent_timeout: 2s
`, filepath.Join(dir, "data"), freePort(t), file("core.pem"), file("core-key.pem"), file("ca.pem"),
		file("ca.pem"), file("core.pem"), file("core-key.pem"), nodes.String())
	path := filepath.Join(dir, "core.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	alice := tlsClient(t, pki, pki, "client-alice", nil)
	core := startProbed(t, dir, "core", nil, probe(alice, "https://%s/health"), "core", "--config", path)
	secret, err := os.ReadFile(filepath.Join(dir, "data", "admin.token"))
	if err != nil {
		t.Fatal(err)
	}
	url := "https://" + core.Addr()
	admin := client.NewCore(url, strings.TrimSpace(string(secret)), alice)
	tokens := map[string]string{}
	for name, role := range map[string]string{"alice": "operator", "bob": "approver"} {
		sec, err := admin.CreateToken(ctxT(t), name, []string{role})
		if err != nil {
			t.Fatal(err)
		}
		tokens[name] = sec.Token
	}
	testwait.Within(t, 20*time.Second, "every node UP over mutual TLS", func() bool {
		ns, err := admin.Nodes(ctxT(t), "e2e")
		if err != nil || len(ns) != 3 {
			return false
		}
		for _, n := range ns {
			if n.Status != "UP" {
				return false
			}
		}
		return true
	})

	// The client commands, from the environment.
	env := []string{"MUSTER_ADDR=" + url, "MUSTER_CACERT=" + file("ca.pem"),
		"MUSTER_CLIENT_CERT=" + file("client-alice.pem"), "MUSTER_CLIENT_KEY=" + file("client-alice-key.pem")}
	out := muster(t, append(env, "MUSTER_TOKEN="+tokens["alice"]), "action", "create", "--cluster", "e2e", "--node", "node-2",
		"--kind", "muster.io/debug.ping", "-o", "json")
	a := decodeJSON[action.Action](t, out)
	if a.State != action.PendingApprove || a.Requester != "alice" {
		t.Fatalf("created %+v", a)
	}
	muster(t, append(env, "MUSTER_TOKEN="+tokens["bob"]), "action", "approve", a.ID)
	testwait.Within(t, 30*time.Second, "the action DONE", func() bool {
		got, err := admin.Action(ctxT(t), a.ID)
		return err == nil && got.State == action.Done
	})

	// The agents answer the core only.
	push := &wire.PushRequest{Kind: "muster.io/debug.ping"}
	for id, addr := range agentAddr {
		resp, err := http.Post("http://"+addr+"/api/v1/actions", "application/json", strings.NewReader(`{"kind":"muster.io/debug.ping"}`))
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode < 400 {
				t.Fatalf("%s: a plaintext push got %d", id, resp.StatusCode)
			}
		}
		want := tlsutil.Agent(id)
		_, _, err = client.NewAgent("https://"+addr, tlsClient(t, pki, other, "core", &want)).Push(ctxT(t), push)
		if err == nil || client.StatusOf(err) != 0 {
			t.Fatalf("%s: a push with another CA's certificate: %v, want a refused handshake", id, err)
		}
		_, _, err = client.NewAgent("https://"+addr, tlsClient(t, pki, pki, "client-alice", &want)).Push(ctxT(t), push)
		if client.StatusOf(err) != http.StatusForbidden {
			t.Fatalf("%s: a push with a person's certificate: %v, want 403", id, err)
		}
	}
	// Only the core's action ever reached an agent.
	list, err := admin.Actions(ctxT(t), client.ActionFilter{Cluster: "e2e"})
	if err != nil || len(list.Actions) != 1 {
		t.Fatalf("the core holds %+v (%v), want only the one action", list, err)
	}
	// And without a client certificate, the core refuses the client.
	cmd := exec.Command(binary, "cluster", "list")
	cmd.Env = append(os.Environ(), "MUSTER_ADDR="+url, "MUSTER_CACERT="+file("ca.pem"), "MUSTER_TOKEN="+tokens["alice"])
	if out, err := cmd.CombinedOutput(); err == nil {
		t.Fatalf("a client without a certificate was served:\n%s", out)
	}
}

func decodeJSON[T any](t *testing.T, s string) T {
	t.Helper()
	var v T
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, s)
	}
	return v
}
