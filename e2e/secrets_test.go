package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/musterhq/muster/shared/action"
	"github.com/musterhq/muster/shared/limit"
	"github.com/musterhq/muster/shared/wire"
)

// TestASecretReachesTheCommandAndNothingElse is issue 34's scenario 5: a
// step's args reference {{ secret "db-password" }}; node-1's agent has it in
// a file of its secrets directory, node-2's has none. The command on node-1
// sees the value (it writes it to a file outside every data directory) and
// prints it, on stdout and stderr, and passes it on as an output that a
// later step reads. Nothing kept or shown holds the value: the raw bytes of
// every file under the fleet's directory (the core's SQLite store and its
// WAL, the agents' queues, every process's log), the API's and the command
// line's answers (run,
// actions, events, nodes, the agent's own records) and the outputs. A run
// over node-2 is refused, naming the node and the secret; a plain action
// referencing a secret its node lacks fails on the agent, saying so.
func TestASecretReachesTheCommandAndNothingElse(t *testing.T) {
	t.Parallel()
	const value = "e2e-S3cr3t-9f2c41d7b0"
	base, secrets, seen := t.TempDir(), t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(secrets, "db-password"), []byte(value+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(base, "migrate.sh")
	// The record on stdin holds the args resolved: the command takes the
	// password out of the dsn.
	body := fmt.Sprintf(`#!/bin/sh
rec=$(cat)
pw=$(printf '%%s' "$rec" | sed -n 's/.*"dsn":"pg:\/\/app:\([^@]*\)@.*/\1/p')
printf '%%s' "$pw" > %q/seen-$MUSTER_NODE_ID-$1
echo "migrating with password $pw"
echo "stderr: $pw" >&2
if [ "$1" = migrate ]; then printf '{"used":"%%s"}' "$pw" > "$MUSTER_OUTPUTS"; fi
`, seen)
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	var kinds strings.Builder
	kinds.WriteString("actions:\n  external:\n")
	for _, k := range []string{"migrate", "report"} {
		fmt.Fprintf(&kinds, "    - kind: example.com/%s\n      run: [%q, %q]\n", k, script, k)
	}
	f := newFleetWith(t, fleetOptions{nodes: 2, dir: base, actionsYAML: kinds.String(), agentYAML: func(node string) string {
		if node == "node-1" {
			return fmt.Sprintf("secrets:\n  dir: %q\n", secrets)
		}
		return ""
	}})

	// The core knows which node has which secret, by name.
	nodes, err := f.admin.Nodes(ctxT(t), "e2e")
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes {
		if want := n.ID == "node-1"; slices.Contains(n.Secrets, "db-password") != want {
			t.Fatalf("node %s announces secrets %v", n.ID, n.Secrets)
		}
	}

	one, zero := limit.MustParse("1"), limit.MustParse("0")
	req := func(nodes ...string) *wire.CreateRunRequest {
		return &wire.CreateRunRequest{ClusterID: "e2e", Stages: []wire.StageSpec{{
			Name: "schema", Target: wire.Target{Nodes: nodes}, MaxConcurrency: &one, MaxErrors: &zero,
			Steps: []wire.StepSpec{
				{Name: "migrate", Kind: "example.com/migrate", Args: json.RawMessage(`{"dsn":"pg://app:{{ secret \"db-password\" }}@{{ .node.id }}/app"}`)},
				{Name: "report", Kind: "example.com/report", Args: json.RawMessage(`{"used":"{{ .steps.migrate.outputs.used }}"}`)},
			},
		}}}
	}
	// Over node-2, which lacks it: refused before any step runs.
	if _, err := f.alice.CreateRun(ctxT(t), req("node-1", "node-2")); err == nil || !strings.Contains(err.Error(), "node node-2 has no secret db-password") {
		t.Fatalf("a run over node-2 = %v; want it refused, naming node-2 and db-password", err)
	}
	r, err := f.alice.CreateRun(ctxT(t), req("node-1"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.bob.RunVerb(ctxT(t), r.ID, "approve", ""); err != nil {
		t.Fatal(err)
	}
	end := (&stepFleet{fleet: f}).waitRun(t, r.ID, 60*time.Second, "DONE", "FAILED", "PARTIAL", "CANCELLED", "PAUSED")
	if end.State != "DONE" {
		t.Fatalf("run ended %s (%s)", end.State, end.StateReason)
	}
	// The command saw the value.
	if b, err := os.ReadFile(filepath.Join(seen, "seen-node-1-migrate")); err != nil || string(b) != value {
		t.Fatalf("the command saw %q (%v), want the secret's value", b, err)
	}

	// A plain action referencing a secret its node lacks fails there.
	a := f.create("node-2", "example.com/report", `{"dsn":"pg://app:{{ secret \"db-password\" }}@x/app"}`)
	if a.State == action.PendingApprove {
		f.approve(a.ID)
	}
	failed := f.waitCore(a.ID, 30*time.Second, action.Done, action.Failed)
	if failed.State != action.Failed || !strings.Contains(failed.StateReason, `no such secret "db-password" on this node`) {
		t.Fatalf("action on node-2 ended %s (%s); want FAILED, no such secret", failed.State, failed.StateReason)
	}
	if _, err := os.Stat(filepath.Join(seen, "seen-node-2-report")); err == nil {
		t.Fatal("the command ran without its secret")
	}

	// What is shown: the API's answers.
	kids := (&procFleet{fleet: f}).children(t, r.ID)
	if len(kids) != 2 {
		t.Fatalf("%d children, want 2", len(kids))
	}
	var shown []string
	get := func(path string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, "http://"+f.core.Addr()+path, nil)
		req.Header.Set("Authorization", "Bearer "+f.secrets["admin"])
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %d %s", path, resp.StatusCode, b)
		}
		shown = append(shown, path+": "+string(b))
	}
	get("/api/v1/runs/" + r.ID)
	get("/api/v1/actions?run=" + r.ID)
	get("/api/v1/events?limit=1000")
	get("/api/v1/nodes?cluster=e2e")
	get("/api/v1/runs/" + r.ID + "/nodes")
	for _, k := range append(kids, *failed) {
		get("/api/v1/actions/" + k.ID)
	}
	for _, k := range kids {
		rec, err := f.agentC["node-1"].Get(ctxT(t), k.ID)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(rec)
		shown = append(shown, "agent "+k.ID+": "+string(b))
	}
	// And what the command line prints of them.
	env := []string{"MUSTER_ADDR=http://" + f.core.Addr(), "MUSTER_TOKEN=" + f.secrets["admin"]}
	for _, args := range [][]string{{"run", "show", r.ID}, {"action", "show", kids[0].ID}, {"action", "show", kids[1].ID},
		{"events", "--limit", "1000"}} {
		shown = append(shown, strings.Join(args, " ")+": "+muster(t, env, args...))
	}
	for _, s := range shown {
		if strings.Contains(s, value) {
			t.Errorf("shown with the secret's value: %.2000s", s)
		}
	}
	// The children keep the reference, and their output and outputs hold
	// [redacted:db-password] where the command printed the value.
	for _, k := range kids {
		switch k.Step {
		case "migrate":
			if out := muster(t, env, "action", "show", k.ID); !strings.Contains(out, "[redacted:db-password]") {
				t.Errorf("action show %s prints no redacted value:\n%s", k.ID, out)
			}
			if !strings.Contains(string(k.Args), `{{ secret \"db-password\" }}`) {
				t.Errorf("migrate's args %s: want the reference", k.Args)
			}
			if !strings.Contains(k.Output, "migrating with password [redacted:db-password]") ||
				!strings.Contains(k.Output, "stderr: [redacted:db-password]") {
				t.Errorf("migrate's output %q: want the value redacted", k.Output)
			}
			if string(k.Outputs) != `{"used":"[redacted:db-password]"}` {
				t.Errorf("migrate's outputs %s: want the value redacted", k.Outputs)
			}
		case "report":
			if string(k.Args) != `{"used":"[redacted:db-password]"}` {
				t.Errorf("report's args %s: want the redacted output of migrate", k.Args)
			}
		}
	}

	// What is kept: the raw bytes of every file under the fleet's
	// directory, stores and logs alike (the processes still run: the
	// SQLite files are read as they are, WAL included).
	scanned := 0
	err = filepath.WalkDir(base, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !d.Type().IsRegular() {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return nil // a file removed meanwhile (a SQLite journal)
		}
		scanned++
		if bytes.Contains(b, []byte(value)) {
			t.Errorf("%s holds the secret's value", strings.TrimPrefix(path, base))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var sawStores int
	_ = filepath.WalkDir(base, func(path string, d fs.DirEntry, _ error) error {
		if d != nil && (d.Name() == "core.db" || d.Name() == "agent.db") {
			sawStores++
		}
		return nil
	})
	if sawStores != 3 {
		t.Fatalf("scanned %d files with %d stores (core.db, 2 × agent.db); want the three", scanned, sawStores)
	}
	t.Logf("scanned %d files and %d API and CLI answers for the value", scanned, len(shown))
}
