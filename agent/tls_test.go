package agent

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/musterhq/muster/shared/apiserver/apiservertest"
	"github.com/musterhq/muster/shared/client"
	"github.com/musterhq/muster/shared/config"
	"github.com/musterhq/muster/shared/gossip"
	"github.com/musterhq/muster/shared/tlsutil"
	"github.com/musterhq/muster/shared/wire"
)

func TestConfigKeepsTheAPIOffTheNetworkWithoutMutualTLS(t *testing.T) {
	t.Parallel()
	full := config.TLS{CertFile: "c.pem", KeyFile: "k.pem", ClientCAFile: "ca.pem"}
	serverOnly := config.TLS{CertFile: "c.pem", KeyFile: "k.pem"}
	for _, c := range []struct {
		name     string
		addr     string
		tls      config.TLS
		insecure bool
		want     string // the one bad field; "" when valid
	}{
		// Item 4 of the attack review: any user of the host reaches loopback, so the
		// TCP API is the core's there too (docs/architecture.md, "Who may call an
		// agent").
		{"loopback plaintext", "127.0.0.1:7420", config.TLS{}, false, "api.addr"},
		{"localhost plaintext", "localhost:7420", config.TLS{}, false, "api.addr"},
		{"loopback TLS without client CA", "127.0.0.1:7420", serverOnly, false, "api.tls.client_ca_file"},
		{"loopback mutual TLS", "127.0.0.1:7420", full, false, ""},
		{"loopback plaintext, insecure", "127.0.0.1:7420", config.TLS{}, true, ""},
		{"socket only", "", config.TLS{}, false, ""},
		{"network plaintext", "0.0.0.0:7420", config.TLS{}, false, "api.addr"},
		{"network TLS without client CA", "10.0.0.1:7420", serverOnly, false, "api.tls.client_ca_file"},
		{"network mutual TLS", "0.0.0.0:7420", full, false, ""},
		{"network plaintext, insecure", "0.0.0.0:7420", config.TLS{}, true, ""},
		{"client CA without a certificate", "127.0.0.1:7420", config.TLS{ClientCAFile: "ca.pem"}, true, "api.tls.client_ca_file"},
		{"certificate without key", "127.0.0.1:7420", config.TLS{CertFile: "c.pem"}, true, "api.tls"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			cfg := DefaultConfig()
			cfg.NodeID, cfg.ClusterID, cfg.DataDir = "n1", "c1", "/d"
			cfg.API.Addr, cfg.API.TLS, cfg.API.Insecure = c.addr, c.tls, c.insecure
			err := cfg.Validate()
			if c.want == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if got := config.FieldsOf(err); !slices.Equal(got, []string{c.want}) {
				t.Fatalf("bad fields %q (%v), want %q", got, err, c.want)
			}
			if _, err := New(cfg, nil); err == nil {
				t.Fatal("New accepted the configuration")
			}
		})
	}
}

// tlsEnv is an agent serving mutual TLS, and the certificates around it.
type tlsEnv struct {
	dir, otherDir string
	url           string
	ag            *Agent
}

// setupTLS starts agent n1 with a certificate of a fresh CA and client
// certificates required, and makes certificates for the core, a person and
// another agent with that CA, and a core certificate of another CA.
func setupTLS(t *testing.T) *tlsEnv {
	t.Helper()
	e := &tlsEnv{dir: filepath.Join(t.TempDir(), "tls"), otherDir: filepath.Join(t.TempDir(), "other")}
	now := time.Now()
	for _, d := range []string{e.dir, e.otherDir} {
		if _, err := tlsutil.CreateCA(d, now, tlsutil.CAValidity); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		dir string
		id  tlsutil.Identity
	}{{e.dir, tlsutil.Agent("n1")}, {e.dir, tlsutil.Agent("n2")}, {e.dir, tlsutil.Core()}, {e.dir, tlsutil.Client("alice")}, {e.otherDir, tlsutil.Core()}} {
		if _, err := tlsutil.CreateCert(c.dir, c.id, nil, now, tlsutil.LeafValidity); err != nil {
			t.Fatal(err)
		}
	}
	cfg := DefaultConfig()
	cfg.NodeID, cfg.ClusterID, cfg.DataDir = "n1", "c1", t.TempDir()
	cfg.API.Addr = "127.0.0.1:0"
	cfg.API.TLS = config.TLS{CertFile: filepath.Join(e.dir, "agent-n1.pem"), KeyFile: filepath.Join(e.dir, "agent-n1-key.pem"),
		ClientCAFile: filepath.Join(e.dir, "ca.pem")}
	ag, err := New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	apiservertest.Run(t, ag)
	e.ag, e.url = ag, "https://"+ag.Addr().String()
	return e
}

