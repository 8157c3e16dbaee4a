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

SIGHUP reloads the core's certificates (api.tls, agents_tls) from their
files without a restart.

Configuration comes from --config (YAML), then MUSTER_* environment variables
(MUSTER_API_ADDR for api.addr), then flags.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg := core.DefaultConfig()
			if err := loadConfig(cmd, &cfg, map[string]string{
				"data-dir": "data_dir", "api-addr": "api.addr",
			}); err != nil {
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
				if err := c.ReloadTLS(); err != nil {
					log.Error("SIGHUP: reloading certificates failed; the ones in use stay", "err", err)
				}
			})
			err = c.Run(ctx)
			stop()
			<-done
			return err
		},
	}
	f := cmd.Flags()
	f.String("config", "", "YAML configuration file")
	f.String("data-dir", "", "directory of the core database and the admin token (data_dir)")
	f.String("api-addr", "", "listen address of the REST API (api.addr)")
	cmd.AddCommand(newCoreStatusCmd())
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
