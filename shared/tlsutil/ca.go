package tlsutil

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Validity defaults: what `muster tls` issues without --days.
const (
	CAValidity   = 5 * 365 * 24 * time.Hour
	LeafValidity = 365 * 24 * time.Hour
	// backdate covers small clock differences between machines.
	backdate = 5 * time.Minute
)

// File names of the CA in its directory.
const (
	CACertFile = "ca.pem"
	CAKeyFile  = "ca-key.pem"
)

// DefaultHosts are the SANs of a certificate issued without hosts.
var DefaultHosts = []string{"localhost", "127.0.0.1"}

// Errors of the CA.
var (
	// ErrExists: a file to write is already there; nothing was written.
	ErrExists = errors.New("already exists")
	// ErrNoCA: the directory holds no usable CA.
	ErrNoCA = errors.New("no certificate authority")
)

// Pair is a PEM certificate and its PEM private key.
type Pair struct {
	CertPEM, KeyPEM []byte
}

// CA is a loaded certificate authority.
type CA struct {
	Cert *x509.Certificate
	Key  *ecdsa.PrivateKey
}

// NewCA makes a self-signed ECDSA P-256 CA valid for validity from now.
func NewCA(now time.Time, validity time.Duration) (Pair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return Pair{}, fmt.Errorf("generate key: %w", err)
	}
	serial, err := serialNumber()
	if err != nil {
		return Pair{}, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: "muster CA " + serial.Text(16)[:8], Organization: []string{"muster"}},
		NotBefore:             now.Add(-backdate),
		NotAfter:              now.Add(validity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
		SubjectKeyId:          keyID(&key.PublicKey),
		// The CA signs only muster identities.
		PermittedURIDomains: []string{TrustDomain},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return Pair{}, fmt.Errorf("create CA certificate: %w", err)
	}
	return encode(der, key)
}

// ParseCA loads a CA from its PEM certificate and key.
func ParseCA(p Pair) (*CA, error) {
	cb, _ := pem.Decode(p.CertPEM)
	if cb == nil || cb.Type != "CERTIFICATE" {
		return nil, fmt.Errorf("%w: the certificate is not PEM", ErrNoCA)
	}
	cert, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNoCA, err)
	}
	if !cert.IsCA {
		return nil, fmt.Errorf("%w: the certificate is not a CA", ErrNoCA)
	}
	kb, _ := pem.Decode(p.KeyPEM)
	if kb == nil {
		return nil, fmt.Errorf("%w: the key is not PEM", ErrNoCA)
	}
	key, err := x509.ParseECPrivateKey(kb.Bytes)
	if err != nil {
		return nil, fmt.Errorf("%w: the key: %v", ErrNoCA, err)
	}
	if !key.PublicKey.Equal(cert.PublicKey) {
		return nil, fmt.Errorf("%w: the key does not belong to the certificate", ErrNoCA)
	}
	return &CA{Cert: cert, Key: key}, nil
}

