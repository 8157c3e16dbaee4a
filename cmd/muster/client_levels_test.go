package main

import (
	"strings"
	"testing"

	"github.com/musterhq/muster/core/approval"
)

// TestCLIShowsApprovalLevels: with two levels (appr, then admin), `action
// show` prints each level with who can approve and what is still needed,
// `action approve` by appr
// says what is still missing, and by op (the requester) fails with one
// line and a non-zero exit.
func TestCLIShowsApprovalLevels(t *testing.T) {
	t.Parallel()
	pol := approval.DefaultPolicy()
	pol.Rules = []approval.Rule{{Kind: "*", Cluster: "prod", Levels: []approval.Level{
		{Persons: []string{"appr"}}, {Persons: []string{"admin"}}}}}
	e := setupCLI(t, pol)
	out, msg, code := e.run("op", "action", "create", "--cluster", "prod", "--node", "db-1", "--kind", "muster.io/debug.ping", "-o", "name")
	if code != 0 {
		t.Fatalf("create: %d %s", code, msg)
	}
	id := strings.TrimSpace(out)
	out, _, _ = e.run("op", "action", "show", id)
	for _, want := range []string{"Approval:", "level 1 (appr): 0 of 1 — can approve: appr", "level 2 (admin): 0 of 1 — can approve: admin",
		"Still needed: 1 more from appr, 1 more from admin."} {
		if !strings.Contains(out, want) {
			t.Fatalf("show lacks %q:\n%s", want, out)
		}
	}
	if _, msg, code = e.run("op", "action", "approve", id); code == 0 || !refusalLines(msg) || !strings.Contains(msg, "op") {
		t.Fatalf("the requester's approval: %d %q", code, msg)
	}
	out, msg, code = e.run("appr", "action", "approve", id)
	if code != 0 || !strings.Contains(out, "(PENDING_APPROVE): 1 more from admin.") {
		t.Fatalf("appr: %d %q %s", code, out, msg)
	}
	out, _, code = e.run("admin", "action", "approve", id)
	if code != 0 || !strings.Contains(out, "Approved action") || !strings.Contains(out, "PENDING_SCHEDULE") {
		t.Fatalf("admin: %d %q", code, out)
	}
}
