package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

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

SIGHUP (systemctl reload) reads the configuration again and applies the
approval rules, the disruptive kinds and the clusters' budgets without a
restart; an event (core.config_reloaded) says what changed. An invalid
configuration changes nothing: the one in use stays, and an event
(core.config_rejected) and a log line say why.

Configuration comes from --config (YAML), then MUSTER_* environment variables
(MUSTER_API_ADDR for api.addr), then flags.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg := core.DefaultConfig()
			if err := loadValid(cmd, &cfg, coreFlagKeys, cfg.Validate); err != nil {
				return err
			}
			log := newLogger(cfg.Log)
			c, err := core.New(cfg, log)
			if err != nil {
				return configExit(err)
			}
			ctx, stop := context.WithCancel(cmd.Context())
			defer stop()
			done := reloadOnHangup(ctx, func() {
				next := core.DefaultConfig()
				if err := loadValid(cmd, &next, coreFlagKeys, next.Validate); err != nil {
					_ = c.RejectConfig(ctx, err)
					return
				}
				if _, err := c.Reload(ctx, next); err != nil {
					log.Error("SIGHUP: reload failed", "err", err)
				}
			})
			err = c.Run(ctx)
			stop()
			<-done
			return err
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

// reloadOnHangup calls reload at every SIGHUP until ctx ends; the returned
// channel is closed once it stopped listening.
func reloadOnHangup(ctx context.Context, reload func()) <-chan struct{} {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGHUP)
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer signal.Stop(ch)
		for {
			select {
			case <-ctx.Done():
				return
			case <-ch:
				reload()
			}
		}
	}()
	return done
}

var coreFlagKeys = map[string]string{"data-dir": "data_dir", "api-addr": "api.addr"}

func coreFlags(cmd *cobra.Command) {
	f := cmd.Flags()
	f.String("config", "", "YAML configuration file")
	f.String("data-dir", "", "directory of the core database and the admin token (data_dir)")
	f.String("api-addr", "", "listen address of the REST API (api.addr)")
}
