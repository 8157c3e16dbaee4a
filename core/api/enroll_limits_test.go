package api

import (
	"crypto/x509"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/musterhq/muster/core/enroll"
	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/wire"
)

// fakeClock is a clock the enrollment tests move by hand.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// clocked replaces the enrollment service of e with one on a clock moved by
// hand, logging to the returned buffer.
func (e *env) clocked(cfg enroll.Config) (*fakeClock, *syncBuffer) {
	e.t.Helper()
	clock := &fakeClock{now: time.Now()}
	logs := &syncBuffer{}
	ca := testCA(e.t)
	cfg.CA, cfg.Bundle, cfg.Now = ca.CA, ca.pem, clock.Now
	e.useEnroll(enroll.New(cfg, e.st, slog.New(slog.NewTextHandler(logs, nil))))
	return clock, logs
}

// refusalsBy returns the refusal events of type typ whose actor is who.
func (e *env) refusalsBy(typ, who string) []store.Event {
	var out []store.Event
	for _, ev := range e.nodeEvents(typ) {
		if ev.Actor == who {
			out = append(out, ev)
		}
	}
	return out
}

// countOf is the count of refusals an event stands for.
func countOf(t *testing.T, ev store.Event) int {
	t.Helper()
	n, ok := ev.Data["count"].(float64)
	if !ok {
		if i, ok := ev.Data["count"].(int); ok {
			return i
		}
		t.Fatalf("event %d has no count: %v", ev.Seq, ev.Data)
	}
	return int(n)
}

// TestRefusalsOfALiveJoinTokenAreOneEventAMinuteWithACount: a live join
// token refused again and again (a bad CSR, a held node id) writes one
// node.enroll_refused event a minute, the next carrying the count of the
// refusals held back; neither the events nor the log echo the CSR.
func TestRefusalsOfALiveJoinTokenAreOneEventAMinuteWithACount(t *testing.T) {
	t.Parallel()
	e := setup(t)
	clock, logs := e.clocked(enroll.Config{})
	e.joinToken("join", wire.CreateTokenRequest{ClusterID: "prod"})
	// A CSR asking for an identity padded with a marker, as the flood did.
	marker := strings.Repeat("CSRMARK", 1000)
	bad := rawCSR(t, &x509.CertificateRequest{URIs: []*url.URL{{Scheme: "spiffe", Host: "muster", Path: "/agent/" + marker}}})
	for range 50 {
		status, body := e.do(http.MethodPost, "/api/v1/enroll", "join", wire.EnrollRequest{NodeID: "n1", ClusterID: "prod", CSR: bad})
		if status != http.StatusBadRequest {
			t.Fatalf("%d %s, want 400", status, body)
		}
	}
	evs := e.refusalsBy(store.EventNodeEnrollRefused, "join")
	if len(evs) != 1 || countOf(t, evs[0]) != 1 {
		t.Fatalf("%d refusal events after 50 refusals, want 1 counting 1", len(evs))
	}
	clock.advance(61 * time.Second)
	status, _ := e.do(http.MethodPost, "/api/v1/enroll", "join", wire.EnrollRequest{NodeID: "n1", ClusterID: "prod", CSR: bad})
	if status != http.StatusBadRequest {
		t.Fatalf("%d, want 400", status)
	}
	evs = e.refusalsBy(store.EventNodeEnrollRefused, "join")
	if len(evs) != 2 || countOf(t, evs[1]) != 50 {
		t.Fatalf("%d refusal events a minute later, want 2, the second counting 50", len(evs))
	}
	for _, ev := range evs {
		if b, _ := json.Marshal(ev); strings.Contains(string(b), "CSRMARK") {
			t.Fatalf("a refusal event echoes the CSR (%d bytes)", len(b))
		}
	}
	if strings.Contains(logs.String(), "CSRMARK") {
		t.Fatal("the log echoes the CSR")
	}
	if n := strings.Count(logs.String(), "enroll: refused"); n != 2 {
		t.Fatalf("%d refusals logged, want one per event (2):\n%s", n, logs.String())
	}
}

