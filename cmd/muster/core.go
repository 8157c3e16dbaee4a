package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
	"go.yaml.in/yaml/v3"

	"github.com/musterhq/muster/cmd/internal/cli"
	"github.com/musterhq/muster/core"
	"github.com/musterhq/muster/core/store/postgres"
	"github.com/musterhq/muster/shared/config"
)

func newCoreCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "core",
		Short: "Run the core: the store, the orchestrator of clusters and the REST API",
		Long: `Run the core. It keeps clusters, nodes, actions and events in
<data_dir>/core.db, orchestrates every cluster periodically (pull from the
agents, reconcile, push approved actions) and serves the REST API. On first
start it writes an admin token to <data_dir>/admin.token.

With store.driver postgres, several replicas share one database: each
cluster's full syncs run on the replica holding its lease ("muster core status"
lists them).

SIGHUP (systemctl reload) reloads the core's certificates (api.tls,
agents_tls) from their files, reads the configuration again and applies the
approval rules, the disruptive kinds, the clusters' budgets, windows and
freezes, and the notification destinations (their secret files read again),
all without a restart; an event (core.config_reloaded) says what changed. An invalid
configuration changes nothing: the one in use stays, and an event
(core.config_rejected) and a log line say why.

Configuration comes from --config (YAML), then MUSTER_* environment variables
(MUSTER_API_ADDR for api.addr), then flags.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg := coreDefaults(cmd)
			if err := cli.LoadValid(cmd, &cfg, coreFlagKeys, cfg.Validate); err != nil {
				return err
			}
			if err := checkConfigSecrets(cmd.Flags().Lookup("config").Value.String()); err != nil {
				return &cli.ExitError{Code: 2, Err: err}
			}
			log := cli.NewLogger(cfg.Log)
			c, err := core.New(cfg, log)
			if err != nil {
				return cli.ConfigError(err)
			}
			ctx, stop := context.WithCancel(cmd.Context())
			defer stop()
			done := reloadOnHangup(ctx, func() {
				if err := c.ReloadTLS(); err != nil {
					log.Error("SIGHUP: reloading certificates failed; the ones in use stay", "err", err)
				}
				next := coreDefaults(cmd)
				if err := cli.LoadValid(cmd, &next, coreFlagKeys, next.Validate); err != nil {
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
		Args:    cli.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg := coreDefaults(cmd)
			if err := cli.LoadValid(cmd, &cfg, coreFlagKeys, cfg.Validate); err != nil {
				return err
			}
			if cfg.Orchestrate.OldFullSyncEvery() {
				fmt.Fprintln(cmd.ErrOrStderr(), "warning: "+core.OldFullSyncEveryWarning)
			}
			return cli.ConfigOK(cmd)
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
	// The end-to-end tests move time with windows of a few seconds; people
	// keep the 1-minute minimum.
	f.Duration("test-min-window", 0, "the shortest maintenance window accepted (tests only)")
	_ = f.MarkHidden("test-min-window")
	// And schedules of a few seconds; people keep the 1-minute minimum.
	f.Duration("test-min-every", 0, "the shortest @every of a schedule accepted (tests only)")
	_ = f.MarkHidden("test-min-every")
	f.String("config", "", "YAML configuration file")
	f.String("data-dir", "", "directory of the core database and the admin token (data_dir)")
	f.String("api-addr", "", "listen address of the REST API (api.addr)")
}

// checkConfigSecrets refuses a core configuration file whose store.dsn holds
// a PostgreSQL password while its group or others may read it, as key files
// are refused (docs/architecture.md, "Several core replicas on PostgreSQL").
// The password itself is never shown.
func checkConfigSecrets(path string) error {
	if path == "" {
		return nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil // cli.LoadConfig has read it; a file gone since fails later
	}
	var doc struct {
		Store struct {
			DSN string `yaml:"dsn"`
		} `yaml:"store"`
	}
	if yaml.Unmarshal(b, &doc) != nil || !postgres.LooksLikeDSN(doc.Store.DSN) || !postgres.HasPassword(doc.Store.DSN) {
		return nil
	}
	if err := config.CheckPrivateFile(path); errors.Is(err, config.ErrFileOpen) {
		return fmt.Errorf("config %s holds a PostgreSQL password in store.dsn (%s): %w; or give the DSN in MUSTER_STORE_DSN",
			path, postgres.Describe(doc.Store.DSN), err)
	}
	return nil
}

// coreDefaults is the core's default configuration with what the hidden
// test flags set.
func coreDefaults(cmd *cobra.Command) core.Config {
	cfg := core.DefaultConfig()
	if d, err := cmd.Flags().GetDuration("test-min-window"); err == nil && d > 0 {
		cfg.MinWindow = d
	}
	if d, err := cmd.Flags().GetDuration("test-min-every"); err == nil && d > 0 {
		cfg.MinEvery = d
	}
	return cfg
}
