package orchestrate_test

// The full sync benchmarks: one core's orchestrator against N real agents (each
// with its own HTTP listener on loopback and its own SQLite file), driven
// full sync by full sync. A full sync over N nodes is N node syncs.
//
// The agents run in this process when its file-descriptor limit allows it
// (an agent holds about six descriptors at rest: the listener and SQLite's
// writer, reader and shared-memory files). Beyond that the fleet is split
// over agent-host processes: this test binary started again with
// hostEnv set, which runs agents instead of the tests (see TestMain).

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/musterhq/muster/agent"
	"github.com/musterhq/muster/core/orchestrate"
	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/core/store/pgtest"
	"github.com/musterhq/muster/core/store/postgres"
	"github.com/musterhq/muster/core/store/sqlite"
	"github.com/musterhq/muster/shared/action"
	"github.com/musterhq/muster/shared/client"
	"github.com/musterhq/muster/shared/wire"
)

const (
	benchCluster = "bench"
	// hostEnv, when set to "first,count,dir", makes the test binary an
	// agent host: it runs agents node-first … node-(first+count-1), prints
	// "node addr" per agent and then "ready" on stdout, and stops them all
	// when its stdin closes.
	hostEnv = "MUSTER_BENCH_AGENT_HOST"
	// refEnv, when set, makes the test binary the reference process (see
	// refProcess).
	refEnv = "MUSTER_BENCH_REFERENCE"
	// fdsPerAgent is what one agent costs this process in descriptors once
	// it has been synced: six at rest, and both ends of the connection the
	// orchestrator keeps alive, the agent's end of the reference's, plus
	// one spare; hostFdsPerAgent is what it costs an agent host (the
	// agents' ends alone); fdReserve is kept for everything else.
	fdsPerAgent     = 10
	hostFdsPerAgent = 9
	fdReserve       = 1000
	// hostFrom: fleets of this many agents or more run in agent hosts, so
	// that this process's CPU time and memory are the core's alone.
	hostFrom = 1000
)

