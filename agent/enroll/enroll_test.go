package enroll

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/musterhq/muster/shared/tlsutil"
	"github.com/musterhq/muster/shared/wire"
)

// fakeCore answers the three enrollment routes as the core does, signing
// with its CA, and records what it was sent. (The real core is exercised
// by e2e; agent never imports core.)
type fakeCore struct {
	ca     *tlsutil.CA
	bundle []byte
	ts     *httptest.Server

	mu      sync.Mutex
	posts   int
	renewed int
}

func newFakeCore(t *testing.T) *fakeCore {
	t.Helper()
	pair, err := tlsutil.NewCA(time.Now(), 24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := tlsutil.ParseCA(pair)
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeCore{ca: ca, bundle: pair.CertPEM}
	core, err := ca.Issue(tlsutil.Core(), []string{"127.0.0.1"}, time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := tls.X509KeyPair(core.CertPEM, core.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/v1/enroll/ca", func(w http.ResponseWriter, _ *http.Request) {
		_ = json.NewEncoder(w).Encode(wire.EnrollCA{CABundle: string(f.bundle), Pins: []string{tlsutil.Pin(ca.Cert)}})
	})
	sign := func(w http.ResponseWriter, node, csrPEM string) {
		csr, err := tlsutil.ParseAgentCSR([]byte(csrPEM), node)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		certPEM, c, err := ca.SignAgent(csr, node, "prod", time.Now(), time.Hour)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(wire.EnrollResponse{NodeID: node, ClusterID: "prod", Certificate: string(certPEM),
			CABundle: string(f.bundle), GossipKey: "a2V5", Serial: tlsutil.SerialHex(c), NotAfter: c.NotAfter})
	}
	mux.HandleFunc("POST /api/v1/enroll", func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		f.posts++
		f.mu.Unlock()
		if r.Header.Get("Authorization") != "Bearer join-secret" {
			http.Error(w, "no token", http.StatusUnauthorized)
			return
		}
		var req wire.EnrollRequest
		b, _ := io.ReadAll(r.Body)
		_ = json.Unmarshal(b, &req)
		sign(w, req.NodeID, req.CSR)
	})
	mux.HandleFunc("POST /api/v1/enroll/renew", func(w http.ResponseWriter, r *http.Request) {
		if r.TLS == nil || len(r.TLS.PeerCertificates) == 0 {
			http.Error(w, "no client certificate", http.StatusUnauthorized)
			return
		}
		id, _ := tlsutil.IdentityOf(r.TLS.PeerCertificates[0])
		f.mu.Lock()
		f.renewed++
		f.mu.Unlock()
		var req wire.RenewRequest
		b, _ := io.ReadAll(r.Body)
		_ = json.Unmarshal(b, &req)
		sign(w, id.Name, req.CSR)
	})
	f.ts = httptest.NewUnstartedServer(mux)
	f.ts.TLS = &tls.Config{Certificates: []tls.Certificate{cert}, ClientAuth: tls.RequestClientCert}
	f.ts.StartTLS()
	t.Cleanup(f.ts.Close)
	return f
}

func options(f *fakeCore, dir, pin string) Options {
	return Options{Core: f.ts.URL, Token: "join-secret", CAPin: pin, NodeID: "web-1", ClusterID: "prod", Paths: PathsIn(dir)}
}

// TestEnrollWritesPrivateFiles: with the right pin, the node's key, its
// certificate, the CA bundle, the gossip key and the state are written,
// mode 0600, and the certificate is of the key made here.
func TestEnrollWritesPrivateFiles(t *testing.T) {
	t.Parallel()
	f := newFakeCore(t)
	dir := filepath.Join(t.TempDir(), "tls")
	st, err := Enroll(t.Context(), options(f, dir, tlsutil.Pin(f.ca.Cert)))
	if err != nil {
		t.Fatal(err)
	}
	p := PathsIn(dir)
	for _, file := range []string{p.Cert, p.Key, p.CA, p.GossipKey, p.State} {
		fi, err := os.Stat(file)
		if err != nil || fi.Mode().Perm() != 0o600 {
			t.Fatalf("%s: %v %v, want mode 0600", file, err, fi)
		}
	}
	if _, err := tls.LoadX509KeyPair(p.Cert, p.Key); err != nil {
		t.Fatal(err)
	}
	got, err := ReadState(p)
	if err != nil || got.Serial != st.Serial || got.Core != f.ts.URL || !got.Gossip {
		t.Fatalf("state %+v, %v", got, err)
	}
	// A second enrollment into the same directory needs --force.
	if _, err := Enroll(t.Context(), options(f, dir, tlsutil.Pin(f.ca.Cert))); !errors.Is(err, ErrEnrolled) {
		t.Fatalf("second enrollment: %v, want ErrEnrolled", err)
	}
}