// TestRenewRefusalsAreOneEventAMinutePerNode: a revoked certificate
// asking again and again for renewal writes one node.renew_refused event a
// minute; another node's certificate has its own minute.
func TestRenewRefusalsAreOneEventAMinutePerNode(t *testing.T) {
	t.Parallel()
	e := setup(t)
	clock, _ := e.clocked(enroll.Config{})
	ts := e.tlsAPI()
	e.joinToken("join", wire.CreateTokenRequest{ClusterID: "prod"})
	certs := map[string]wire.EnrollResponse{}
	keys := map[string][]byte{}
	for _, node := range []string{"app-1", "app-2"} {
		csr, key := csrFor(t, node)
		var out wire.EnrollResponse
		e.call(http.MethodPost, "/api/v1/enroll", "join", wire.EnrollRequest{NodeID: node, ClusterID: "prod", CSR: csr}, http.StatusCreated, &out)
		certs[node], keys[node] = out, key
		e.call(http.MethodPost, fmt.Sprintf("/api/v1/clusters/prod/nodes/%s/revoke", node), "admin", nil, http.StatusOK, nil)
	}
	for range 20 {
		for _, node := range []string{"app-1", "app-2"} {
			if status, body, _ := renew(t, ts, []byte(certs[node].Certificate), keys[node], node); status != http.StatusForbidden {
				t.Fatalf("%s: %d %s, want 403", node, status, body)
			}
		}
	}
	for _, node := range []string{"app-1", "app-2"} {
		if evs := e.refusalsBy(store.EventNodeRenewRefused, node); len(evs) != 1 {
			t.Fatalf("%s: %d renewal refusal events after 20 refusals, want 1", node, len(evs))
		}
	}
	clock.advance(time.Minute)
	renew(t, ts, []byte(certs["app-1"].Certificate), keys["app-1"], "app-1")
	if evs := e.refusalsBy(store.EventNodeRenewRefused, "app-1"); len(evs) != 2 || countOf(t, evs[1]) != 20 {
		t.Fatalf("%d renewal refusal events a minute later, want 2, the second counting 20: %+v", len(evs), evs)
	}
}

// TestRenewRefusalsOfOneNodeAreOneEventAMinuteWhateverTheSerial: a node
// that renewed many times holds as many retired certificates; asking
// renewal with each in turn, as a flood cycling serials past the
// limiter's bound would, writes one node.renew_refused event a minute for
// the node, not one per serial. The same once the certificates expired.
func TestRenewRefusalsOfOneNodeAreOneEventAMinuteWhateverTheSerial(t *testing.T) {
	t.Parallel()
	e := setup(t)
	clock, _ := e.clocked(enroll.Config{})
	ts := e.tlsAPI()
	e.joinToken("join", wire.CreateTokenRequest{ClusterID: "prod"})
	csr, key := csrFor(t, "app-1")
	var cur wire.EnrollResponse
	e.call(http.MethodPost, "/api/v1/enroll", "join", wire.EnrollRequest{NodeID: "app-1", ClusterID: "prod", CSR: csr}, http.StatusCreated, &cur)
	type pair struct{ cert, key []byte }
	var retired []pair
	for range 6 {
		status, body, newKey := renew(t, ts, []byte(cur.Certificate), key, "app-1")
		if status != http.StatusCreated {
			t.Fatalf("renewal: %d %s", status, body)
		}
		retired = append(retired, pair{[]byte(cur.Certificate), key})
		cur, key = wire.EnrollResponse{}, newKey
		if err := json.Unmarshal(body, &cur); err != nil {
			t.Fatal(err)
		}
	}
	for range 3 {
		for _, p := range retired {
			if status, body, _ := renew(t, ts, p.cert, p.key, "app-1"); status != http.StatusForbidden {
				t.Fatalf("a retired certificate: %d %s, want 403", status, body)
			}
		}
	}
	if evs := e.refusalsBy(store.EventNodeRenewRefused, "app-1"); len(evs) != 1 {
		t.Fatalf("%d renewal refusal events from %d retired certificates within a minute, want 1", len(evs), len(retired))
	}
	// Past every certificate's end: expired, still one event a minute.
	clock.advance(enroll.DefaultLifetime + time.Hour)
	for _, p := range append(retired, pair{[]byte(cur.Certificate), key}) {
		if status, body, _ := renew(t, ts, p.cert, p.key, "app-1"); status != http.StatusUnauthorized && status != http.StatusForbidden {
			t.Fatalf("an expired certificate: %d %s, want 401 or 403", status, body)
		}
	}
	evs := e.refusalsBy(store.EventNodeRenewRefused, "app-1")
	if len(evs) != 2 || countOf(t, evs[1]) != 3*len(retired) {
		t.Fatalf("%d renewal refusal events after the certificates expired, want 2, the second counting %d: %+v", len(evs), 3*len(retired), evs)
	}
}

// TestUnknownCallersAreOneLogLineAMinute: enrollments with no known token
// write no event and one log line a minute, the next with the count.
func TestUnknownCallersAreOneLogLineAMinute(t *testing.T) {
	t.Parallel()
	e := setup(t)
	clock, logs := e.clocked(enroll.Config{})
	e.secrets["nobody"] = "not-a-token"
	csr, _ := csrFor(t, "n1")
	for range 100 {
		if status, body := e.do(http.MethodPost, "/api/v1/enroll", "nobody", wire.EnrollRequest{NodeID: "n1", ClusterID: "prod", CSR: csr}); status != http.StatusUnauthorized {
			t.Fatalf("%d %s, want 401", status, body)
		}
	}
	if n := strings.Count(logs.String(), "enroll: refused"); n != 1 {
		t.Fatalf("%d log lines after 100 unknown callers, want 1:\n%s", n, logs.String())
	}
	clock.advance(time.Minute)
	e.do(http.MethodPost, "/api/v1/enroll", "nobody", wire.EnrollRequest{NodeID: "n1", ClusterID: "prod", CSR: csr})
	if n := strings.Count(logs.String(), "enroll: refused"); n != 2 || !strings.Contains(logs.String(), "count=100") {
		t.Fatalf("%d log lines a minute later, want 2, the second with count=100:\n%s", n, logs.String())
	}
	if n := len(e.nodeEvents(store.EventNodeEnrollRefused)); n != 0 {
		t.Fatalf("%d refusal events for unknown callers, want none", n)
	}
}