func TestMain(m *testing.M) {
	if spec := os.Getenv(hostEnv); spec != "" {
		if err := hostAgents(spec, os.Stdin, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, "agent host:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	if os.Getenv(refEnv) != "" {
		if err := serveReference(os.Stdin, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, "reference:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(pgtest.Run(m)) // PostgreSQL for the tests that run on it too
}

// agentSet is a group of running agents: node id and API address, in order.
type agentSet struct {
	nodes, addrs []string
	stop         func() error
	// elsewhere: the agents run in agent-host processes, so this process's
	// CPU time is the core's alone.
	elsewhere bool
}

// startAgents starts count agents node-first…, each with its own data
// directory under dir, eight at a time. stop ends them all, stopGroup at a
// time (thousands stopping at once on two cores would miss their shutdown
// deadlines), and waits. With gossipJoin set, every agent joins the gossip
// pool there (on loopback, without a key) and tells the cores of its
// changes.
func startAgents(ctx context.Context, first, count int, dir, gossipJoin string) (*agentSet, error) {
	const stopGroup = 32
	set := &agentSet{nodes: make([]string, count), addrs: make([]string, count)}
	var (
		running sync.WaitGroup
		mu      sync.Mutex
		runErr  error
		cancels = make([]context.CancelFunc, count)
		dones   = make([]chan struct{}, count)
	)
	set.stop = func() error {
		for g := 0; g < count; g += stopGroup {
			group := min(count, g+stopGroup)
			for i := g; i < group; i++ {
				if cancels[i] != nil {
					cancels[i]()
				}
			}
			for i := g; i < group; i++ {
				if dones[i] != nil {
					<-dones[i]
				}
			}
		}
		running.Wait()
		return runErr
	}
	var starting sync.WaitGroup
	sem := make(chan struct{}, 8)
	startErr := make([]error, count)
	for i := 0; i < count; i++ {
		starting.Add(1)
		sem <- struct{}{}
		go func(i int) {
			defer func() { <-sem; starting.Done() }()
			node := fmt.Sprintf("node-%d", first+i)
			cfg := agent.DefaultConfig()
			cfg.NodeID, cfg.ClusterID, cfg.DataDir, cfg.API.Addr = node, benchCluster, filepath.Join(dir, node), "127.0.0.1:0"
			cfg.API.Insecure = true
			if gossipJoin != "" {
				cfg.Gossip.Enabled, cfg.Gossip.Insecure = true, true
				cfg.Gossip.BindAddr, cfg.Gossip.Join = "127.0.0.1:0", []string{gossipJoin}
			}
			a, err := agent.New(cfg, nil)
			if err != nil {
				startErr[i] = err
				return
			}
			ctx, cancel := context.WithCancel(ctx)
			done := make(chan struct{})
			cancels[i], dones[i] = cancel, done
			running.Add(1)
			go func() {
				defer running.Done()
				defer close(done)
				if err := a.Run(ctx); err != nil {
					mu.Lock()
					runErr = errors.Join(runErr, fmt.Errorf("%s: %w", node, err))
					mu.Unlock()
				}
			}()
			select {
			case <-a.Ready():
				set.nodes[i], set.addrs[i] = node, a.Addr().String()
			case <-done:
				startErr[i] = fmt.Errorf("%s stopped before it was ready", node)
			}
		}(i)
	}
	starting.Wait()
	if err := errors.Join(startErr...); err != nil {
		return nil, errors.Join(err, set.stop())
	}
	return set, nil
}

// hostAgents is the agent-host mode of the test binary (see hostEnv).
func hostAgents(spec string, in io.Reader, out io.Writer) error {
	var first, count int
	var dir string
	parts := strings.SplitN(spec, ",", 3)
	if len(parts) != 3 {
		return fmt.Errorf("%s=%q: want first,count,dir", hostEnv, spec)
	}
	first, err1 := strconv.Atoi(parts[0])
	count, err2 := strconv.Atoi(parts[1])
	if err := errors.Join(err1, err2); err != nil {
		return fmt.Errorf("%s=%q: %w", hostEnv, spec, err)
	}
	dir = parts[2]
	set, err := startAgents(context.Background(), first, count, dir, "")
	if err != nil {
		return err
	}
	w := bufio.NewWriter(out)
	for i := range set.nodes {
		fmt.Fprintf(w, "%s %s\n", set.nodes[i], set.addrs[i])
	}
	fmt.Fprintln(w, "ready")
	if err := w.Flush(); err != nil {
		return errors.Join(err, set.stop())
	}
	_, _ = io.Copy(io.Discard, in) // until the benchmark closes our stdin
	return set.stop()
}

// fdLimit is this process's RLIMIT_NOFILE, its soft limit raised to the
// hard one first (the Go runtime does so at start-up too; the hard one
// needs privileges to raise).
func fdLimit() int {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		return 1024
	}
	if rl.Cur < rl.Max {
		rl.Cur = rl.Max
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
			_ = syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl)
		}
	}
	return int(min(rl.Cur, 1<<30))
}

