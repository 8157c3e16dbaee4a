package agent

import (
	"crypto/tls"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/musterhq/muster/agent/enroll"
	"github.com/musterhq/muster/shared/apiserver/apiservertest"
	"github.com/musterhq/muster/shared/tlsutil"
)

// TestStartFinishesAnInterruptedRenewal: an enrolled agent stopped by a
// crash after a renewal moved the new key in and before it moved the new
// certificate starts, and serves the new pair.
func TestStartFinishesAnInterruptedRenewal(t *testing.T) {
	t.Parallel()
	caPair, err := tlsutil.NewCA(time.Now(), 24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := tlsutil.ParseCA(caPair)
	if err != nil {
		t.Fatal(err)
	}
	sign := func() (certPEM, keyPEM []byte, serial string) {
		csrPEM, keyPEM, err := tlsutil.NewAgentCSR("n1")
		if err != nil {
			t.Fatal(err)
		}
		csr, _ := tlsutil.ParseAgentCSR(csrPEM, "n1")
		certPEM, cert, err := ca.SignAgent(csr, "n1", "c1", time.Now(), time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		return certPEM, keyPEM, tlsutil.SerialHex(cert)
	}
	oldCert, _, _ := sign()
	newCert, newKey, newSerial := sign()
	dataDir := t.TempDir()
	p := enroll.PathsIn(filepath.Join(dataDir, "tls"))
	st, _ := json.Marshal(enroll.State{Core: "https://127.0.0.1:1", NodeID: "n1", ClusterID: "c1", NotAfter: time.Now().Add(time.Hour)})
	if err := os.MkdirAll(p.Dir, 0o700); err != nil {
		t.Fatal(err)
	}
	// The crash: the new key is in place, the new certificate still staged.
	for path, data := range map[string][]byte{p.Cert: oldCert, p.Key: newKey, p.Cert + ".next": newCert, p.CA: caPair.CertPEM, p.State: st} {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cfg := DefaultConfig()
	cfg.NodeID, cfg.ClusterID, cfg.DataDir, cfg.API.Addr = "n1", "c1", dataDir, "127.0.0.1:0"
	ag, err := New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	apiservertest.Run(t, ag)
	conn, err := tls.Dial("tcp", ag.Addr().String(), &tls.Config{InsecureSkipVerify: true}) // only the serial is read
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if got := tlsutil.SerialHex(conn.ConnectionState().PeerCertificates[0]); got != newSerial {
		t.Fatalf("serves %s, want the renewed %s", got, newSerial)
	}
}
