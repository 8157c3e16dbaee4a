package api

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/musterhq/muster/core/auth"
	"github.com/musterhq/muster/core/enroll"
	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/tlsutil"
	"github.com/musterhq/muster/shared/wire"
)

// testAuthority is the agent CA of the API tests, made once.
type testAuthority struct {
	*tlsutil.CA
	pem []byte
}

var (
	caOnce sync.Once
	caVal  *testAuthority
	caErr  error
)

func testCA(t *testing.T) *testAuthority {
	t.Helper()
	caOnce.Do(func() {
		pair, err := tlsutil.NewCA(time.Now(), 24*time.Hour*365)
		if err != nil {
			caErr = err
			return
		}
		ca, err := tlsutil.ParseCA(pair)
		caVal, caErr = &testAuthority{CA: ca, pem: pair.CertPEM}, err
	})
	if caErr != nil {
		t.Fatal(caErr)
	}
	return caVal
}

// csrFor returns a PEM CSR for node as an agent makes it, and its key.
func csrFor(t *testing.T, node string) (string, []byte) {
	t.Helper()
	csr, key, err := tlsutil.NewAgentCSR(node)
	if err != nil {
		t.Fatal(err)
	}
	return string(csr), key
}

// rawCSR makes a CSR from tmpl with a fresh key.
func rawCSR(t *testing.T, tmpl *x509.CertificateRequest) string {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	der, err := x509.CreateCertificateRequest(rand.Reader, tmpl, key)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}))
}

// joinToken makes a join token through the API and keeps its secret as who.
func (e *env) joinToken(who string, req wire.CreateTokenRequest) wire.TokenSecret {
	e.t.Helper()
	req.Name, req.Roles = who, []string{store.RoleEnroll}
	var out wire.TokenSecret
	e.call(http.MethodPost, "/api/v1/tokens", "admin", req, http.StatusCreated, &out)
	e.secrets[who] = out.Token
	return out
}

// storedToken puts a token straight into the store (for states the API
// cannot make at once: expired, used up) and keeps its secret as name.
func (e *env) storedToken(name string, tok store.Token) {
	e.t.Helper()
	secret, err := auth.NewSecret()
	if err != nil {
		e.t.Fatal(err)
	}
	tok.Name, tok.Hash, tok.CreatedTS, tok.Roles = name, auth.Hash(secret), time.Now().UTC(), []string{store.RoleEnroll}
	e.update(func(ctx context.Context, tx store.Tx) error { return tx.InsertToken(ctx, &tok) })
	e.secrets[name] = secret
}

func (e *env) certs(node string) []store.AgentCert {
	e.t.Helper()
	var out []store.AgentCert
	err := e.st.Read(context.Background(), func(r store.Reader) error {
		var err error
		out, err = r.AgentCerts(context.Background(), "", node)
		return err
	})
	if err != nil {
		e.t.Fatal(err)
	}
	return out
}

func (e *env) usesLeft(name string) int {
	e.t.Helper()
	var list wire.TokenList
	e.call(http.MethodGet, "/api/v1/tokens", "admin", nil, http.StatusOK, &list)
	for _, tk := range list.Tokens {
		if tk.Name == name && tk.UsesLeft != nil {
			return *tk.UsesLeft
		}
	}
	e.t.Fatalf("token %s has no use count", name)
	return 0
}

