package core_test

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/musterhq/muster/core"
	"github.com/musterhq/muster/core/auth"
	"github.com/musterhq/muster/core/discovery"
	"github.com/musterhq/muster/shared/apiserver/apiservertest"
	"github.com/musterhq/muster/shared/client"
	"github.com/musterhq/muster/shared/config"
	"github.com/musterhq/muster/shared/testwait"
	"github.com/musterhq/muster/shared/tlsutil"
	"github.com/musterhq/muster/shared/wire"
)

// A core with TLS on its API and agents_tls, and one node served over TLS
// 1.2 only (with a valid certificate for that node): the core's API speaks
// TLS 1.2 with AEAD suites and refuses CBC ones, and the core refuses to
// reach the agent below TLS 1.3 (issue 9, item 11).
func TestCoreTLSVersionsAndSuites(t *testing.T) {
	t.Parallel()
	file := apiservertest.NewPKI(t, tlsutil.LeafValidity, tlsutil.Core(), tlsutil.Agent("old-1")).File

	// An agent stand-in that would answer the core, over TLS 1.2 at most.
	var hits atomic.Int64
	old := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		_ = json.NewEncoder(w).Encode(wire.AgentInfo{NodeID: "old-1", ClusterID: "c1", StoreID: "s"})
	}))
	cert, err := tls.LoadX509KeyPair(file("agent-old-1.pem"), file("agent-old-1-key.pem"))
	if err != nil {
		t.Fatal(err)
	}
	old.TLS = &tls.Config{Certificates: []tls.Certificate{cert}, MaxVersion: tls.VersionTLS12}
	old.StartTLS()
	t.Cleanup(old.Close)

	cfg := core.DefaultConfig()
	cfg.DataDir = t.TempDir()
	cfg.API.Addr = "127.0.0.1:0"
	cfg.API.TLS = config.TLS{CertFile: file("core.pem"), KeyFile: file("core-key.pem")}
	cfg.AgentsTLS = core.AgentsTLSConfig{CAFile: file("ca.pem"), CertFile: file("core.pem"), KeyFile: file("core-key.pem")}
	cfg.Clusters = []discovery.ClusterSpec{{ID: "c1", Nodes: []discovery.NodeSpec{{ID: "old-1", Addr: strings.TrimPrefix(old.URL, "https://")}}}}
	c, err := core.New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	apiservertest.Run(t, c)
	ctx := context.Background()

	clientWith := func(suite uint16) *http.Client {
		tc, err := tlsutil.ClientConfig(file("ca.pem"), "", "")
		if err != nil {
			t.Fatal(err)
		}
		tc.MaxVersion, tc.CipherSuites = tls.VersionTLS12, []uint16{suite}
		tr := &http.Transport{TLSClientConfig: tlsutil.ForPeer(tc, tlsutil.Core())}
		t.Cleanup(tr.CloseIdleConnections)
		return &http.Client{Transport: tr, Timeout: 10 * time.Second}
	}
	url := "https://" + c.Addr().String()
	secret, err := os.ReadFile(filepath.Join(cfg.DataDir, auth.AdminTokenFile))
	if err != nil {
		t.Fatal(err)
	}
	if err := client.NewCore(url, "", clientWith(tls.TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA)).Health(ctx); err == nil || client.StatusOf(err) != 0 {
		t.Fatalf("ECDHE-ECDSA-AES128-SHA on TLS 1.2: %v, want a refused handshake", err)
	}
	cl := client.NewCore(url, strings.TrimSpace(string(secret)), clientWith(tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256))
	if err := cl.Health(ctx); err != nil {
		t.Fatalf("ECDHE-ECDSA-AES128-GCM-SHA256 on TLS 1.2: %v", err)
	}
	testwait.For(t, "old-1 DOWN", func() bool {
		ns, err := cl.Nodes(ctx, "c1")
		return err == nil && len(ns) == 1 && ns[0].Status == "DOWN"
	})
	if n := hits.Load(); n != 0 {
		t.Fatalf("the TLS 1.2 agent got %d requests", n)
	}
}