// clientAs is an HTTP client trusting the agent's CA that presents the
// certificate dir/base.pem ("" for none).
func (e *tlsEnv) clientAs(t *testing.T, dir, base string) *http.Client {
	t.Helper()
	cert, key := "", ""
	if base != "" {
		cert, key = filepath.Join(dir, base+".pem"), filepath.Join(dir, base+"-key.pem")
	}
	tc, err := tlsutil.ClientConfig(filepath.Join(e.dir, "ca.pem"), cert, key)
	if err != nil {
		t.Fatal(err)
	}
	if len(tc.Certificates) == 1 {
		// Present it even when the agent asks for another CA's.
		cert := tc.Certificates[0]
		tc.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &cert, nil }
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = tlsutil.ForPeer(tc, tlsutil.Agent("n1"))
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 10 * time.Second}
}

// queued returns how many actions the agent holds, asked as the core.
func (e *tlsEnv) queued(t *testing.T) int {
	t.Helper()
	page, err := client.NewAgent(e.url, e.clientAs(t, e.dir, "core")).Changes(context.Background(), 0, 100, false)
	if err != nil {
		t.Fatal(err)
	}
	return len(page.Actions)
}

// OWASP API8 (security misconfiguration): the agent API answers the core,
// and no one else, when client certificates are required.
func TestAPI8AgentAnswersOnlyTheCoreOverMutualTLS(t *testing.T) {
	t.Parallel()
	e := setupTLS(t)
	ctx := context.Background()
	push := &wire.PushRequest{Kind: "muster.io/debug.ping"}

	core := client.NewAgent(e.url, e.clientAs(t, e.dir, "core"))
	if info, err := core.Info(ctx); err != nil || info.NodeID != "n1" {
		t.Fatalf("the core's certificate: info %+v, %v", info, err)
	}
	if _, status, err := core.Push(ctx, push); err != nil || status != http.StatusCreated {
		t.Fatalf("the core's push: %d %v", status, err)
	}

	t.Run("plaintext", func(t *testing.T) {
		resp, err := http.Post("http://"+e.ag.Addr().String()+"/api/v1/actions", "application/json",
			strings.NewReader(`{"kind":"muster.io/debug.ping"}`))
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode < 400 {
				t.Fatalf("a plaintext push got %d", resp.StatusCode)
			}
		}
	})
	// Refused in the handshake: no certificate, another CA's, and an
	// agent's (it is not a client certificate).
	for name, hc := range map[string]*http.Client{
		"no client certificate":            e.clientAs(t, e.dir, ""),
		"a core certificate of another CA": e.clientAs(t, e.otherDir, "core"),
		"another agent's certificate":      e.clientAs(t, e.dir, "agent-n2"),
	} {
		t.Run(name, func(t *testing.T) {
			_, _, err := client.NewAgent(e.url, hc).Push(ctx, push)
			if err == nil || client.StatusOf(err) != 0 {
				t.Fatalf("push: %v, want a refused handshake", err)
			}
			var rec tls.RecordHeaderError
			if errors.As(err, &rec) {
				t.Fatalf("the agent did not speak TLS: %v", err)
			}
		})
	}
	// Accepted in the handshake (same CA, client certificate), refused by
	// identity: a person is not the core.
	t.Run("a person's certificate of the same CA", func(t *testing.T) {
		for _, req := range []struct{ method, path, body string }{
			{http.MethodPost, "/api/v1/actions", `{"kind":"muster.io/debug.ping"}`},
			{http.MethodGet, "/api/v1/info", ""},
			{http.MethodGet, "/api/v1/changes", ""},
			{http.MethodGet, "/api/v1/actions", ""},
			{http.MethodGet, "/metrics", ""},
		} {
			r, _ := http.NewRequest(req.method, e.url+req.path, strings.NewReader(req.body))
			resp, err := e.clientAs(t, e.dir, "client-alice").Do(r)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			var env wire.ErrorBody
			if resp.StatusCode != http.StatusForbidden || json.Unmarshal(b, &env) != nil || env.Error.Code != wire.CodeForbidden ||
				!strings.Contains(env.Error.Message, "spiffe://muster/client/alice") {
				t.Fatalf("%s %s: %d %s, want 403 with the envelope naming the identity", req.method, req.path, resp.StatusCode, b)
			}
		}
	})
	if n := e.queued(t); n != 1 {
		t.Fatalf("the agent holds %d actions, want only the core's", n)
	}
}