// hostedAgents starts n agents: in this process when they are fewer than
// hostFrom and fit in its descriptor limit, else spread over as many
// agent-host processes as their descriptors need.
func hostedAgents(b *testing.B, n int) *agentSet {
	b.Helper()
	dir := b.TempDir()
	if n < hostFrom && n <= (fdLimit()-fdReserve)/fdsPerAgent {
		set, err := startAgents(context.Background(), 1, n, dir, "")
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() {
			if err := set.stop(); err != nil {
				b.Error(err)
			}
		})
		return set
	}
	exe, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	perProc := (fdLimit() - fdReserve) / hostFdsPerAgent
	hosts := (n + perProc - 1) / perProc
	b.Logf("%d agents in %d agent-host processes (about %d descriptors each, limit %d)",
		n, hosts, n/hosts*hostFdsPerAgent, fdLimit())
	began := time.Now()
	// The hosts start at once (starting an agent waits on its disk as
	// much as on the CPU), and stop at once.
	cmds := make([]*exec.Cmd, hosts)
	stdins := make([]io.Closer, hosts)
	outs := make([]io.Reader, hosts)
	b.Cleanup(func() {
		for _, in := range stdins {
			if in != nil {
				in.Close() // the host stops its agents and exits
			}
		}
		for _, cmd := range cmds {
			if cmd == nil || cmd.Process == nil {
				continue
			}
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			select {
			case err := <-done:
				if err != nil {
					b.Errorf("agent host: %v", err)
				}
			case <-time.After(2 * time.Minute):
				_ = cmd.Process.Kill()
				<-done
				b.Error("agent host did not stop in 2 minutes: killed")
			}
		}
	})
	for h := 0; h < hosts; h++ {
		first, count := 1+h*n/hosts, (h+1)*n/hosts-h*n/hosts
		cmd := exec.Command(exe, "-test.run=^$")
		cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%d,%d,%s", hostEnv, first, count, dir))
		cmd.Stderr = os.Stderr
		stdin, err := cmd.StdinPipe()
		if err != nil {
			b.Fatal(err)
		}
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			b.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		cmds[h], stdins[h], outs[h] = cmd, stdin, stdout
	}
	all := &agentSet{elsewhere: true}
	for h, stdout := range outs {
		sc := bufio.NewScanner(stdout)
		ready := false
		for sc.Scan() {
			line := sc.Text()
			if line == "ready" {
				ready = true
				break
			}
			node, addr, ok := strings.Cut(line, " ")
			if !ok {
				b.Fatalf("agent host said %q", line)
			}
			all.nodes, all.addrs = append(all.nodes, node), append(all.addrs, addr)
		}
		if !ready {
			b.Fatalf("agent host %d ended before it was ready", h)
		}
		go func() { _, _ = io.Copy(io.Discard, stdout) }() // nothing more is expected
	}
	b.Logf("%d agents started in %v", n, time.Since(began).Round(time.Second))
	if len(all.addrs) != n {
		b.Fatalf("agent hosts started %d agents, want %d", len(all.addrs), n)
	}
	return all
}

// benchFleet is a core store and orchestrator over one cluster of real agents.
type benchFleet struct {
	st     store.Store
	dbFile string // the SQLite file ("" on PostgreSQL)
	o      *orchestrate.Orchestrator
	agents *agentSet
	ref    *reference // the reference sweeps, in a process of their own
	next   int        // the first agent of the next changing full sync
}

// newBenchFleet builds the fleet over n hosted agents and a SQLite store
// with an orchestrator of cfg (zero fields take the defaults, as in muster
// core) and runs its first two full syncs.
func newBenchFleet(b *testing.B, n int, cfg orchestrate.Config) *benchFleet {
	b.Helper()
	return newFleetOver(b, hostedAgents(b, n), cfg)
}

// newFleetOver is newBenchFleet over agents already running.
func newFleetOver(b *testing.B, agents *agentSet, cfg orchestrate.Config) *benchFleet {
	b.Helper()
	dir := b.TempDir()
	st, err := sqlite.Open(context.Background(), dir)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	return newBenchFleetOn(b, agents, st, filepath.Join(dir, sqlite.FileName), cfg)
}

