package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/musterhq/muster/core/approval"
	"github.com/musterhq/muster/shared/version"
)

// Issue 35, item 6: muster version and muster --version print the client's
// version and the core's, asked of GET /api/v1/version; a core that does
// not answer is said on the core's line and fails nothing.
func TestVersionPrintsTheClientsAndTheCoresVersion(t *testing.T) {
	// Not parallel: muster --version reads the core from the environment.
	e := setupCLI(t, approval.DefaultPolicy())
	out, msg, code := e.run("viewer-less", "version")
	if code != 0 || !strings.Contains(out, "muster "+version.Version+"\n") || !strings.Contains(out, "core   unknown:") {
		t.Fatalf("version without a token: %d %s\n%s", code, msg, out)
	}
	out, msg, code = e.run("op", "version")
	if code != 0 || out != "muster "+version.Version+"\ncore   "+version.Version+" ("+e.url+")\n" {
		t.Fatalf("version: %d %s\n%q", code, msg, out)
	}
	out, _, _ = e.run("op", "version", "-o", "json")
	if v := decode[versions](t, out); v.Client != version.Version || v.Core != version.Version || v.CoreAddr != e.url {
		t.Fatalf("version -o json: %+v", v)
	}
	out, _, _ = e.run("op", "version", "--client")
	if out != "muster "+version.Version+"\n" {
		t.Fatalf("version --client: %q", out)
	}

	// The core's line is what the core answered, not the client's build.
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/api/v1/version" || r.Header.Get("Authorization") != "Bearer tok" {
			http.Error(w, `{"error":{"code":"not_found","message":"no"}}`, http.StatusNotFound)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"version":"v9.9.9"}`))
	}))
	t.Cleanup(other.Close)
	t.Setenv("MUSTER_ADDR", other.URL)
	t.Setenv("MUSTER_TOKEN", "tok")
	for _, args := range [][]string{{"--version"}, {"version"}} {
		root := newRootCmd()
		var b lockedBuffer
		root.SetOut(&b)
		root.SetArgs(args)
		if err := root.ExecuteContext(context.Background()); err != nil {
			t.Fatal(err)
		}
		if want := "muster " + version.Version + "\ncore   v9.9.9 (" + other.URL + ")\n"; b.String() != want {
			t.Fatalf("muster %s: %q, want %q", args[0], b.String(), want)
		}
	}
	other.Close()
	root := newRootCmd()
	var b lockedBuffer
	root.SetOut(&b)
	root.SetArgs([]string{"--version"})
	if err := root.ExecuteContext(context.Background()); err != nil || !strings.Contains(b.String(), "core   unknown: core at "+other.URL) {
		t.Fatalf("muster --version, the core down: %v\n%s", err, b.String())
	}
}
