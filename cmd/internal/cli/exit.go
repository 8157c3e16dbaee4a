package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/musterhq/muster/shared/config"
)

// ExitError carries a specific exit code (2 for usage and configuration errors).
type ExitError struct {
	Code int
	Err  error
}

func (e *ExitError) Error() string { return e.Err.Error() }
func (e *ExitError) Unwrap() error { return e.Err }

// ExitCode is the exit status for err: its ExitError's code, else 1.
func ExitCode(err error) int {
	var ee *ExitError
	if errors.As(err, &ee) {
		return ee.Code
	}
	return 1
}

// UsageError is a mistake in the command line: exit code 2.
func UsageError(format string, args ...any) error {
	return &ExitError{Code: 2, Err: fmt.Errorf(format, args...)}
}

// ConfigError gives a configuration error (config.Errors, however wrapped)
// exit code 2; other errors pass unchanged.
func ConfigError(err error) error {
	var es config.Errors
	if errors.As(err, &es) {
		return &ExitError{Code: 2, Err: err}
	}
	return err
}

// NoArgs is cobra.NoArgs with exit code 2.
func NoArgs(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return UsageError("%s takes no arguments, got %q (see '%s --help')", cmd.CommandPath(), args[0], cmd.CommandPath())
	}
	return nil
}

// FlagError is a root command's flag error function: a bad flag is a
// usage error (exit code 2) that says where the help is.
func FlagError(c *cobra.Command, err error) error {
	return &ExitError{Code: 2, Err: fmt.Errorf("%w (see '%s --help')", err, c.CommandPath())}
}

// Main runs root as the program prog does: until SIGINT or SIGTERM ends its
// context, then its error on stderr, escaped, and the exit status ExitCode
// gives it.
func Main(prog string, root *cobra.Command) {
	addGenDocs(root)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := root.ExecuteContext(ctx)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, prog+":", ErrorText(err))
		os.Exit(ExitCode(err))
	}
}