// newBenchFleetOn is newFleetOver on the store st, whose file (for the
// bytes written) is dbFile ("": not measured).
func newBenchFleetOn(b *testing.B, agents *agentSet, st store.Store, dbFile string, cfg orchestrate.Config) *benchFleet {
	b.Helper()
	ctx := context.Background()
	n := len(agents.nodes)
	err := st.Update(ctx, func(tx store.Tx) error {
		if err := tx.PutCluster(ctx, &store.Cluster{ID: benchCluster, Status: store.ClusterHealthy}); err != nil {
			return err
		}
		for i, node := range agents.nodes {
			err := tx.PutNode(ctx, &store.Node{ClusterID: benchCluster, ID: node, Addr: agents.addrs[i],
				Source: store.SourceStatic, Status: store.NodeUnknown})
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	o, err := orchestrate.New(cfg, st, nil, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(o.Stop) // closes its idle connections
	f := &benchFleet{st: st, dbFile: dbFile, o: o, agents: agents, ref: startReference(b, agents.addrs)}
	// The first full sync finds every node UP and stores its cursor; from the
	// second on, an unchanged fleet is idle.
	for range 2 {
		f.fullSync(b, n)
	}
	return f
}

func (f *benchFleet) fullSync(b *testing.B, n int) orchestrate.Report {
	b.Helper()
	rep, err := f.o.FullSync(context.Background(), benchCluster)
	if err != nil {
		b.Fatal(err)
	}
	if rep.Nodes != n || rep.Down != 0 {
		b.Fatalf("full sync synced %d nodes, %d down; want %d, none down", rep.Nodes, rep.Down, n)
	}
	return rep
}

// dbBytes is the size of the core's database and its write-ahead log.
func (f *benchFleet) dbBytes(b *testing.B) int64 {
	b.Helper()
	var total int64
	for _, name := range []string{f.dbFile, f.dbFile + "-wal"} {
		fi, err := os.Stat(name)
		if errors.Is(err, os.ErrNotExist) {
			continue
		} else if err != nil {
			b.Fatal(err)
		}
		total += fi.Size()
	}
	return total
}

// infoRate is the reference of a full sync: GET /api/v1/info on every node,
// NodeConcurrency at once, over kept-alive connections, in calls per
// second, measured by the reference process. A node sync is two such calls
// (info, then the changes since the cursor), so a full sync cannot beat half
// this rate.
func (f *benchFleet) infoRate(b *testing.B) float64 {
	b.Helper()
	return f.ref.sweep(b)
}

// reference is the process that measures the reference: the test binary
// started again with refEnv set. Its connections to the agents are its own,
// so that the core's process holds only the core's descriptors (at 10,000
// nodes the two would not fit in one process's limit) and the reference
// does not share the core's CPU scheduling or garbage collector.
type reference struct {
	in  io.WriteCloser
	out *bufio.Scanner
}

// startReference starts the reference process over the agents at addrs.
func startReference(b *testing.B, addrs []string) *reference {
	b.Helper()
	exe, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), refEnv+"=1")
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		in.Close() // the reference exits at the end of its input
		if err := cmd.Wait(); err != nil {
			b.Errorf("reference process: %v", err)
		}
	})
	w := bufio.NewWriter(in)
	for _, a := range addrs {
		fmt.Fprintln(w, a)
	}
	fmt.Fprintln(w, "ready")
	if err := w.Flush(); err != nil {
		b.Fatal(err)
	}
	return &reference{in: in, out: bufio.NewScanner(out)}
}

// sweep asks the reference process for one sweep and returns its rate.
func (r *reference) sweep(b *testing.B) float64 {
	b.Helper()
	if _, err := io.WriteString(r.in, "sweep\n"); err != nil {
		b.Fatal(err)
	}
	if !r.out.Scan() {
		b.Fatalf("reference process ended: %v", r.out.Err())
	}
	v, err := strconv.ParseFloat(r.out.Text(), 64)
	if err != nil {
		b.Fatalf("reference process: %s", r.out.Text())
	}
	return v
}

