package tlsutil

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/musterhq/muster/shared/config"
)

// setup makes a CA in a fresh directory and returns the directory.
func setup(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "tls")
	if _, err := CreateCA(dir, time.Now(), CAValidity); err != nil {
		t.Fatal(err)
	}
	return dir
}

func readCert(t *testing.T, path string) *x509.Certificate {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	blk, _ := pem.Decode(b)
	if blk == nil {
		t.Fatalf("%s is not PEM", path)
	}
	c, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func mode(t *testing.T, path string) os.FileMode {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Mode().Perm()
}

func TestCreateCA(t *testing.T) {
	t.Parallel()
	dir := setup(t)
	ca := readCert(t, filepath.Join(dir, CACertFile))
	if !ca.IsCA || ca.PublicKeyAlgorithm != x509.ECDSA {
		t.Fatalf("CA: IsCA %v, algorithm %v", ca.IsCA, ca.PublicKeyAlgorithm)
	}
	if pub := ca.PublicKey.(*ecdsa.PublicKey); pub.Curve != elliptic.P256() {
		t.Fatalf("curve %v, want P-256", pub.Curve.Params().Name)
	}
	if life := ca.NotAfter.Sub(ca.NotBefore); life < CAValidity || life > CAValidity+time.Hour {
		t.Fatalf("CA valid for %s, want 5 years", life)
	}
	if m := mode(t, filepath.Join(dir, CAKeyFile)); m != 0o600 {
		t.Fatalf("ca-key.pem mode %o, want 600", m)
	}
	if _, err := LoadCA(dir); err != nil {
		t.Fatal(err)
	}

	// A second create refuses and leaves the CA as it was.
	before, _ := os.ReadFile(filepath.Join(dir, CAKeyFile))
	if _, err := CreateCA(dir, time.Now(), CAValidity); !errors.Is(err, ErrExists) {
		t.Fatalf("second CreateCA: %v, want ErrExists", err)
	}
	after, _ := os.ReadFile(filepath.Join(dir, CAKeyFile))
	if string(before) != string(after) {
		t.Fatal("a refused CreateCA changed ca-key.pem")
	}
}

func TestCreateCertForEachRole(t *testing.T) {
	t.Parallel()
	dir := setup(t)
	ca, err := LoadCA(dir)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca.Cert)
	cases := []struct {
		id        Identity
		hosts     []string
		file, uri string
		cn        string
		eku       []x509.ExtKeyUsage
		dns       []string
		ips       []string
	}{
		{Agent("db-1"), []string{"db-1.example.com", "10.0.0.7"}, "agent-db-1", "spiffe://muster/agent/db-1", "agent.db-1",
			[]x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, []string{"db-1.example.com"}, []string{"10.0.0.7"}},
		{Core(), nil, "core", "spiffe://muster/core", "core",
			[]x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}, []string{"localhost"}, []string{"127.0.0.1"}},
		{Client("alice"), nil, "client-alice", "spiffe://muster/client/alice", "client.alice",
			[]x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, []string{"localhost"}, []string{"127.0.0.1"}},
	}
	for _, c := range cases {
		t.Run(c.file, func(t *testing.T) {
			p, err := CreateCert(dir, c.id, c.hosts, time.Now(), LeafValidity)
			if err != nil {
				t.Fatal(err)
			}
			if p.Cert != filepath.Join(dir, c.file+".pem") || p.Key != filepath.Join(dir, c.file+"-key.pem") {
				t.Fatalf("paths %+v", p)
			}
			if m := mode(t, p.Key); m != 0o600 {
				t.Fatalf("key mode %o, want 600", m)
			}
			cert := readCert(t, p.Cert)
			if cert.Subject.CommonName != c.cn || len(cert.URIs) != 1 || cert.URIs[0].String() != c.uri {
				t.Fatalf("CN %q URIs %v, want %q %q", cert.Subject.CommonName, cert.URIs, c.cn, c.uri)
			}
			if got, ok := IdentityOf(cert); !ok || got != c.id {
				t.Fatalf("IdentityOf = %v %v, want %v", got, ok, c.id)
			}
			if !slices.Equal(cert.ExtKeyUsage, c.eku) || cert.IsCA {
				t.Fatalf("ext key usage %v (CA %v), want %v", cert.ExtKeyUsage, cert.IsCA, c.eku)
			}
			var ips []string
			for _, ip := range cert.IPAddresses {
				ips = append(ips, ip.String())
			}
			if !slices.Equal(cert.DNSNames, c.dns) || !slices.Equal(ips, c.ips) {
				t.Fatalf("SANs %v %v, want %v %v", cert.DNSNames, ips, c.dns, c.ips)
			}
			if life := cert.NotAfter.Sub(cert.NotBefore); life < LeafValidity || life > LeafValidity+time.Hour {
				t.Fatalf("valid for %s, want a year", life)
			}
			if _, err := cert.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: c.eku[:1]}); err != nil {
				t.Fatalf("does not chain to the CA: %v", err)
			}
			if _, err := tls.LoadX509KeyPair(p.Cert, p.Key); err != nil {
				t.Fatalf("certificate and key do not match: %v", err)
			}
			if _, err := CreateCert(dir, c.id, nil, time.Now(), LeafValidity); !errors.Is(err, ErrExists) {
				t.Fatalf("second create: %v, want ErrExists", err)
			}
		})
	}
}

