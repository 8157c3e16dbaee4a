package agentcmd

import (
	"context"
	"io"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/musterhq/muster/cmd/internal/cli"
	"github.com/musterhq/muster/shared/config"
)

// TestAgentRefusesAnIDTheCoreRefuses starts the agent the way a user does,
// as `muster agent` and as `muster-agent`: an id the core would drop stops
// it before it opens anything.
func TestAgentRefusesAnIDTheCoreRefuses(t *testing.T) {
	t.Parallel()
	for _, self := range []string{"muster agent", "muster-agent"} {
		t.Run(self, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			cmd := New(self)
			cmd.SetArgs([]string{"--data-dir", dir, "--node-id", "db 1", "--cluster-id", "c1", "--api-addr", ""})
			cmd.SetOut(io.Discard)
			cmd.SetErr(io.Discard)
			err := cmd.ExecuteContext(context.Background())
			if cli.ExitCode(err) != 2 {
				t.Fatalf("error %v, want an exit-2 configuration error", err)
			}
			if got := config.FieldsOf(err); !slices.Equal(got, []string{"node_id"}) {
				t.Fatalf("fields %q, want node_id", got)
			}
			if entries, _ := os.ReadDir(dir); len(entries) != 0 {
				t.Fatalf("the refused agent wrote %d entries in its data directory", len(entries))
			}
		})
	}
}

// TestHelpNamesTheCommandItIs: the help of check and enroll names the
// command as it is typed in the binary that carries it, and the commands
// and flags are the same in both.
func TestHelpNamesTheCommandItIs(t *testing.T) {
	t.Parallel()
	help := func(self string, args ...string) string {
		t.Helper()
		cmd := New(self)
		if parent, _, ok := strings.Cut(self, " "); ok {
			root := &cobra.Command{Use: parent}
			root.AddCommand(cmd)
			cmd = root
			args = append([]string{"agent"}, args...)
		}
		var out strings.Builder
		cmd.SetOut(&out)
		cmd.SetErr(&out)
		cmd.SetArgs(append(args, "--help"))
		if err := cmd.Execute(); err != nil {
			t.Fatalf("%s %s --help: %v", self, strings.Join(args, " "), err)
		}
		return out.String()
	}
	for _, sub := range [][]string{{"check"}, {"enroll"}} {
		one, own := help("muster agent", sub...), help("muster-agent", sub...)
		if !strings.Contains(one, "muster agent "+sub[0]) || strings.Contains(one, "muster-agent") {
			t.Errorf("muster agent %s --help does not name muster agent:\n%s", sub[0], one)
		}
		if !strings.Contains(own, "muster-agent "+sub[0]) || strings.Contains(own, "muster agent") {
			t.Errorf("muster-agent %s --help does not name muster-agent:\n%s", sub[0], own)
		}
		if strings.ReplaceAll(one, "muster agent", "muster-agent") != own {
			t.Errorf("%s: the two helps differ beyond the command's name:\n%s\n---\n%s", sub[0], one, own)
		}
	}
}
