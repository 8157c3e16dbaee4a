// Command muster is the one binary of muster: the agent, the core, the
// development cluster and the client. This package only wires: it reads flags,
// environment and configuration files, builds plain config structs and hands
// them to the agent and core packages. The agent's command (cmd/internal/agentcmd)
// is also the root of muster-agent, the small agent-only binary of the nodes.
package main

import (
	"github.com/musterhq/muster/cmd/internal/cli"
)

func main() { cli.Main("muster", newRootCmd()) }
