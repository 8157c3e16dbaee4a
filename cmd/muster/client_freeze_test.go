package main

import (
	"strings"
	"testing"
)

// The freeze commands against a real API: an operator freezes with
// --until or --for, the list shows it, an operator may not lift it, an
// approver does with a reason, and the lifted one shows with --all; bad
// usage is one line and a non-zero exit before any call.
func TestFreezeCommands(t *testing.T) {
	t.Parallel()
	a := newCLIAPI(t, map[string]string{"olga": "operator", "ann": "approver"}, "prod")
	run := func(who string, args ...string) (string, error) {
		t.Helper()
		return a.run(t, who, args...)
	}
	out, err := run("olga", "freeze", "create", "prod", "--for", "2h", "--reason", "incident 4711")
	if err != nil || !strings.Contains(out, "Created freeze ") || !strings.Contains(out, "of cluster prod until") ||
		!strings.Contains(out, "incident 4711") {
		t.Fatalf("freeze create: %q, %v", out, err)
	}
	id := strings.Fields(out)[2]
	if out, err := run("olga", "freeze", "create", "prod", "--until", "23:59", "--reason", "change freeze"); err != nil ||
		!strings.Contains(out, "change freeze") {
		t.Errorf("freeze create --until: %q, %v", out, err)
	}
	out, err = run("olga", "freeze", "list", "--cluster", "prod")
	if err != nil || !strings.Contains(out, id) || !strings.Contains(out, "olga") || strings.Count(out, "\n") != 3 {
		t.Errorf("freeze list:\n%s%v", out, err)
	}
	if _, err := run("olga", "freeze", "lift", id, "--reason", "fixed"); err == nil || !strings.Contains(err.Error(), "approver") ||
		!refusalLines(err.Error()) {
		t.Errorf("an operator lifts: %v, want one line naming the approver role, and the hint", err)
	}
	if out, err := run("ann", "freeze", "lift", id, "--reason", "incident closed"); err != nil || !strings.Contains(out, "Lifted freeze "+id) {
		t.Errorf("freeze lift: %q, %v", out, err)
	}
	if out, _ := run("ann", "freeze", "list"); strings.Contains(out, id) {
		t.Errorf("the lifted freeze is still listed in force:\n%s", out)
	}
	if out, _ := run("ann", "freeze", "list", "--all"); !strings.Contains(out, id) || !strings.Contains(out, "by ann: incident closed") {
		t.Errorf("freeze list --all:\n%s", out)
	}
	for _, args := range [][]string{
		{"freeze", "create", "prod", "--reason", "x"},
		{"freeze", "create", "prod", "--for", "1h", "--until", "18:00", "--reason", "x"},
		{"freeze", "create", "prod", "--for", "1h"},
		{"freeze", "create", "prod", "--until", "tomorrow", "--reason", "x"},
		{"freeze", "create", "nope", "--for", "1h", "--reason", "x"},
		{"freeze", "lift", id},
		{"freeze", "create", "prod", "--for", "1h", "--reason", "a\x1b[31mb"},
		{"freeze", "lift", id, "--reason", "again"},
	} {
		if _, err := run("ann", args...); err == nil || strings.Contains(err.Error(), "\n") {
			t.Errorf("%v: %v, want one line and a non-zero exit", args, err)
		}
	}
}
