package core_test

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/musterhq/muster/agent"
	"github.com/musterhq/muster/agent/agenttest"
	agentenroll "github.com/musterhq/muster/agent/enroll"
	"github.com/musterhq/muster/core"
	"github.com/musterhq/muster/core/auth"
	"github.com/musterhq/muster/core/discovery"
	"github.com/musterhq/muster/core/orchestrate"
	"github.com/musterhq/muster/shared/apiserver/apiservertest"
	"github.com/musterhq/muster/shared/client"
	"github.com/musterhq/muster/shared/config"
	"github.com/musterhq/muster/shared/testwait"
	"github.com/musterhq/muster/shared/tlsutil"
	"github.com/musterhq/muster/shared/wire"
)

// TestARevokedAgentIsRefusedAtOnce: a static node (marked enroll: true) whose agent enrolled
// (through the real API) is synced over mutual TLS; once revoked, the
// core drops its kept connection and refuses the agent's certificate at
// the next handshake: the node is DOWN with the revocation as reason right
// away, not when the kept connection ends.
func TestARevokedAgentIsRefusedAtOnce(t *testing.T) {
	t.Parallel()
	pki := apiservertest.NewPKI(t, time.Hour, tlsutil.Core())
	file := pki.File
	agentAddr := apiservertest.FreeAddr(t)

	cfg := core.DefaultConfig()
	cfg.DataDir = t.TempDir()
	cfg.API.Addr = "127.0.0.1:0"
	cfg.API.TLS = config.TLS{CertFile: file("core.pem"), KeyFile: file("core-key.pem")}
	cfg.AgentsTLS = core.AgentsTLSConfig{CAFile: file("ca.pem"), CertFile: file("core.pem"), KeyFile: file("core-key.pem")}
	cfg.AgentsCA = core.AgentsCAConfig{CertFile: file("ca.pem"), KeyFile: file("ca-key.pem"), Lifetime: time.Hour}
	cfg.Clusters = []discovery.ClusterSpec{{ID: "prod", Nodes: []discovery.NodeSpec{{ID: "web-1", Addr: agentAddr, Enroll: true}}}}
	cfg.Orchestrate.Interval = time.Hour // syncs come from nudges
	c, err := core.New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	apiservertest.Run(t, c)
	ctx := context.Background()
	secret, err := os.ReadFile(filepath.Join(cfg.DataDir, auth.AdminTokenFile))
	if err != nil {
		t.Fatal(err)
	}
	hc := apiservertest.Client(t, file("ca.pem"), "", "")
	url := "https://" + c.Addr().String()
	cl := client.NewCore(url, strings.TrimSpace(string(secret)), hc)
	uses := 1
	join, err := cl.CreateTokenWith(ctx, wire.CreateTokenRequest{Name: "join", Roles: []string{"enroll"}, ClusterID: "prod", Uses: &uses})
	if err != nil {
		t.Fatal(err)
	}
	ca, err := tlsutil.LoadCA(string(pki))
	if err != nil {
		t.Fatal(err)
	}
	agentDir := t.TempDir()
	if _, err := agentenroll.Enroll(ctx, agentenroll.Options{Core: url, Token: join.Token, CAPin: tlsutil.Pin(ca.Cert),
		NodeID: "web-1", ClusterID: "prod", Paths: agentenroll.PathsIn(filepath.Join(agentDir, "tls"))}); err != nil {
		t.Fatal(err)
	}
	acfg := agent.DefaultConfig()
	acfg.NodeID, acfg.ClusterID, acfg.DataDir, acfg.API.Addr = "web-1", "prod", agentDir, agentAddr
	agenttest.Start(t, acfg) // enrolled: serves <data_dir>/tls, requires the core's certificate

	node := func() wire.Node {
		ns, err := cl.Nodes(ctx, "prod")
		if err != nil || len(ns) != 1 {
			return wire.Node{}
		}
		return ns[0]
	}
	testwait.For(t, "web-1 UP over mutual TLS with its enrolled certificate", func() bool {
		if node().Status == "UP" {
			return true
		}
		_ = cl.Orchestrate(ctx, "prod")
		return false
	})
	if _, err := cl.RevokeNode(ctx, "prod", "web-1", "lost"); err != nil {
		t.Fatal(err)
	}
	// The revocation nudges the node: no orchestrate call from here on.
	testwait.Within(t, 5*time.Second, "web-1 DOWN, its certificate refused", func() bool {
		n := node()
		return n.Status == "DOWN" && n.StatusReason == orchestrate.ReasonRevoked && n.Revoked
	})
}

