package main

import (
	"github.com/spf13/cobra"

	"github.com/musterhq/muster/agent"
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
			if err := loadConfig(cmd, &cfg, map[string]string{
				"data-dir": "data_dir", "node-id": "node_id", "cluster-id": "cluster_id", "api-addr": "api.addr",
			}); err != nil {
				return err
			}
			a, err := agent.New(cfg, newLogger(cfg.Log))
			if err != nil {
				return configExit(err)
			}
			return a.Run(cmd.Context())
		},
	}
	f := cmd.Flags()
	f.String("config", "", "YAML configuration file")
	f.String("data-dir", "", "directory of the queue database (data_dir)")
	f.String("node-id", "", "this node's id (node_id)")
	f.String("cluster-id", "", "this node's cluster (cluster_id)")
	f.String("api-addr", "", "listen address of the API (api.addr)")
	return cmd
}
