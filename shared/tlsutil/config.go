package tlsutil

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"

	"github.com/musterhq/muster/shared/config"
)

// ErrNoPeerCertificate: the peer presented no certificate that was verified.
var ErrNoPeerCertificate = errors.New("no verified client certificate")

// MinVersion is the oldest TLS version muster speaks: TLS 1.2, with the
// CipherSuites only, on the core's API, whose clients may be any tool.
const MinVersion = tls.VersionTLS12

// LinkVersion is the only TLS version between the core and its agents, Go
// on both ends: 1.3 (its suites are all AEAD with forward secrecy).
const LinkVersion = tls.VersionTLS13

// CipherSuites are the TLS 1.2 suites muster accepts: ECDHE key exchange
// with an AEAD cipher. CBC and SHA-1 suites (ECDHE-ECDSA-AES128-SHA, ...)
// and RSA key exchange are refused. TLS 1.3 suites are not configurable and
// all qualify.
var CipherSuites = []uint16{
	tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
	tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
	tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
	tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
	tls.TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
	tls.TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
}

// ListenOption tunes the TLS configuration of Listen.
type ListenOption func(*tls.Config)

// OnlyTLS13 makes a listener speak TLS 1.3 only (LinkVersion): the agent's
// API, whose client is the core.
func OnlyTLS13(c *tls.Config) { c.MinVersion = LinkVersion }

// ServerConfig is the TLS configuration of an API listener: its certificate
// and key and, when clientCAFile is set, client certificates required and
// verified against that CA (the handshake fails without one).
func ServerConfig(certFile, keyFile, clientCAFile string) (*tls.Config, error) {
	cert, err := loadKeyPair(certFile, keyFile)
	if err != nil {
		return nil, err
	}
	c := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: MinVersion, CipherSuites: CipherSuites}
	if clientCAFile != "" {
		pool, err := CertPool(clientCAFile)
		if err != nil {
			return nil, fmt.Errorf("client_ca_file: %w", err)
		}
		c.ClientCAs, c.ClientAuth = pool, tls.RequireAndVerifyClientCert
	}
	return c, nil
}

// ClientConfig is the TLS configuration of a client: the CA that signs the
// server's certificate (the system's roots when caFile is empty) and, when
// certFile is set, the client's own certificate.
func ClientConfig(caFile, certFile, keyFile string) (*tls.Config, error) {
	c := &tls.Config{MinVersion: MinVersion, CipherSuites: CipherSuites}
	if caFile != "" {
		pool, err := CertPool(caFile)
		if err != nil {
			return nil, fmt.Errorf("ca_file: %w", err)
		}
		c.RootCAs = pool
	}
	if certFile != "" || keyFile != "" {
		cert, err := loadKeyPair(certFile, keyFile)
		if err != nil {
			return nil, err
		}
		c.Certificates = []tls.Certificate{cert}
	}
	return c, nil
}

// loadKeyPair loads a certificate and its key, refusing a key file its
// group or others may read (config.ErrFileOpen). Errors name the key:
// "cert_file/key_file: ..." or "key_file: ... has mode 0644, ...".
func loadKeyPair(certFile, keyFile string) (tls.Certificate, error) {
	if err := config.CheckPrivateFile(keyFile); errors.Is(err, config.ErrFileOpen) {
		return tls.Certificate{}, fmt.Errorf("key_file: %w", err)
	}
	// A missing file is reported by the load, as it always was.
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return cert, fmt.Errorf("cert_file/key_file: %w", err)
	}
	return cert, nil
}

// ForPeer returns a copy of the client configuration c that accepts a server
// only when its certificate chains to c.RootCAs and names want. The host name
// is not checked: the identity is.
func ForPeer(c *tls.Config, want Identity) *tls.Config {
	c = c.Clone()
	roots := c.RootCAs
	// A check c already makes (the revocation list) runs after the
	// identity's.
	extra := c.VerifyConnection
	// Standard verification is replaced, not dropped: VerifyConnection
	// below verifies the chain, then the identity.
	c.InsecureSkipVerify = true
	c.VerifyConnection = func(cs tls.ConnectionState) error {
		if len(cs.PeerCertificates) == 0 {
			return fmt.Errorf("tls: the server presented no certificate")
		}
		leaf := cs.PeerCertificates[0]
		inter := x509.NewCertPool()
		for _, ic := range cs.PeerCertificates[1:] {
			inter.AddCert(ic)
		}
		if _, err := leaf.Verify(x509.VerifyOptions{
			Roots: roots, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		}); err != nil {
			return fmt.Errorf("tls: %w", err)
		}
		if err := CheckIdentity(leaf, want); err != nil {
			return err
		}
		if extra != nil {
			return extra(cs)
		}
		return nil
	}
	return c
}