func TestCreateCertRefusals(t *testing.T) {
	t.Parallel()
	dir := setup(t)
	for name, c := range map[string]struct {
		dir  string
		id   Identity
		days time.Duration
		want error
	}{
		"no CA in the directory":  {t.TempDir(), Agent("a"), LeafValidity, ErrNoCA},
		"empty agent name":        {dir, Agent(""), LeafValidity, ErrBadName},
		"name with a slash":       {dir, Client("../x"), LeafValidity, ErrBadName},
		"name with a space":       {dir, Agent("db 1"), LeafValidity, ErrBadName},
		"name starting with '.'":  {dir, Agent(".hidden"), LeafValidity, ErrBadName},
		"unknown role":            {dir, Identity{Role: "admin", Name: "x"}, LeafValidity, ErrBadName},
		"longer than the CA life": {dir, Agent("a"), 10 * CAValidity, nil},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			_, err := CreateCert(c.dir, c.id, nil, time.Now(), c.days)
			if err == nil || (c.want != nil && !errors.Is(err, c.want)) {
				t.Fatalf("err %v, want %v", err, c.want)
			}
		})
	}
	t.Cleanup(func() {
		entries, _ := os.ReadDir(dir)
		if len(entries) != 2 {
			t.Errorf("refused creates left files: %v", entries)
		}
	})
}

func TestIdentityOfNeedsExactlyOneMusterURI(t *testing.T) {
	t.Parallel()
	u := func(s string) *url.URL { v, _ := url.Parse(s); return v }
	for name, c := range map[string]struct {
		uris []*url.URL
		want Identity
		ok   bool
	}{
		"agent":                 {[]*url.URL{u("spiffe://muster/agent/db-1")}, Agent("db-1"), true},
		"other URIs ignored":    {[]*url.URL{u("https://example.com"), u("spiffe://muster/core")}, Core(), true},
		"none":                  {nil, Identity{}, false},
		"two identities":        {[]*url.URL{u("spiffe://muster/core"), u("spiffe://muster/agent/a")}, Identity{}, false},
		"other trust domain":    {[]*url.URL{u("spiffe://other/core")}, Identity{}, false},
		"agent without name":    {[]*url.URL{u("spiffe://muster/agent")}, Identity{}, false},
		"core with name":        {[]*url.URL{u("spiffe://muster/core/x")}, Identity{}, false},
		"extra path":            {[]*url.URL{u("spiffe://muster/agent/a/b")}, Identity{}, false},
		"query":                 {[]*url.URL{u("spiffe://muster/agent/a?x=1")}, Identity{}, false},
		"name with bad letters": {[]*url.URL{u("spiffe://muster/client/a%20b")}, Identity{}, false},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			got, ok := IdentityOf(&x509.Certificate{URIs: c.uris})
			if got != c.want || ok != c.ok {
				t.Fatalf("IdentityOf = %v %v, want %v %v", got, ok, c.want, c.ok)
			}
		})
	}
}

