package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Issue 17, item 7: a core config file whose store.dsn holds a password is
// refused unless its mode is 0600, like a key file, and the refusal shows
// the DSN redacted. A private file gets past the check (to a connection
// error that does not show the password either).
func TestACoreConfigHoldingAPasswordMustBePrivate(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "core.yaml")
	cfg := fmt.Sprintf("data_dir: %s\nstore:\n  driver: postgres\n  dsn: \"postgres://muster:s3cret-pw@127.0.0.1:1/muster?connect_timeout=1\"\n",
		filepath.Join(dir, "data"))
	run := func(mode os.FileMode) (int, string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(cfg), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(path, mode); err != nil {
			t.Fatal(err)
		}
		root := newRootCmd()
		root.SetArgs([]string{"core", "--config", path})
		root.SetOut(&bytes.Buffer{})
		root.SetErr(&bytes.Buffer{})
		if err := root.ExecuteContext(context.Background()); err != nil {
			return exitCode(err), err.Error()
		}
		return 0, ""
	}
	code, msg := run(0o644)
	if code != 2 || !strings.Contains(msg, "holds a PostgreSQL password") || !strings.Contains(msg, "chmod 600") ||
		!strings.Contains(msg, "host=127.0.0.1 port=1 database=muster user=muster") || strings.Contains(msg, "s3cret") {
		t.Fatalf("a 0644 config with a password: %d %s", code, msg)
	}
	code, msg = run(0o600)
	t.Logf("a private config: %s", msg)
	if code == 0 || strings.Contains(msg, "holds a PostgreSQL password") || strings.Contains(msg, "s3cret") {
		t.Fatalf("a 0600 config with a password: %d %s", code, msg)
	}
}