// ServeKeyPair makes a listener serve the pair of kp, read at every
// handshake, so that kp.Reload takes effect without a restart.
func ServeKeyPair(kp *KeyPair) ListenOption {
	return func(c *tls.Config) {
		c.Certificates = nil
		c.GetCertificate = kp.GetCertificate
	}
}

// RequestAgentCerts makes a listener ask clients for a certificate of the
// agents' CA (pool) without requiring one: the core's enrollment renewal
// verifies it itself, so that an expired or revoked certificate gets a
// clear answer rather than a failed handshake. When the listener already
// requires client certificates (api.tls.client_ca_file), the agents' CA is
// accepted beside that CA, and an agent certificate whose serial revoked
// reports is refused in the handshake (nil revoked: none is).
func RequestAgentCerts(pool *x509.CertPool, certs []*x509.Certificate, revoked func(serial string) bool) ListenOption {
	return func(c *tls.Config) {
		if c.ClientAuth == tls.RequireAndVerifyClientCert {
			for _, ca := range certs {
				c.ClientCAs.AddCert(ca)
			}
			if revoked != nil {
				check, extra := CheckSerials(revoked), c.VerifyConnection
				c.VerifyConnection = func(cs tls.ConnectionState) error {
					// Only a certificate the agents' CA signed is looked
					// up: the serials on the list are that CA's.
					if len(cs.PeerCertificates) > 0 && signedByOneOf(cs.PeerCertificates[0], certs) {
						if err := check(cs); err != nil {
							return err
						}
					}
					if extra != nil {
						return extra(cs)
					}
					return nil
				}
			}
			return
		}
		c.ClientAuth = tls.RequestClientCert
		c.ClientCAs = pool
	}
}

// signedByOneOf reports whether one of cas signed leaf.
func signedByOneOf(leaf *x509.Certificate, cas []*x509.Certificate) bool {
	for _, ca := range cas {
		if leaf.CheckSignatureFrom(ca) == nil {
			return true
		}
	}
	return false
}

// CheckSerials returns a VerifyConnection check that refuses a peer whose
// certificate's serial revoked reports (ErrRevoked).
func CheckSerials(revoked func(serial string) bool) func(tls.ConnectionState) error {
	return func(cs tls.ConnectionState) error {
		if len(cs.PeerCertificates) > 0 && revoked(SerialHex(cs.PeerCertificates[0])) {
			return fmt.Errorf("tls: %w: serial %s", ErrRevoked, SerialHex(cs.PeerCertificates[0]))
		}
		return nil
	}
}

// PeerIdentity returns the identity of the verified client certificate of a
// TLS connection (ErrNoPeerCertificate without one).
func PeerIdentity(cs *tls.ConnectionState) (Identity, error) {
	if cs == nil || len(cs.VerifiedChains) == 0 || len(cs.PeerCertificates) == 0 {
		return Identity{}, ErrNoPeerCertificate
	}
	id, _ := IdentityOf(cs.PeerCertificates[0])
	return id, nil
}

// CertPool reads the PEM certificates of file.
func CertPool(file string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("no PEM certificate in %s", file)
	}
	return pool, nil
}

// ListenConfig is the TLS configuration of a listener (nil without certFile
// and keyFile: plain TCP): ServerConfig tuned by opts. Errors name the
// configuration key under prefix ("api.tls.cert_file", ...).
func ListenConfig(prefix, certFile, keyFile, clientCAFile string, opts ...ListenOption) (*tls.Config, error) {
	if certFile == "" && keyFile == "" {
		return nil, nil
	}
	tc, err := ServerConfig(certFile, keyFile, clientCAFile)
	if err != nil {
		return nil, fmt.Errorf("%s.tls.%w", prefix, err)
	}
	for _, o := range opts {
		o(tc)
	}
	return tc, nil
}