// handshake runs a TLS handshake over loopback TCP and returns the
// connection state the server saw and the client's error.
func handshake(t *testing.T, server, client *tls.Config) (tls.ConnectionState, error) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	done := make(chan tls.ConnectionState, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			done <- tls.ConnectionState{}
			return
		}
		defer c.Close()
		srv := tls.Server(c, server)
		if srv.HandshakeContext(ctx) == nil {
			_, _ = srv.Write([]byte("k"))
		}
		done <- srv.ConnectionState()
	}()
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	cl := tls.Client(c, client)
	err = cl.HandshakeContext(ctx)
	if err == nil {
		// In TLS 1.3 the server verifies the client's certificate after
		// the client's side has finished: the server's first byte (or
		// its alert) is its verdict.
		_, err = cl.Read(make([]byte, 1))
	}
	c.Close()
	return <-done, err
}

func TestForPeerChecksChainAndIdentityNotHostName(t *testing.T) {
	t.Parallel()
	dir := setup(t)
	other := setup(t)
	for _, c := range []struct {
		dir string
		id  Identity
	}{{dir, Agent("db-1")}, {dir, Core()}, {other, Agent("db-1")}} {
		// Host names that no one dials: the identity is what counts.
		if _, err := CreateCert(c.dir, c.id, []string{"unused.invalid"}, time.Now(), LeafValidity); err != nil {
			t.Fatal(err)
		}
	}
	server := func(d, base string) *tls.Config {
		sc, err := ServerConfig(filepath.Join(d, base+".pem"), filepath.Join(d, base+"-key.pem"), "")
		if err != nil {
			t.Fatal(err)
		}
		return sc
	}
	client, err := ClientConfig(filepath.Join(dir, CACertFile), "", "")
	if err != nil {
		t.Fatal(err)
	}
	client.ServerName = "127.0.0.1"

	if _, err := handshake(t, server(dir, "agent-db-1"), ForPeer(client, Agent("db-1"))); err != nil {
		t.Fatalf("the expected agent was refused: %v", err)
	}
	_, err = handshake(t, server(dir, "agent-db-1"), ForPeer(client, Agent("db-2")))
	var ie *IdentityError
	if !errors.Is(err, ErrIdentityMismatch) || !errors.As(err, &ie) || ie.Got != Agent("db-1") || ie.Want != Agent("db-2") {
		t.Fatalf("another agent's certificate: %v, want an IdentityError naming db-1", err)
	}
	if _, err := handshake(t, server(dir, "core"), ForPeer(client, Agent("db-1"))); !errors.Is(err, ErrIdentityMismatch) {
		t.Fatalf("the core's certificate posing as an agent: %v", err)
	}
	if _, err := handshake(t, server(other, "agent-db-1"), ForPeer(client, Agent("db-1"))); err == nil || errors.Is(err, ErrIdentityMismatch) {
		t.Fatalf("a certificate of another CA: %v, want a chain error", err)
	}
}

func TestServerRequiresAClientCertificateOfItsCA(t *testing.T) {
	t.Parallel()
	dir := setup(t)
	other := setup(t)
	for _, c := range []struct {
		dir string
		id  Identity
	}{{dir, Agent("a")}, {dir, Core()}, {dir, Client("alice")}, {other, Core()}} {
		if _, err := CreateCert(c.dir, c.id, nil, time.Now(), LeafValidity); err != nil {
			t.Fatal(err)
		}
	}
	sc, err := ServerConfig(filepath.Join(dir, "agent-a.pem"), filepath.Join(dir, "agent-a-key.pem"), filepath.Join(dir, CACertFile))
	if err != nil {
		t.Fatal(err)
	}
	clientAs := func(d, base string) *tls.Config {
		cert, key := "", ""
		if base != "" {
			cert, key = filepath.Join(d, base+".pem"), filepath.Join(d, base+"-key.pem")
		}
		cc, err := ClientConfig(filepath.Join(dir, CACertFile), cert, key)
		if err != nil {
			t.Fatal(err)
		}
		return ForPeer(cc, Agent("a"))
	}
	st, _ := handshake(t, sc, clientAs(dir, "core"))
	if id, err := PeerIdentity(&st); err != nil || id != Core() {
		t.Fatalf("the core's client certificate: identity %v, %v", id, err)
	}
	st, _ = handshake(t, sc, clientAs(dir, "client-alice"))
	if id, err := PeerIdentity(&st); err != nil || id != Client("alice") {
		t.Fatalf("a person's certificate: identity %v, %v (the API refuses it by identity)", id, err)
	}
	for name, cc := range map[string]*tls.Config{
		"no client certificate": clientAs(dir, ""),
		"another CA":            clientAs(other, "core"),
	} {
		st, _ := handshake(t, sc, cc)
		if st.HandshakeComplete {
			t.Errorf("%s: the handshake completed", name)
		}
		if _, err := PeerIdentity(&st); !errors.Is(err, ErrNoPeerCertificate) {
			t.Errorf("%s: PeerIdentity %v, want ErrNoPeerCertificate", name, err)
		}
	}
}

