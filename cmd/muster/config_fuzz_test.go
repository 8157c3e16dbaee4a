package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/musterhq/muster/agent"
	"github.com/musterhq/muster/cmd/internal/cli"
	"github.com/musterhq/muster/core"
	"github.com/musterhq/muster/shared/config"
)

// FuzzLoadConfig feeds YAML to cli.LoadConfig as `muster agent` and `muster core`
// read it. Whatever the input, loading never panics; it either fails with a
// one-line configuration error (exit code 2) or yields a struct whose
// Validate never panics and reports one line per bad field. The seeds are
// the example configurations and a few broken documents; `make test` runs
// them, `go test -fuzz FuzzLoadConfig ./cmd/muster` explores further.
func FuzzLoadConfig(f *testing.F) {
	for _, name := range []string{"agent.yaml", "core.yaml"} {
		b, err := os.ReadFile(filepath.Join("..", "..", "configs", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(string(b))
	}
	for _, s := range []string{
		"",
		"node_id: [1, 2]\n",
		"api: 7\n",
		"api:\n  tls:\n    cert_file: {a: b}\n",
		"actions:\n  retention: 10 parsecs\n",
		"actions:\n  external:\n    - kind: a/b\n      run: \"rm -rf /\"\n",
		"clusters:\n  - id: c\n    nodes: [{id: n, addr: 'ftp://x'}]\n",
		"orchestrate:\n  workers: -1\n  interval: -5s\n",
		"approval:\n  rules: [{kind: '[', cluster: '*', approval: maybe}]\n",
		"approval:\n  rules: [{kind: '*', cluster: 'prod-*', levels: [{teams: [db], min: 1}, {teams: [sre], persons: [alice]}]}]\n",
		"approval:\n  rules: [{kind: '*', approval: none, levels: [{}, {min: -1, teams: ['a b'], persons: ['']}]}]\n",
		"approval:\n  rules: [{levels: {teams: db}}, {levels: [{persons: [a], min: 2}]}]\n",
		"a: &a [*a, *a]\n",
		"\t- not yaml",
		"gossip: {enabled: true, join: x,y}\n",
		"notify:\n  - {name: x, url: 'http://127.0.0.1/?k=s', format: xml, secret_file: /nonexistent, events: ['['], clusters: [nope]}\n",
		"notify: 7\nnotify_allow_loopback: maybe\n",
		"notify:\n  - name: ''\n    url: ':'\n    events: {a: b}\n",
		"api:\n  read_timeout: 1 fortnight\n  max_connections: -3\n  socket_group: [x]\n  socket: {a: 1}\n",
		"api:\n  max_event_streams: 0\n  max_header_bytes: 1e99\n",
		"actions:\n  external:\n    - kind: a/b\n      run: [/bin/true]\n      env: {A: b}\n",
		"actions:\n  external:\n    - kind: a/b\n      run: [/bin/true]\n      env: [\"MUSTER_X=1\", \"=\", \"A\"]\n",
		"actions:\n  systemd_run: systemd-run\n  external:\n    - {kind: a/b, run: [/bin/true], privileges: admin, user: x}\n    - {kind: a/c, run: [/bin/true], restarts_agent: true, check: [/bin/true], idempotent: true}\n",
		"actions:\n  systemctl: [1]\n  external:\n    - {kind: a/b, run: [/bin/true], privileges: [root], restarts_agent: maybe}\n",
		"labels: {role: replica, zone: [1]}\n",
		"labels: {'a b': c}\n",
		"secrets:\n  dir: relative\n  files: {Db.Password: /x, ok: rel, '../x': /y}\n",
		"secrets:\n  dir: /etc/muster/secrets\n  files: {db-password: /run/credentials/db}\n",
		"secrets: 7\nsecrets_files: [1]\n",
		"core_steps:\n  allow_loopback: maybe\n  secrets:\n    lb-token: {file: /nonexistent, hosts: [lb.example.com]}\n    Bad: {file: rel, hosts: ['https://x/', '']}\n    x: /old/shape\n",
		"clusters:\n  - id: c\n    budget: {max_unavailable: 10%}\n    nodes: [{id: n, addr: 'x:1', labels: {role: replica}}]\n",
		"clusters:\n  - id: c\n    budget: {max_unavailable: [1]}\n",
		"kinds: [{kind: '[', disruptive: yes}]\n",
		"clusters:\n  - id: c\n    windows: [{cron: '0 2 * * *', duration: 4h, timezone: Europe/Berlin}]\n    freezes: [{from: '2026-12-24T00:00:00+01:00', to: '2026-12-27T00:00:00+01:00', reason: x}]\n",
		"clusters:\n  - id: c\n    windows: [{cron: '@every 0s', duration: -1h, timezone: Local}, {cron: [1]}]\n    freezes: [{from: 2026-12-24, to: 2026-12-23}, {from: {a: b}}]\n",
		"clusters:\n  - id: c\n    expect: {nodes: [a, b], grace: 2m}\n",
		"clusters:\n  - id: c\n    expect: {count: 3, selector: {role: web}}\n",
		"clusters:\n  - id: c\n    expect: {nodes: ['a b', a, a], count: -1, selector: {'': '<b>'}, grace: -1s}\n",
		"clusters:\n  - id: c\n    expect: {nodes: {a: b}, count: x, grace: [1]}\n",
		"clusters:\n  - id: c\n    expect: 7\n",
		"clusters:\n  - id: c\n    expect: {nodes: [a], on_alert: {playbook: heal, version: 2, params: {service: web}}}\n",
		"clusters:\n  - id: c\n    expect: {nodes: [a], on_alert: {playbook: '<b>', version: -1, params: {missing: x}}}\n",
		"clusters:\n  - id: c\n    expect: {nodes: [a], on_alert: [1]}\n",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, doc string) {
		path := filepath.Join(t.TempDir(), "muster.yaml")
		if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
			t.Fatal(err)
		}
		acfg := agent.DefaultConfig()
		checkLoad(t, path, &acfg, acfg.Validate)
		ccfg := core.DefaultConfig()
		checkLoad(t, path, &ccfg, ccfg.Validate)
	})
}

