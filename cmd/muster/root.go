package main

import (
	"github.com/spf13/cobra"

	"github.com/musterhq/muster/cmd/internal/agentcmd"
	"github.com/musterhq/muster/cmd/internal/cli"
)

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:           "muster",
		Short:         "Run operational actions on fleets of machines",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	// muster --version is muster version: the client's and the core's.
	showVersion := root.Flags().Bool("version", false, "print the client's version and, when the core answers, the core's")
	root.RunE = func(cmd *cobra.Command, _ []string) error {
		if *showVersion {
			return printVersions(cmd.Context(), cmd.OutOrStdout(), &clientFlags{output: "table"}, false)
		}
		return cmd.Help()
	}
	root.SetFlagErrorFunc(cli.FlagError)
	// Every command of muster, in one place (help lists them by name).
	root.AddCommand(
		// Run muster.
		agentcmd.New("muster agent"), newCoreCmd(), newDevCmd(),
		// Talk to a core.
		newActionCmd(), newRunCmd(), newPlaybookCmd(), newScheduleCmd(), newClusterCmd(), newNodeCmd(), newEventsCmd(), newTokenCmd(), newTeamCmd(), newGrantCmd(), newFreezeCmd(), newWindowCmd(), newBudgetCmd(), newApprovalRuleCmd(), newPolicyCmd(false), newPolicyCmd(true), newNotifyCmd(),
		newLoginCmd(), newLogoutCmd(),
		// Set-up helpers.
		newTLSCmd(), newGossipCmd(), newWebhookCmd(), newVersionCmd(),
	)
	addCompletions(root)
	return root
}
