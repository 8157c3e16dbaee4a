package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/musterhq/muster/core/approval"
	"github.com/musterhq/muster/shared/wire"
)

// A schedule from the command line: created by an operator, approved by an
// approver as shown, listed with its next occurrence, paused, resumed and
// deleted; bad input is one line and a non-zero exit.
func TestCLIScheduleLifecycle(t *testing.T) {
	t.Parallel()
	e := setupCLI(t, approval.Policy{})
	doc := filepath.Join(t.TempDir(), "pb.yaml")
	if err := os.WriteFile(doc, []byte(cliPlaybook), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, msg, code := e.run("op", "playbook", "apply", doc); code != 0 {
		t.Fatalf("apply: %d %s", code, msg)
	}
	if _, msg, code := e.run("op", "schedule", "create", "nightly", "--cluster", "prod", "--playbook", "pb"); code != 2 || !strings.Contains(msg, "--cron") {
		t.Fatalf("create without --cron: %d %s", code, msg)
	}
	_, msg, code := e.run("op", "schedule", "create", "nightly", "--cluster", "prod", "--playbook", "pb", "--cron", "0 2 * * *",
		"--timezone", "Mars/Olympus")
	if code == 0 || !strings.Contains(msg, "timezone") || strings.Count(strings.TrimSpace(msg), "\n") != 0 {
		t.Fatalf("bad time zone: %d %q, want one line naming timezone", code, msg)
	}
	for _, cron := range []string{"0 0 30 2 *", "@every 1ns"} {
		_, msg, code := e.run("op", "schedule", "create", "nightly", "--cluster", "prod", "--playbook", "pb", "--cron", cron)
		if code == 0 || !strings.Contains(msg, "cron") || strings.Count(strings.TrimSpace(msg), "\n") != 0 {
			t.Fatalf("--cron %q: %d %q, want one line naming cron", cron, code, msg)
		}
	}
	out, msg, code := e.run("op", "schedule", "create", "nightly", "--cluster", "prod", "--playbook", "pb", "--cron", "0 2 * * *",
		"--timezone", "Europe/Berlin")
	if code != 0 || !strings.Contains(out, "Created schedule nightly: it waits for approval") {
		t.Fatalf("create: %d %s\n%s", code, msg, out)
	}
	if _, msg, code := e.run("op", "schedule", "approve", "nightly"); code == 0 || !strings.Contains(msg, "may not approve") {
		t.Fatalf("approve by an operator: %d %s", code, msg)
	}
	out, msg, code = e.run("appr", "schedule", "approve", "nightly")
	if code != 0 || !strings.Contains(out, "Approved schedule nightly (ACTIVE)") {
		t.Fatalf("approve: %d %s\n%s", code, msg, out)
	}
	out, _, code = e.run("op", "schedule", "list")
	if code != 0 || !strings.Contains(out, "nightly") || !strings.Contains(out, "ACTIVE") || !strings.Contains(out, "latest") {
		t.Fatalf("list:\n%s", out)
	}
	out, _, _ = e.run("op", "schedule", "list", "-o", "name")
	if strings.TrimSpace(out) != "nightly" {
		t.Fatalf("list -o name: %q", out)
	}
	if out, _, code = e.run("op", "schedule", "list", "--state", "pending_approve", "-o", "name"); code != 0 || strings.TrimSpace(out) != "" {
		t.Fatalf("list --state pending_approve: %d %q, want nothing", code, out)
	}
	if out, _, code = e.run("op", "schedule", "list", "--state", "active", "--cluster", "prod", "-o", "name"); code != 0 ||
		strings.TrimSpace(out) != "nightly" {
		t.Fatalf("list --state active --cluster prod: %d %q", code, out)
	}
	if _, msg, code := e.run("op", "schedule", "list", "--state", "done"); code == 0 || !strings.Contains(msg, "state") {
		t.Fatalf("list --state done: %d %q, want an error naming state", code, msg)
	}
	out, _, _ = e.run("op", "schedule", "show", "nightly")
	if !strings.Contains(out, "Next occurrences:") || !strings.Contains(out, "02:00 CET") {
		t.Fatalf("show:\n%s", out)
	}
	js, _, _ := e.run("op", "schedule", "show", "nightly", "-o", "json")
	if sc := decode[wire.Schedule](t, js); sc.ApprovedBy != "appr" || len(sc.Next) == 0 {
		t.Fatalf("show -o json: %+v", sc)
	}
	if out, msg, code := e.run("op", "schedule", "pause", "nightly", "--reason", "db migration"); code != 0 || !strings.Contains(out, "Paused schedule nightly (PAUSED)") {
		t.Fatalf("pause: %d %s %s", code, msg, out)
	}
	if out, _, _ := e.run("op", "schedule", "show", "nightly", "-o", "json"); !strings.HasSuffix(decode[wire.Schedule](t, out).StateReason, ": db migration") {
		t.Fatalf("the paused schedule does not keep the reason: %s", out)
	}
	if out, msg, code := e.run("op", "schedule", "resume", "nightly"); code != 0 || !strings.Contains(out, "Resumed schedule nightly (ACTIVE)") {
		t.Fatalf("resume: %d %s %s", code, msg, out)
	}
	if out, msg, code := e.run("op", "schedule", "delete", "nightly", "--reason", "replaced"); code != 0 || !strings.Contains(out, "Deleted schedule nightly") {
		t.Fatalf("delete: %d %s %s", code, msg, out)
	}
	if _, msg, code := e.run("op", "schedule", "show", "nightly"); code == 0 || !strings.Contains(msg, "not found") {
		t.Fatalf("show after delete: %d %s", code, msg)
	}
}
