package tlsutil

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func loadCA(t *testing.T) *CA {
	t.Helper()
	ca, err := LoadCA(setup(t))
	if err != nil {
		t.Fatal(err)
	}
	return ca
}

// TestPinAndPinnedPool: the pin is the SHA-256 of the CA's DER; a bundle
// is accepted only when one of its CAs has the pin given (in any accepted
// spelling); a malformed pin is an error.
func TestPinAndPinnedPool(t *testing.T) {
	t.Parallel()
	dir := setup(t)
	bundle, err := os.ReadFile(filepath.Join(dir, CACertFile))
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := LoadCA(dir)
	pin := Pin(ca.Cert)
	if !strings.HasPrefix(pin, PinPrefix) || len(pin) != len(PinPrefix)+64 {
		t.Fatalf("pin %q", pin)
	}
	hexOnly := strings.TrimPrefix(pin, PinPrefix)
	colons := ""
	for i := 0; i < len(hexOnly); i += 2 {
		colons += strings.ToUpper(hexOnly[i:i+2]) + ":"
	}
	for _, p := range []string{pin, hexOnly, strings.TrimSuffix(colons, ":")} {
		if _, err := PinnedPool(bundle, p); err != nil {
			t.Errorf("pin %q refused: %v", p, err)
		}
	}
	other := loadCA(t)
	if _, err := PinnedPool(bundle, Pin(other.Cert)); !errors.Is(err, ErrPinMismatch) {
		t.Errorf("another CA's pin: %v, want ErrPinMismatch", err)
	}
	if _, err := PinnedPool(bundle, "sha256:abc"); err == nil {
		t.Error("a short pin was accepted")
	}
}

// TestParseAgentCSR: only a plain request for the named agent passes.
func TestParseAgentCSR(t *testing.T) {
	t.Parallel()
	good, _, err := NewAgentCSR("web-1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ParseAgentCSR(good, "web-1"); err != nil {
		t.Fatalf("a good request: %v", err)
	}
	for name, c := range map[string]struct {
		pem  []byte
		node string
	}{
		"another node":  {good, "web-2"},
		"not PEM":       {[]byte("nope"), "web-1"},
		"trailing data": {append(append([]byte{}, good...), []byte("-----BEGIN X-----\n-----END X-----\n")...), "web-1"},
	} {
		if _, err := ParseAgentCSR(c.pem, c.node); !errors.Is(err, ErrBadCSR) {
			t.Errorf("%s: %v, want ErrBadCSR", name, err)
		}
	}
}

// TestSignAgentAndRenewAt: an enrolled certificate names the agent and its
// cluster, serves and authenticates, is no CA, and is renewed at two
// thirds of its lifetime, backdated by a tenth of a short lifetime only.
func TestSignAgentAndRenewAt(t *testing.T) {
	t.Parallel()
	ca := loadCA(t)
	csrPEM, _, _ := NewAgentCSR("web-1")
	csr, err := ParseAgentCSR(csrPEM, "web-1")
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().Truncate(time.Second)
	_, cert, err := ca.SignAgent(csr, "web-1", "prod", now, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if err := CheckIdentity(cert, Agent("web-1")); err != nil || ClusterOf(cert) != "prod" || cert.IsCA {
		t.Fatalf("identity %v, cluster %q, CA %v", err, ClusterOf(cert), cert.IsCA)
	}
	if !cert.NotBefore.Equal(now.Add(-3*time.Second)) || !cert.NotAfter.Equal(now.Add(30*time.Second)) {
		t.Fatalf("valid %s to %s", cert.NotBefore, cert.NotAfter)
	}
	if got, want := RenewAt(cert), now.Add(19*time.Second); !got.Equal(want) {
		t.Fatalf("RenewAt = %s, want %s (two thirds of 33 s after NotBefore)", got, want)
	}
	if len(cert.ExtKeyUsage) != 2 {
		t.Fatalf("key usages %v, want server and client authentication", cert.ExtKeyUsage)
	}
}

// TestKeyPairReloadServesTheNewCertificate: a listener serving a KeyPair
// presents the new certificate after Reload, without being restarted; a
// reload that fails keeps the pair in use.
func TestKeyPairReloadServesTheNewCertificate(t *testing.T) {
	t.Parallel()
	dir := setup(t)
	p, err := CreateCert(dir, Agent("web-1"), nil, time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	kp, err := LoadKeyPair(p.Cert, p.Key)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := Listen("api", "127.0.0.1:0", p.Cert, p.Key, "", ServeKeyPair(kp))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { _ = c.(*tls.Conn).Handshake(); c.Close() }()
		}
	}()
	served := func() string {
		t.Helper()
		conn, err := tls.Dial("tcp", ln.Addr().String(), &tls.Config{InsecureSkipVerify: true})
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		return SerialHex(conn.ConnectionState().PeerCertificates[0])
	}
	first := served()
	if first != SerialHex(kp.Leaf()) {
		t.Fatalf("served %s, pair holds %s", first, SerialHex(kp.Leaf()))
	}
	os.Remove(p.Cert)
	os.Remove(p.Key)
	if _, err := CreateCert(dir, Agent("web-1"), nil, time.Now(), time.Hour); err != nil {
		t.Fatal(err)
	}
	if err := kp.Reload(); err != nil {
		t.Fatal(err)
	}
	if second := served(); second == first || second != SerialHex(kp.Leaf()) {
		t.Fatalf("after Reload served %s, want the new %s", second, SerialHex(kp.Leaf()))
	}
	os.WriteFile(p.Cert, []byte("garbage"), 0o600)
	if err := kp.Reload(); err == nil {
		t.Fatal("a bad file reloaded")
	}
	if got := served(); got != SerialHex(kp.Leaf()) || got == first {
		t.Fatalf("a failed reload changed what is served: %s", got)
	}
}