// TestEnrollSignsForTheTokensClusterAndCountsUses: three nodes enroll with
// one token of three uses; each gets a certificate naming its node and the
// token's cluster, signed by the agent CA, the CA bundle and the gossip
// key; each is a node.enrolled event; the uses go down to 0 and a fourth
// enrollment is refused.
func TestEnrollSignsForTheTokensClusterAndCountsUses(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ca := testCA(t)
	uses := 3
	e.joinToken("join", wire.CreateTokenRequest{ClusterID: "prod", Uses: &uses, TTL: "1h"})
	for i := range 3 {
		node := fmt.Sprintf("web-%d", i)
		csr, _ := csrFor(t, node)
		var out wire.EnrollResponse
		e.call(http.MethodPost, "/api/v1/enroll", "join", wire.EnrollRequest{NodeID: node, ClusterID: "prod", CSR: csr}, http.StatusCreated, &out)
		certs, err := tlsutil.ParseCerts([]byte(out.Certificate))
		if err != nil {
			t.Fatal(err)
		}
		leaf := certs[0]
		pool := x509.NewCertPool()
		pool.AddCert(ca.Cert)
		if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
			t.Fatalf("certificate does not verify for serving: %v", err)
		}
		if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
			t.Fatalf("certificate does not verify as a client: %v", err)
		}
		if err := tlsutil.CheckIdentity(leaf, tlsutil.Agent(node)); err != nil || tlsutil.ClusterOf(leaf) != "prod" || leaf.IsCA {
			t.Fatalf("certificate names %v, cluster %q, CA %v", err, tlsutil.ClusterOf(leaf), leaf.IsCA)
		}
		if out.CABundle != string(ca.pem) || out.GossipKey != "Z29zc2lw" || out.Serial != tlsutil.SerialHex(leaf) {
			t.Fatalf("answer = %+v", out)
		}
		if got := e.usesLeft("join"); got != 2-i {
			t.Fatalf("uses left after %d enrollments = %d", i+1, got)
		}
	}
	if n := len(e.nodeEvents(store.EventNodeEnrolled)); n != 3 {
		t.Fatalf("%d node.enrolled events, want 3", n)
	}
	csr, _ := csrFor(t, "web-9")
	status, body := e.do(http.MethodPost, "/api/v1/enroll", "join", wire.EnrollRequest{NodeID: "web-9", ClusterID: "prod", CSR: csr})
	if status != http.StatusForbidden || !strings.Contains(string(body), "used up") {
		t.Fatalf("fourth enrollment: %d %s, want 403 used up", status, body)
	}
}

