package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/musterhq/muster/cmd/internal/cli"
	"github.com/musterhq/muster/shared/tlsutil"
)

// runTLS runs `muster tls ...` and returns its output, error line and exit code.
func runTLS(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	root := newRootCmd()
	var out lockedBuffer
	root.SetOut(&out)
	root.SetErr(&lockedBuffer{})
	root.SetArgs(append([]string{"tls"}, args...))
	if err := root.ExecuteContext(context.Background()); err != nil {
		return out.String(), err.Error(), cli.ExitCode(err)
	}
	return out.String(), "", 0
}

func TestTLSCommandsWriteAChainOfCertificates(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "tls")
	if out, msg, code := runTLS(t, "ca", "create", "--dir", dir); code != 0 || !strings.Contains(out, "ca.pem") {
		t.Fatalf("ca create: exit %d %q %q", code, out, msg)
	}
	for _, args := range [][]string{
		{"--agent", "db-1", "--hosts", "db-1.example.com,10.0.0.7"},
		{"--core", "--days", "30"},
		{"--client", "alice"},
	} {
		if out, msg, code := runTLS(t, append([]string{"cert", "create", "--dir", dir}, args...)...); code != 0 || !strings.Contains(out, "mode 0600") {
			t.Fatalf("cert create %v: exit %d %q %q", args, code, out, msg)
		}
	}
	pool, err := tlsutil.CertPool(filepath.Join(dir, "ca.pem"))
	if err != nil {
		t.Fatal(err)
	}
	for base, want := range map[string]tlsutil.Identity{
		"agent-db-1": tlsutil.Agent("db-1"), "core": tlsutil.Core(), "client-alice": tlsutil.Client("alice"),
	} {
		pair, err := tls.LoadX509KeyPair(filepath.Join(dir, base+".pem"), filepath.Join(dir, base+"-key.pem"))
		if err != nil {
			t.Fatalf("%s: %v", base, err)
		}
		leaf := pair.Leaf
		if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}); err != nil {
			t.Fatalf("%s does not chain to the CA: %v", base, err)
		}
		if got, ok := tlsutil.IdentityOf(leaf); !ok || got != want {
			t.Fatalf("%s names %v, want %v", base, got, want)
		}
		if fi, _ := os.Stat(filepath.Join(dir, base+"-key.pem")); fi.Mode().Perm() != 0o600 {
			t.Fatalf("%s key mode %o", base, fi.Mode().Perm())
		}
		if base == "agent-db-1" && (len(leaf.DNSNames) != 1 || leaf.DNSNames[0] != "db-1.example.com" || len(leaf.IPAddresses) != 1) {
			t.Fatalf("agent SANs %v %v", leaf.DNSNames, leaf.IPAddresses)
		}
		if base == "core" && leaf.NotAfter.Sub(leaf.NotBefore) > 31*24*time.Hour {
			t.Fatalf("--days 30 gave %s", leaf.NotAfter.Sub(leaf.NotBefore))
		}
	}
}

func TestTLSCommandsRefuse(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "tls")
	if _, msg, code := runTLS(t, "ca", "create", "--dir", dir); code != 0 {
		t.Fatal(msg)
	}
	if _, msg, code := runTLS(t, "cert", "create", "--dir", dir, "--agent", "a"); code != 0 {
		t.Fatal(msg)
	}
	before, _ := os.ReadFile(filepath.Join(dir, "agent-a-key.pem"))
	for _, c := range []struct {
		name string
		args []string
		code int
		msg  string
	}{
		{"existing CA", []string{"ca", "create", "--dir", dir}, 1, "already exists"},
		{"existing certificate", []string{"cert", "create", "--dir", dir, "--agent", "a"}, 1, "already exists"},
		{"no CA", []string{"cert", "create", "--dir", t.TempDir(), "--core"}, 1, "muster tls ca create"},
		{"no role", []string{"cert", "create", "--dir", dir}, 2, "exactly one of"},
		{"two roles", []string{"cert", "create", "--dir", dir, "--core", "--client", "x"}, 2, "exactly one of"},
		{"bad name", []string{"cert", "create", "--dir", dir, "--client", "../etc"}, 2, "bad name"},
		{"empty name", []string{"cert", "create", "--dir", dir, "--agent", ""}, 2, "bad name"},
		{"no dir", []string{"ca", "create"}, 2, "--dir is required"},
		{"bad days", []string{"cert", "create", "--dir", dir, "--core", "--days", "0"}, 2, "--days"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, msg, code := runTLS(t, c.args...)
			if code != c.code || !strings.Contains(msg, c.msg) || strings.Contains(msg, "\n") {
				t.Fatalf("exit %d %q; want exit %d and one line with %q", code, msg, c.code, c.msg)
			}
		})
	}
	after, _ := os.ReadFile(filepath.Join(dir, "agent-a-key.pem"))
	if string(before) != string(after) {
		t.Fatal("a refused create changed an existing key")
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 4 {
		t.Fatalf("refused creates left files behind: %v", entries)
	}
}
