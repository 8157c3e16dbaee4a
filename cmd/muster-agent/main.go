// Command muster-agent is the agent of muster alone, for the nodes of a
// fleet: `muster-agent --config /etc/muster/agent.yaml` runs what
// `muster agent` runs, with the same flags, MUSTER_* environment and exit
// codes, and `muster-agent check`, `enroll` and `version` are its other
// commands. It links no part of the core, so that an idle agent stays
// small (docs/architecture.md, "Binaries"); the one binary muster keeps
// every command, the agent's included.
package main

import (
	"github.com/spf13/cobra"

	"github.com/musterhq/muster/cmd/internal/agentcmd"
	"github.com/musterhq/muster/cmd/internal/cli"
)

func main() { cli.Main("muster-agent", newRootCmd()) }

// newRootCmd is the agent command as a root command, with the version
// command beside check and enroll.
func newRootCmd() *cobra.Command {
	root := agentcmd.New("muster-agent")
	// As muster's root: a word that is no command is refused as one (with
	// suggestions), before --help and flags are looked at.
	root.Args = nil
	root.SilenceUsage = true
	root.SilenceErrors = true
	root.SetFlagErrorFunc(cli.FlagError)
	root.AddCommand(cli.NewVersionCmd("muster-agent"))
	return root
}