// TestEnrollRefusals: each bad token or request is refused with its 4xx,
// the error envelope and a node.enroll_refused event (none for a token the
// core does not know: anyone could send those); nothing is signed and the
// token keeps its uses.
func TestEnrollRefusals(t *testing.T) {
	t.Parallel()
	e := setup(t)
	clock, _ := e.clocked(enroll.Config{})
	uses, none := 5, 0
	past := time.Now().Add(-time.Minute).UTC()
	e.joinToken("join", wire.CreateTokenRequest{ClusterID: "prod", Uses: &uses})
	e.storedToken("expired", store.Token{ClusterID: "prod", ExpiresTS: &past})
	e.storedToken("usedup", store.Token{ClusterID: "prod", UsesLeft: &none})
	e.joinToken("gone", wire.CreateTokenRequest{ClusterID: "prod"})
	e.call(http.MethodDelete, "/api/v1/tokens/gone", "admin", nil, http.StatusNoContent, nil)
	// A node held by a live certificate.
	held, _ := csrFor(t, "held")
	e.call(http.MethodPost, "/api/v1/enroll", "join", wire.EnrollRequest{NodeID: "held", ClusterID: "prod", CSR: held}, http.StatusCreated, nil)
	heldSerial := e.certs("held")[0].Serial

	good := func(node string) string { c, _ := csrFor(t, node); return c }
	cases := []struct {
		name   string
		who    string
		req    wire.EnrollRequest
		status int
		code   string
		says   string
	}{
		{"expired token", "expired", wire.EnrollRequest{NodeID: "n1", ClusterID: "prod", CSR: good("n1")}, 401, wire.CodeUnauthorized, "expired"},
		{"used-up token", "usedup", wire.EnrollRequest{NodeID: "n1", ClusterID: "prod", CSR: good("n1")}, 403, wire.CodeForbidden, "used up"},
		{"revoked token", "gone", wire.EnrollRequest{NodeID: "n1", ClusterID: "prod", CSR: good("n1")}, 401, wire.CodeUnauthorized, "unknown or revoked"},
		{"wrong cluster", "join", wire.EnrollRequest{NodeID: "n1", ClusterID: "stage", CSR: good("n1")}, 403, wire.CodeForbidden, "is for cluster prod, not stage"},
		{"not a join token", "op", wire.EnrollRequest{NodeID: "n1", ClusterID: "prod", CSR: good("n1")}, 403, wire.CodeForbidden, "not a join token"},
		{"CSR for another node", "join", wire.EnrollRequest{NodeID: "n1", ClusterID: "prod", CSR: good("n2")}, 400, wire.CodeBadRequest, "exactly spiffe://muster/agent/n1"},
		{"CSR with extra SANs", "join", wire.EnrollRequest{NodeID: "n1", ClusterID: "prod", CSR: rawCSR(t, &x509.CertificateRequest{
			Subject: pkix.Name{CommonName: "agent.n1"}, URIs: []*url.URL{tlsutil.Agent("n1").URI()}, DNSNames: []string{"core.example.com"}})},
			400, wire.CodeBadRequest, "names hosts"},
		{"CSR with two identities", "join", wire.EnrollRequest{NodeID: "n1", ClusterID: "prod", CSR: rawCSR(t, &x509.CertificateRequest{
			URIs: []*url.URL{tlsutil.Agent("n1").URI(), tlsutil.Core().URI()}})}, 400, wire.CodeBadRequest, "exactly"},
		{"CSR with a CA flag", "join", wire.EnrollRequest{NodeID: "n1", ClusterID: "prod", CSR: rawCSR(t, &x509.CertificateRequest{
			URIs: []*url.URL{tlsutil.Agent("n1").URI()}, ExtraExtensions: []pkix.Extension{caExtension(t)}})}, 400, wire.CodeBadRequest, "basic constraints"},
		{"not a CSR", "join", wire.EnrollRequest{NodeID: "n1", ClusterID: "prod", CSR: "hello"}, 400, wire.CodeBadRequest, "not a PEM"},
		{"bad node id", "join", wire.EnrollRequest{NodeID: "../etc", ClusterID: "prod", CSR: good("n1")}, 400, wire.CodeBadRequest, "node_id"},
		{"node held by a live certificate", "join", wire.EnrollRequest{NodeID: "held", ClusterID: "prod", CSR: good("held")}, 409, wire.CodeConflict, heldSerial},
		{"replace with a join token", "join", wire.EnrollRequest{NodeID: "held", ClusterID: "prod", CSR: good("held"), Replace: true}, 403, wire.CodeForbidden, "replace needs an admin"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			// Each case in a minute of its own: a token's refusals are
			// one event a minute.
			clock.advance(time.Minute)
			before := len(e.nodeEvents(store.EventNodeEnrollRefused))
			status, body := e.do(http.MethodPost, "/api/v1/enroll", c.who, c.req)
			var env wire.ErrorBody
			if err := json.Unmarshal(body, &env); err != nil || status != c.status || env.Error.Code != c.code || !strings.Contains(env.Error.Message, c.says) {
				t.Fatalf("%d %s, want %d %s saying %q", status, body, c.status, c.code, c.says)
			}
			want := before + 1
			if c.who == "gone" {
				want = before
			}
			if after := len(e.nodeEvents(store.EventNodeEnrollRefused)); after != want {
				t.Fatalf("%d refusal events, want %d", after, want)
			}
			if n := len(e.certs("n1")); n != 0 {
				t.Fatalf("%d certificates signed for n1", n)
			}
			if n := len(e.certs("held")); n != 1 {
				t.Fatalf("%d certificates for held, want 1", n)
			}
			if got := e.usesLeft("join"); got != 4 {
				t.Fatalf("join token has %d uses left, want 4", got)
			}
		})
	}
	// An admin may replace the node: the old certificate is revoked.
	e.call(http.MethodPost, "/api/v1/enroll", "admin", wire.EnrollRequest{NodeID: "held", ClusterID: "prod", CSR: good("held"), Replace: true}, http.StatusCreated, nil)
	certs := e.certs("held")
	if len(certs) != 2 || certs[1].Serial != heldSerial || certs[1].RevokedTS == nil || certs[0].RevokedTS != nil {
		t.Fatalf("after replace: %+v", certs)
	}
}