// TestEnrollWorksWithClientCAFileAndOtherRoutesStillNeedACert: with
// api.tls.client_ca_file, an agent without any certificate enrolls (the
// handshake no longer demands one), while every other route, the public
// ones included, still refuses a caller without a certificate of that CA
// (401 with a JSON error), and answers one with it.
func TestEnrollWorksWithClientCAFileAndOtherRoutesStillNeedACert(t *testing.T) {
	t.Parallel()
	pki := apiservertest.NewPKI(t, time.Hour, tlsutil.Core())
	file := pki.File
	cfg := core.DefaultConfig()
	cfg.DataDir = t.TempDir()
	cfg.API.Addr = "127.0.0.1:0"
	cfg.API.TLS = config.TLS{CertFile: file("core.pem"), KeyFile: file("core-key.pem"), ClientCAFile: file("ca.pem")}
	cfg.AgentsTLS = core.AgentsTLSConfig{CAFile: file("ca.pem"), CertFile: file("core.pem"), KeyFile: file("core-key.pem")}
	cfg.AgentsCA = core.AgentsCAConfig{CertFile: file("ca.pem"), KeyFile: file("ca-key.pem"), Lifetime: time.Hour}
	cfg.Clusters = []discovery.ClusterSpec{{ID: "prod"}}
	c, err := core.New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	apiservertest.Run(t, c)
	ctx := context.Background()
	secret, err := os.ReadFile(filepath.Join(cfg.DataDir, auth.AdminTokenFile))
	if err != nil {
		t.Fatal(err)
	}
	admin := strings.TrimSpace(string(secret))
	url := "https://" + c.Addr().String()
	httpClient := func(withCert bool) *http.Client {
		certFile, keyFile := "", ""
		if withCert {
			certFile, keyFile = file("core.pem"), file("core-key.pem")
		}
		tc, err := tlsutil.ClientConfig(file("ca.pem"), certFile, keyFile)
		if err != nil {
			t.Fatal(err)
		}
		tr := &http.Transport{TLSClientConfig: tc}
		t.Cleanup(tr.CloseIdleConnections)
		return &http.Client{Transport: tr, Timeout: 10 * time.Second}
	}
	withCert, without := httpClient(true), httpClient(false)
	cl := client.NewCore(url, admin, withCert)
	join, err := cl.CreateTokenWith(ctx, wire.CreateTokenRequest{Name: "join", Roles: []string{"enroll"}, ClusterID: "prod"})
	if err != nil {
		t.Fatal(err)
	}
	ca, err := tlsutil.LoadCA(string(pki))
	if err != nil {
		t.Fatal(err)
	}
	// The agent's enrollment presents no certificate.
	if _, err := agentenroll.Enroll(ctx, agentenroll.Options{Core: url, Token: join.Token, CAPin: tlsutil.Pin(ca.Cert),
		NodeID: "web-1", ClusterID: "prod", Paths: agentenroll.PathsIn(filepath.Join(t.TempDir(), "tls"))}); err != nil {
		t.Fatalf("enrollment without a client certificate: %v", err)
	}
	get := func(hc *http.Client, path string) (int, string) {
		t.Helper()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url+path, nil)
		req.Header.Set("Authorization", "Bearer "+admin)
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		defer resp.Body.Close()
		var body wire.ErrorBody
		_ = json.NewDecoder(resp.Body).Decode(&body)
		return resp.StatusCode, body.Error.Code
	}
	for _, path := range []string{"/api/v1/nodes", "/api/v1/tokens", "/health", "/metrics", "/api/v1/openapi.json", "/ui/", "/api/v1/enroll"} {
		if status, code := get(without, path); status != http.StatusUnauthorized || code != wire.CodeUnauthorized {
			t.Errorf("GET %s without a client certificate: %d %q, want 401 unauthorized", path, status, code)
		}
	}
	if status, _ := get(without, "/api/v1/enroll/ca"); status != http.StatusOK {
		t.Errorf("GET /api/v1/enroll/ca without a client certificate: %d, want 200", status)
	}
	if status, _ := get(withCert, "/api/v1/nodes"); status != http.StatusOK {
		t.Errorf("GET /api/v1/nodes with a client certificate: %d, want 200", status)
	}
}
