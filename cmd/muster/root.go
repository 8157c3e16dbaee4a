package main

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/musterhq/muster/shared/config"
	"github.com/musterhq/muster/shared/version"
)

// exitError carries a specific exit code (2 for usage and configuration errors).
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

func exitCode(err error) int {
	var ee *exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	return 1
}

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:           "muster",
		Short:         "Run operational actions on fleets of machines",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return &exitError{code: 2, err: fmt.Errorf("%w (see '%s --help')", err, c.CommandPath())}
	})
	// Every command of muster, in one place (help lists them by name).
	root.AddCommand(
		// Run muster.
		newAgentCmd(), newCoreCmd(), newDevCmd(),
		// Talk to a core.
		newActionCmd(), newRunCmd(), newPlaybookCmd(), newScheduleCmd(), newClusterCmd(), newNodeCmd(), newEventsCmd(), newTokenCmd(), newNotifyCmd(),
		// Set-up helpers.
		newTLSCmd(), newGossipCmd(), newVersionCmd(),
	)
	addCompletions(root)
	return root
}

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			fmt.Fprintln(cmd.OutOrStdout(), "muster", version.Version)
			return nil
		},
	}
}

// newLogger builds the process logger from a validated log section.
func newLogger(l config.Log) *slog.Logger {
	var lv slog.Level
	_ = lv.UnmarshalText([]byte(l.Level))
	opts := &slog.HandlerOptions{Level: lv}
	if strings.EqualFold(l.Format, "json") {
		return slog.New(slog.NewJSONHandler(os.Stderr, opts))
	}
	return slog.New(slog.NewTextHandler(os.Stderr, opts))
}
