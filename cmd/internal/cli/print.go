package cli

import (
	"fmt"
	"log/slog"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/musterhq/muster/shared/config"
	"github.com/musterhq/muster/shared/textsafe"
	"github.com/musterhq/muster/shared/version"
)

// NewLogger builds the process logger from a validated log section.
func NewLogger(l config.Log) *slog.Logger {
	var lv slog.Level
	_ = lv.UnmarshalText([]byte(l.Level))
	opts := &slog.HandlerOptions{Level: lv}
	if strings.EqualFold(l.Format, "json") {
		return slog.New(slog.NewJSONHandler(os.Stderr, opts))
	}
	return slog.New(slog.NewTextHandler(os.Stderr, opts))
}

// NewVersionCmd is the version command of the binary named prog.
func NewVersionCmd(prog string) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			fmt.Fprintln(cmd.OutOrStdout(), prog, version.Version)
			return nil
		},
	}
}

// ConfigOK is what a check prints for a valid configuration.
func ConfigOK(cmd *cobra.Command) error {
	what := "the defaults and the environment"
	if f := cmd.Flags().Lookup("config"); f != nil && f.Value.String() != "" {
		what = f.Value.String()
	}
	_, err := fmt.Fprintf(cmd.OutOrStdout(), "Configuration is valid: %s\n", textsafe.Escape(what))
	return err
}

// ErrorText is how an error prints: its lines, each escaped, since an error
// may quote what a server answered. Tabs stay tabs: cobra indents its
// suggestions ("Did you mean this?") with one.
func ErrorText(err error) string {
	parts := strings.Split(err.Error(), "\t")
	for i, p := range parts {
		parts[i] = SafeLines(p)
	}
	return strings.Join(parts, "\t")
}

// SafeLines is text of several lines from the core (an action's output, a
// playbook, an error) escaped line by line: its line breaks stay line
// breaks, any other control character becomes an escape (textsafe.Escape).
func SafeLines(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = textsafe.Escape(l)
	}
	return strings.Join(lines, "\n")
}
