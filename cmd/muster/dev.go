package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/musterhq/muster/agent"
	"github.com/musterhq/muster/cmd/internal/cli"
	"github.com/musterhq/muster/core"
	"github.com/musterhq/muster/core/discovery"
	"github.com/musterhq/muster/shared/client"
	"github.com/musterhq/muster/shared/config"
	"github.com/musterhq/muster/shared/gossip"
)

// devOptions configure `muster dev`.
type devOptions struct {
	agents    int
	dataDir   string
	coreAddr  string
	agentPort int
	interval  time.Duration
	logLevel  string
	// gossip: agents announce themselves in a gossip pool (bound on
	// gossipAddr by the core) instead of the core's static list.
	gossip     bool
	gossipAddr string
	// ha: a local PostgreSQL and several core replicas (dev_ha.go).
	ha       bool
	replicas int
	// fail lists STEP@NODE: that example kind fails on that node
	// (devkinds.go).
	fail []string
	// healthAddr serves the nodes' health for gates (devhealth.go).
	healthAddr string
}

func newDevCmd() *cobra.Command {
	var o devOptions
	cmd := &cobra.Command{
		Use:   "dev",
		Short: "Run a core and N agents on loopback with temporary SQLite files",
		Long: `Run a development cluster in one process: a core on 127.0.0.1:7410 and N
agents on 127.0.0.1:7421 and up, each with its own SQLite file, in cluster
"dev". It creates an operator token (alice) and an approver token (bob) and
prints the lines to use them. Without --data-dir everything lives in a
temporary directory removed on exit. With --gossip the core lists no node:
the agents announce themselves in an (unencrypted) gossip pool.

With --ha it starts a throwaway PostgreSQL from the distribution's packages
(initdb and postgres, as the user muster-pg when run as root), --replicas
core replicas sharing it, each its own process, and one cluster per agent
(dev-1, dev-2...), so that the cluster leases spread over the replicas.

Its agents carry a role label (node-1 primary, the others replica) and the
example kinds the shipped playbooks use (example.com/node.drain, undrain,
upgrade, verify, service.restart, service.health, db.backup), which keep a
node's version in the data directory. A kind fails on a node while the file
fail/STEP.NODE exists in the data directory (holding a number: that many
times); --fail upgrade@node-2 creates it at start.

On first start it writes dev.yaml in the data directory: cluster dev's budget,
windows and freezes, approval rules, kinds and notification destinations, in
the format of a core configuration file, with commented examples. SIGHUP reads
it again and reloads the core as "muster core" does; an invalid file changes
nothing (not with --gossip or --ha).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.ha {
				if o.gossip {
					return &cli.ExitError{Code: 2, Err: errors.New("--ha and --gossip do not go together")}
				}
				if len(o.fail) > 0 {
					return &cli.ExitError{Code: 2, Err: errors.New("--fail goes without --ha: the --ha agents run no example kinds")}
				}
				return runDevHA(cmd.Context(), o, cmd.OutOrStdout())
			}
			return runDev(cmd.Context(), o, cmd.OutOrStdout())
		},
	}
	f := cmd.Flags()
	f.IntVar(&o.agents, "agents", 3, "number of agents")
	f.StringVar(&o.dataDir, "data-dir", "", "keep the databases here instead of a temporary directory")
	f.StringVar(&o.coreAddr, "api-addr", "127.0.0.1:7410", "the core API's listen address")
	f.IntVar(&o.agentPort, "agent-port", 7421, "the first agent's port (the others follow)")
	f.DurationVar(&o.interval, "interval", 2*time.Second, "orchestration interval")
	f.StringVar(&o.logLevel, "log-level", "warn", "log level: debug, info, warn, error")
	f.BoolVar(&o.gossip, "gossip", false, "find the agents through a gossip pool (unencrypted) instead of a static list")
	f.StringVar(&o.gossipAddr, "gossip-addr", "127.0.0.1:7946", "with --gossip: the core's gossip address, which the agents join")
	f.BoolVar(&o.ha, "ha", false, "start a local PostgreSQL and several core replicas (on --api-addr and the ports after it), one cluster per agent")
	f.IntVar(&o.replicas, "replicas", 3, "with --ha: the number of core replicas")
	f.StringArrayVar(&o.fail, "fail", nil, "STEP@NODE: make that example kind fail on that node (repeatable; the file fail/STEP.NODE in the data directory; not with --ha)")
	f.StringVar(&o.healthAddr, "health-addr", "127.0.0.1:7499", "serves the nodes' health (/health) and an example metric (/metrics) for gates")
	cmd.AddCommand(newDevKindCmd())
	return cmd
}

// devClusterSpec is muster dev's cluster, before its agents' nodes are
// added.
func devClusterSpec() discovery.ClusterSpec {
	return discovery.ClusterSpec{ID: "dev", Budget: discovery.BudgetSpec{MaxUnavailable: "1"}}
}

// devCoreConfig is the configuration of muster dev's core, before dev.yaml
// (loadDevConfig): its data under dir, cluster spec (none with --gossip:
// the pool brings it), the dev kinds, and loopback allowed where muster dev
// needs it.
func devCoreConfig(o devOptions, dir string, spec discovery.ClusterSpec) core.Config {
	ccfg := core.DefaultConfig()
	ccfg.DataDir = filepath.Join(dir, "core")
	ccfg.API.Addr = o.coreAddr
	ccfg.Clusters = []discovery.ClusterSpec{spec}
	if o.gossip {
		ccfg.Clusters = nil
		ccfg.Gossip = core.GossipConfig{Enabled: true, Insecure: true, BindAddr: o.gossipAddr, Timing: devGossipTiming}
	}
	ccfg.Orchestrate.Interval = o.interval
	ccfg.Kinds = devKindRules()
	// The browser, the CLI and the agents all come from loopback.
	ccfg.LoopbackUncapped = true
	// Receivers tried out on this machine are on loopback.
	ccfg.NotifyAllowLoopback = true
	// So are the gates of its playbooks (the metric `muster dev` serves).
	ccfg.CoreSteps.AllowLoopback = true
	return ccfg
}

func runDev(ctx context.Context, o devOptions, out io.Writer) error {
	if o.agents < 1 || o.agents > 100 {
		return &cli.ExitError{Code: 2, Err: fmt.Errorf("--agents: want 1 to 100, got %d", o.agents)}
	}
	logCfg := config.Log{Level: o.logLevel, Format: "text"}
	if errs := logCfg.Validate(); len(errs) > 0 {
		return &cli.ExitError{Code: 2, Err: fmt.Errorf("--log-level: %q is not debug, info, warn or error", o.logLevel)}
	}
	log := cli.NewLogger(logCfg)
	dir := o.dataDir
	if dir == "" {
		tmp, err := os.MkdirTemp("", "muster-dev-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(tmp)
		dir = tmp
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	host, _, err := net.SplitHostPort(o.coreAddr)
	if err != nil {
		return &cli.ExitError{Code: 2, Err: fmt.Errorf("--api-addr: %v", err)}
	}
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	if err := devPrepareFail(dir, o.fail); err != nil {
		return err
	}
	var agents []*agent.Agent
	spec := devClusterSpec()
	for i := 1; i <= o.agents; i++ {
		cfg := agent.DefaultConfig()
		cfg.NodeID = "node-" + strconv.Itoa(i)
		cfg.Labels = map[string]string{"role": devRole(i)}
		cfg.Actions.External = devExternalKinds(exe, dir)
		cfg.ClusterID = "dev"
		cfg.DataDir = filepath.Join(dir, cfg.NodeID)
		cfg.API.Addr = net.JoinHostPort(host, strconv.Itoa(o.agentPort+i-1))
		// Plaintext and no identity check on the TCP API: development only.
		cfg.API.Insecure = true
		if o.gossip {
			cfg.Gossip = agent.GossipConfig{Enabled: true, Insecure: true, BindAddr: net.JoinHostPort(host, "0"),
				Join: []string{o.gossipAddr}, Timing: devGossipTiming}
		}
		a, err := agent.New(cfg, log)
		if err != nil {
			return err
		}
		agents = append(agents, a)
		spec.Nodes = append(spec.Nodes, discovery.NodeSpec{ID: cfg.NodeID, Addr: cfg.API.Addr})
	}
	ccfg := devCoreConfig(o, dir, spec)
	// One-time sign-in links for the web UI, accepted only from loopback,
	// for ten minutes.
	ccfg.DevLoginsExpire = time.Now().Add(core.DevLoginTTL)
	links := map[string]string{}
	ccfg.DevLogins = map[string]string{}
	for _, name := range []string{"alice", "bob"} {
		nonce, err := devNonce()
		if err != nil {
			return err
		}
		ccfg.DevLogins[nonce] = name
		links[name] = nonce
	}
	// dev.yaml: the settings a newcomer may change, read again at SIGHUP
	// (not with --gossip: the cluster comes from the pool there).
	base, devFile := ccfg, ""
	if !o.gossip {
		if devFile, err = writeDevConfig(dir); err != nil {
			return err
		}
		if ccfg, err = loadDevConfig(devFile, base, &spec); err != nil {
			return &cli.ExitError{Code: 2, Err: err}
		}
	}
	c, err := core.New(ccfg, log)
	if err != nil {
		return err
	}
	if devFile != "" {
		// Like muster core: SIGHUP reads the file again; an invalid one
		// changes nothing.
		done := reloadOnHangup(ctx, func() {
			next, err := loadDevConfig(devFile, base, &spec)
			if err != nil {
				_ = c.RejectConfig(ctx, err)
				fmt.Fprintf(out, "muster dev: %s refused, the settings in use stay: %v\n", devFile, err)
				return
			}
			msg, err := c.Reload(ctx, next)
			if err != nil {
				fmt.Fprintf(out, "muster dev: reload failed: %v\n", err)
				return
			}
			fmt.Fprintf(out, "muster dev: %s: %s\n", devFile, msg)
		})
		defer func() { cancel(); <-done }()
	}

	// Every part runs until ctx ends; the first one to fail stops the others.
	var wg sync.WaitGroup
	errs := make(chan error, len(agents)+1)
	runPart := func(name string, run func(context.Context) error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := run(ctx); err != nil {
				errs <- fmt.Errorf("%s: %w", name, err)
				cancel()
			}
		}()
	}
	for i, a := range agents {
		runPart(spec.Nodes[i].ID, a.Run)
	}
	health, err := listenDevHealth(o.healthAddr)
	if err != nil {
		return &cli.ExitError{Code: 2, Err: err}
	}
	var nodeIDs []string
	for _, n := range spec.Nodes {
		nodeIDs = append(nodeIDs, n.ID)
	}
	runPart("health", func(ctx context.Context) error { return serveDevHealth(ctx, health, devHealthHandler(dir, nodeIDs)) })
	runPart("core", c.Run)
	defer wg.Wait()

	for _, a := range agents {
		if err := waitReady(ctx, a.Ready(), errs); err != nil {
			return err
		}
	}
	if err := waitReady(ctx, c.Ready(), errs); err != nil {
		return err
	}
	coreURL := "http://" + c.Addr().String()
	admin, err := os.ReadFile(filepath.Join(ccfg.DataDir, "admin.token"))
	if err != nil {
		return fmt.Errorf("read the admin token: %w", err)
	}
	adminClient := client.NewCore(coreURL, strings.TrimSpace(string(admin)), nil)
	tokens := map[string]string{}
	for _, u := range []struct{ name, role string }{{"alice", "operator"}, {"bob", "approver"}} {
		sec, err := adminClient.CreateToken(ctx, u.name, []string{u.role})
		if err != nil {
			return fmt.Errorf("create token %s: %w", u.name, err)
		}
		tokens[u.name] = sec.Token
	}
	for name, nonce := range links {
		links[name] = coreURL + "/ui/dev-login?nonce=" + nonce
	}
	printDevBanner(out, dir, coreURL, spec, tokens, links, o.dataDir == "", devFile, "http://"+health.Addr().String()+"/health")

	select {
	case <-ctx.Done():
	case err := <-errs:
		cancel()
		return err
	}
	fmt.Fprintln(out, "\nmuster dev: stopping")
	return nil
}

// devGossipTiming is the timing recommended for a local network (docs/gossip.md,
// "Failure detection timing"): a killed agent is DOWN in about two seconds.
var devGossipTiming = gossip.Timing{Profile: gossip.ProfileLocal, ProbeInterval: 500 * time.Millisecond, ProbeTimeout: 200 * time.Millisecond}

func waitReady(ctx context.Context, ready <-chan struct{}, errs chan error) error {
	select {
	case <-ready:
		return nil
	case err := <-errs:
		return err
	case <-ctx.Done():
		return errors.New("stopped before it was ready")
	}
}

// devNonce returns a random one-time sign-in nonce.
func devNonce() (string, error) {
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

func printDevBanner(out io.Writer, dir, coreURL string, spec discovery.ClusterSpec, tokens, links map[string]string, temp bool, devFile, health string) {
	where := dir
	if temp {
		where += " (removed on exit)"
	}
	fmt.Fprintf(out, `muster dev is running.

  core     %s
  web UI   %s/ui/
  cluster  dev
`, coreURL, coreURL)
	for _, n := range spec.Nodes {
		fmt.Fprintf(out, "  agent    %-8s http://%s  socket %s\n", n.ID, n.Addr, filepath.Join(dir, n.ID, agent.SocketFile))
	}
	// Commands are printed as this binary was invoked (bin/muster after make dev).
	bin := "muster"
	if len(os.Args) > 0 && strings.Contains(os.Args[0], string(filepath.Separator)) {
		bin = os.Args[0]
	}
	fmt.Fprintf(out, `  data     %[1]s

In another terminal, as alice (operator):

  export MUSTER_ADDR=%[2]s
  export MUSTER_TOKEN=%[3]s

  %[5]s cluster list
  %[5]s action create --cluster dev --node node-1 --kind muster.io/debug.sleep --arg seconds=5
  %[5]s action approve <id>     # refused: alice's role (operator) cannot approve

Then as bob (approver; four-eyes: nobody, an admin included, approves a request of their own):

  MUSTER_TOKEN=%[4]s %[5]s action approve <id>
  %[5]s action watch <id>       # PENDING_SCHEDULE → NEW → RUNNING → DONE
  %[5]s events

A run over every node, one at a time, approved once (alice creates, bob approves):

  %[5]s run create --cluster dev --kind muster.io/debug.sleep --arg seconds=2 --target all --max-concurrency 1
  MUSTER_TOKEN=%[4]s %[5]s run approve <id>
  %[5]s run watch <id>          # a bar and counts per state for each stage

The agents carry role labels (node-1 primary) and example kinds, so the shipped playbooks run:

  %[5]s playbook apply configs/playbooks/drain-upgrade-verify.yaml
  %[5]s playbook plan drain-upgrade-verify --cluster dev --param version=2.0

A kind fails on a node while %[9]s exists (e.g. fail/upgrade.node-2; a number in it: that many times).

On a node, people use the agent's socket (its file mode decides who may):

  curl -s --unix-socket %[6]s http://agent/api/v1/info

In a browser on this machine (each link signs in once, within ten minutes):

  alice  %[7]s
  bob    %[8]s

`, where, coreURL, tokens["alice"], tokens["bob"], bin, filepath.Join(dir, spec.Nodes[0].ID, agent.SocketFile),
		links["alice"], links["bob"], filepath.Join(dir, "fail", "STEP.NODE"))
	if devFile != "" {
		fmt.Fprintf(out, "To try maintenance windows, freezes and notifications: edit %s\nand run kill -HUP %d (an invalid file is refused, the settings in use stay).\n",
			devFile, os.Getpid())
		fmt.Fprintf(out, "Its notification example goes to a receiver that checks each signature and prints each delivery:\n  %s webhook listen --addr 127.0.0.1:9000 --secret-file %s\n\n",
			bin, filepath.Join(filepath.Dir(devFile), devWebhookSecret))
	}
	fmt.Fprintf(out, "A canary upgrade gated on the nodes' health, which the gate of canary-upgrade checks: %[1]s\n"+
		"(an example metric: /metrics; a node is unhealthy while %[2]s exists).\n"+
		"Held healthy for 15 s the canary promotes itself; unhealthy, the run aborts and rolls the canary back:\n\n"+
		"  %[3]s playbook apply configs/playbooks/canary-upgrade.yaml\n"+
		"  %[3]s playbook plan canary-upgrade --cluster dev --param version=2.0 --param health_url=%[1]s\n"+
		"  # then the start line the plan prints (its digest), bob's run approve, and %[3]s run watch <id>\n\n",
		health, filepath.Join(dir, "fail", "health.NODE"), bin)
	fmt.Fprintln(out, "Stop with Ctrl-C.")
}
