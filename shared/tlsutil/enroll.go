package tlsutil

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"sync/atomic"
	"time"
)

// Enrollment: an agent makes its key on its node and sends a certificate
// signing request; the core signs it with its agent CA (core/enroll). The
// key never leaves the node.

// PinPrefix starts every CA pin.
const PinPrefix = "sha256:"

// Errors of enrollment and revocation.
var (
	// ErrBadCSR: a signing request that is not one agent's plain request.
	ErrBadCSR = errors.New("bad certificate signing request")
	// ErrRevoked: the peer's certificate is on the revocation list.
	ErrRevoked = errors.New("certificate revoked")
	// ErrPinMismatch: the CA the peer offered is not the one pinned.
	ErrPinMismatch = errors.New("CA pin mismatch")
)

// Pin is the pin of a CA certificate: "sha256:" and the lowercase hex
// SHA-256 of its DER encoding (what `muster tls ca create` prints).
func Pin(cert *x509.Certificate) string {
	sum := sha256.Sum256(cert.Raw)
	return PinPrefix + hex.EncodeToString(sum[:])
}

// NormalizePin returns pin in the form Pin makes (prefix optional, colons
// and case ignored), or an error for anything that is not a SHA-256.
func NormalizePin(pin string) (string, error) {
	h := strings.ToLower(strings.TrimSpace(pin))
	h = strings.TrimPrefix(h, PinPrefix)
	h = strings.ReplaceAll(h, ":", "")
	if b, err := hex.DecodeString(h); err != nil || len(b) != sha256.Size {
		return "", fmt.Errorf("CA pin %q is not sha256:<64 hex digits>", pin)
	}
	return PinPrefix + h, nil
}

// ParseCerts reads every PEM certificate of b (at least one).
func ParseCerts(b []byte) ([]*x509.Certificate, error) {
	var out []*x509.Certificate
	for {
		var blk *pem.Block
		blk, b = pem.Decode(b)
		if blk == nil {
			break
		}
		if blk.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(blk.Bytes)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	if len(out) == 0 {
		return nil, errors.New("no PEM certificate")
	}
	return out, nil
}

// PinnedPool returns a pool holding only the CA of bundle whose Pin is pin
// (ErrPinMismatch when none has it). The other certificates of the bundle
// are not trusted: whoever answers in the core's place may add their own.
func PinnedPool(bundle []byte, pin string) (*x509.CertPool, error) {
	want, err := NormalizePin(pin)
	if err != nil {
		return nil, err
	}
	certs, err := ParseCerts(bundle)
	if err != nil {
		return nil, fmt.Errorf("CA bundle: %w", err)
	}
	pool := x509.NewCertPool()
	found := false
	for _, c := range certs {
		if c.IsCA && Pin(c) == want {
			pool.AddCert(c)
			found = true
		}
	}
	if !found {
		return nil, fmt.Errorf("%w: no CA of the core's bundle has pin %s", ErrPinMismatch, want)
	}
	return pool, nil
}

// NewAgentCSR makes a P-256 key and a signing request for the agent
// identity of nodeID: no subject beyond its common name, one URI SAN. It
// returns both in PEM.
func NewAgentCSR(nodeID string) (csrPEM, keyPEM []byte, err error) {
	id := Agent(nodeID)
	if err := id.Validate(); err != nil {
		return nil, nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("generate key: %w", err)
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{
		Subject: pkix.Name{CommonName: id.CommonName()},
		URIs:    []*url.URL{id.URI()},
	}, key)
	if err != nil {
		return nil, nil, fmt.Errorf("certificate request: %w", err)
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), nil
}

// oidBasicConstraints is the extension a request uses to ask for a CA.
var oidBasicConstraints = []int{2, 5, 29, 19}

// ParseAgentCSR decodes a PEM signing request and checks that it is a
// plain request for the agent identity of nodeID: a valid signature, one
// URI SAN naming that agent, no other SAN, no CA flag (ErrBadCSR, with the
// reason, otherwise).
func ParseAgentCSR(csrPEM []byte, nodeID string) (*x509.CertificateRequest, error) {
	blk, rest := pem.Decode(csrPEM)
	if blk == nil || blk.Type != "CERTIFICATE REQUEST" {
		return nil, fmt.Errorf("%w: not a PEM CERTIFICATE REQUEST", ErrBadCSR)
	}
	if len(strings.TrimSpace(string(rest))) != 0 {
		return nil, fmt.Errorf("%w: data after the request", ErrBadCSR)
	}
	csr, err := x509.ParseCertificateRequest(blk.Bytes)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadCSR, err)
	}
	if err := csr.CheckSignature(); err != nil {
		return nil, fmt.Errorf("%w: signature: %v", ErrBadCSR, err)
	}
	switch k := csr.PublicKey.(type) {
	case *ecdsa.PublicKey:
		if k.Curve != elliptic.P256() && k.Curve != elliptic.P384() {
			return nil, fmt.Errorf("%w: the key's curve is not P-256 or P-384", ErrBadCSR)
		}
	default:
		return nil, fmt.Errorf("%w: the key is not ECDSA", ErrBadCSR)
	}
	for _, e := range csr.Extensions {
		if e.Id.Equal(oidBasicConstraints) {
			return nil, fmt.Errorf("%w: it asks for basic constraints (a CA)", ErrBadCSR)
		}
	}
	if len(csr.DNSNames)+len(csr.IPAddresses)+len(csr.EmailAddresses) > 0 {
		return nil, fmt.Errorf("%w: it names hosts, addresses or e-mail (only the agent's identity may be asked for)", ErrBadCSR)
	}
	want := Agent(nodeID)
	if len(csr.URIs) != 1 || csr.URIs[0].String() != want.URI().String() {
		// What it asks for is not quoted: the requester chose it, and the
		// reason is logged and recorded.
		return nil, fmt.Errorf("%w: it must ask for exactly %s (it asks for %d identities, not that one alone)", ErrBadCSR, want, len(csr.URIs))
	}
	return csr, nil
}

