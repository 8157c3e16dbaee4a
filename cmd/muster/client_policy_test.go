package main

import (
	"strings"
	"testing"
)

// muster window, budget and approval-rule against a real API: each change
// is stored with who and why and listed so; a wider budget takes an
// approver (an operator's is refused in one line); a delete keeps the
// record for --all and its history; the history names every change.
func TestWindowBudgetApprovalRuleCommands(t *testing.T) {
	t.Parallel()
	a := newCLIAPI(t, map[string]string{"otto": "operator", "ann": "approver", "adam": "admin"}, "prod")
	run := func(who string, args ...string) (string, error) {
		t.Helper()
		return a.run(t, who, args...)
	}
	if out, err := run("otto", "window", "create", "prod", "--name", "nightly", "--cron", "0 2 * * *", "--duration", "4h",
		"--timezone", "Europe/Berlin", "--reason", "change board 12"); err != nil || !strings.Contains(out, "window nightly (version 1)") {
		t.Fatalf("window create:\n%s%v", out, err)
	}
	out, err := run("otto", "window", "list")
	if err != nil || !strings.Contains(out, "nightly") || !strings.Contains(out, "Europe/Berlin") || !strings.Contains(out, "otto") ||
		!strings.Contains(out, "change board 12") {
		t.Fatalf("window list:\n%s%v", out, err)
	}
	if out, err := run("otto", "budget", "set", "prod", "--max-unavailable", "1", "--reason", "start small"); err != nil {
		t.Fatalf("budget set:\n%s%v", out, err)
	}
	if _, err := run("otto", "budget", "set", "prod", "--max-unavailable", "3", "--reason", "more"); err == nil ||
		!strings.Contains(err.Error(), "may not unfreeze on cluster prod") {
		t.Fatalf("an operator widens the budget: %v, want a refusal naming the permission", err)
	}
	if _, err := run("ann", "budget", "set", "prod", "--max-unavailable", "3", "--reason", "more replicas"); err != nil {
		t.Fatal(err)
	}
	if out, err := run("otto", "budget", "show", "prod"); err != nil || !strings.Contains(out, "max_unavailable 3") ||
		!strings.Contains(out, "ann") || !strings.Contains(out, "more replicas") {
		t.Fatalf("budget show:\n%s%v", out, err)
	}
	if out, err := run("otto", "budget", "history", "prod"); err != nil || strings.Count(out, "\n") != 3 || !strings.Contains(out, "changed") {
		t.Fatalf("budget history:\n%s%v", out, err)
	}
	if out, err := run("adam", "approval-rule", "create", "prod-db", "--cluster", "prod", "--level", "teams=db;sre,min=2",
		"--reason", "two people"); err != nil || !strings.Contains(out, "teams=db;sre,min=2") {
		t.Fatalf("approval-rule create:\n%s%v", out, err)
	}
	if _, err := run("otto", "window", "delete", "nightly", "--reason", "x"); err == nil {
		t.Fatal("an operator deleted a window")
	}
	if _, err := run("ann", "window", "delete", "nightly", "--reason", "not needed"); err != nil {
		t.Fatal(err)
	}
	if out, _ := run("otto", "window", "list"); strings.Contains(out, "nightly") {
		t.Errorf("a deleted window is listed:\n%s", out)
	}
	if out, _ := run("otto", "window", "list", "--all"); !strings.Contains(out, "by ann: not needed") {
		t.Errorf("window list --all:\n%s", out)
	}
}
