package e2e

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/musterhq/muster/shared/tlsutil"
	"github.com/musterhq/muster/shared/wire"
)

// post sends body as JSON to the fleet's core with the bearer secret ("" for
// none) through hc, and returns the status and the body.
func (f *enrollFleet) post(hc *http.Client, path, secret string, body any) (int, []byte) {
	f.t.Helper()
	b, _ := json.Marshal(body)
	req, _ := http.NewRequestWithContext(ctxT(f.t), http.MethodPost, f.url+path, bytes.NewReader(b))
	req.Header.Set("Content-Type", "application/json")
	if secret != "" {
		req.Header.Set("Authorization", "Bearer "+secret)
	}
	resp, err := hc.Do(req)
	if err != nil {
		f.t.Fatalf("POST %s: %v", path, err)
	}
	defer resp.Body.Close()
	var out bytes.Buffer
	_, _ = out.ReadFrom(resp.Body)
	return resp.StatusCode, out.Bytes()
}

// joinSecret makes a join token for cluster prod through the API.
func (f *enrollFleet) joinSecret(name string) string {
	f.t.Helper()
	tok, err := f.admin.CreateTokenWith(ctxT(f.t), wire.CreateTokenRequest{Name: name, Roles: []string{"enroll"}, ClusterID: "prod"})
	if err != nil {
		f.t.Fatal(err)
	}
	return tok.Token
}

// TestE2ERefusalFloodIsOneEventPerTokenAMinute: a flood of refused
// enrollments against a real core (a live join token with a bad 8 KB CSR,
// and unknown tokens) writes one node.enroll_refused event for the token
// and none for the unknown callers, each CSR unquoted. It logs the rate of
// events and of their bytes (the threat model's figure).
func TestE2ERefusalFloodIsOneEventPerTokenAMinute(t *testing.T) {
	t.Parallel()
	f := newEnrollFleet(t, time.Hour)
	secret := f.joinSecret("flood")
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	marker := strings.Repeat("CSRMARK", 1200)
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{
		URIs: []*url.URL{{Scheme: "spiffe", Host: "muster", Path: "/agent/" + marker}}}, key)
	if err != nil {
		t.Fatal(err)
	}
	bad := string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}))
	hc := tlsClient(t, f.pki, "", "", nil)
	const workers, each = 8, 150
	start := time.Now()
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				who := secret
				if (w+i)%2 == 1 {
					who = "unknown-token"
				}
				status, body := f.post(hc, "/api/v1/enroll", who, wire.EnrollRequest{NodeID: "n1", ClusterID: "prod", CSR: bad})
				if status != http.StatusBadRequest && status != http.StatusUnauthorized {
					t.Errorf("refused enrollment: %d %.200s", status, body)
					return
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	evs := f.events("node.enroll_refused", "")
	size := 0
	for _, ev := range evs {
		b, _ := json.Marshal(ev)
		size += len(b)
		if strings.Contains(string(b), "CSRMARK") {
			t.Fatalf("a refusal event quotes the CSR (%d bytes)", len(b))
		}
	}
	t.Logf("%d refused enrollments in %s (%.0f/s): %d events, %d bytes (%.2f events/s, %.0f bytes/s)",
		workers*each, elapsed.Round(time.Millisecond), float64(workers*each)/elapsed.Seconds(), len(evs), size,
		float64(len(evs))/elapsed.Seconds(), float64(size)/elapsed.Seconds())
	if elapsed < time.Minute && len(evs) != 1 {
		t.Fatalf("%d refusal events for one token within a minute, want 1", len(evs))
	}
	if n := strings.Count(f.core.logs(), "enroll: refused"); elapsed < time.Minute && n > 2 {
		t.Fatalf("%d refusal log lines within a minute, want at most 2 (the token's, the unknown callers')", n)
	}
}

// TestE2EEnrollWithClientCAFile: with api.tls.client_ca_file set, an agent
// enrolls at its first start (it has no certificate yet) and is served; a
// request without a client certificate to any other route is still 401.
func TestE2EEnrollWithClientCAFile(t *testing.T) {
	t.Parallel()
	f := newEnrollFleetWith(t, time.Hour, enrollFleetOptions{clientCA: true})
	tokenFile, _ := f.joinToken("join", "--cluster", "prod")
	f.agent("n1", tokenFile)
	bare := tlsClient(t, f.pki, "", "", nil)
	resp, err := bare.Get(f.url + "/api/v1/nodes")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("GET /api/v1/nodes without a client certificate: %d, want 401", resp.StatusCode)
	}
}