// Issue signs a leaf certificate for id, valid for validity from now, with
// hosts (DNS names or IP addresses) as SANs (DefaultHosts when empty).
// Agents get server authentication, clients client authentication, the core
// both (it serves its API and calls agents).
func (ca *CA) Issue(id Identity, hosts []string, now time.Time, validity time.Duration) (Pair, error) {
	if err := id.Validate(); err != nil {
		return Pair{}, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return Pair{}, fmt.Errorf("generate key: %w", err)
	}
	serial, err := serialNumber()
	if err != nil {
		return Pair{}, err
	}
	notAfter := now.Add(validity)
	if notAfter.After(ca.Cert.NotAfter) {
		return Pair{}, fmt.Errorf("the certificate would outlive the CA (which expires %s)", ca.Cert.NotAfter.Format(time.DateOnly))
	}
	tmpl := &x509.Certificate{
		SerialNumber:   serial,
		Subject:        pkix.Name{CommonName: id.CommonName(), Organization: []string{"muster"}},
		NotBefore:      now.Add(-backdate),
		NotAfter:       notAfter,
		KeyUsage:       x509.KeyUsageDigitalSignature,
		SubjectKeyId:   keyID(&key.PublicKey),
		AuthorityKeyId: ca.Cert.SubjectKeyId,
		URIs:           []*url.URL{id.URI()},
	}
	switch id.Role {
	case RoleAgent:
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
	case RoleCore:
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
	case RoleClient:
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	}
	if len(hosts) == 0 {
		hosts = DefaultHosts
	}
	for _, h := range hosts {
		h = strings.TrimSpace(h)
		switch ip := net.ParseIP(h); {
		case h == "":
		case ip != nil:
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		default:
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.Key)
	if err != nil {
		return Pair{}, fmt.Errorf("sign certificate: %w", err)
	}
	return encode(der, key)
}

// CreateCA writes a new CA to dir/ca.pem and dir/ca-key.pem (mode 0600),
// creating dir (0700) when needed. It refuses to overwrite either file.
func CreateCA(dir string, now time.Time, validity time.Duration) (Paths, error) {
	p := Paths{Cert: filepath.Join(dir, CACertFile), Key: filepath.Join(dir, CAKeyFile)}
	if err := p.free(); err != nil {
		return p, err
	}
	pair, err := NewCA(now, validity)
	if err != nil {
		return p, err
	}
	return p, write(dir, p, pair)
}

// LoadCA reads the CA of dir.
func LoadCA(dir string) (*CA, error) {
	cert, err := os.ReadFile(filepath.Join(dir, CACertFile))
	if err != nil {
		return nil, fmt.Errorf("%w in %s (run 'muster tls ca create --dir %s' first): %v", ErrNoCA, dir, dir, err)
	}
	key, err := os.ReadFile(filepath.Join(dir, CAKeyFile))
	if err != nil {
		return nil, fmt.Errorf("%w in %s: %v", ErrNoCA, dir, err)
	}
	return ParseCA(Pair{CertPEM: cert, KeyPEM: key})
}

// CreateCert issues a certificate for id with the CA of dir and writes it to
// dir/<FileBase>.pem and dir/<FileBase>-key.pem (mode 0600). It refuses to
// overwrite either file.
func CreateCert(dir string, id Identity, hosts []string, now time.Time, validity time.Duration) (Paths, error) {
	if err := id.Validate(); err != nil {
		return Paths{}, err
	}
	p := Paths{Cert: filepath.Join(dir, id.FileBase()+".pem"), Key: filepath.Join(dir, id.FileBase()+"-key.pem")}
	if err := p.free(); err != nil {
		return p, err
	}
	ca, err := LoadCA(dir)
	if err != nil {
		return p, err
	}
	pair, err := ca.Issue(id, hosts, now, validity)
	if err != nil {
		return p, err
	}
	return p, write(dir, p, pair)
}

// Paths are the files of a certificate and its key.
type Paths struct {
	Cert, Key string
}

func (p Paths) free() error {
	for _, f := range []string{p.Cert, p.Key} {
		if _, err := os.Lstat(f); err == nil {
			return fmt.Errorf("%s: %w; remove it first to replace it", f, ErrExists)
		} else if !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	return nil
}

// write creates both files exclusively; when the second fails, the first is
// removed, so that a failure leaves nothing behind.
func write(dir string, p Paths, pair Pair) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	if err := writeNew(p.Key, pair.KeyPEM, 0o600); err != nil {
		return err
	}
	if err := writeNew(p.Cert, pair.CertPEM, 0o644); err != nil {
		os.Remove(p.Key)
		return err
	}
	return nil
}

func writeNew(path string, data []byte, mode os.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("%s: %w; remove it first to replace it", path, ErrExists)
	} else if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		os.Remove(path)
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		os.Remove(path)
		return err
	}
	return f.Close()
}

func encode(der []byte, key *ecdsa.PrivateKey) (Pair, error) {
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return Pair{}, fmt.Errorf("encode key: %w", err)
	}
	return Pair{
		CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyPEM:  pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}),
	}, nil
}

func serialNumber() (*big.Int, error) {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, fmt.Errorf("serial number: %w", err)
	}
	return n.Add(n, big.NewInt(1)), nil
}

func keyID(pub *ecdsa.PublicKey) []byte {
	b, _ := x509.MarshalPKIXPublicKey(pub)
	sum := sha256.Sum256(b)
	return sum[:20]
}