func TestKeyFileOthersMayReadIsRefused(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if _, err := CreateCA(dir, time.Now(), CAValidity); err != nil {
		t.Fatal(err)
	}
	p, err := CreateCert(dir, Core(), nil, time.Now(), LeafValidity)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p.Key, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ServerConfig(p.Cert, p.Key, ""); !errors.Is(err, config.ErrFileOpen) || !strings.HasPrefix(err.Error(), "key_file: "+p.Key+" has mode 0644") {
		t.Errorf("ServerConfig = %v", err)
	}
	if _, err := ClientConfig("", p.Cert, p.Key); !errors.Is(err, config.ErrFileOpen) {
		t.Errorf("ClientConfig = %v", err)
	}
}

// listenHandshake opens Listen with opts on core.pem of dir, and runs one
// handshake of client against it, returning the client's error.
func listenHandshake(t *testing.T, dir string, client *tls.Config, opts ...ListenOption) error {
	t.Helper()
	ln, err := Listen("api", "127.0.0.1:0", filepath.Join(dir, "core.pem"), filepath.Join(dir, "core-key.pem"), "", opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		_ = c.(*tls.Conn).Handshake()
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := (&tls.Dialer{Config: client}).DialContext(ctx, "tcp", ln.Addr().String())
	if err == nil {
		c.Close()
	}
	return err
}

// Between the core and agents only TLS 1.3 is spoken (issue 9, item 11):
// the agent's listener (OnlyTLS13) refuses a TLS 1.2 client, and the core's
// client towards agents (LinkVersion) refuses a TLS 1.2 server.
func TestAgentLinkRequiresTLS13(t *testing.T) {
	t.Parallel()
	dir := setup(t)
	if _, err := CreateCert(dir, Core(), nil, time.Now(), LeafValidity); err != nil {
		t.Fatal(err)
	}
	client := func(min, max uint16) *tls.Config {
		c, err := ClientConfig(filepath.Join(dir, CACertFile), "", "")
		if err != nil {
			t.Fatal(err)
		}
		c.MinVersion, c.MaxVersion = min, max
		return ForPeer(c, Core())
	}
	if err := listenHandshake(t, dir, client(tls.VersionTLS12, tls.VersionTLS12), OnlyTLS13); err == nil {
		t.Fatal("the agent's listener accepted a TLS 1.2 client")
	}
	if err := listenHandshake(t, dir, client(tls.VersionTLS12, 0), OnlyTLS13); err != nil {
		t.Fatalf("the agent's listener refused TLS 1.3: %v", err)
	}
	// A server that stops at 1.2 (the core API's listener, made to) is
	// refused by the core's agent client.
	ln, err := Listen("api", "127.0.0.1:0", filepath.Join(dir, "core.pem"), filepath.Join(dir, "core-key.pem"), "",
		func(c *tls.Config) { c.MaxVersion = tls.VersionTLS12 })
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		if c, err := ln.Accept(); err == nil {
			_ = c.(*tls.Conn).Handshake()
			c.Close()
		}
	}()
	if _, err := tls.Dial("tcp", ln.Addr().String(), client(LinkVersion, 0)); err == nil {
		t.Fatal("the core's agent client accepted a TLS 1.2 server")
	}
}