// Hardening of issue 17: under TLS, every answer carries
// Strict-Transport-Security and the web UI's cookies are __Host- (Secure,
// path /, no Domain).
func TestCoreSendsHSTSAndHostCookiesUnderTLS(t *testing.T) {
	t.Parallel()
	dir := apiservertest.NewPKI(t, tlsutil.LeafValidity, tlsutil.Core())
	file := dir.File
	cfg := core.DefaultConfig()
	cfg.DataDir = t.TempDir()
	cfg.API.Addr = "127.0.0.1:0"
	cfg.API.TLS = config.TLS{CertFile: file("core.pem"), KeyFile: file("core-key.pem")}
	c, err := core.New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	apiservertest.Run(t, c)
	tc, err := tlsutil.ClientConfig(file("ca.pem"), "", "")
	if err != nil {
		t.Fatal(err)
	}
	tr := &http.Transport{TLSClientConfig: tlsutil.ForPeer(tc, tlsutil.Core())}
	t.Cleanup(tr.CloseIdleConnections)
	hc := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	base := "https://" + c.Addr().String()
	for _, path := range []string{"/health", "/ui/login"} {
		resp, err := hc.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if h := resp.Header.Get("Strict-Transport-Security"); !strings.HasPrefix(h, "max-age=") {
			t.Fatalf("%s: Strict-Transport-Security %q, want max-age=...", path, h)
		}
		if path != "/ui/login" {
			continue
		}
		var found bool
		for _, ck := range resp.Cookies() {
			found = found || ck.Name == "__Host-muster_login"
			if !strings.HasPrefix(ck.Name, "__Host-") || !ck.Secure || ck.Path != "/" || ck.Domain != "" {
				t.Fatalf("cookie %+v: want __Host-, Secure, Path=/, no Domain", ck)
			}
		}
		if !found {
			t.Fatal("no __Host-muster_login cookie on the sign-in page")
		}
	}
}

// TestReloadTLSServesTheNewCertificate: after the core's certificate files
// are replaced, ReloadTLS (what SIGHUP calls) makes new connections get the
// new certificate, without a restart; a file that does not load keeps the
// one in use and the error names it.
func TestReloadTLSServesTheNewCertificate(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "tls")
	if _, err := tlsutil.CreateCA(dir, time.Now(), tlsutil.CAValidity); err != nil {
		t.Fatal(err)
	}
	p, err := tlsutil.CreateCert(dir, tlsutil.Core(), nil, time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	cfg := core.DefaultConfig()
	cfg.DataDir = t.TempDir()
	cfg.API.Addr = "127.0.0.1:0"
	cfg.API.TLS = config.TLS{CertFile: p.Cert, KeyFile: p.Key}
	c, err := core.New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	apiservertest.Run(t, c)
	served := func() string {
		t.Helper()
		conn, err := tls.Dial("tcp", c.Addr().String(), &tls.Config{InsecureSkipVerify: true})
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		return tlsutil.SerialHex(conn.ConnectionState().PeerCertificates[0])
	}
	first := served()
	os.Remove(p.Cert)
	os.Remove(p.Key)
	if _, err := tlsutil.CreateCert(dir, tlsutil.Core(), nil, time.Now(), time.Hour); err != nil {
		t.Fatal(err)
	}
	if got := served(); got != first {
		t.Fatalf("the new certificate was served before a reload: %s", got)
	}
	if err := c.ReloadTLS(); err != nil {
		t.Fatal(err)
	}
	second := served()
	if second == first {
		t.Fatal("the reload did not change the certificate served")
	}
	if err := os.WriteFile(p.Cert, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := c.ReloadTLS(); err == nil || !strings.Contains(err.Error(), "api.tls") {
		t.Fatalf("reloading a broken file: %v, want an error naming api.tls", err)
	}
	if got := served(); got != second {
		t.Fatalf("a failed reload changed the certificate served: %s", got)
	}
}