// TestRevokedPeerIsRefused: a client configuration checking serials
// refuses a peer on the list, through ForPeer, and ProvePeer says so.
func TestRevokedPeerIsRefused(t *testing.T) {
	t.Parallel()
	dir := setup(t)
	p, err := CreateCert(dir, Agent("web-1"), nil, time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := Listen("api", "127.0.0.1:0", p.Cert, p.Key, "")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { _ = c.(*tls.Conn).Handshake(); c.Close() }()
		}
	}()
	leaf := readCert(t, p.Cert)
	revoked := map[string]bool{}
	cc, err := ClientConfig(filepath.Join(dir, CACertFile), "", "")
	if err != nil {
		t.Fatal(err)
	}
	cc.VerifyConnection = CheckSerials(func(s string) bool { return revoked[s] })
	if err := ProvePeer(t.Context(), &net.Dialer{}, cc, ln.Addr().String(), Agent("web-1")); err != nil {
		t.Fatalf("before revocation: %v", err)
	}
	revoked[SerialHex(leaf)] = true
	err = ProvePeer(t.Context(), &net.Dialer{}, cc, ln.Addr().String(), Agent("web-1"))
	var pe *ProofError
	if !errors.As(err, &pe) || !strings.Contains(pe.Reason, "revoked") {
		t.Fatalf("after revocation: %v, want a proof error naming the revocation", err)
	}
	_, err = tls.Dial("tcp", ln.Addr().String(), ForPeer(cc, Agent("web-1")))
	if !errors.Is(err, ErrRevoked) {
		t.Fatalf("dial after revocation: %v, want ErrRevoked", err)
	}

}