// serveReference is the reference process (see refEnv): it reads the
// agents' addresses, one a line, up to "ready", then answers every "sweep"
// line with the calls per second of one sweep (or an error line), until
// its input ends.
func serveReference(in io.Reader, out io.Writer) error {
	fdLimit()
	sc := bufio.NewScanner(in)
	var addrs []string
	for sc.Scan() && sc.Text() != "ready" {
		addrs = append(addrs, sc.Text())
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	// One connection kept to every agent, or as many as the core keeps
	// over a fleet past the descriptor limit (simIdleConns).
	tr.MaxIdleConns, tr.MaxIdleConnsPerHost = simIdleConns(len(addrs)), 1
	hc := &http.Client{Transport: tr}
	defer hc.CloseIdleConnections()
	agents := make([]*client.Agent, len(addrs))
	for i, a := range addrs {
		agents[i] = client.NewAgent(a, hc)
	}
	// The first sweep connects to every agent: the measured ones reuse.
	if _, err := sweepInfo(agents); err != nil {
		return err
	}
	for sc.Scan() {
		if sc.Text() != "sweep" {
			return fmt.Errorf("unknown request %q", sc.Text())
		}
		rate, err := sweepInfo(agents)
		if err != nil {
			return err
		}
		if _, err := fmt.Fprintln(out, rate); err != nil {
			return err
		}
	}
	return sc.Err()
}

// sweepInfo calls GET /api/v1/info on every agent, NodeConcurrency at once,
// and returns the calls per second.
func sweepInfo(agents []*client.Agent) (float64, error) {
	// Two minutes, or 10 ms a node for a larger fleet on a loaded machine.
	ctx, cancel := context.WithTimeout(context.Background(), max(2*time.Minute, time.Duration(len(agents))*10*time.Millisecond))
	defer cancel()
	work := make(chan *client.Agent)
	errs := make(chan error, len(agents))
	var wg sync.WaitGroup
	start := time.Now()
	for range orchestrate.DefaultConfig().NodeConcurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ag := range work {
				if _, err := ag.Info(ctx); err != nil {
					errs <- err
				}
			}
		}()
	}
	for _, ag := range agents {
		work <- ag
	}
	close(work)
	wg.Wait()
	elapsed := time.Since(start)
	close(errs)
	if err := <-errs; err != nil {
		return 0, err
	}
	return float64(len(agents)) / elapsed.Seconds(), nil
}

// change gives the next tenth of the fleet one new action each, scheduled
// directly on the agent (a ping), and waits until every one is DONE, so the
// next full sync has exactly that tenth of the nodes to import a change from.
func (f *benchFleet) change(b *testing.B) int {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	n := len(f.agents.addrs)
	k := max(1, n/10)
	errs := make([]error, k)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 16)
	for j := 0; j < k; j++ {
		wg.Add(1)
		sem <- struct{}{}
		go func(j int) {
			defer func() { <-sem; wg.Done() }()
			ag := client.NewAgent(f.agents.addrs[(f.next+j)%n], nil)
			a, _, err := ag.Push(ctx, &wire.PushRequest{ID: action.NewID(), Kind: "muster.io/debug.ping"})
			for err == nil && !a.State.Final() {
				time.Sleep(2 * time.Millisecond) // the agent's runner takes it at once
				a, err = ag.Get(ctx, a.ID)
			}
			errs[j] = err
		}(j)
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		b.Fatal(err)
	}
	f.next = (f.next + k) % n
	return k
}

