package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/musterhq/muster/cmd/internal/cli"
)

// checkRun runs `muster <what> check --config F` with yaml in F.
func checkRun(t *testing.T, what, yaml string) (string, string, int) {
	t.Helper()
	path := filepath.Join(t.TempDir(), what+".yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	e := &cliEnv{t: t}
	return e.runRaw(what, "check", "--config", path)
}

// Unknown keys, values the decoder refuses and fields validation refuses
// come in one report: one run of check shows every problem.
func TestCheckReportsEveryErrorInOnePass(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		what, yaml string
		want       []string
	}{
		{"agent", "cluster_id: prod\ndata_dir: /tmp/x\ncolour: blue\nactions:\n  retention: soon\ngossip:\n  enabled: true\n",
			[]string{"colour: unknown key", "actions.retention:", "node_id:", "gossip.key_file:"}},
		{"core", "data_dir: /tmp/x\nshape: round\norchestrate:\n  interval: often\napproval:\n  default: maybe\n",
			[]string{"shape: unknown key", "orchestrate.interval:", "approval.default:"}},
		{"core", "data_dir: /tmp/x\nclusters:\n  - id: prod\n    windows: [{cron: '0 25 * * *', duration: 30s, timezone: Mars/Base}]\n" +
			"    freezes: [{from: '2026-12-27T00:00:00Z', to: '2026-12-24T00:00:00Z', reason: x}]\n",
			[]string{"clusters[0].windows[0].cron:", "clusters[0].windows[0].duration:", "clusters[0].windows[0].timezone:",
				"clusters[0].freezes[0].to:"}},
	} {
		t.Run(c.what, func(t *testing.T) {
			t.Parallel()
			_, msg, code := checkRun(t, c.what, c.yaml)
			if code != 2 {
				t.Fatalf("exit %d: %s", code, msg)
			}
			for _, w := range c.want {
				if !strings.Contains(msg, w) {
					t.Errorf("report lacks %q:\n%s", w, msg)
				}
			}
		})
	}
}

func TestCheckValidConfig(t *testing.T) {
	t.Parallel()
	for what, yaml := range map[string]string{
		"agent": "node_id: db-1\ncluster_id: prod\ndata_dir: /var/lib/muster\n",
		"core": "data_dir: /var/lib/muster\nclusters:\n  - id: prod\n    nodes: [{id: db-1, addr: \"10.0.0.1:7420\"}]\n" +
			"    windows: [{cron: '0 2 * * *', duration: 4h, timezone: Europe/Berlin}]\n" +
			"    freezes: [{from: '2026-12-24T00:00:00+01:00', to: '2026-12-27T00:00:00+01:00', reason: holidays}]\n",
	} {
		out, msg, code := checkRun(t, what, yaml)
		if code != 0 || !strings.HasPrefix(out, "Configuration is valid: ") {
			t.Fatalf("%s check: exit %d %q %s", what, code, out, msg)
		}
	}
	if _, msg, code := checkRun(t, "agent", "node_id: [unclosed\n"); code != 2 || !strings.Contains(msg, "config ") {
		t.Fatalf("bad YAML: exit %d %s", code, msg)
	}
}

// A bad args_schema is a configuration error reported with the others; a
// schema written as a YAML mapping (whose keys would lose their case) is
// refused with how to write it; one written as a block of text is valid.
func TestCheckArgsSchema(t *testing.T) {
	t.Parallel()
	const head = "node_id: db-1\ncluster_id: prod\ndata_dir: /var/lib/muster\nactions:\n  external:\n    - kind: example.com/pkg.upgrade\n      run: [/bin/true]\n"
	_, msg, code := checkRun(t, "agent", head+"      args_schema: |\n        {\"type\": \"banana\"}\n"+"colour: blue\n")
	if code != 2 || !strings.Contains(msg, "actions.external[0].args_schema:") || !strings.Contains(msg, "colour: unknown key") {
		t.Fatalf("bad schema: exit %d %s", code, msg)
	}
	_, msg, code = checkRun(t, "agent", head+"      args_schema:\n        type: object\n        minProperties: 1\n")
	if code != 2 || !strings.Contains(msg, "actions.external[0].args_schema:") || !strings.Contains(msg, "args_schema: |") {
		t.Fatalf("schema as a mapping: exit %d %s", code, msg)
	}
	out, msg, code := checkRun(t, "agent", head+"      args_schema: |\n        type: object\n        required: [version]\n        properties:\n          version: {type: string, minLength: 1}\n")
	if code != 0 || !strings.HasPrefix(out, "Configuration is valid: ") {
		t.Fatalf("good schema: exit %d %q %s", code, out, msg)
	}
}

