package main

import (
	"strings"
	"testing"
)

// The team and grant commands against a real API: made, listed, shown,
// changed and revoked; a grant beyond the caller's scope is one line and
// a non-zero exit; bad usage is refused before any call.
func TestTeamAndGrantCommands(t *testing.T) {
	t.Parallel()
	a := newCLIAPI(t, map[string]string{"root": "admin"})
	run := func(args ...string) (string, error) {
		t.Helper()
		return a.run(t, "root", args...)
	}
	must := func(want string, args ...string) {
		t.Helper()
		out, err := run(args...)
		if err != nil || !strings.Contains(out, want) {
			t.Errorf("%v: %q, %v; want it to say %q", args, out, err, want)
		}
	}
	must("Created team db (members dana; groups db-oncall)", "team", "create", "db", "--member", "dana", "--group", "db-oncall")
	must("members dana,olga", "team", "add-member", "db", "olga")
	must("members olga", "team", "remove-member", "db", "dana")
	must("groups db-oncall,sre", "team", "map-group", "db", "sre")
	must("db", "team", "list")
	must("The team db", "team", "show", "db")
	must("Granted team db approver on prod-db-*", "grant", "create", "--team", "db", "--role", "approver", "--clusters", "prod-db-*")
	must("Granted person dana viewer on tier=prod", "grant", "create", "--person", "dana", "--role", "viewer", "--labels", "tier=prod")
	out, _ := run("grant", "list")
	if !strings.Contains(out, "team db") || !strings.Contains(out, "tier=prod") {
		t.Errorf("grant list:\n%s", out)
	}
	id := strings.Fields(strings.Split(strings.TrimSpace(out), "\n")[1])[0]
	must("Revoked grant "+id, "grant", "revoke", id)
	for _, args := range [][]string{
		{"grant", "create", "--role", "viewer", "--clusters", "*"},
		{"grant", "create", "--person", "x", "--clusters", "*"},
		{"grant", "create", "--person", "x", "--role", "viewer"},
		{"grant", "create", "--person", "x", "--role", "root", "--clusters", "*"},
		{"team", "create", "a b"},
		{"team", "show", "nope"},
	} {
		if _, err := run(args...); err == nil || strings.Contains(err.Error(), "\n") {
			t.Errorf("%v: %v, want one line and a non-zero exit", args, err)
		}
	}
	must("Deleted team db", "team", "delete", "db")
}