// cpuTime is the CPU time this process has used, user and system.
func cpuTime(b *testing.B) time.Duration {
	b.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkPass measures one core's node syncs per second over N real
// agents (in agent-host processes from hostFrom agents on): "idle" (nothing
// changed; also the rows and bytes an idle full sync writes, the goal being
// zero, and, when the agents run elsewhere, the core's CPU time per node
// sync and its memory per 1,000 nodes), "changing" (a tenth of the nodes
// each have one new finished action to import before every full sync) and, from
// 1,000 nodes, "approve" (approval → RUNNING while full syncs run back to back,
// see approveDuringPass). Every idle sample is as many full syncs as make about
// 5,000 node syncs, between two sweeps of the reference process; the ratio
// of a sample is its syncs/s to half the mean of those two sweeps' calls/s
// (a sync is two calls), and the figure is the median ratio of the samples,
// with their spread (largest − smallest).
//
// Run it with -benchtime 1x: every sub-benchmark takes its samples per
// iteration (refSamples reference samples; at least two changing full syncs;
// the approvals of its size).
func BenchmarkPass(b *testing.B) {
	const refSamples = 3
	for _, tc := range []struct{ n, samples int }{{100, 0}, {1000, 40}, {5000, 15}, {10000, 15}} {
		n := tc.n
		b.Run(fmt.Sprintf("nodes=%d", n), func(b *testing.B) {
			debug.FreeOSMemory() // what the last size left behind
			rss0 := rssMB(b)
			// The orchestrator as muster core builds it: default
			// settings, a plain HTTP client.
			cfg := coreConfig()
			f := newBenchFleet(b, n, cfg)
			rounds := max(1, 5000/n)
			b.Run("idle", func(b *testing.B) {
				rows, bytes := f.st.RowsWritten(), f.dbBytes(b)
				var (
					ref, ratios []float64
					cpu         time.Duration
					quiet       int
				)
				// Each sample's full syncs lie between two reference sweeps,
				// and its reference is their mean: both see the same
				// load on a shared machine.
				b.StopTimer()
				ref = append(ref, f.infoRate(b))
				b.StartTimer()
				for i := 0; i < b.N*refSamples; i++ {
					c, t := cpuTime(b), time.Now()
					for range rounds {
						quiet += f.fullSync(b, n).Quiet
					}
					b.StopTimer()
					rate := float64(n*rounds) / time.Since(t).Seconds()
					cpu += cpuTime(b) - c
					ref = append(ref, f.infoRate(b))
					around := (ref[len(ref)-2] + ref[len(ref)-1]) / 2
					ratios = append(ratios, rate/(around/2))
					b.StartTimer()
				}
				b.StopTimer()
				syncs := float64(n * rounds * b.N * refSamples)
				if f.agents.elsewhere {
					// Only the core runs here: what one sync costs it, and
					// what the nodes cost its memory.
					b.ReportMetric(cpu.Seconds()*1000/syncs, fmt.Sprintf("core_cpu_ms_per_node_sync_%d", n))
					rss := rssMB(b)
					b.ReportMetric(rss, fmt.Sprintf("core_rss_mb_%d_nodes", n))
					b.ReportMetric((rss-rss0)*1000/float64(n), fmt.Sprintf("core_rss_mb_per_1000_nodes_%d", n))
				}
				slices.Sort(ratios)
				b.ReportMetric(syncs/b.Elapsed().Seconds(), fmt.Sprintf("core_node_syncs_per_s_%d", n))
				b.ReportMetric(mean(ref), fmt.Sprintf("agent_info_calls_per_s_%d", n))
				b.ReportMetric(ratios[len(ratios)/2], fmt.Sprintf("core_ref_ratio_%d", n))
				b.ReportMetric(ratios[len(ratios)-1]-ratios[0], fmt.Sprintf("core_ref_ratio_spread_%d", n))
				b.ReportMetric(float64(f.st.RowsWritten()-rows)/float64(b.N*rounds*refSamples), "idle_pass_rows_written")
				b.ReportMetric(float64(f.st.RowsWritten()-rows)/float64(b.N*rounds*refSamples), fmt.Sprintf("idle_pass_rows_written_%d", n))
				// A node left by its change counter is one request; one
				// synced fully, two (info, one page of changes).
				b.ReportMetric(float64(2*int(syncs)-quiet)/syncs, fmt.Sprintf("idle_agent_requests_per_node_%d", n))
				b.ReportMetric(float64(quiet)/syncs, fmt.Sprintf("idle_quiet_node_share_%d", n))
				b.ReportMetric(float64(f.dbBytes(b)-bytes)/float64(b.N*rounds*refSamples), "idle_pass_bytes_written")
			})
			b.Run("changing", func(b *testing.B) {
				fullSyncs := max(2, rounds) * b.N
				b.ResetTimer()
				for i := 0; i < fullSyncs; i++ {
					b.StopTimer()
					k := f.change(b)
					b.StartTimer()
					if rep := f.fullSync(b, n); rep.Changes < k {
						b.Fatalf("full sync wrote %d changes, want at least %d", rep.Changes, k)
					}
				}
				b.StopTimer()
				b.ReportMetric(float64(n*fullSyncs)/b.Elapsed().Seconds(), fmt.Sprintf("core_node_syncs_per_s_%d_changing", n))
			})
			if tc.samples > 0 {
				// Last: it starts the scheduler.
				b.Run("approve", func(b *testing.B) {
					approveDuringPass(b, startCoreAPI(b, f, cfg), n, tc.samples)
				})
			}
		})
	}
}

// mean is the mean of v.
func mean(v []float64) float64 {
	var sum float64
	for _, x := range v {
		sum += x
	}
	return sum / float64(max(len(v), 1))
}

// rssMB is this process's resident set size in MB.
func rssMB(b *testing.B) float64 {
	b.Helper()
	raw, err := os.ReadFile("/proc/self/status")
	if err != nil {
		b.Skip("no /proc/self/status:", err)
	}
	for _, l := range strings.Split(string(raw), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
			if err != nil {
				b.Fatal(err)
			}
			return kb / 1024
		}
	}
	b.Fatal("no VmRSS in /proc/self/status")
	return 0
}

