package tlsutil

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"

	"github.com/musterhq/muster/shared/config"
)

// ErrNoPeerCertificate: the peer presented no certificate that was verified.
var ErrNoPeerCertificate = errors.New("no verified client certificate")

// MinVersion is the oldest TLS version muster speaks.
const MinVersion = tls.VersionTLS12

// ServerConfig is the TLS configuration of an API listener: its certificate
// and key and, when clientCAFile is set, client certificates required and
// verified against that CA (the handshake fails without one).
func ServerConfig(certFile, keyFile, clientCAFile string) (*tls.Config, error) {
	cert, err := loadKeyPair(certFile, keyFile)
	if err != nil {
		return nil, err
	}
	c := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: MinVersion}
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
	c := &tls.Config{MinVersion: MinVersion}
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
		return CheckIdentity(leaf, want)
	}
	return c
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
