package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestLinksNoCore: muster-agent is the small binary of the nodes, so
// nothing it links may be of the core (core/..., its web UI included) or
// PostgreSQL's driver, nor the Prometheus client library and the protocol
// buffers it brings (about 2 MB resident on every node; the agent's
// /metrics is written by github.com/VictoriaMetrics/metrics, see
// docs/performance.md, "Idle agent RSS"), nor any OpenTelemetry package:
// the agent hands the core's traceparent to the kind's command and links
// no tracing SDK (issue 38), nor what writes man pages and completion
// scripts (cmd/internal/gendocs, cobra/doc: only a build with the gendocs
// tag has them). `go list -deps` gives every package the binary links.
func TestLinksNoCore(t *testing.T) {
	t.Parallel()
	out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 50 || !slices.Contains(deps, "github.com/musterhq/muster/agent") {
		t.Fatalf("go list -deps gave %d packages, without the agent: %q", len(deps), deps)
	}
	// Paths none of whose packages may be linked.
	refused := []string{"github.com/musterhq/muster/core", "github.com/jackc/pgx",
		"github.com/prometheus/client_golang", "github.com/prometheus/client_model", "github.com/prometheus/common",
		"github.com/prometheus/procfs", "google.golang.org/protobuf", "go.opentelemetry.io",
		"github.com/musterhq/muster/cmd/internal/gendocs", "github.com/spf13/cobra/doc", "github.com/cpuguy83/go-md2man"}
	for _, p := range deps {
		for _, r := range refused {
			if p == r || strings.HasPrefix(p, r+"/") {
				t.Errorf("muster-agent links %s", p)
			}
		}
	}
}

// TestBinaryChecksAndPrintsItsVersion builds muster-agent and runs it as a
// node would: check of the example configuration (exit 0), of a bad one and
// of an id set through the environment (exit 2), version, and the help that
// lists the commands.
func TestBinaryChecksAndPrintsItsVersion(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	bin := filepath.Join(dir, "muster-agent")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("node_id: db-1\ncluster_id: prod\ncolour: blue\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	example := filepath.Join("..", "..", "configs", "agent.yaml")
	for _, tc := range []struct {
		name string
		args []string
		env  []string
		code int
		want string // in the output, standard output and error together
	}{
		{"check the example", []string{"check", "--config", example}, nil, 0, "Configuration is valid: " + example},
		{"check a bad file", []string{"check", "--config", bad}, nil, 2, "colour: unknown key"},
		{"check the environment", []string{"check", "--config", example}, []string{"MUSTER_NODE_ID=db 1"}, 2, "node_id:"},
		{"a bad flag", []string{"--colour", "blue"}, nil, 2, "muster-agent: unknown flag: --colour (see 'muster-agent --help')"},
		{"an unknown command", []string{"chek", "--help"}, nil, 1, "unknown command \"chek\" for \"muster-agent\"\n\nDid you mean this?\n\tcheck"},
		{"version", []string{"version"}, nil, 0, "muster-agent "},
		{"help", []string{"--help"}, nil, 0, "muster-agent [command]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cmd := exec.Command(bin, tc.args...)
			cmd.Env = append(os.Environ(), tc.env...)
			var out bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &out
			err := cmd.Run()
			code := 0
			if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
				code = ee.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			if code != tc.code || !strings.Contains(out.String(), tc.want) {
				t.Fatalf("muster-agent %s: exit %d, want %d with %q:\n%s", strings.Join(tc.args, " "), code, tc.code, tc.want, out.String())
			}
		})
	}
	help, _ := exec.Command(bin, "--help").Output()
	for _, c := range []string{"check", "enroll", "version", "--config", "--data-dir", "--node-id", "--cluster-id", "--api-addr"} {
		if !bytes.Contains(help, []byte(c)) {
			t.Errorf("muster-agent --help lacks %s:\n%s", c, help)
		}
	}
}