// BenchmarkPassPostgres is BenchmarkPass's idle and changing full syncs over
// 1,000 real agents with the store on PostgreSQL: the tests' local server,
// which runs with fsync off where the SQLite file syncs, so the rows an idle
// full sync writes compare exactly and the rates as an order of magnitude.
func BenchmarkPassPostgres(b *testing.B) {
	const n = 1000
	st, err := postgres.Open(context.Background(), pgtest.NewDatabase(b))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	// The orchestrator as muster core builds it: default settings, a plain
	// HTTP client.
	f := newBenchFleetOn(b, hostedAgents(b, n), st, "", orchestrate.DefaultConfig())
	b.Run("idle", func(b *testing.B) {
		rows := f.st.RowsWritten()
		for i := 0; i < b.N; i++ {
			f.fullSync(b, n)
		}
		b.StopTimer()
		b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "pg_node_syncs_per_s_1000")
		b.ReportMetric(float64(f.st.RowsWritten()-rows)/float64(b.N), "pg_idle_pass_rows_written")
	})
	b.Run("changing", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			b.StopTimer()
			k := f.change(b)
			b.StartTimer()
			if rep := f.fullSync(b, n); rep.Changes < k {
				b.Fatalf("full sync wrote %d changes, want at least %d", rep.Changes, k)
			}
		}
		b.StopTimer()
		b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "pg_node_syncs_per_s_1000_changing")
	})
}

// BenchmarkIdleCounter measures what an idle full sync costs the core per
// node over 1,000 real agents (in agent-host processes), with every node
// synced fully ("full": a full_sync_every no longer than the interval, as
// at 1,000 nodes and fewer by default) and with the nodes left by their
// change counters but for their turn in the spread ("counter":
// full_sync_every 5 minutes, as by default at 30,000 nodes and more):
// core CPU time per node, agent requests per node and the rows written.
func BenchmarkIdleCounter(b *testing.B) {
	const n, rounds = 1000, 5
	agents := hostedAgents(b, n)
	for _, tc := range []struct {
		name  string
		every time.Duration
	}{{"full", time.Second}, {"counter", 5 * time.Minute}} {
		b.Run(tc.name, func(b *testing.B) {
			cfg := coreConfig()
			cfg.FullSyncEvery = tc.every
			f := newFleetOver(b, agents, cfg)
			rows, quiet := f.st.RowsWritten(), 0
			c := cpuTime(b)
			b.ResetTimer()
			for range b.N * rounds {
				quiet += f.fullSync(b, n).Quiet
			}
			b.StopTimer()
			syncs := float64(n * rounds * b.N)
			if agents.elsewhere {
				b.ReportMetric(float64((cpuTime(b)-c).Microseconds())/syncs, "core_cpu_us_per_node")
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/syncs, "ns_per_node")
			b.ReportMetric(float64(2*int(syncs)-quiet)/syncs, "agent_requests_per_node")
			b.ReportMetric(float64(quiet)/syncs, "quiet_node_share")
			b.ReportMetric(float64(f.st.RowsWritten()-rows)/float64(b.N*rounds), "rows_per_idle_pass")
		})
	}
}