// SignAgent signs csr (checked by ParseAgentCSR) as the certificate of the
// agent nodeID of cluster: its identity URI, the cluster as organizational
// unit, server and client authentication (the agent serves the core and
// renews over mutual TLS), valid for validity from now.
func (ca *CA) SignAgent(csr *x509.CertificateRequest, nodeID, cluster string, now time.Time, validity time.Duration) ([]byte, *x509.Certificate, error) {
	id := Agent(nodeID)
	if err := id.Validate(); err != nil {
		return nil, nil, err
	}
	serial, err := serialNumber()
	if err != nil {
		return nil, nil, err
	}
	notAfter := now.Add(validity)
	if notAfter.After(ca.Cert.NotAfter) {
		notAfter = ca.Cert.NotAfter
	}
	pub, ok := csr.PublicKey.(*ecdsa.PublicKey)
	if !ok {
		return nil, nil, fmt.Errorf("%w: the key is not ECDSA", ErrBadCSR)
	}
	// Backdated for clock differences, by a tenth of the lifetime at most,
	// so that "two thirds of the lifetime" stays near two thirds after issue.
	tmpl := &x509.Certificate{
		SerialNumber:   serial,
		Subject:        pkix.Name{CommonName: id.CommonName(), Organization: []string{"muster"}, OrganizationalUnit: []string{cluster}},
		NotBefore:      now.Add(-min(backdate, validity/10)),
		NotAfter:       notAfter,
		KeyUsage:       x509.KeyUsageDigitalSignature,
		ExtKeyUsage:    []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		SubjectKeyId:   keyID(pub),
		AuthorityKeyId: ca.Cert.SubjectKeyId,
		URIs:           []*url.URL{id.URI()},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, pub, ca.Key)
	if err != nil {
		return nil, nil, fmt.Errorf("sign certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), cert, nil
}

// SerialHex is how muster writes a certificate serial: lowercase hex.
func SerialHex(c *x509.Certificate) string { return c.SerialNumber.Text(16) }

// ClusterOf returns the cluster an enrolled agent certificate names ("" for
// a certificate made by `muster tls cert create`).
func ClusterOf(c *x509.Certificate) string {
	if len(c.Subject.OrganizationalUnit) == 1 {
		return c.Subject.OrganizationalUnit[0]
	}
	return ""
}

// KeyPair is a certificate and key loaded from files that can be loaded
// again while connections use it: a TLS configuration that takes its
// certificate from GetCertificate or GetClientCertificate picks up the new
// pair at its next handshake, without a restart.
type KeyPair struct {
	certFile, keyFile string
	cur               atomic.Pointer[tls.Certificate]
}

// LoadKeyPair loads certFile and keyFile (the key file private to its
// owner).
func LoadKeyPair(certFile, keyFile string) (*KeyPair, error) {
	kp := &KeyPair{certFile: certFile, keyFile: keyFile}
	if err := kp.Reload(); err != nil {
		return nil, err
	}
	return kp, nil
}

// Reload reads the files again; on error the pair in use stays.
func (kp *KeyPair) Reload() error {
	c, err := loadKeyPair(kp.certFile, kp.keyFile)
	if err != nil {
		return err
	}
	if c.Leaf == nil && len(c.Certificate) > 0 {
		if c.Leaf, err = x509.ParseCertificate(c.Certificate[0]); err != nil {
			return err
		}
	}
	kp.cur.Store(&c)
	return nil
}

// Leaf is the certificate in use.
func (kp *KeyPair) Leaf() *x509.Certificate { return kp.cur.Load().Leaf }

// GetCertificate serves the pair in use (tls.Config.GetCertificate).
func (kp *KeyPair) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	return kp.cur.Load(), nil
}

// GetClientCertificate presents the pair in use
// (tls.Config.GetClientCertificate).
func (kp *KeyPair) GetClientCertificate(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
	return kp.cur.Load(), nil
}

// WriteFileAtomic writes data to path with mode through a temporary file in
// the same directory and a rename, so that a reader sees the old or the new
// content, never a part.
func WriteFileAtomic(path string, data []byte, mode os.FileMode) error {
	tmp := path + ".tmp"
	os.Remove(tmp)
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		os.Remove(tmp)
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		os.Remove(tmp)
		return err
	}
	if err := f.Close(); err != nil {
		os.Remove(tmp)
		return err
	}
	if err := os.Chmod(tmp, mode); err != nil {
		os.Remove(tmp)
		return err
	}
	return os.Rename(tmp, path)
}

// RenewAt is when a certificate should be renewed: at two thirds of its
// lifetime.
func RenewAt(c *x509.Certificate) time.Time {
	life := c.NotAfter.Sub(c.NotBefore)
	return c.NotBefore.Add(life * 2 / 3)
}