// TestE2ERenewingTwiceFromOneCertificateIsRefused: an agent certificate
// renews once; a second renewal from it is refused (403), and the new one
// renews.
func TestE2ERenewingTwiceFromOneCertificateIsRefused(t *testing.T) {
	t.Parallel()
	f := newEnrollFleet(t, time.Hour)
	secret := f.joinSecret("join")
	hc := tlsClient(t, f.pki, "", "", nil)
	csr, keyPEM, err := tlsutil.NewAgentCSR("n1")
	if err != nil {
		t.Fatal(err)
	}
	status, body := f.post(hc, "/api/v1/enroll", secret, wire.EnrollRequest{NodeID: "n1", ClusterID: "prod", CSR: string(csr)})
	var first wire.EnrollResponse
	if err := json.Unmarshal(body, &first); status != http.StatusCreated || err != nil {
		t.Fatalf("enroll: %d %s", status, body)
	}
	renewWith := func(certPEM string, keyPEM []byte) (int, []byte, wire.EnrollResponse, []byte) {
		t.Helper()
		cert, err := tls.X509KeyPair([]byte(certPEM), keyPEM)
		if err != nil {
			t.Fatal(err)
		}
		client := tlsClient(t, f.pki, "", "", nil)
		tr := client.Transport.(*http.Transport).Clone()
		tr.TLSClientConfig.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &cert, nil }
		csr, key, err := tlsutil.NewAgentCSR("n1")
		if err != nil {
			t.Fatal(err)
		}
		status, body := f.post(&http.Client{Transport: tr, Timeout: 10 * time.Second}, "/api/v1/enroll/renew", "", wire.RenewRequest{CSR: string(csr)})
		var out wire.EnrollResponse
		_ = json.Unmarshal(body, &out)
		return status, body, out, key
	}
	status, body, second, key2 := renewWith(first.Certificate, keyPEM)
	if status != http.StatusCreated {
		t.Fatalf("first renewal: %d %s", status, body)
	}
	if status, body, _, _ := renewWith(first.Certificate, keyPEM); status != http.StatusForbidden || !strings.Contains(string(body), "renewed already") {
		t.Fatalf("second renewal from the same certificate: %d %s, want 403", status, body)
	}
	if status, body, _, _ := renewWith(second.Certificate, key2); status != http.StatusCreated {
		t.Fatalf("renewal from the new certificate: %d %s", status, body)
	}
}

// TestE2EJoinTokenCannotTakeAConfiguredNodesID: a join token cannot enroll
// the id of a node of the core's static list (409 with a JSON error); one
// marked `enroll: true` it can; an admin token asking to replace takes the
// other.
func TestE2EJoinTokenCannotTakeAConfiguredNodesID(t *testing.T) {
	t.Parallel()
	f := newEnrollFleetWith(t, time.Hour, enrollFleetOptions{extra: `clusters:
  - id: prod
    nodes:
      - {id: web-1, addr: "127.0.0.1:1"}
      - {id: web-2, addr: "127.0.0.1:2", enroll: true}
`})
	secret := f.joinSecret("join")
	hc := tlsClient(t, f.pki, "", "", nil)
	csr := func(node string) string {
		c, _, err := tlsutil.NewAgentCSR(node)
		if err != nil {
			t.Fatal(err)
		}
		return string(c)
	}
	status, body := f.post(hc, "/api/v1/enroll", secret, wire.EnrollRequest{NodeID: "web-1", ClusterID: "prod", CSR: csr("web-1")})
	var env wire.ErrorBody
	if err := json.Unmarshal(body, &env); err != nil || status != http.StatusConflict || env.Error.Code != wire.CodeConflict ||
		!strings.Contains(env.Error.Message, "web-1") {
		t.Fatalf("join token on a configured node: %d %s, want 409 naming web-1", status, body)
	}
	if status, body := f.post(hc, "/api/v1/enroll", secret, wire.EnrollRequest{NodeID: "web-2", ClusterID: "prod", CSR: csr("web-2")}); status != http.StatusCreated {
		t.Fatalf("join token on a node marked enroll: true: %d %s", status, body)
	}
	admin := strings.TrimPrefix(f.env[2], "MUSTER_TOKEN=")
	if status, body := f.post(hc, "/api/v1/enroll", admin, wire.EnrollRequest{NodeID: "web-1", ClusterID: "prod", CSR: csr("web-1"), Replace: true}); status != http.StatusCreated {
		t.Fatalf("admin replace: %d %s", status, body)
	}
}