// Listen opens a TCP listener on addr, serving TLS when certFile is set (see
// ServerConfig; with clientCAFile, clients must present a certificate of that
// CA). Errors name the configuration key under prefix ("api.addr",
// "api.tls.cert_file", ...). opts tune the TLS configuration.
func Listen(prefix, addr, certFile, keyFile, clientCAFile string, opts ...ListenOption) (net.Listener, error) {
	tc, err := ListenConfig(prefix, certFile, keyFile, clientCAFile, opts...)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("%s.addr: %w", prefix, err)
	}
	if tc == nil {
		return ln, nil
	}
	return tls.NewListener(ln, tc), nil
}

// ErrNotProven: a peer answered at an address and did not prove the
// identity wanted there. ProvePeer's errors that match it are *ProofError.
var ErrNotProven = errors.New("the peer did not prove its identity")

// ProofError says, in a fixed text, why a peer did not prove an identity.
// It matches ErrNotProven.
type ProofError struct{ Reason string }

func (e *ProofError) Error() string { return e.Reason }

// Is makes errors.Is(err, ErrNotProven) true.
func (e *ProofError) Is(target error) bool { return target == ErrNotProven }

// ProvePeer dials addr (with d, or a plain net.Dialer when d is nil) and
// completes a TLS handshake that accepts only a certificate of c's CA naming
// want (ForPeer), then hangs up. It returns nil when the peer proved want; a
// *ProofError when it answered and did not (another identity, another CA,
// no TLS, a refused handshake); any other error when the address did not
// answer, or d refused it.
func ProvePeer(ctx context.Context, d *net.Dialer, c *tls.Config, addr string, want Identity) error {
	pc := ForPeer(c, want)
	check := pc.VerifyConnection
	var refused error
	pc.VerifyConnection = func(cs tls.ConnectionState) error {
		err := check(cs)
		refused = err
		return err
	}
	conn, err := (&tls.Dialer{NetDialer: d, Config: pc}).DialContext(ctx, "tcp", addr)
	if err == nil {
		return conn.Close()
	}
	var (
		ie *IdentityError
		ce *ClusterError
		ua x509.UnknownAuthorityError
		rh tls.RecordHeaderError
		al tls.AlertError
	)
	switch {
	case errors.As(err, &ie):
		return &ProofError{Reason: ie.Error()}
	case errors.As(refused, &ce):
		return &ProofError{Reason: ce.Error()}
	case errors.Is(refused, ErrRevoked):
		return &ProofError{Reason: "its certificate is revoked"}
	case errors.As(err, &ua):
		return &ProofError{Reason: "its certificate is not signed by the CA"}
	case refused != nil:
		return &ProofError{Reason: "its certificate is not valid"}
	case errors.As(err, &rh):
		return &ProofError{Reason: "it does not answer TLS"}
	case errors.As(err, &al):
		return &ProofError{Reason: "it refused the TLS handshake"}
	}
	return err
}

// ErrWrongCluster: an agent's certificate names another cluster than the
// node's. Errors of InCluster that match it are *ClusterError.
var ErrWrongCluster = errors.New("certificate of another cluster")

// ClusterError says which cluster an agent's certificate names instead of
// the node's. It matches ErrWrongCluster.
type ClusterError struct{ Got, Want string }

func (e *ClusterError) Error() string {
	return fmt.Sprintf("the peer's certificate is for cluster %s, not %s", e.Got, e.Want)
}

// Is makes errors.Is(err, ErrWrongCluster) true.
func (e *ClusterError) Is(target error) bool { return target == ErrWrongCluster }

// InCluster returns a copy of c that also refuses a peer whose certificate
// names a cluster (ClusterOf) other than cluster; a certificate naming none
// passes. Wrapped by ForPeer, the check runs after the chain's and the
// identity's.
func InCluster(c *tls.Config, cluster string) *tls.Config {
	c = c.Clone()
	extra := c.VerifyConnection
	c.VerifyConnection = func(cs tls.ConnectionState) error {
		if len(cs.PeerCertificates) > 0 {
			if got := ClusterOf(cs.PeerCertificates[0]); got != "" && got != cluster {
				return &ClusterError{Got: got, Want: cluster}
			}
		}
		if extra != nil {
			return extra(cs)
		}
		return nil
	}
	return c
}