// The core's API speaks TLS 1.2 only with ECDHE and AEAD suites (issue 9,
// item 11): a client offering only a CBC/SHA-1 suite is refused, one
// offering an AEAD suite is served.
func TestCoreAPIRefusesCBCSuites(t *testing.T) {
	t.Parallel()
	dir := setup(t)
	if _, err := CreateCert(dir, Core(), nil, time.Now(), LeafValidity); err != nil {
		t.Fatal(err)
	}
	client := func(suite uint16) *tls.Config {
		c, err := ClientConfig(filepath.Join(dir, CACertFile), "", "")
		if err != nil {
			t.Fatal(err)
		}
		c.MaxVersion, c.CipherSuites = tls.VersionTLS12, []uint16{suite}
		return ForPeer(c, Core())
	}
	for _, suite := range []uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA, tls.TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA,
		tls.TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256} {
		if err := listenHandshake(t, dir, client(suite)); err == nil {
			t.Errorf("%s accepted", tls.CipherSuiteName(suite))
		}
	}
	for _, suite := range []uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256, tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256} {
		if err := listenHandshake(t, dir, client(suite)); err != nil {
			t.Errorf("%s refused: %v", tls.CipherSuiteName(suite), err)
		}
	}
}

// serveTLS accepts connections on a Listen of dir/base.pem and completes
// their handshakes, until the test ends.
func serveTLS(t *testing.T, dir, base string) string {
	t.Helper()
	ln, err := Listen("api", "127.0.0.1:0", filepath.Join(dir, base+".pem"), filepath.Join(dir, base+"-key.pem"), "", OnlyTLS13)
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
			_ = c.(*tls.Conn).Handshake()
			c.Close()
		}
	}()
	return ln.Addr().String()
}

// ProvePeer tells a peer that proved the identity, one that answered and
// did not (a *ProofError with a fixed reason), and an address that did not
// answer (another error): what gossip claim checks rely on.
func TestProvePeer(t *testing.T) {
	t.Parallel()
	dir, other := setup(t), setup(t)
	for _, c := range []struct {
		dir string
		id  Identity
	}{{dir, Agent("n1")}, {dir, Agent("n2")}, {dir, Core()}, {other, Agent("n1")}} {
		if _, err := CreateCert(c.dir, c.id, nil, time.Now(), LeafValidity); err != nil {
			t.Fatal(err)
		}
	}
	cc, err := ClientConfig(filepath.Join(dir, CACertFile), filepath.Join(dir, "core.pem"), filepath.Join(dir, "core-key.pem"))
	if err != nil {
		t.Fatal(err)
	}
	cc.MinVersion = LinkVersion
	plain, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for {
			c, err := plain.Accept()
			if err != nil {
				return
			}
			_, _ = c.Write([]byte("HTTP/1.1 400 Bad Request\r\n\r\n"))
			c.Close()
		}
	}()
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closedAddr := closed.Addr().String()
	closed.Close()
	t.Cleanup(func() { plain.Close() })

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := ProvePeer(ctx, nil, cc, serveTLS(t, dir, "agent-n1"), Agent("n1")); err != nil {
		t.Fatalf("n1 at its address: %v", err)
	}
	for name, c := range map[string]struct {
		addr, reason string
	}{
		"another node":  {serveTLS(t, dir, "agent-n2"), "identity mismatch: the peer's certificate is spiffe://muster/agent/n2, want spiffe://muster/agent/n1"},
		"another CA":    {serveTLS(t, other, "agent-n1"), "its certificate is not signed by the CA"},
		"no TLS at all": {plain.Addr().String(), "it does not answer TLS"},
	} {
		err := ProvePeer(ctx, nil, cc, c.addr, Agent("n1"))
		var pe *ProofError
		if !errors.Is(err, ErrNotProven) || !errors.As(err, &pe) || pe.Reason != c.reason {
			t.Errorf("%s: %v, want a ProofError %q", name, err, c.reason)
		}
	}
	if err := ProvePeer(ctx, nil, cc, closedAddr, Agent("n1")); err == nil || errors.Is(err, ErrNotProven) {
		t.Errorf("a closed port: %v, want an error that is not a refusal", err)
	}
}
