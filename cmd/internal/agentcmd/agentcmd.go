// Package agentcmd is the agent's command line: run the agent, check its
// configuration, enroll the node. Both binaries carry it: `muster agent` in
// the one binary muster, and the small agent-only binary muster-agent, whose
// root command it is and which links no part of the core
// (docs/architecture.md, "Binaries").
package agentcmd

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime/debug"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/musterhq/muster/agent"
	"github.com/musterhq/muster/agent/enroll"
	"github.com/musterhq/muster/cmd/internal/cli"
	"github.com/musterhq/muster/shared/textsafe"
)

// New returns the agent command whose full path is self: "muster agent"
// under muster's root command, "muster-agent" as a root command of its own.
// Its help names the commands by that path.
func New(self string) *cobra.Command {
	use := self[strings.LastIndex(self, " ")+1:]
	cmd := &cobra.Command{
		Use:   use,
		Short: "Run the agent of this node: its action queue, runner and local API",
		Long: `Run the agent of this node. It keeps a durable queue of actions in
<data_dir>/agent.db, runs them one at a time in creation order, and answers
its API: over TCP (api.addr) for the core only, with mutual TLS unless
api.insecure, and on the Unix socket <data_dir>/agent.sock for people and
scripts on the node, who are recorded by their uid. Configuration comes
from --config (YAML), then MUSTER_* environment variables (MUSTER_API_ADDR
for api.addr), then flags.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg := agent.DefaultConfig()
			if err := cli.LoadValid(cmd, &cfg, agentFlagKeys, cfg.Validate); err != nil {
				return err
			}
			a, err := agent.New(cfg, cli.NewLogger(cfg.Log))
			if err != nil {
				return cli.ConfigError(err)
			}
			go returnStartupMemory(cmd.Context(), a.Ready())
			return a.Run(cmd.Context())
		},
	}
	agentFlags(cmd)
	check := &cobra.Command{
		Use:   "check",
		Short: "Check an agent configuration and report every problem at once",
		Long: `Check an agent configuration as "` + self + `" would load it (the file, then
MUSTER_* environment variables, then flags) and report every unknown key, bad
value and bad field at once. Exit status 0 when it is valid, 2 when not.
Nothing is opened or started.`,
		Example: `  ` + self + ` check --config /etc/muster/agent.yaml`,
		Args:    cli.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg := agent.DefaultConfig()
			if err := cli.LoadValid(cmd, &cfg, agentFlagKeys, cfg.Validate); err != nil {
				return err
			}
			return cli.ConfigOK(cmd)
		},
	}
	agentFlags(check)
	cmd.AddCommand(check, newEnrollCmd(self))
	return cmd
}

var agentFlagKeys = map[string]string{
	"data-dir": "data_dir", "node-id": "node_id", "cluster-id": "cluster_id", "api-addr": "api.addr",
}

func agentFlags(cmd *cobra.Command) {
	f := cmd.Flags()
	f.String("config", "", "YAML configuration file")
	f.String("data-dir", "", "directory of the queue database (data_dir)")
	f.String("node-id", "", "this node's id (node_id)")
	f.String("cluster-id", "", "this node's cluster (cluster_id)")
	f.String("api-addr", "", "listen address of the API (api.addr)")
}

func newEnrollCmd(self string) *cobra.Command {
	var (
		core, tokenFile, pin, dir string
		replace, force            bool
	)
	cmd := &cobra.Command{
		Use:   "enroll --core URL --token-file F --ca-pin SHA256",
		Short: "Join the fleet: make this node's key, have the core sign it with a join token",
		Long: `Enroll this node. The key pair is made here and never leaves the node; the
core signs a certificate for the node and cluster of the agent's
configuration (node_id, cluster_id, or the flags) when the join token allows
it. Before the token is sent, the core must prove it holds a certificate of
the CA whose pin --ca-pin gives (printed by 'muster tls ca create'): the core
is never trusted on first use.

The certificate, its key, the CA bundle and the gossip key are written to
<data_dir>/tls (or --dir, enroll.dir), mode 0600. '` + self + `' then serves
with them and renews the certificate over mutual TLS at two thirds of its
lifetime, without a restart.

The same happens at the first start of '` + self + `' when its configuration
has an enroll block (core, token_file, ca_pin).`,
		Example: `  ` + self + ` enroll --config /etc/muster/agent.yaml \
    --core https://core.example.com:7410 --token-file /etc/muster/join.token \
    --ca-pin sha256:4f1c...`,
		Args: cli.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg := agent.DefaultConfig()
			if err := cli.LoadConfig(cmd, &cfg, map[string]string{
				"data-dir": "data_dir", "node-id": "node_id", "cluster-id": "cluster_id",
				"core": "enroll.core", "token-file": "enroll.token_file", "ca-pin": "enroll.ca_pin", "dir": "enroll.dir", "replaces": "enroll.replaces",
			}); err != nil {
				return err
			}
			e := cfg.Enroll
			switch {
			case e.Core == "":
				return cli.UsageError("--core is required (or enroll.core in the configuration)")
			case e.TokenFile == "":
				return cli.UsageError("--token-file is required (or enroll.token_file)")
			case e.CAPin == "":
				return cli.UsageError("--ca-pin is required (or enroll.ca_pin): printed by 'muster tls ca create'; the core is never trusted on first use")
			case cfg.NodeID == "" || cfg.ClusterID == "":
				return cli.UsageError("node_id and cluster_id are required (--node-id, --cluster-id or the configuration)")
			case cfg.EnrollDir() == "":
				return cli.UsageError("--data-dir or --dir is required")
			}
			tok, err := enroll.ReadToken(e.TokenFile)
			if err != nil {
				return err
			}
			p := enroll.PathsIn(cfg.EnrollDir())
			st, err := enroll.Enroll(cmd.Context(), enroll.Options{Core: e.Core, Token: tok, CAPin: e.CAPin, Replaces: e.Replaces,
				NodeID: cfg.NodeID, ClusterID: cfg.ClusterID, Replace: replace, Force: force, Paths: p})
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			fmt.Fprintf(w, "Enrolled node %s into cluster %s (certificate %s, valid until %s).\n",
				textsafe.Escape(st.NodeID), textsafe.Escape(st.ClusterID), st.Serial, st.NotAfter.Format(time.RFC3339))
			fmt.Fprintf(w, "Wrote %s, %s, %s", p.Cert, p.Key, p.CA)
			if st.Gossip {
				fmt.Fprintf(w, " and %s", p.GossipKey)
			}
			fmt.Fprintf(w, " (mode 0600).\n")
			fmt.Fprint(w, startLines(cfg))
			return nil
		},
	}
	f := cmd.Flags()
	f.String("config", "", "YAML configuration file of the agent")
	f.String("data-dir", "", "the agent's data directory (data_dir)")
	f.String("node-id", "", "this node's id (node_id)")
	f.String("cluster-id", "", "this node's cluster (cluster_id)")
	f.StringVar(&core, "core", "", "the core's API URL, https://host:port (enroll.core)")
	f.StringVar(&tokenFile, "token-file", "", "file holding the join token (enroll.token_file)")
	f.StringVar(&pin, "ca-pin", "", "the core CA's pin, sha256:... (enroll.ca_pin)")
	f.StringVar(&dir, "dir", "", "where the files go (enroll.dir; default <data_dir>/tls)")
	f.String("replaces", "", "a node of the cluster this one asks to replace, once an admin approves (enroll.replaces)")
	f.BoolVar(&replace, "replace", false, "take over a node id a live certificate holds (needs an admin token)")
	f.BoolVar(&force, "force", false, "overwrite the files of an earlier enrollment")
	return cmd
}

// startLines tells how to start the agent enrolled with cfg: the lines its
// configuration needs, so that it serves the enrolled certificate and
// renews it (a configuration naming the files under api.tls instead still
// renews, as long as they stay where enrollment wrote them).
func startLines(cfg agent.Config) string {
	var b strings.Builder
	b.WriteString("Start the agent with a configuration that has these lines: it serves and renews with them.\n")
	fmt.Fprintf(&b, "  node_id: %s\n  cluster_id: %s\n", yamlString(cfg.NodeID), yamlString(cfg.ClusterID))
	if cfg.DataDir != "" {
		fmt.Fprintf(&b, "  data_dir: %s\n", yamlString(cfg.DataDir))
	}
	if cfg.Enroll.Dir != "" {
		fmt.Fprintf(&b, "  enroll:\n    dir: %s\n", yamlString(cfg.Enroll.Dir))
	}
	return b.String()
}

// yamlString quotes s for a YAML line (JSON strings are YAML), escaped.
func yamlString(s string) string {
	q, _ := json.Marshal(s)
	return string(q)
}

// returnStartupMemory hands the heap that start-up left behind back to the
// system once the agent serves: the init of the JSON Schema library compiles
// every draft's meta-schema (about 1.7 MB of allocations, most of it garbage
// once done), and an idle agent would otherwise keep those pages until its
// first collection, which a quiet agent may not reach for hours. One
// collection, once, per agent process (docs/performance.md, "Idle agent
// RSS").
func returnStartupMemory(ctx context.Context, ready <-chan struct{}) {
	select {
	case <-ready:
		debug.FreeOSMemory()
	case <-ctx.Done():
	}
}
