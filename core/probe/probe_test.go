package probe_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/musterhq/muster/core/probe"
	"github.com/musterhq/muster/shared/wire"
)

func TestHTTPGateChecksStatusAndBody(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/down" {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
		_, _ = w.Write([]byte("status: green"))
	}))
	t.Cleanup(srv.Close)
	p := probe.New(probe.Config{AllowLoopback: true})
	for _, tc := range []struct {
		name string
		g    wire.HTTPGate
		pass bool
		want string
	}{
		{"ok", wire.HTTPGate{URL: srv.URL + "/health"}, true, "answered 200"},
		{"body", wire.HTTPGate{URL: srv.URL + "/health", BodyContains: "green"}, true, "answered 200"},
		{"body missing", wire.HTTPGate{URL: srv.URL + "/health", BodyContains: "red"}, false, `without "red"`},
		{"status", wire.HTTPGate{URL: srv.URL + "/down"}, false, "answered 503, not 200"},
		{"expected status", wire.HTTPGate{URL: srv.URL + "/down", ExpectStatus: 503}, true, "answered 503"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, pass, why := p.Gate(context.Background(), wire.Gate{HTTP: &tc.g}, time.Second)
			if pass != tc.pass || !strings.Contains(why, tc.want) {
				t.Fatalf("pass %v (%s), want %v with %q", pass, why, tc.pass, tc.want)
			}
		})
	}
}

func TestLoopbackAndLinkLocalAreRefusedUnlessAllowed(t *testing.T) {
	t.Parallel()
	hit := false
	var mu sync.Mutex
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		mu.Lock()
		hit = true
		mu.Unlock()
	}))
	t.Cleanup(srv.Close)
	p := probe.New(probe.Config{})
	for _, u := range []string{srv.URL + "/x", "http://169.254.169.254/latest/meta-data", "http://localhost:1/x", "http://[::1]:1/"} {
		if _, pass, why := p.Gate(context.Background(), wire.Gate{HTTP: &wire.HTTPGate{URL: u}}, time.Second); pass ||
			!strings.Contains(why, "loopback or link-local") {
			t.Fatalf("gate on %s: pass %v (%s), want refused", u, pass, why)
		}
		if _, ok, why := p.Call(context.Background(), wire.Call{HTTP: &wire.HTTPCall{URL: u}}, time.Second); ok ||
			!strings.Contains(why, "loopback or link-local") {
			t.Fatalf("call to %s: ok %v (%s), want refused", u, ok, why)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if hit {
		t.Fatal("a refused request reached the server")
	}
}

func TestPrometheusGateComparesEverySample(t *testing.T) {
	t.Parallel()
	answer := `{"status":"success","data":{"resultType":"vector","result":[{"metric":{"instance":"a"},"value":[1,"0.002"]}]}}`
	var mu sync.Mutex
	var query string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		if r.URL.Path != "/api/v1/query" {
			http.NotFound(w, r)
			return
		}
		query = r.URL.Query().Get("query")
		_, _ = w.Write([]byte(answer))
	}))
	t.Cleanup(srv.Close)
	p := probe.New(probe.Config{AllowLoopback: true})
	g := wire.Gate{Prometheus: &wire.PrometheusGate{URL: srv.URL, Query: `errors{node="n1"}`, Expect: "< 0.01"}}
	value, pass, why := p.Gate(context.Background(), g, time.Second)
	if !pass || value != `{instance="a"} 0.002` || query != `errors{node="n1"}` {
		t.Fatalf("value %q pass %v (%s), query %q", value, pass, why, query)
	}
	mu.Lock()
	answer = `{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1,"0.5"]}]}}`
	mu.Unlock()
	if value, pass, why := p.Gate(context.Background(), g, time.Second); pass || value != "0.5" || why != "0.5 is not < 0.01" {
		t.Fatalf("value %q pass %v (%s), want failing", value, pass, why)
	}
	mu.Lock()
	answer = `{"status":"success","data":{"resultType":"vector","result":[]}}`
	mu.Unlock()
	if _, pass, why := p.Gate(context.Background(), g, time.Second); pass || why != "the query has no samples" {
		t.Fatalf("pass %v (%s), want failing without samples", pass, why)
	}
}

func TestCallSendsSecretsButKeepsThemOutOfItsReason(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := filepath.Join(dir, "lb-token")
	if err := os.WriteFile(file, []byte("s3cr3t\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	open := filepath.Join(dir, "open")
	if err := os.WriteFile(open, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var got, method string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got, method = r.Header.Get("Authorization"), r.Method
		mu.Unlock()
		w.WriteHeader(http.StatusForbidden)
		_, _ = w.Write([]byte("bad token " + r.Header.Get("Authorization"))) // echoes it
	}))
	t.Cleanup(srv.Close)
	p := probe.New(probe.Config{AllowLoopback: true, Secrets: map[string]probe.Secret{
		"lb-token": {File: file, Hosts: []string{"127.0.0.1"}}, "open": {File: open, Hosts: []string{"127.0.0.1"}},
		"elsewhere": {File: file, Hosts: []string{"lb.example"}}}})
	c := wire.Call{HTTP: &wire.HTTPCall{Method: "PUT", URL: srv.URL + "/out",
		Headers: map[string]string{"Authorization": `Bearer {{ secret "lb-token" }}`}}}
	value, ok, why := p.Call(context.Background(), c, time.Second)
	mu.Lock()
	if got != "Bearer s3cr3t" || method != "PUT" {
		t.Fatalf("the server saw %s %q", method, got)
	}
	mu.Unlock()
	if ok || value != "403" || strings.Contains(why, "s3cr3t") || why != "answered 403 (23 bytes)" {
		t.Fatalf("value %q ok %v reason %q: want a failure without the secret", value, ok, why)
	}
	// An unknown secret, one others may read, or one whose hosts do not
	// hold the call's (whoever wrote the run, whatever its templates
	// rendered) is not sent: the server sees nothing.
	got = ""
	for _, name := range []string{"nope", "open", "elsewhere"} {
		c.HTTP.Headers["Authorization"] = `{{ secret "` + name + `" }}`
		if _, ok, why := p.Call(context.Background(), c, time.Second); ok || !strings.Contains(why, "secret") {
			t.Fatalf("call with secret %s: ok %v (%s)", name, ok, why)
		}
	}
	mu.Lock()
	if got != "" {
		t.Fatalf("a refused secret reached the server: %q", got)
	}
	mu.Unlock()
	for name, cfg := range map[string]probe.Secret{
		"open":     {File: open, Hosts: []string{"lb.example"}},
		"no-hosts": {File: file},
		"relative": {File: "lb-token", Hosts: []string{"lb.example"}},
		"bad-host": {File: file, Hosts: []string{"https://lb.example/x"}},
	} {
		if errs := (probe.Config{Secrets: map[string]probe.Secret{name: cfg}}).Validate("core_steps"); len(errs) != 1 {
			t.Errorf("Validate of %s: %v, want one error", name, errs)
		}
	}
	if errs := (probe.Config{Secrets: map[string]probe.Secret{"ok": {File: file, Hosts: []string{"lb.example"}}}}).Validate("core_steps"); len(errs) != 0 {
		t.Errorf("Validate of a good secret: %v", errs)
	}
}
