package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/musterhq/muster/core/approval"
)

const cliPlaybook = `name: pb
stages:
  - {name: one, kind: muster.io/debug.ping, target: {all: true}}
`

// Issue 17, item 8: the command line starts what the plan showed. plan
// prints the digest to start with; start without --digest or --version is a
// usage error; a start by the digest of a plan the playbook has moved past
// creates nothing; by the current plan's digest it creates the run.
func TestPlaybookStartPassesWhatThePlanShowed(t *testing.T) {
	t.Parallel()
	e := setupCLI(t, approval.Policy{})
	dir := t.TempDir()
	doc := filepath.Join(dir, "pb.yaml")
	apply := func(body string) {
		t.Helper()
		if err := os.WriteFile(doc, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, msg, code := e.run("op", "playbook", "apply", doc); code != 0 {
			t.Fatalf("apply: %d %s", code, msg)
		}
	}
	apply(cliPlaybook)
	out, msg, code := e.run("op", "playbook", "plan", "pb", "--cluster", "prod")
	m := regexp.MustCompile(`muster playbook start pb --cluster prod --digest ([0-9a-f]{64})`).FindStringSubmatch(out)
	if code != 0 || m == nil {
		t.Fatalf("plan: %d %s\n%s", code, msg, out)
	}
	if _, msg, code := e.run("op", "playbook", "start", "pb", "--cluster", "prod"); code != 2 || !strings.Contains(msg, "--digest") {
		t.Fatalf("start without a digest or version: %d %s", code, msg)
	}
	apply(cliPlaybook + "  - {name: two, kind: muster.io/debug.ping, target: {all: true}, depends_on: [one]}\n")
	if _, msg, code := e.run("op", "playbook", "start", "pb", "--cluster", "prod", "--digest", m[1]); code == 0 || !strings.Contains(msg, "the plan changed") {
		t.Fatalf("start by the digest of an older plan: %d %s", code, msg)
	}
	if _, msg, code := e.run("op", "playbook", "start", "pb", "--cluster", "prod", "--version", "1"); code == 0 || !strings.Contains(msg, "is at version 2 now") {
		t.Fatalf("start of a version no longer the newest: %d %s", code, msg)
	}
	out, _, _ = e.run("op", "playbook", "plan", "pb", "--cluster", "prod")
	m = regexp.MustCompile(`--digest ([0-9a-f]{64})`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("plan of version 2:\n%s", out)
	}
	out, msg, code = e.run("op", "playbook", "start", "pb", "--cluster", "prod", "--digest", m[1])
	if code != 0 || !strings.Contains(out, "Started playbook pb version 2") {
		t.Fatalf("start by the current digest: %d %s\n%s", code, msg, out)
	}
}
