package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/musterhq/muster/cmd/internal/cli"
	"github.com/musterhq/muster/shared/textsafe"
	"github.com/musterhq/muster/shared/version"
)

// versions is what muster version prints: the client's build and, when the
// core answers, the core's.
type versions struct {
	Client string `json:"client"`
	Core   string `json:"core,omitempty"`
	// CoreAddr is the core asked; CoreError why it did not answer.
	CoreAddr  string `json:"core_addr,omitempty"`
	CoreError string `json:"core_error,omitempty"`
}

// versionTimeout bounds the question to the core: a version is asked for
// when something is wrong, and must not hang on a core that does not answer.
const versionTimeout = 5 * time.Second

// newVersionCmd is muster version (muster --version prints the same).
func newVersionCmd() *cobra.Command {
	var clientOnly bool
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the client's version and, when the core answers, the core's",
		Args:  cli.NoArgs,
	}
	f := bindClientFlags(cmd)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		return printVersions(cmd.Context(), cmd.OutOrStdout(), f, clientOnly)
	}
	cmd.Flags().BoolVar(&clientOnly, "client", false, "print the client's version alone, asking no core")
	return cmd
}

// printVersions prints the client's version and asks the core of f for
// its own: a core that does not answer (or no token) is said on the core's
// line, and is no error: the client's version is what was asked first.
func printVersions(ctx context.Context, w io.Writer, f *clientFlags, clientOnly bool) error {
	v := versions{Client: version.Version}
	if err := f.checkOutput(); err != nil {
		return err
	}
	if !clientOnly {
		if c, err := f.core(); err != nil {
			v.CoreError = cli.ErrorText(err)
		} else {
			v.CoreAddr = c.Addr()
			ctx, cancel := context.WithTimeout(ctx, versionTimeout)
			defer cancel()
			if v.Core, err = c.Version(ctx); err != nil {
				v.CoreError = apiError(c, err).Error()
			}
		}
	}
	if f.json() {
		return f.write(w, v)
	}
	// The client's line is what it always was ("muster VERSION", as
	// muster-agent version prints its own); the core's follows it.
	fmt.Fprintf(w, "muster %s\n", textsafe.Escape(v.Client))
	switch {
	case clientOnly:
	case v.CoreError != "":
		_, err := fmt.Fprintf(w, "core   unknown: %s\n", textsafe.Escape(v.CoreError))
		return err
	default:
		_, err := fmt.Fprintf(w, "core   %s (%s)\n", textsafe.Escape(v.Core), textsafe.Escape(v.CoreAddr))
		return err
	}
	return nil
}
