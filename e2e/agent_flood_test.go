package e2e

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/musterhq/muster/shared/tlsutil"
)

// Issue 30, item 4: 2 × 1,100 connections opened from one address and left
// idle, without a TLS handshake, reopened as soon as the agent closes them,
// do not keep the core out of an agent that requires its certificate: the
// agent's listener has the core's guard (a cap per address, the oldest idle
// connection closed first, before the handshake). A real agent.
func TestIdleConnectionFloodLeavesTheAgentAnsweringTheCore(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	pki := filepath.Join(base, "tls")
	muster(t, nil, "tls", "ca", "create", "--dir", pki)
	muster(t, nil, "tls", "cert", "create", "--dir", pki, "--core")
	muster(t, nil, "tls", "cert", "create", "--dir", pki, "--agent", "flooded")
	file := func(name string) string { return filepath.Join(pki, name) }
	path := filepath.Join(base, "agent.yaml")
	cfg := fmt.Sprintf(`node_id: flooded
cluster_id: e2e
data_dir: %s
api:
  addr: 127.0.0.1:%d
  tls:
    cert_file: %s
    key_file: %s
    client_ca_file: %s
`, filepath.Join(base, "data"), freePort(t), file("agent-flooded.pem"), file("agent-flooded-key.pem"), file("ca.pem"))
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	want := tlsutil.Agent("flooded")
	core := tlsClient(t, pki, pki, "core", &want)
	ag := startProbed(t, base, "flooded", nil, probe(core, "https://%s/api/v1/health"), "agent", "--config", path)

	// One address: the per-address cap is what holds.
	flood := idleFlood(t, ag.Addr(), 2*1100, 2*time.Millisecond, func(int) net.IP { return net.IPv4(127, 0, 4, 1) })
	var worst time.Duration
	for i := range 5 {
		core.Transport.(interface{ CloseIdleConnections() }).CloseIdleConnections() // a new connection each time
		d, err := timed(func() error {
			resp, err := core.Get("https://" + ag.Addr() + "/api/v1/health")
			if err == nil {
				resp.Body.Close()
			}
			return err
		})
		if err != nil {
			t.Fatalf("the core's request %d under the flood: %v", i+1, err)
		}
		worst = max(worst, d)
	}
	t.Logf("%d idle connections opened (%d reopened) from one address: the core's GET /api/v1/health, each on a new connection, slowest %s",
		flood.dials.Load(), flood.reopened.Load(), worst)
}
