// Package apiservertest has the fixtures of tests that run a server of an
// API, a core or an agent, in process: running it until the test ends, a
// certificate authority with its certificates, a TLS client, a loopback
// address free now, and a request left unfinished. It is imported by tests
// only (docs/architecture.md, "Arrows").
package apiservertest

import (
	"bufio"
	"context"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/musterhq/muster/shared/tlsutil"
)

// ReadyTimeout bounds how long Run waits for the server to be ready.
const ReadyTimeout = 30 * time.Second

// Server is what Run runs: a core (core.Core) or an agent (agent.Agent).
type Server interface {
	Run(ctx context.Context) error
	Ready() <-chan struct{}
}

// Run runs s until the test ends and returns once it is ready (Start).
func Run(t testing.TB, s Server) { Start(t, s) }

// Start runs s until stop is called or the test ends, and returns once it
// is ready. Run ending before that, or not ready within ReadyTimeout,
// fails the test at once. stop cancels Run and waits for it to return; it
// is idempotent, the test's cleanup calls it, and an error Run returns
// fails the test.
func Start(t testing.TB, s Server) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	select {
	case <-s.Ready():
	case err := <-done:
		cancel()
		t.Fatalf("Run ended before the server was ready: %v", err)
	case <-time.After(ReadyTimeout):
		cancel()
		<-done
		t.Fatalf("the server was not ready within %s", ReadyTimeout)
	}
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Run: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// PKI is a directory made by NewPKI: a CA (ca.pem, ca-key.pem) and the
// certificates it signed, named as `muster tls cert create` names them
// (core.pem, core-key.pem, agent-<node>.pem, agent-<node>-key.pem).
type PKI string

// NewPKI makes a CA in a temporary directory and a certificate for each of
// ids, valid for leaf from now.
func NewPKI(t testing.TB, leaf time.Duration, ids ...tlsutil.Identity) PKI {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "tls")
	if _, err := tlsutil.CreateCA(dir, time.Now(), tlsutil.CAValidity); err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		if _, err := tlsutil.CreateCert(dir, id, nil, time.Now(), leaf); err != nil {
			t.Fatal(err)
		}
	}
	return PKI(dir)
}

// File is the path of the file name of the directory.
func (p PKI) File(name string) string { return filepath.Join(string(p), name) }

// Client is an HTTP client that trusts the CA in caFile and presents the
// certificate of certFile and keyFile ("" for none); its idle connections
// are closed when the test ends.
func Client(t testing.TB, caFile, certFile, keyFile string) *http.Client {
	t.Helper()
	tc, err := tlsutil.ClientConfig(caFile, certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	tr := &http.Transport{TLSClientConfig: tc}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 10 * time.Second}
}

// FreeAddr is a loopback host:port free now (a listener opened and closed).
func FreeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// HoldRequest starts a request on c that the API's handler is left reading:
// its headers ask for "100 Continue" before the body, which the server sends
// once the handler reads the body, and the body never comes.
func HoldRequest(t testing.TB, c net.Conn, token string) {
	t.Helper()
	req := "POST /api/v1/actions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n" +
		"Content-Length: 100\r\nExpect: 100-continue\r\n"
	if token != "" {
		req += "Authorization: Bearer " + token + "\r\n"
	}
	if _, err := c.Write([]byte(req + "\r\n")); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "HTTP/1.1 100") {
		t.Fatalf("the handler did not start reading the body: %q, %v", line, err)
	}
}
