package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/musterhq/muster/agent"
	"github.com/musterhq/muster/shared/textsafe"
)

func newAgentCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "agent",
		Short: "Run the agent of this node: its action queue, runner and local API",
		Long: `Run the agent of this node. It keeps a durable queue of actions in
<data_dir>/agent.db, runs them one at a time in creation order, and answers
its API: over TCP (api.addr) for the core only, with mutual TLS unless
api.insecure, and on the Unix socket <data_dir>/agent.sock for people and
scripts on the node, who are recorded by their uid. Configuration comes
from --config (YAML), then MUSTER_* environment variables (MUSTER_API_ADDR
for api.addr), then flags.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg := agent.DefaultConfig()
			if err := loadValid(cmd, &cfg, agentFlagKeys, cfg.Validate); err != nil {
				return err
			}
			a, err := agent.New(cfg, newLogger(cfg.Log))
			if err != nil {
				return configExit(err)
			}
			return a.Run(cmd.Context())
		},
	}
	agentFlags(cmd)
	check := &cobra.Command{
		Use:   "check",
		Short: "Check an agent configuration and report every problem at once",
		Long: `Check an agent configuration as "muster agent" would load it (the file, then
MUSTER_* environment variables, then flags) and report every unknown key, bad
value and bad field at once. Exit status 0 when it is valid, 2 when not.
Nothing is opened or started.`,
		Example: `  muster agent check --config /etc/muster/agent.yaml`,
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg := agent.DefaultConfig()
			if err := loadValid(cmd, &cfg, agentFlagKeys, cfg.Validate); err != nil {
				return err
			}
			return configOK(cmd)
		},
	}
	agentFlags(check)
	cmd.AddCommand(check)
	return cmd
}

var agentFlagKeys = map[string]string{
	"data-dir": "data_dir", "node-id": "node_id", "cluster-id": "cluster_id", "api-addr": "api.addr",
}

func agentFlags(cmd *cobra.Command) {
	f := cmd.Flags()
	f.String("config", "", "YAML configuration file")
	f.String("data-dir", "", "directory of the queue database (data_dir)")
	f.String("node-id", "", "this node's id (node_id)")
	f.String("cluster-id", "", "this node's cluster (cluster_id)")
	f.String("api-addr", "", "listen address of the API (api.addr)")
}

// configOK is what a check prints for a valid configuration.
func configOK(cmd *cobra.Command) error {
	what := "the defaults and the environment"
	if f := cmd.Flags().Lookup("config"); f != nil && f.Value.String() != "" {
		what = f.Value.String()
	}
	_, err := fmt.Fprintf(cmd.OutOrStdout(), "Configuration is valid: %s\n", textsafe.Escape(what))
	return err
}
