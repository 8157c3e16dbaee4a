// Package enroll is the agent's side of enrollment (docs/architecture.md,
// "Installing on a fleet"): it makes the node's key pair, sends a
// certificate signing request to the core with a join token, checking the
// core against a CA pin first, writes the certificate, the CA bundle and
// the gossip key (mode 0600), and renews the certificate over mutual TLS at
// two thirds of its lifetime, without a restart.
package enroll

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/musterhq/muster/shared/client"
	"github.com/musterhq/muster/shared/tlsutil"
	"github.com/musterhq/muster/shared/wire"
)

// Files of an enrolled agent in its directory.
const (
	CertFile      = "agent.pem"
	KeyFile       = "agent-key.pem"
	CAFile        = "ca.pem"
	GossipKeyFile = "gossip.key"
	// StateFile records where the agent enrolled (the core's URL, for
	// renewal) and what it got.
	StateFile = "enrolled.json"
)

// ErrEnrolled: the directory already holds a certificate.
var ErrEnrolled = errors.New("already enrolled")

// Paths are the files of an enrolled agent.
type Paths struct {
	Dir, Cert, Key, CA, GossipKey, State string
}

// PathsIn returns the files of dir.
func PathsIn(dir string) Paths {
	return Paths{Dir: dir, Cert: filepath.Join(dir, CertFile), Key: filepath.Join(dir, KeyFile), CA: filepath.Join(dir, CAFile),
		GossipKey: filepath.Join(dir, GossipKeyFile), State: filepath.Join(dir, StateFile)}
}

// Enrolled reports whether dir holds a certificate.
func (p Paths) Enrolled() bool {
	_, err := os.Stat(p.Cert)
	return err == nil
}

// State is what StateFile holds.
type State struct {
	Core      string    `json:"core"`
	NodeID    string    `json:"node_id"`
	ClusterID string    `json:"cluster_id"`
	Serial    string    `json:"serial"`
	NotAfter  time.Time `json:"not_after"`
	Gossip    bool      `json:"gossip_key"`
}

// ReadState reads the state of an enrolled directory.
func ReadState(p Paths) (*State, error) {
	b, err := os.ReadFile(p.State)
	if err != nil {
		return nil, err
	}
	var st State
	if err := json.Unmarshal(b, &st); err != nil {
		return nil, fmt.Errorf("%s: %w", p.State, err)
	}
	return &st, nil
}

// Options of one enrollment.
type Options struct {
	// Core is the core's API URL (https://host:port).
	Core string
	// Token is the join token's secret.
	Token string
	// CAPin is the SHA-256 pin of the core's CA (muster tls ca create
	// prints it). Required unless CAFile names a CA bundle to trust.
	CAPin             string
	CAFile            string
	NodeID, ClusterID string
	// Replace asks to enroll a node id a live certificate holds (an admin
	// token only).
	Replace bool
	// Replaces names a node of the cluster this one asks to replace, once
	// an admin approves ("": none).
	Replaces string
	// Force overwrites the files of an earlier enrollment.
	Force   bool
	Paths   Paths
	Timeout time.Duration
}

// CoreURL checks a core URL: https with a host.
func CoreURL(s string) (string, error) {
	u, err := url.Parse(strings.TrimSpace(s))
	if err != nil || u.Host == "" || u.Scheme != "https" {
		return "", fmt.Errorf("core URL %q is not https://host:port (enrollment sends a secret: TLS only)", s)
	}
	return strings.TrimSuffix(u.String(), "/"), nil
}