func checkLoad(t *testing.T, path string, out any, validate func() error) {
	t.Helper()
	var loadErr error
	cmd := &cobra.Command{RunE: func(cmd *cobra.Command, _ []string) error {
		loadErr = cli.LoadConfig(cmd, out, nil)
		return nil
	}}
	cmd.Flags().String("config", "", "")
	cmd.SetArgs([]string{"--config", path})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	if loadErr != nil {
		if cli.ExitCode(loadErr) != 2 {
			t.Fatalf("load error with exit code %d: %v", cli.ExitCode(loadErr), loadErr)
		}
		checkReport(t, loadErr, false)
		return
	}
	if err := validate(); err != nil {
		checkReport(t, cli.ConfigError(err), true)
	}
}

// checkReport checks that err is a configuration report: exit code 2 and,
// when it is a list of field errors (required when fields is true), one
// line per entry, each naming its field.
func checkReport(t *testing.T, err error, fields bool) {
	t.Helper()
	if cli.ExitCode(err) != 2 {
		t.Fatalf("exit code %d for %v", cli.ExitCode(err), err)
	}
	var es config.Errors
	if !errors.As(err, &es) {
		if fields {
			t.Fatalf("validation error %v is not a list of field errors", err)
		}
		return // the file itself is not YAML
	}
	if strings.Count(err.Error(), "\n") != len(es) {
		t.Fatalf("report %q is not one line per field", err)
	}
	for _, e := range es {
		if e.Field == "" || e.Problem == "" {
			t.Fatalf("entry %+v names no field or no problem", e)
		}
	}
}
