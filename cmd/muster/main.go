// Command muster is the one binary of muster: the agent, the core, the
// development cluster and the client. This package only wires: it reads flags,
// environment and configuration files, builds plain config structs and hands
// them to the agent and core packages.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := newRootCmd().ExecuteContext(ctx)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "muster:", errorText(err))
		os.Exit(exitCode(err))
	}
}

// errorText is how an error prints: its lines, each escaped, since an error
// may quote what a server answered. Tabs stay tabs: cobra indents its
// suggestions ("Did you mean this?") with one.
func errorText(err error) string {
	parts := strings.Split(err.Error(), "\t")
	for i, p := range parts {
		parts[i] = safeLines(p)
	}
	return strings.Join(parts, "\t")
}
