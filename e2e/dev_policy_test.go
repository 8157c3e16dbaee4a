package e2e

import (
	"path/filepath"
	"strings"
	"testing"
)

// `make dev` takes the shipped policy file as shipped: muster dev with
// three agents, configs/policy.yaml applied by its admin makes every kind
// the file declares on cluster prod-db (a cluster of dev.yaml without
// nodes), leaves cluster dev's windows alone, and a second apply changes
// nothing.
func TestDevAppliesTheShippedPolicyFile(t *testing.T) {
	t.Parallel()
	d := startDev(t, "--agents", "3")
	env := []string{"MUSTER_ADDR=" + d.addr, "MUSTER_TOKEN_FILE=" + filepath.Join(d.dir, "core", "admin.token")}
	path := filepath.Join("..", "configs", "policy.yaml")
	out := muster(t, env, "apply", "-f", path, "--reason", "trying policy as data")
	for _, want := range []string{"+ window prod-db-nightly", "+ budget prod-db", "+ approval rule prod-db-two-teams", "+ team sre",
		"+ playbook rolling-restart version 1", "+ schedule prod-db-weekly-restart", "Applied "} {
		if !strings.Contains(out, want) {
			t.Fatalf("apply of configs/policy.yaml lacks %q:\n%s", want, out)
		}
	}
	if out := muster(t, env, "apply", "-f", path); out != "No changes: the store holds what policy.yaml declares.\n" {
		t.Fatalf("second apply:\n%s", out)
	}
	if out := muster(t, env, "window", "list"); strings.Contains(out, " dev ") {
		t.Fatalf("the shipped file gave cluster dev a window:\n%s", out)
	}
}
