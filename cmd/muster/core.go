package main

import (
	"github.com/spf13/cobra"

	"github.com/musterhq/muster/core"
)

func init() { register(newCoreCmd) }

func newCoreCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "core",
		Short: "Run the core: the store, the orchestrator of clusters and the REST API",
		Long: `Run the core. It keeps clusters, nodes, actions and events in
<data_dir>/core.db, orchestrates every cluster periodically (pull from the
agents, reconcile, push approved actions) and serves the REST API. On first
start it writes an admin token to <data_dir>/admin.token.

With store.driver postgres, several replicas share one database: each
cluster's passes run on the replica holding its lease ("muster core status"
lists them).

Configuration comes from --config (YAML), then MUSTER_* environment variables
(MUSTER_API_ADDR for api.addr), then flags.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg := core.DefaultConfig()
			if err := loadValid(cmd, &cfg, coreFlagKeys, cfg.Validate); err != nil {
				return err
			}
			c, err := core.New(cfg, newLogger(cfg.Log))
			if err != nil {
				return configExit(err)
			}
			return c.Run(cmd.Context())
		},
	}
	coreFlags(cmd)
	check := &cobra.Command{
		Use:   "check",
		Short: "Check a core configuration and report every problem at once",
		Long: `Check a core configuration as "muster core" would load it (the file, then
MUSTER_* environment variables, then flags) and report every unknown key, bad
value and bad field at once. Exit status 0 when it is valid, 2 when not.
Nothing is opened or started: the store is not contacted.`,
		Example: `  muster core check --config /etc/muster/core.yaml`,
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg := core.DefaultConfig()
			if err := loadValid(cmd, &cfg, coreFlagKeys, cfg.Validate); err != nil {
				return err
			}
			return configOK(cmd)
		},
	}
	coreFlags(check)
	cmd.AddCommand(newCoreStatusCmd(), check)
	return cmd
}

var coreFlagKeys = map[string]string{"data-dir": "data_dir", "api-addr": "api.addr"}

func coreFlags(cmd *cobra.Command) {
	f := cmd.Flags()
	f.String("config", "", "YAML configuration file")
	f.String("data-dir", "", "directory of the core database and the admin token (data_dir)")
	f.String("api-addr", "", "listen address of the REST API (api.addr)")
}
