package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/musterhq/muster/cmd/internal/cli"
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
			return cli.ExitCode(err), err.Error()
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

// A bad approval glob stops `muster core` at load, exit 2, with one line
// naming the rule, the field and the pattern.
func TestCoreRefusesABadApprovalGlobAtLoad(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "core.yaml")
	yaml := "data_dir: " + dir + "\napproval:\n  rules:\n    - kind: 'example.com/{db'\n      approval: required\n"
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	root := newRootCmd()
	root.SetArgs([]string{"core", "--config", path})
	root.SetOut(&strings.Builder{})
	root.SetErr(&strings.Builder{})
	// Were the glob accepted, the core would run: the deadline ends it.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := root.ExecuteContext(ctx)
	var ee *cli.ExitError
	if !errors.As(err, &ee) || ee.Code != 2 {
		t.Fatalf("error %v, want an exit-2 configuration error", err)
	}
	lines := strings.Split(err.Error(), "\n")
	if len(lines) != 2 || !strings.Contains(lines[1], `approval.rules[0].kind: bad glob "example.com/{db"`) {
		t.Fatalf("want one line naming the rule and the glob, got:\n%s", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "core.db")); !os.IsNotExist(err) {
		t.Fatalf("the refused core created its database: %v", err)
	}
}