func caExtension(t *testing.T) pkix.Extension {
	t.Helper()
	v, err := asn1.Marshal(struct {
		IsCA bool `asn1:"optional"`
	}{true})
	if err != nil {
		t.Fatal(err)
	}
	return pkix.Extension{Id: asn1.ObjectIdentifier{2, 5, 29, 19}, Critical: true, Value: v}
}

// tlsAPI serves the API over TLS as the core does with agents_ca: the
// core's certificate, and client certificates requested, not required.
func (e *env) tlsAPI() *httptest.Server {
	e.t.Helper()
	ca := testCA(e.t)
	pair, err := ca.Issue(tlsutil.Core(), []string{"127.0.0.1"}, time.Now(), time.Hour)
	if err != nil {
		e.t.Fatal(err)
	}
	cert, err := tls.X509KeyPair(pair.CertPEM, pair.KeyPEM)
	if err != nil {
		e.t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	ts := httptest.NewUnstartedServer(e.srv.Handler())
	ts.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	tlsutil.RequestAgentCerts(pool, []*x509.Certificate{ca.Cert}, nil)(ts.TLS)
	ts.StartTLS()
	e.t.Cleanup(ts.Close)
	return ts
}

// renew posts a renewal over mutual TLS with the agent pair given.
func renew(t *testing.T, ts *httptest.Server, certPEM, keyPEM []byte, node string) (int, []byte, []byte) {
	t.Helper()
	ca := testCA(t)
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	tc := &tls.Config{RootCAs: pool}
	if certPEM != nil {
		cert, err := tls.X509KeyPair(certPEM, keyPEM)
		if err != nil {
			t.Fatal(err)
		}
		// Presented whatever CAs the server names, as a forger would.
		tc.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &cert, nil }
	}
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: tc}}
	csr, newKey := csrFor(t, node)
	b, _ := json.Marshal(wire.RenewRequest{CSR: csr})
	resp, err := hc.Post(ts.URL+"/api/v1/enroll/renew", "application/json", strings.NewReader(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out json.RawMessage
	_ = json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out, newKey
}

// TestRenewOverMutualTLS: an enrolled agent renews with its certificate as
// client certificate and gets a new one for the same node and cluster; a
// renewal without a certificate, with an expired one, with one the core did
// not sign by enrollment, or after the node was revoked is refused with its
// 4xx, nothing is signed, and only a certificate the agent CA signed makes
// an event.
func TestRenewOverMutualTLS(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ca := testCA(t)
	ts := e.tlsAPI()
	e.joinToken("join", wire.CreateTokenRequest{ClusterID: "prod"})
	csr, key := csrFor(t, "app-1")
	var first wire.EnrollResponse
	e.call(http.MethodPost, "/api/v1/enroll", "join", wire.EnrollRequest{NodeID: "app-1", ClusterID: "prod", CSR: csr}, http.StatusCreated, &first)

	status, body, key2 := renew(t, ts, []byte(first.Certificate), key, "app-1")
	var second wire.EnrollResponse
	if err := json.Unmarshal(body, &second); status != http.StatusCreated || err != nil || second.Serial == first.Serial ||
		second.NodeID != "app-1" || second.ClusterID != "prod" {
		t.Fatalf("renewal: %d %s", status, body)
	}
	if n := len(e.nodeEvents(store.EventNodeCertRenewed)); n != 1 {
		t.Fatalf("%d node.cert_renewed events, want 1", n)
	}

	// Expired: signed by the CA two hours ago for one hour, and recorded.
	req, _ := tlsutil.ParseAgentCSR([]byte(csr), "app-1")
	oldPEM, old, err := ca.SignAgent(req, "app-1", "prod", time.Now().Add(-2*time.Hour), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	e.update(func(ctx context.Context, tx store.Tx) error {
		return tx.InsertAgentCert(ctx, &store.AgentCert{Serial: tlsutil.SerialHex(old), ClusterID: "prod", NodeID: "app-1",
			NotBefore: old.NotBefore, NotAfter: old.NotAfter, IssuedTS: old.NotBefore, IssuedBy: "join"})
	})
	// Not from enrollment: made like `muster tls cert create`, for the
	// same node, with the same CA.
	handMade, err := ca.Issue(tlsutil.Agent("app-1"), nil, time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	// (It has server authentication only: refused as a client certificate.)
	// Forged: another CA's certificate naming app-1.
	otherPair, err := tlsutil.NewCA(time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	otherCA, err := tlsutil.ParseCA(otherPair)
	if err != nil {
		t.Fatal(err)
	}
	forgedPEM, _, err := otherCA.SignAgent(req, "app-1", "prod", time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	// Only a certificate the agent CA signed (an expired one included: its
	// signature verifies, and the connection proved its key) names the node
	// of an event; anything else is logged only.
	cases := []struct {
		name      string
		cert, key []byte
		status    int
		says      string
		events    int
	}{
		{"no certificate", nil, nil, 401, "mutual TLS", 0},
		{"expired certificate", oldPEM, key, 401, "expired", 1},
		{"hand-made certificate", handMade.CertPEM, handMade.KeyPEM, 401, "does not verify", 0},
		{"another CA's certificate", forgedPEM, key, 401, "does not verify", 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before, signed := len(e.nodeEvents(store.EventNodeRenewRefused)), len(e.certs("app-1"))
			status, body, _ := renew(t, ts, c.cert, c.key, "app-1")
			if status != c.status || !strings.Contains(string(body), c.says) {
				t.Fatalf("%d %s, want %d saying %q", status, body, c.status, c.says)
			}
			evs := e.nodeEvents(store.EventNodeRenewRefused)
			if n := len(evs); n != before+c.events {
				t.Fatalf("%d refusal events, want %d", n, before+c.events)
			}
			if c.events > 0 && (evs[len(evs)-1].NodeID != "app-1" || evs[len(evs)-1].ClusterID != "prod") {
				t.Fatalf("the refusal event names %s/%s, want prod/app-1", evs[len(evs)-1].ClusterID, evs[len(evs)-1].NodeID)
			}
			if n := len(e.certs("app-1")); n != signed {
				t.Fatalf("%d certificates, want %d", n, signed)
			}
		})
	}

	// Revoked: the node's certificates go on the list; renewing is refused
	// and the node shows revoked.
	var rr wire.RevokeResult
	e.call(http.MethodPost, "/api/v1/clusters/prod/nodes/app-1/revoke", "admin", wire.RevokeRequest{Reason: "stolen laptop"}, http.StatusOK, &rr)
	if len(rr.Serials) != 3 {
		t.Fatalf("revoked %v, want the 3 certificates of app-1", rr.Serials)
	}
	if !e.enroll.Revoked(second.Serial) || !e.enroll.Revoked(first.Serial) {
		t.Fatal("the revocation list in memory does not hold the serials")
	}
	status, body, _ = renew(t, ts, []byte(second.Certificate), key2, "app-1")
	if status != http.StatusForbidden || !strings.Contains(string(body), "revoked") {
		t.Fatalf("renewal after revocation: %d %s", status, body)
	}
	// The node record shows it (a node the store knows).
	e.update(func(ctx context.Context, tx store.Tx) error {
		return tx.PutNode(ctx, &store.Node{ClusterID: "prod", ID: "app-1", Addr: "127.0.0.1:9", Source: store.SourceGossip, Status: store.NodeUnknown})
	})
	var nl wire.NodeList
	e.call(http.MethodGet, "/api/v1/nodes?cluster=prod", "viewer", nil, http.StatusOK, &nl)
	found := false
	for _, n := range nl.Nodes {
		if n.ID == "app-1" {
			found = n.Revoked && n.RevokeReason == "stolen laptop"
		} else if n.Revoked {
			t.Errorf("node %s shows revoked", n.ID)
		}
	}
	if !found {
		t.Fatalf("node app-1 is not shown revoked: %+v", nl.Nodes)
	}
	if n := len(e.nodeEvents(store.EventNodeRevoked)); n != 1 {
		t.Fatalf("%d node.revoked events, want 1", n)
	}
	// Re-enrolling needs a token, and a fresh one works now that the node
	// id is free.
	csr2, _ := csrFor(t, "app-1")
	e.call(http.MethodPost, "/api/v1/enroll", "join", wire.EnrollRequest{NodeID: "app-1", ClusterID: "prod", CSR: csr2}, http.StatusCreated, nil)
	for _, c := range e.certs("app-1") {
		if c.Serial == tlsutil.SerialHex(old) {
			t.Fatal("the expired certificate was kept after the node enrolled again")
		}
	}
	var again wire.NodeList
	e.call(http.MethodGet, "/api/v1/nodes?cluster=prod", "viewer", nil, http.StatusOK, &again)
	for _, n := range again.Nodes {
		if n.ID == "app-1" && n.Revoked {
			t.Fatalf("a node enrolled again still shows revoked: %+v", e.certs("app-1"))
		}
	}
}

// TestRevokeUnknownNode: a node without certificates from enrollment is 404.
func TestRevokeUnknownNode(t *testing.T) {
	t.Parallel()
	e := setup(t)
	status, body := e.do(http.MethodPost, "/api/v1/clusters/prod/nodes/db-1/revoke", "admin", nil)
	if status != http.StatusNotFound || !strings.Contains(string(body), "no certificate from enrollment") {
		t.Fatalf("%d %s", status, body)
	}
}

// FuzzDecodeEnroll: the enrollment decoder and the CSR check never panic,
// and what they accept is a request for the node it names.
func FuzzDecodeEnroll(f *testing.F) {
	csr, _, err := tlsutil.NewAgentCSR("n1")
	if err != nil {
		f.Fatal(err)
	}
	good, _ := json.Marshal(wire.EnrollRequest{NodeID: "n1", ClusterID: "prod", CSR: string(csr)})
	for _, seed := range []string{
		string(good),
		`{}`,
		`{"node_id":"n1","cluster_id":"prod","csr":"-----BEGIN CERTIFICATE REQUEST-----\nAAAA\n-----END CERTIFICATE REQUEST-----\n"}`,
		`{"node_id":"n1","cluster_id":"prod","csr":"x","replace":true}`,
		`{"node_id":"n1","cluster_id":"prod","csr":"x","replaces":"n0"}`,
		`{"node_id":"n1","cluster_id":"prod","csr":"x","extra":1}`,
		`{"node_id":1}`,
		`[]`,
		`{"node_id":"n1","cluster_id":"prod","csr":"x"}{}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		req, err := decodeEnroll(b)
		if err != nil {
			return
		}
		if req.NodeID == "" || req.ClusterID == "" || req.CSR == "" {
			t.Fatalf("accepted %+v", req)
		}
		if c, err := tlsutil.ParseAgentCSR([]byte(req.CSR), req.NodeID); err == nil {
			if len(c.URIs) != 1 || c.URIs[0].String() != tlsutil.Agent(req.NodeID).URI().String() {
				t.Fatalf("accepted a CSR for %v as %s", c.URIs, req.NodeID)
			}
		}
	})
}

// TestEnrollRefusesNodeIDOfAnotherCluster: a join token for cluster dev
// cannot enroll the node id db-1 that cluster prod has (no live certificate
// holds it): 409 naming prod, nothing signed, the token keeps its use.
func TestEnrollRefusesNodeIDOfAnotherCluster(t *testing.T) {
	t.Parallel()
	e := setup(t)
	uses := 2
	e.joinToken("dev-join", wire.CreateTokenRequest{ClusterID: "dev", Uses: &uses})
	csr, _ := csrFor(t, "db-1")
	status, body := e.do(http.MethodPost, "/api/v1/enroll", "dev-join", wire.EnrollRequest{NodeID: "db-1", ClusterID: "dev", CSR: csr})
	var env wire.ErrorBody
	if err := json.Unmarshal(body, &env); err != nil || status != http.StatusConflict || env.Error.Code != wire.CodeConflict ||
		!strings.Contains(env.Error.Message, "cluster prod") {
		t.Fatalf("%d %s, want 409 naming cluster prod", status, body)
	}
	if n := len(e.certs("db-1")); n != 0 {
		t.Fatalf("%d certificates signed for db-1", n)
	}
	if got := e.usesLeft("dev-join"); got != 2 {
		t.Fatalf("the token has %d uses left, want 2", got)
	}
	// The same id in its own cluster is enrolled.
	// (db-1 is in the static list: only an admin's replace takes it.)
	e.call(http.MethodPost, "/api/v1/enroll", "admin", wire.EnrollRequest{NodeID: "db-1", ClusterID: "prod", CSR: csr, Replace: true}, http.StatusCreated, nil)
}

// TestEnrollRefusalEventsPerTokenAtMostOneAMinute: refusals of an expired
// or used-up join token are all refused, but write at most one
// node.enroll_refused event and one log line per token a minute.
func TestEnrollRefusalEventsPerTokenAtMostOneAMinute(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	now := time.Now()
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	e := setup(t)
	ca := testCA(t)
	logs := &syncBuffer{}
	e.useEnroll(enroll.New(enroll.Config{CA: ca.CA, Bundle: ca.pem, Now: clock}, e.st, slog.New(slog.NewTextHandler(logs, nil))))
	past, none := now.Add(-time.Minute).UTC(), 0
	e.storedToken("expired", store.Token{ClusterID: "prod", ExpiresTS: &past})
	e.storedToken("usedup", store.Token{ClusterID: "prod", UsesLeft: &none})
	csr, _ := csrFor(t, "n1")
	try := func(who string, want int) {
		t.Helper()
		status, body := e.do(http.MethodPost, "/api/v1/enroll", who, wire.EnrollRequest{NodeID: "n1", ClusterID: "prod", CSR: csr})
		if status != want {
			t.Fatalf("%s: %d %s, want %d", who, status, body, want)
		}
	}
	count := func(who string) int {
		n := 0
		for _, ev := range e.nodeEvents(store.EventNodeEnrollRefused) {
			if ev.Actor == who {
				n++
			}
		}
		return n
	}
	for range 5 {
		try("expired", http.StatusUnauthorized)
		try("usedup", http.StatusForbidden)
	}
	if a, b := count("expired"), count("usedup"); a != 1 || b != 1 {
		t.Fatalf("%d and %d refusal events after five tries each, want 1 each", a, b)
	}
	advance(61 * time.Second)
	try("expired", http.StatusUnauthorized)
	try("expired", http.StatusUnauthorized)
	if a := count("expired"); a != 2 {
		t.Fatalf("%d refusal events a minute later, want 2", a)
	}
	if n := strings.Count(logs.String(), "enroll: refused"); n != 3 {
		t.Fatalf("%d refusals logged, want one per event (3):\n%s", n, logs.String())
	}
}