// Enroll enrolls the node and writes its files. The join token is sent
// only once the core proved it holds a certificate of the pinned CA.
func Enroll(ctx context.Context, o Options) (*State, error) {
	core, err := CoreURL(o.Core)
	if err != nil {
		return nil, err
	}
	if o.Timeout <= 0 {
		o.Timeout = 30 * time.Second
	}
	if o.Paths.Enrolled() && !o.Force {
		return nil, fmt.Errorf("%w: %s exists; remove the directory's files or pass --force to enroll again", ErrEnrolled, o.Paths.Cert)
	}
	if o.CAPin == "" && o.CAFile == "" {
		return nil, errors.New("a CA pin (--ca-pin, printed by 'muster tls ca create') or a CA file is required: the core is never trusted on first use")
	}
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()

	var pool *x509.CertPool
	if o.CAPin != "" {
		// First contact: nothing secret is sent before the pin checks out.
		probe := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{
			InsecureSkipVerify: true, MinVersion: tlsutil.MinVersion, // verified below, by the pin
		}}}
		ca, err := client.NewCore(core, "", probe).EnrollCA(ctx)
		if err != nil {
			return nil, fmt.Errorf("fetch the core's CA bundle: %w", err)
		}
		if pool, err = tlsutil.PinnedPool([]byte(ca.CABundle), o.CAPin); err != nil {
			return nil, err
		}
	} else {
		if pool, err = tlsutil.CertPool(o.CAFile); err != nil {
			return nil, fmt.Errorf("CA file: %w", err)
		}
	}
	csrPEM, keyPEM, err := tlsutil.NewAgentCSR(o.NodeID)
	if err != nil {
		return nil, err
	}
	hc := &http.Client{Transport: &http.Transport{
		TLSClientConfig: tlsutil.ForPeer(&tls.Config{RootCAs: pool, MinVersion: tlsutil.MinVersion}, tlsutil.Core()),
	}}
	resp, err := client.NewCore(core, o.Token, hc).Enroll(ctx, wire.EnrollRequest{
		NodeID: o.NodeID, ClusterID: o.ClusterID, CSR: string(csrPEM), Replace: o.Replace, Replaces: o.Replaces})
	if err != nil {
		return nil, fmt.Errorf("enroll: %w", err)
	}
	if o.CAPin != "" {
		if _, err := tlsutil.PinnedPool([]byte(resp.CABundle), o.CAPin); err != nil {
			return nil, fmt.Errorf("the core's answer: %w", err)
		}
	}
	if err := check(resp, keyPEM, o.NodeID); err != nil {
		return nil, err
	}
	st := &State{Core: core, NodeID: resp.NodeID, ClusterID: resp.ClusterID, Serial: resp.Serial, NotAfter: resp.NotAfter,
		Gossip: resp.GossipKey != ""}
	if err := write(o.Paths, resp, keyPEM, st); err != nil {
		return nil, err
	}
	return st, nil
}

// check verifies that the answer is a certificate for node, of the key,
// chaining to its own CA bundle.
func check(resp *wire.EnrollResponse, keyPEM []byte, node string) error {
	pair, err := tls.X509KeyPair([]byte(resp.Certificate), keyPEM)
	if err != nil {
		return fmt.Errorf("the core's certificate does not match the key made here: %w", err)
	}
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		return err
	}
	if err := tlsutil.CheckIdentity(leaf, tlsutil.Agent(node)); err != nil {
		return fmt.Errorf("the core's certificate: %w", err)
	}
	cas, err := tlsutil.ParseCerts([]byte(resp.CABundle))
	if err != nil {
		return fmt.Errorf("the core's CA bundle: %w", err)
	}
	pool := x509.NewCertPool()
	for _, c := range cas {
		pool.AddCert(c)
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
		return fmt.Errorf("the core's certificate does not chain to its CA bundle: %w", err)
	}
	return nil
}

// write writes every file, mode 0600, each atomically; the key and
// certificate first, as one pair (stagePair), the state last.
func write(p Paths, resp *wire.EnrollResponse, keyPEM []byte, st *State) error {
	if err := os.MkdirAll(p.Dir, 0o700); err != nil {
		return err
	}
	if err := stagePair(p, keyPEM, []byte(resp.Certificate)); err != nil {
		return fmt.Errorf("write %s: %w", p.Cert, err)
	}
	if err := commitPair(p); err != nil {
		return fmt.Errorf("write %s: %w", p.Cert, err)
	}
	files := []struct {
		path string
		data []byte
	}{{p.CA, []byte(resp.CABundle)}}
	if resp.GossipKey != "" {
		files = append(files, struct {
			path string
			data []byte
		}{p.GossipKey, []byte(resp.GossipKey + "\n")})
	}
	for _, f := range files {
		if err := tlsutil.WriteFileAtomic(f.path, f.data, 0o600); err != nil {
			return fmt.Errorf("write %s: %w", f.path, err)
		}
	}
	b, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	return tlsutil.WriteFileAtomic(p.State, append(b, '\n'), 0o600)
}

// ReadToken reads a join token file (its first line).
func ReadToken(path string) (string, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("token file %s does not exist", path)
	} else if err != nil {
		return "", err
	}
	tok, _, _ := strings.Cut(string(bytes.TrimSpace(b)), "\n")
	if tok == "" {
		return "", fmt.Errorf("token file %s is empty", path)
	}
	return strings.TrimSpace(tok), nil
}