// An args_schema whose check could cost the core (and the agent) too much
// is refused by `muster agent check`, saying which bound it passes: issue
// 30's 21 levels of an anyOf of two $refs to the level below.
func TestCheckRefusesACostlyArgsSchema(t *testing.T) {
	t.Parallel()
	defs := []string{`"l0": {"type": "string", "minLength": 1}`}
	for i := 1; i < 21; i++ {
		defs = append(defs, fmt.Sprintf(`"l%d": {"anyOf": [{"$ref": "#/$defs/l%d"}, {"$ref": "#/$defs/l%d"}]}`, i, i-1, i-1))
	}
	schema := `{"$defs": {` + strings.Join(defs, ", ") + `}, "$ref": "#/$defs/l20"}`
	const head = "node_id: db-1\ncluster_id: prod\ndata_dir: /var/lib/muster\nactions:\n  external:\n    - kind: example.com/pkg.upgrade\n      run: [/bin/true]\n"
	_, msg, code := checkRun(t, "agent", head+"      args_schema: |\n        "+schema+"\n")
	if code != 2 || !strings.Contains(msg, "actions.external[0].args_schema:") || !strings.Contains(msg, "schema too costly") ||
		!strings.Contains(msg, "$ref") {
		t.Fatalf("costly schema: exit %d %s", code, msg)
	}
}

// TestCheckFullSyncEvery: full_sync_every is a duration (0: scaled with the
// fleet); the integer of its meaning before (every Nth pass compared id
// sets) is still accepted, as compare_ids_every, with a warning; a
// duration under a second is refused, as is a counter_every under a second.
func TestCheckFullSyncEvery(t *testing.T) {
	t.Parallel()
	const head = "data_dir: /var/lib/muster\norchestrate:\n"
	for _, c := range []struct {
		yaml string
		code int
		warn bool
	}{
		{"  full_sync_every: 5m\n", 0, false},
		{"  full_sync_every: 0s\n  compare_ids_every: 3\n", 0, false},
		{"  full_sync_every: 6\n", 0, true},
		{"  full_sync_every: 500ms\n", 2, false},
		{"  full_sync_every: -1m\n", 2, false},
		{"  compare_ids_every: 0\n", 2, false},
		{"  counter_every: 30s\n", 0, false},
		{"  counter_every: 0s\n", 0, false},
		{"  counter_every: 100ms\n", 2, false},
		{"  counter_every: -5s\n", 2, false},
	} {
		path := filepath.Join(t.TempDir(), "core.yaml")
		if err := os.WriteFile(path, []byte(head+c.yaml), 0o600); err != nil {
			t.Fatal(err)
		}
		root := newRootCmd()
		root.SetArgs([]string{"core", "check", "--config", path})
		var out, errs lockedBuffer
		root.SetOut(&out)
		root.SetErr(&errs)
		err := root.ExecuteContext(context.Background())
		code := 0
		if err != nil {
			code = cli.ExitCode(err)
		}
		if code != c.code {
			t.Errorf("%q: exit %d, want %d: %v", c.yaml, code, c.code, err)
		}
		if err != nil && !strings.Contains(err.Error(), "orchestrate.") {
			t.Errorf("%q: the report names no orchestrate key: %v", c.yaml, err)
		}
		if got := strings.Contains(errs.String(), "warning: orchestrate.full_sync_every is an integer"); got != c.warn {
			t.Errorf("%q: warned %v, want %v: %s", c.yaml, got, c.warn, errs.String())
		}
	}
}
