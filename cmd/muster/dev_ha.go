package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/musterhq/muster/agent"
	"github.com/musterhq/muster/cmd/internal/cli"
	"github.com/musterhq/muster/core/store/pglocal"
	"github.com/musterhq/muster/shared/client"
	"github.com/musterhq/muster/shared/config"
)

// devHALeaseTTL is the lease TTL of `muster dev --ha`: short, so that a
// killed replica's clusters move in a few seconds.
const devHALeaseTTL = 3 * time.Second

// runDevHA is `muster dev --ha`: a throwaway PostgreSQL (core/store/pglocal),
// o.replicas core replicas sharing it, each its own process (so that one can
// be killed), and o.agents agents in this process, each in a cluster of its
// own (dev-1, dev-2...) so that the leases spread over the replicas.
func runDevHA(ctx context.Context, o devOptions, out io.Writer) error {
	if o.replicas < 1 || o.replicas > 9 {
		return &cli.ExitError{Code: 2, Err: fmt.Errorf("--replicas: want 1 to 9, got %d", o.replicas)}
	}
	logCfg := config.Log{Level: o.logLevel, Format: "text"}
	if errs := logCfg.Validate(); len(errs) > 0 {
		return &cli.ExitError{Code: 2, Err: fmt.Errorf("--log-level: %q is not debug, info, warn or error", o.logLevel)}
	}
	host, portText, err := net.SplitHostPort(o.coreAddr)
	port, perr := strconv.Atoi(portText)
	if err != nil || perr != nil {
		return &cli.ExitError{Code: 2, Err: fmt.Errorf("--api-addr: %q is not host:port", o.coreAddr)}
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	log := cli.NewLogger(logCfg)
	dir := o.dataDir
	if dir == "" {
		tmp, err := os.MkdirTemp("", "muster-dev-ha-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(tmp)
		dir = tmp
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	fmt.Fprintln(out, "muster dev --ha: starting PostgreSQL...")
	// On a Unix socket in its own directory alone, with passwords; the
	// replicas connect as muster, which owns the database and nothing more.
	pg, err := pglocal.Start(ctx, pglocal.Options{Private: true})
	if err != nil {
		return err
	}
	defer pg.Stop()
	password, err := devNonce()
	if err != nil {
		return err
	}
	if err := pg.CreateDatabase(ctx, "muster", ""); err != nil {
		return err
	}
	if err := pg.CreateRole(ctx, "muster", password, "muster"); err != nil {
		return err
	}
	dsn := pg.RoleDSN("muster", "muster", password)

	var agents []*agent.Agent
	var clusters strings.Builder
	for i := 1; i <= o.agents; i++ {
		cfg := agent.DefaultConfig()
		cfg.NodeID, cfg.ClusterID = "node-"+strconv.Itoa(i), "dev-"+strconv.Itoa(i)
		cfg.DataDir = filepath.Join(dir, cfg.NodeID)
		cfg.API.Addr = net.JoinHostPort(host, strconv.Itoa(o.agentPort+i-1))
		cfg.API.Insecure = true // plaintext on loopback: development only
		a, err := agent.New(cfg, log)
		if err != nil {
			return err
		}
		agents = append(agents, a)
		fmt.Fprintf(&clusters, "  - id: %s\n    nodes:\n      - {id: %s, addr: %q}\n", cfg.ClusterID, cfg.NodeID, cfg.API.Addr)
	}

	var wg sync.WaitGroup
	defer wg.Wait()
	errs := make(chan error, len(agents)+o.replicas)
	for _, a := range agents {
		wg.Go(func() {
			if err := a.Run(ctx); err != nil {
				errs <- fmt.Errorf("agent: %w", err)
				cancel()
			}
		})
	}
	for _, a := range agents {
		if err := waitReady(ctx, a.Ready(), errs); err != nil {
			return err
		}
	}

	type replica struct {
		url, log, dataDir string
		cmd               *exec.Cmd
	}
	var replicas []*replica
	defer func() { // SIGTERM every replica still running, then wait for it
		for _, r := range replicas {
			_ = r.cmd.Process.Signal(syscall.SIGTERM)
		}
		for _, r := range replicas {
			_ = r.cmd.Wait()
		}
	}()
	for i := range o.replicas {
		rdir := filepath.Join(dir, fmt.Sprintf("core-%d", i+1))
		if err := os.MkdirAll(rdir, 0o700); err != nil {
			return err
		}
		addr := net.JoinHostPort(host, strconv.Itoa(port+i))
		cfg := fmt.Sprintf("data_dir: %s\napi:\n  addr: %s\nstore:\n  driver: postgres\n  dsn: %q\n"+
			"ha:\n  lease_ttl: %s\n  replica_id: core-%d\norchestrate:\n  interval: %s\nlog:\n  level: %s\n  format: text\nclusters:\n%s",
			filepath.Join(rdir, "data"), addr, dsn, devHALeaseTTL, i+1, o.interval, o.logLevel, clusters.String())
		path := filepath.Join(rdir, "core.yaml")
		if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
			return err
		}
		logFile, err := os.OpenFile(filepath.Join(rdir, "core.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
		if err != nil {
			return err
		}
		cmd := exec.Command(self, "core", "--config", path)
		cmd.Stdout, cmd.Stderr = logFile, logFile
		// On Linux the replicas end with this process, even when it is killed.
		cmd.SysProcAttr = replicaAttr()
		err = cmd.Start()
		logFile.Close()
		if err != nil {
			return fmt.Errorf("start replica %d: %w", i+1, err)
		}
		replicas = append(replicas, &replica{url: "http://" + addr, log: logFile.Name(), dataDir: filepath.Join(rdir, "data"), cmd: cmd})
	}
	hc := &http.Client{Timeout: 2 * time.Second}
	var admin string
	for i, r := range replicas {
		deadline := time.Now().Add(60 * time.Second)
		for client.NewCore(r.url, "", hc).Health(ctx) != nil {
			if time.Now().After(deadline) || ctx.Err() != nil {
				b, _ := os.ReadFile(r.log)
				return fmt.Errorf("replica %d did not start: %s", i+1, strings.TrimSpace(string(b)))
			}
			time.Sleep(100 * time.Millisecond)
		}
		if b, err := os.ReadFile(filepath.Join(r.dataDir, "admin.token")); err == nil {
			admin = strings.TrimSpace(string(b))
		}
	}
	if admin == "" {
		return errors.New("no replica wrote the admin token")
	}
	adminClient := client.NewCore(replicas[0].url, admin, nil)
	tokens := map[string]string{}
	for _, u := range []struct{ name, role string }{{"alice", "operator"}, {"bob", "approver"}} {
		sec, err := adminClient.CreateToken(ctx, u.name, []string{u.role})
		if err != nil {
			return fmt.Errorf("create token %s: %w", u.name, err)
		}
		tokens[u.name] = sec.Token
	}

	where := dir
	if o.dataDir == "" {
		where += " (removed on exit)"
	}
	fmt.Fprintf(out, "\nmuster dev --ha is running.\n\n  postgres  %s\n", dsn)
	for i, r := range replicas {
		fmt.Fprintf(out, "  replica   core-%d  %s  pid %d  log %s\n", i+1, r.url, r.cmd.Process.Pid, r.log)
	}
	for i := 1; i <= o.agents; i++ {
		fmt.Fprintf(out, "  agent     node-%d  cluster dev-%d  http://%s\n", i, i, net.JoinHostPort(host, strconv.Itoa(o.agentPort+i-1)))
	}
	bin := "muster"
	if len(os.Args) > 0 && strings.Contains(os.Args[0], string(filepath.Separator)) {
		bin = os.Args[0]
	}
	last := replicas[len(replicas)-1]
	fmt.Fprintf(out, `  data      %[1]s

Every replica serves the whole API. In another terminal, as alice (operator):

  export MUSTER_ADDR=%[2]s
  export MUSTER_TOKEN=%[3]s

  %[5]s core status                  # the replicas, their heartbeats and leases (lease TTL %[6]s)
  %[5]s action create --cluster dev-1 --node node-1 --kind muster.io/debug.sleep --arg seconds=20

Approve it through another replica, as bob:

  MUSTER_ADDR=%[7]s MUSTER_TOKEN=%[4]s %[5]s action approve <id>
  %[5]s action watch <id>

Then kill the replica that holds dev-1 (its pid is above; core status shows
who holds what) and watch another take the lease within the TTL:

  kill -9 <pid>; sleep 4; %[5]s core status

Back it up with: pg_dump '%[8]s' > muster.sql

Stop with Ctrl-C.
`, where, replicas[0].url, tokens["alice"], tokens["bob"], bin, devHALeaseTTL, last.url, dsn)

	select {
	case <-ctx.Done():
	case err := <-errs:
		cancel()
		return err
	}
	fmt.Fprintln(out, "\nmuster dev --ha: stopping")
	return nil
}
