// Command muster is the one binary of muster: the agent, the core, the
// development cluster and the client. This package only wires: it reads flags,
// environment and configuration files, builds plain config structs and hands
// them to the agent and core packages. The agent's command (cmd/internal/agentcmd)
// is also the root of muster-agent, the small agent-only binary of the nodes.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/musterhq/muster/cmd/internal/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := newRootCmd().ExecuteContext(ctx)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "muster:", cli.ErrorText(err))
		os.Exit(cli.ExitCode(err))
	}
}
