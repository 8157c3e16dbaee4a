package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/musterhq/muster/core/approval"
	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/wire"
)

// `muster action create --target` makes one action per node of the target
// and says how many, one line each; args a node's schema refuses, a
// selector matching nothing, and --node with --target are one-line errors
// with a non-zero exit that create nothing. Each invocation sends its own
// request_id, so a retry of its call makes nothing new and a second
// invocation makes new actions.
func TestActionCreateOverATarget(t *testing.T) {
	t.Parallel()
	e := setupCLI(t, approval.DefaultPolicy())
	ctx := context.Background()
	now := time.Now().UTC()
	if err := e.st.Update(ctx, func(tx store.Tx) error {
		return tx.PutNode(ctx, &store.Node{ClusterID: "prod", ID: "db-2", Addr: "127.0.0.1:7422", Source: store.SourceStatic,
			Status: store.NodeUp, Kinds: []string{"muster.io/debug.sleep"}, UpdatedTS: now,
			Labels:      map[string]string{"role": "replica", "zone": "eu-2"},
			ArgsSchemas: map[string]json.RawMessage{"muster.io/debug.sleep": json.RawMessage(`{"type":"object","properties":{"seconds":{"type":"integer","maximum":5}}}`)}})
	}); err != nil {
		t.Fatal(err)
	}
	out, msg, code := e.run("op", "action", "create", "--cluster", "prod", "--target", "role=replica", "--kind", "muster.io/debug.sleep", "--arg", "seconds=2")
	if code != 0 || !strings.Contains(out, "Created 2 actions:") || !strings.Contains(out, " on db-1 (PENDING_APPROVE)") ||
		!strings.Contains(out, " on db-2 (PENDING_APPROVE)") || !strings.Contains(out, "2 wait for approval") {
		t.Fatalf("create over role=replica: exit %d %q %q", code, out, msg)
	}
	out, _, code = e.run("op", "action", "create", "--cluster", "prod", "--target", "zone=eu-1", "--kind", "muster.io/debug.ping", "-o", "json")
	var created wire.CreatedActions
	if code != 0 || json.Unmarshal([]byte(out), &created) != nil || len(created.Actions) != 1 || created.Actions[0].NodeID != "db-1" {
		t.Fatalf("-o json: exit %d %q", code, out)
	}
	// Each invocation sends a request_id of its own (a retry of it would
	// make nothing new): the ids are derived from it, UUIDv5.
	if u, err := uuid.Parse(created.Actions[0].ID); err != nil || u.Version() != 5 {
		t.Fatalf("action id %s is not derived from a request_id (%v)", created.Actions[0].ID, err)
	}
	for name, args := range map[string][]string{
		"args db-2 refuses": {"--target", "role=replica", "--kind", "muster.io/debug.sleep", "--arg", "seconds=9"},
		"nothing matches":   {"--target", "role=cache", "--kind", "muster.io/debug.sleep"},
		"node and target":   {"--target", "all", "--node", "db-1", "--kind", "muster.io/debug.sleep"},
		"no node or target": {"--kind", "muster.io/debug.sleep"},
	} {
		out, msg, code := e.run("op", append([]string{"action", "create", "--cluster", "prod"}, args...)...)
		if code == 0 || out != "" || strings.Count(strings.TrimSpace(msg), "\n") != 0 {
			t.Errorf("%s: exit %d %q %q, want a one-line error", name, code, out, msg)
		}
		if name == "args db-2 refuses" && !strings.Contains(msg, "db-2") || name == "nothing matches" && !strings.Contains(msg, "role=cache") {
			t.Errorf("%s: %q does not name the cause", name, msg)
		}
	}
	out, _, _ = e.run("op", "action", "list", "-o", "name")
	if n := len(strings.Fields(out)); n != 3 {
		t.Fatalf("%d actions after the refused creates, want 3: %q", n, out)
	}
}

// `muster playbook start FILE --digest D` starts a document that is not
// applied as an ad-hoc run, exactly as `muster playbook plan FILE` showed
// it; without --digest it is a usage error that starts nothing.
func TestPlaybookStartOfADocumentAsPlanned(t *testing.T) {
	t.Parallel()
	e := setupCLI(t, approval.DefaultPolicy())
	doc := filepath.Join(t.TempDir(), "hotfix.yaml")
	if err := os.WriteFile(doc, []byte(strings.Replace(cliPlaybook, "name: pb", "name: hotfix", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	out, msg, code := e.run("op", "playbook", "plan", doc, "--cluster", "prod")
	m := regexp.MustCompile(`Digest ([0-9a-f]{64})`).FindStringSubmatch(out)
	if code != 0 || m == nil {
		t.Fatalf("plan of the document: %d %s\n%s", code, msg, out)
	}
	if out, msg, code := e.run("op", "playbook", "start", doc, "--cluster", "prod"); code != 2 || out != "" || !strings.Contains(msg, "--digest") {
		t.Fatalf("start without --digest: exit %d %q %q, want a usage error", code, out, msg)
	}
	out, msg, code = e.run("op", "playbook", "start", doc, "--cluster", "prod", "--digest", m[1])
	if code != 0 || !strings.Contains(out, "as ad-hoc run") || !strings.Contains(out, "PENDING_APPROVE") {
		t.Fatalf("start of the document: exit %d %q %q", code, out, msg)
	}
	out, _, _ = e.run("op", "run", "list", "-o", "name")
	if n := len(strings.Fields(out)); n != 1 {
		t.Fatalf("%d runs, want the one started: %q", n, out)
	}
}
