package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/musterhq/muster/agent/handlers"
	"github.com/musterhq/muster/cmd/internal/cli"
)

// The example upgrade keeps the node's version and passes on the previous
// one as an output; verify checks it.
func TestDevKindUpgradePassesThePreviousVersion(t *testing.T) {
	dir := t.TempDir()
	outputs := filepath.Join(t.TempDir(), "outputs")
	var out bytes.Buffer
	if err := runDevKind(dir, "upgrade", "node-2", outputs, strings.NewReader(`{"args":{"version":"2.0"}}`), &out); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(outputs)
	if err != nil || string(b) != `{"previous":"1.0"}` {
		t.Fatalf("outputs %q, %v", b, err)
	}
	if err := runDevKind(dir, "upgrade", "node-2", outputs, strings.NewReader(`{"args":{"version":"3.0"}}`), &out); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(outputs); string(b) != `{"previous":"2.0"}` {
		t.Fatalf("second upgrade's outputs %q", b)
	}
	if err := runDevKind(dir, "verify", "node-2", "", strings.NewReader(`{"args":{"version":"3.0"}}`), &out); err != nil {
		t.Fatalf("verify at the version: %v", err)
	}
	if err := runDevKind(dir, "verify", "node-2", "", strings.NewReader(`{"args":{"version":"2.0"}}`), &out); err == nil {
		t.Fatal("verify passed at another version")
	}
	if err := runDevKind(dir, "verify", "node-1", "", strings.NewReader(`{"args":{"version":"1.0"}}`), &out); err != nil {
		t.Fatalf("another node keeps its version: %v", err)
	}
}

// A kind fails on the node its fail file names: empty, every time; with a
// count, that many times.
func TestDevKindFailsOnTheChosenNode(t *testing.T) {
	dir := t.TempDir()
	var out bytes.Buffer
	if err := devFail(dir, "health@node-3"); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ {
		err := runDevKind(dir, "health", "node-3", "", strings.NewReader(`{}`), &out)
		var ee *cli.ExitError
		if !errors.As(err, &ee) || ee.Code != 3 {
			t.Fatalf("health on node-3, try %d: %v", i, err)
		}
	}
	if err := runDevKind(dir, "health", "node-2", "", strings.NewReader(`{}`), &out); err != nil {
		t.Fatalf("health on node-2: %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "fail", "drain.node-1"), []byte("1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := runDevKind(dir, "drain", "node-1", "", strings.NewReader(`{}`), &out); err == nil {
		t.Fatal("drain did not fail the first time")
	}
	if err := runDevKind(dir, "drain", "node-1", "", strings.NewReader(`{}`), &out); err != nil {
		t.Fatalf("drain after its count: %v", err)
	}
	for _, bad := range []string{"health", "nope@node-1", "health@", "health@a/b"} {
		if err := devFail(dir, bad); err == nil {
			t.Fatalf("--fail %q accepted", bad)
		}
	}
}

// The dev agents' upgrade declares an args_schema that requires a string
// version: it is valid (the agents start with it) and refuses what upgrade
// would fail on.
func TestDevKindUpgradeDeclaresItsArgs(t *testing.T) {
	t.Parallel()
	kinds := devExternalKinds("/bin/muster", t.TempDir())
	reg, err := handlers.NewRegistry(kinds, handlers.Env{})
	if err != nil {
		t.Fatal(err)
	}
	for i, k := range kinds {
		if errs := k.Validate(i); len(errs) != 0 {
			t.Fatalf("%s: %v", k.Kind, errs)
		}
	}
	if _, ok := reg.Schemas()[devKindPrefix+"node.upgrade"]; !ok {
		t.Fatalf("upgrade announces no schema: %v", reg.Schemas())
	}
	h, _ := reg.Get(devKindPrefix + "node.upgrade")
	for _, args := range []string{`{}`, `{"version": 2}`, `{"version": "2.0", "force": true}`} {
		if err := h.Validate(json.RawMessage(args)); err == nil {
			t.Errorf("upgrade took %s", args)
		}
	}
	if err := h.Validate(json.RawMessage(`{"version": "2.0"}`)); err != nil {
		t.Fatal(err)
	}
}

// TestDevPreparesTheFailDirectory: the banner tells people to create
// fail/STEP.NODE in the data directory; the directory is there whether or
// not --fail was given, so `echo 1 > DIR/fail/upgrade.node-2` works.
func TestDevPreparesTheFailDirectory(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := devPrepareFail(dir, nil); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "fail", "upgrade.node-2"), []byte("1\n"), 0o644); err != nil {
		t.Fatalf("the banner's way to make a step fail: %v", err)
	}
	if err := devPrepareFail(t.TempDir(), []string{"nope@node-1"}); err == nil {
		t.Fatal("a bad --fail was accepted")
	}
}

// TestDevHARefusesFail: the --ha agents carry no example kinds, so --fail
// with --ha is refused (exit 2) rather than ignored.
func TestDevHARefusesFail(t *testing.T) {
	t.Parallel()
	root := newRootCmd()
	root.SetArgs([]string{"dev", "--ha", "--fail", "upgrade@node-2"})
	root.SetOut(io.Discard)
	root.SetErr(io.Discard)
	err := root.Execute()
	var ee *cli.ExitError
	if !errors.As(err, &ee) || ee.Code != 2 || !strings.Contains(err.Error(), "--fail") {
		t.Fatalf("dev --ha --fail: %v, want a usage error naming --fail", err)
	}
}