// TestPinnedPoolTrustsOnlyThePinnedCA: a bundle holding the pinned CA and
// another one (a man in the middle's) yields a pool that verifies the
// pinned CA's certificates and not the other CA's.
func TestPinnedPoolTrustsOnlyThePinnedCA(t *testing.T) {
	t.Parallel()
	dir, evilDir := setup(t), setup(t)
	good, err := os.ReadFile(filepath.Join(dir, CACertFile))
	if err != nil {
		t.Fatal(err)
	}
	evil, err := os.ReadFile(filepath.Join(evilDir, CACertFile))
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := LoadCA(dir)
	pool, err := PinnedPool(append(append([]byte{}, evil...), good...), Pin(ca.Cert))
	if err != nil {
		t.Fatal(err)
	}
	gp, err := CreateCert(dir, Core(), []string{"core.test"}, time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	ep, err := CreateCert(evilDir, Core(), []string{"core.test"}, time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	opts := x509.VerifyOptions{Roots: pool}
	if _, err := readCert(t, gp.Cert).Verify(opts); err != nil {
		t.Fatalf("the pinned CA's certificate: %v", err)
	}
	if _, err := readCert(t, ep.Cert).Verify(opts); err == nil {
		t.Fatal("a certificate of the other CA in the bundle verified")
	}
}

// TestClientCAListenerRefusesRevokedAgentCert: a listener that requires
// client certificates (api.tls.client_ca_file) and accepts the agents' CA
// beside it refuses an agent certificate once its serial is revoked, and
// still accepts a certificate of its own client CA.
func TestClientCAListenerRefusesRevokedAgentCert(t *testing.T) {
	t.Parallel()
	dir, agents := setup(t), setup(t)
	if _, err := CreateCert(dir, Core(), []string{"127.0.0.1"}, time.Now(), time.Hour); err != nil {
		t.Fatal(err)
	}
	if _, err := CreateCert(dir, Client("alice"), nil, time.Now(), time.Hour); err != nil {
		t.Fatal(err)
	}
	aca, _ := LoadCA(agents)
	csrPEM, keyPEM, err := NewAgentCSR("web-1")
	if err != nil {
		t.Fatal(err)
	}
	csr, _ := ParseAgentCSR(csrPEM, "web-1")
	certPEM, leaf, err := aca.SignAgent(csr, "web-1", "prod", time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	sc, err := ServerConfig(filepath.Join(dir, "core.pem"), filepath.Join(dir, "core-key.pem"), filepath.Join(dir, CACertFile))
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(aca.Cert)
	revoked := map[string]bool{}
	RequestAgentCerts(pool, []*x509.Certificate{aca.Cert}, func(s string) bool { return revoked[s] })(sc)
	clientAs := func(cert, key string) *tls.Config {
		cc, err := ClientConfig(filepath.Join(dir, CACertFile), cert, key)
		if err != nil {
			t.Fatal(err)
		}
		return ForPeer(cc, Core())
	}
	agent := clientAs("", "")
	agent.Certificates = []tls.Certificate{pair}
	if st, err := handshake(t, sc, agent); err != nil || !st.HandshakeComplete {
		t.Fatalf("before revocation: %v", err)
	}
	revoked[SerialHex(leaf)] = true
	if st, _ := handshake(t, sc, agent); st.HandshakeComplete {
		t.Fatal("a revoked agent certificate completed the handshake")
	}
	alice := clientAs(filepath.Join(dir, "client-alice.pem"), filepath.Join(dir, "client-alice-key.pem"))
	if st, err := handshake(t, sc, alice); err != nil || !st.HandshakeComplete {
		t.Fatalf("the client CA's certificate after an agent's revocation: %v", err)
	}
}

// TestInClusterRefusesAnotherClustersAgent: an enrolled certificate for
// node web-1 of cluster dev does not pass as web-1 of cluster prod, through
// ForPeer or ProvePeer; it passes for dev; a certificate naming no cluster
// (made by `muster tls cert create`) passes for any cluster.
func TestInClusterRefusesAnotherClustersAgent(t *testing.T) {
	t.Parallel()
	dir := setup(t)
	ca, _ := LoadCA(dir)
	csrPEM, keyPEM, err := NewAgentCSR("web-1")
	if err != nil {
		t.Fatal(err)
	}
	csr, _ := ParseAgentCSR(csrPEM, "web-1")
	certPEM, _, err := ca.SignAgent(csr, "web-1", "dev", time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	serve := func(c tls.Certificate) string {
		ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{c}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ln.Close() })
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				go func() { _ = c.(*tls.Conn).Handshake(); c.Close() }()
			}
		}()
		return ln.Addr().String()
	}
	enrolled := serve(pair)
	cc, err := ClientConfig(filepath.Join(dir, CACertFile), "", "")
	if err != nil {
		t.Fatal(err)
	}
	if err := ProvePeer(t.Context(), nil, InCluster(cc, "dev"), enrolled, Agent("web-1")); err != nil {
		t.Fatalf("web-1 of dev for dev: %v", err)
	}
	err = ProvePeer(t.Context(), nil, InCluster(cc, "prod"), enrolled, Agent("web-1"))
	var pe *ProofError
	if !errors.As(err, &pe) || !strings.Contains(pe.Reason, "cluster dev") {
		t.Fatalf("web-1 of dev for prod: %v, want a proof error naming cluster dev", err)
	}
	if _, err := tls.Dial("tcp", enrolled, ForPeer(InCluster(cc, "prod"), Agent("web-1"))); !errors.Is(err, ErrWrongCluster) {
		t.Fatalf("dial web-1 of dev for prod: %v, want ErrWrongCluster", err)
	}
	p, err := CreateCert(dir, Agent("web-2"), nil, time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	hand, err := tls.LoadX509KeyPair(p.Cert, p.Key)
	if err != nil {
		t.Fatal(err)
	}
	if err := ProvePeer(t.Context(), nil, InCluster(cc, "prod"), serve(hand), Agent("web-2")); err != nil {
		t.Fatalf("a certificate naming no cluster: %v", err)
	}
}