// Item 13 of the attack review: a TLS or gossip key file its group or others
// may read is refused at start, one error per file naming it and its mode,
// before the queue is opened.
func TestKeyFilesReadableByGroupOrOthersAreRefused(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if _, err := tlsutil.CreateCA(dir, time.Now(), tlsutil.CAValidity); err != nil {
		t.Fatal(err)
	}
	if _, err := tlsutil.CreateCert(dir, tlsutil.Agent("n1"), nil, time.Now(), tlsutil.LeafValidity); err != nil {
		t.Fatal(err)
	}
	tlsKey := filepath.Join(dir, "agent-n1-key.pem")
	gossipKey := filepath.Join(dir, "gossip.key")
	k, _ := gossip.GenerateKey()
	if err := os.WriteFile(gossipKey, []byte(k), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(tlsKey, 0o640); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(gossipKey, 0o604); err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.NodeID, cfg.ClusterID, cfg.DataDir = "n1", "c1", filepath.Join(t.TempDir(), "data")
	cfg.API.Addr = "127.0.0.1:0"
	cfg.API.TLS = config.TLS{CertFile: filepath.Join(dir, "agent-n1.pem"), KeyFile: tlsKey, ClientCAFile: filepath.Join(dir, "ca.pem")}
	cfg.Gossip.Enabled, cfg.Gossip.KeyFile, cfg.Gossip.BindAddr = true, gossipKey, "127.0.0.1:0"
	ag, err := New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = ag.Run(context.Background())
	for _, want := range []string{
		"api.tls.key_file: " + tlsKey + " has mode 0640, readable by group or others",
		"gossip.key_file: " + gossipKey + " has mode 0604, readable by group or others",
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Run = %v, want an error with %q", err, want)
		}
	}
	if _, err := os.Stat(cfg.DataDir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the agent made its data directory before refusing: %v", err)
	}
}

// The agent's API speaks TLS 1.3 only (issue 9, item 11): its one client is
// the core, Go on both ends. A TLS 1.2 client with the core's certificate is
// refused in the handshake.
func TestAgentLinkRequiresTLS13(t *testing.T) {
	t.Parallel()
	e := setupTLS(t)
	hc := e.clientAs(t, e.dir, "core")
	if _, err := client.NewAgent(e.url, hc).Info(context.Background()); err != nil {
		t.Fatalf("TLS 1.3: %v", err)
	}
	old := e.clientAs(t, e.dir, "core")
	old.Transport.(*http.Transport).TLSClientConfig.MaxVersion = tls.VersionTLS12
	_, err := client.NewAgent(e.url, old).Info(context.Background())
	if err == nil || client.StatusOf(err) != 0 || !strings.Contains(err.Error(), "protocol version not supported") {
		t.Fatalf("TLS 1.2: %v, want a refused handshake", err)
	}
}