// TestJoinTokenCannotTakeTheIDOfAKnownOrConfiguredNode: a join token cannot
// enroll the id of a node the core knows without a certificate from
// enrollment (db-2, announced by gossip with a hand-made certificate) nor
// of a configured node (web-1): 409 with a JSON error, nothing signed, the
// token keeps its uses. A configured node marked for enrollment (web-2)
// is enrolled, and an admin token asking to replace takes db-2.
func TestJoinTokenCannotTakeTheIDOfAKnownOrConfiguredNode(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.clocked(enroll.Config{Configured: map[string]bool{"prod/web-1": false, "prod/web-2": true}})
	uses := 5
	e.joinToken("join", wire.CreateTokenRequest{ClusterID: "prod", Uses: &uses})
	for _, node := range []string{"db-2", "db-1", "web-1"} {
		csr, _ := csrFor(t, node)
		status, body := e.do(http.MethodPost, "/api/v1/enroll", "join", wire.EnrollRequest{NodeID: node, ClusterID: "prod", CSR: csr})
		var env wire.ErrorBody
		if err := json.Unmarshal(body, &env); err != nil || status != http.StatusConflict || env.Error.Code != wire.CodeConflict ||
			!strings.Contains(env.Error.Message, node) {
			t.Fatalf("%s: %d %s, want 409 naming the node", node, status, body)
		}
		if n := len(e.certs(node)); n != 0 {
			t.Fatalf("%s: %d certificates signed", node, n)
		}
		// Replace needs an admin token: a join token asking is refused.
		status, body = e.do(http.MethodPost, "/api/v1/enroll", "join", wire.EnrollRequest{NodeID: node, ClusterID: "prod", CSR: csr, Replace: true})
		if status != http.StatusForbidden {
			t.Fatalf("%s with replace: %d %s, want 403", node, status, body)
		}
	}
	if got := e.usesLeft("join"); got != 5 {
		t.Fatalf("the token has %d uses left, want 5", got)
	}
	csr, _ := csrFor(t, "web-2")
	e.call(http.MethodPost, "/api/v1/enroll", "join", wire.EnrollRequest{NodeID: "web-2", ClusterID: "prod", CSR: csr}, http.StatusCreated, nil)
	csr, _ = csrFor(t, "db-2")
	e.call(http.MethodPost, "/api/v1/enroll", "admin", wire.EnrollRequest{NodeID: "db-2", ClusterID: "prod", CSR: csr, Replace: true}, http.StatusCreated, nil)
}

// TestRenewalRetiresTheCertificateItReplaces: a certificate renews once; a
// second renewal from it is refused (403), it leaves the revocation list's
// grace when enroll.RenewalGrace ends, and the new certificate renews.
func TestRenewalRetiresTheCertificateItReplaces(t *testing.T) {
	t.Parallel()
	e := setup(t)
	clock, _ := e.clocked(enroll.Config{})
	ts := e.tlsAPI()
	e.joinToken("join", wire.CreateTokenRequest{ClusterID: "prod"})
	csr, key := csrFor(t, "app-1")
	var first wire.EnrollResponse
	e.call(http.MethodPost, "/api/v1/enroll", "join", wire.EnrollRequest{NodeID: "app-1", ClusterID: "prod", CSR: csr}, http.StatusCreated, &first)
	status, body, key2 := renew(t, ts, []byte(first.Certificate), key, "app-1")
	var second wire.EnrollResponse
	if err := json.Unmarshal(body, &second); status != http.StatusCreated || err != nil {
		t.Fatalf("first renewal: %d %s", status, body)
	}
	status, body, _ = renew(t, ts, []byte(first.Certificate), key, "app-1")
	if status != http.StatusForbidden || !strings.Contains(string(body), "renewed") {
		t.Fatalf("second renewal from the same certificate: %d %s, want 403 saying it was renewed", status, body)
	}
	if n := len(e.certs("app-1")); n != 2 {
		t.Fatalf("%d certificates for app-1, want 2", n)
	}
	if e.enroll.Revoked(first.Serial) {
		t.Fatal("the replaced certificate is refused before its grace ends")
	}
	clock.advance(enroll.RenewalGrace)
	if !e.enroll.Revoked(first.Serial) || e.enroll.Revoked(second.Serial) {
		t.Fatalf("after the grace: replaced revoked %v (want true), new revoked %v (want false)",
			e.enroll.Revoked(first.Serial), e.enroll.Revoked(second.Serial))
	}
	if status, body, _ := renew(t, ts, []byte(second.Certificate), key2, "app-1"); status != http.StatusCreated {
		t.Fatalf("renewal from the new certificate: %d %s", status, body)
	}
}