// TestEnrollNeverSendsTheTokenToAnUnpinnedCore: a wrong pin, no pin, or
// plain HTTP: nothing is posted and no file is written.
func TestEnrollNeverSendsTheTokenToAnUnpinnedCore(t *testing.T) {
	t.Parallel()
	f := newFakeCore(t)
	other := newFakeCore(t)
	dir := filepath.Join(t.TempDir(), "tls")
	cases := map[string]Options{
		"another CA's pin": options(f, dir, tlsutil.Pin(other.ca.Cert)),
		"no pin":           options(f, dir, ""),
		"plain http":       func() Options { o := options(f, dir, tlsutil.Pin(f.ca.Cert)); o.Core = "http://127.0.0.1:1"; return o }(),
	}
	for name, o := range cases {
		if _, err := Enroll(t.Context(), o); err == nil {
			t.Errorf("%s: enrolled", name)
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.posts != 0 {
		t.Fatalf("the token was posted %d times", f.posts)
	}
	if PathsIn(dir).Enrolled() {
		t.Fatal("a certificate was written")
	}
}

// TestRenewReloadsThePairInUse: Renew presents the certificate in use as a
// client certificate, writes the new pair and reloads it: what the pair
// serves changes without a restart.
func TestRenewReloadsThePairInUse(t *testing.T) {
	t.Parallel()
	f := newFakeCore(t)
	dir := filepath.Join(t.TempDir(), "tls")
	if _, err := Enroll(t.Context(), options(f, dir, tlsutil.Pin(f.ca.Cert))); err != nil {
		t.Fatal(err)
	}
	p := PathsIn(dir)
	pair, err := tlsutil.LoadKeyPair(p.Cert, p.Key)
	if err != nil {
		t.Fatal(err)
	}
	before := tlsutil.SerialHex(pair.Leaf())
	r := NewRenewer(f.ts.URL, "web-1", p, pair, nil)
	if err := r.Renew(t.Context()); err != nil {
		t.Fatal(err)
	}
	after := tlsutil.SerialHex(pair.Leaf())
	if after == before || r.Renewed() != 1 {
		t.Fatalf("serial %s → %s, %d renewals", before, after, r.Renewed())
	}
	onDisk, err := tls.LoadX509KeyPair(p.Cert, p.Key)
	if err != nil {
		t.Fatal(err)
	}
	leaf, _ := x509.ParseCertificate(onDisk.Certificate[0])
	if tlsutil.SerialHex(leaf) != after {
		t.Fatal("the files do not hold the renewed pair")
	}
	st, _ := ReadState(p)
	if st.Serial != after {
		t.Fatalf("state serial %s, want %s", st.Serial, after)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.renewed != 1 {
		t.Fatalf("the core saw %d renewals with a client certificate", f.renewed)
	}
}

// TestRenewedPairSurvivesACrashAtEachStep: a renewal stages the new key and
// certificate beside the pair in use, then moves the key, then the
// certificate. Stopped after any step, Recover leaves a key and a
// certificate that match: the old pair before both are staged, the new one
// after.
func TestRenewedPairSurvivesACrashAtEachStep(t *testing.T) {
	t.Parallel()
	f := newFakeCore(t)
	for _, step := range []string{"key staged", "both staged", "key moved", "done"} {
		t.Run(step, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "tls")
			if _, err := Enroll(t.Context(), options(f, dir, tlsutil.Pin(f.ca.Cert))); err != nil {
				t.Fatal(err)
			}
			p := PathsIn(dir)
			old := serialOnDisk(t, p)
			csrPEM, keyPEM, _ := tlsutil.NewAgentCSR("web-1")
			csr, _ := tlsutil.ParseAgentCSR(csrPEM, "web-1")
			certPEM, cert, err := f.ca.SignAgent(csr, "web-1", "prod", time.Now(), time.Hour)
			if err != nil {
				t.Fatal(err)
			}
			want := old
			switch step {
			case "key staged":
				if err := tlsutil.WriteFileAtomic(p.Key+nextSuffix, keyPEM, 0o600); err != nil {
					t.Fatal(err)
				}
			case "both staged":
				if err := stagePair(p, keyPEM, certPEM); err != nil {
					t.Fatal(err)
				}
				want = tlsutil.SerialHex(cert)
			case "key moved":
				if err := stagePair(p, keyPEM, certPEM); err != nil {
					t.Fatal(err)
				}
				if err := os.Rename(p.Key+nextSuffix, p.Key); err != nil {
					t.Fatal(err)
				}
				want = tlsutil.SerialHex(cert)
			case "done":
				if err := stagePair(p, keyPEM, certPEM); err != nil {
					t.Fatal(err)
				}
				if err := commitPair(p); err != nil {
					t.Fatal(err)
				}
				want = tlsutil.SerialHex(cert)
			}
			if err := Recover(p); err != nil {
				t.Fatal(err)
			}
			if got := serialOnDisk(t, p); got != want {
				t.Fatalf("after recovery the pair on disk is %s, want %s", got, want)
			}
			for _, left := range []string{p.Key + nextSuffix, p.Cert + nextSuffix} {
				if _, err := os.Stat(left); err == nil {
					t.Fatalf("%s is left behind", left)
				}
			}
		})
	}
}

// serialOnDisk loads the pair of p (failing when key and certificate do
// not match) and returns its serial.
func serialOnDisk(t *testing.T, p Paths) string {
	t.Helper()
	kp, err := tlsutil.LoadKeyPair(p.Cert, p.Key)
	if err != nil {
		t.Fatalf("the pair on disk: %v", err)
	}
	return tlsutil.SerialHex(kp.Leaf())
}
