package orchestrate_test

// The pass benchmarks: one core's orchestrator against N real agents (each
// with its own HTTP listener on loopback and its own SQLite file), driven
// pass by pass. A pass over N nodes is N node syncs.
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
	// fdsPerAgent is what one agent costs this process in descriptors once
	// it has been synced: six at rest, and both ends of the connection the
	// orchestrator keeps alive, both ends of the reference client's, plus
	// one spare; fdReserve is kept for everything else.
	fdsPerAgent = 11
	fdReserve   = 1000
)

func TestMain(m *testing.M) {
	if spec := os.Getenv(hostEnv); spec != "" {
		if err := hostAgents(spec, os.Stdin, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, "agent host:", err)
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
// directory under dir, eight at a time. stop ends them all and waits.
func startAgents(ctx context.Context, first, count int, dir string) (*agentSet, error) {
	ctx, cancel := context.WithCancel(ctx)
	set := &agentSet{nodes: make([]string, count), addrs: make([]string, count)}
	var (
		running sync.WaitGroup
		mu      sync.Mutex
		runErr  error
	)
	set.stop = func() error {
		cancel()
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
			a, err := agent.New(cfg, nil)
			if err != nil {
				startErr[i] = err
				return
			}
			done := make(chan struct{})
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
	set, err := startAgents(context.Background(), first, count, dir)
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

// fdLimit is this process's RLIMIT_NOFILE (Go raises the soft limit to the
// hard one at start-up; the hard one needs privileges to raise).
func fdLimit() int {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		return 1024
	}
	return int(min(rl.Cur, 1<<30))
}

// hostedAgents starts n agents: in this process when they fit in its
// descriptor limit, else spread over as many agent-host processes as needed.
func hostedAgents(b *testing.B, n int) *agentSet {
	b.Helper()
	dir := b.TempDir()
	perProc := (fdLimit() - fdReserve) / fdsPerAgent
	if n <= perProc {
		set, err := startAgents(context.Background(), 1, n, dir)
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
	hosts := (n + perProc - 1) / perProc
	b.Logf("%d agents need about %d descriptors, over this process's limit of %d: %d agent-host processes",
		n, n*fdsPerAgent, fdLimit(), hosts)
	all := &agentSet{elsewhere: true}
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
		b.Cleanup(func() {
			stdin.Close() // the host stops its agents and exits
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			select {
			case err := <-done:
				if err != nil {
					b.Errorf("agent host: %v", err)
				}
			case <-time.After(60 * time.Second):
				_ = cmd.Process.Kill()
				<-done
				b.Error("agent host did not stop in 60 s: killed")
			}
		})
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
	ref    *http.Client // the reference calls' own client
	next   int          // the first agent of the next changing pass
}

func newBenchFleet(b *testing.B, n int) *benchFleet {
	b.Helper()
	dir := b.TempDir()
	st, err := sqlite.Open(context.Background(), dir)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	return newBenchFleetOn(b, n, st, filepath.Join(dir, sqlite.FileName))
}

// newBenchFleetOn is newBenchFleet on the store st, whose file (for the
// bytes written) is dbFile ("": not measured).
func newBenchFleetOn(b *testing.B, n int, st store.Store, dbFile string) *benchFleet {
	b.Helper()
	ctx := context.Background()
	agents := hostedAgents(b, n)
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
	// The orchestrator as muster core builds it: default settings, a plain
	// HTTP client.
	o, err := orchestrate.New(orchestrate.DefaultConfig(), st, nil, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(o.Stop) // closes its idle connections
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns = 0
	ref := &http.Client{Transport: tr}
	b.Cleanup(ref.CloseIdleConnections)
	f := &benchFleet{st: st, dbFile: dbFile, o: o, agents: agents, ref: ref}
	// The first pass finds every node UP and stores its cursor; from the
	// second on, an unchanged fleet is idle.
	for range 2 {
		f.pass(b, n)
	}
	f.infoRate(b) // the reference client connects to every agent once
	return f
}

func (f *benchFleet) pass(b *testing.B, n int) orchestrate.Report {
	b.Helper()
	rep, err := f.o.Pass(context.Background(), benchCluster)
	if err != nil {
		b.Fatal(err)
	}
	if rep.Nodes != n || rep.Down != 0 {
		b.Fatalf("pass synced %d nodes, %d down; want %d, none down", rep.Nodes, rep.Down, n)
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

// infoRate is the reference of a pass: GET /api/v1/info on every node,
// NodeConcurrency at once, over kept-alive connections, in calls per
// second. A node sync is two such calls (info, then the changes since the
// cursor), so a pass cannot beat half this rate.
func (f *benchFleet) infoRate(b *testing.B) float64 {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	work := make(chan string)
	errs := make(chan error, len(f.agents.addrs))
	var wg sync.WaitGroup
	start := time.Now()
	for range orchestrate.DefaultConfig().NodeConcurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for addr := range work {
				if _, err := client.NewAgent(addr, f.ref).Info(ctx); err != nil {
					errs <- err
				}
			}
		}()
	}
	for _, addr := range f.agents.addrs {
		work <- addr
	}
	close(work)
	wg.Wait()
	elapsed := time.Since(start)
	close(errs)
	if err := <-errs; err != nil {
		b.Fatal(err)
	}
	return float64(len(f.agents.addrs)) / elapsed.Seconds()
}

// change gives the next tenth of the fleet one new action each, scheduled
// directly on the agent (a ping), and waits until every one is DONE, so the
// next pass has exactly that tenth of the nodes to import a change from.
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
// agents: "idle" (nothing changed; also the rows and bytes an idle pass
// writes, the goal being zero, and, when the agents run in agent-host
// processes, the core's CPU time per node sync) and "changing" (a tenth of
// the nodes each have one new finished action to import before every pass).
func BenchmarkPass(b *testing.B) {
	for _, n := range []int{100, 1000, 5000} {
		b.Run(fmt.Sprintf("nodes=%d", n), func(b *testing.B) {
			f := newBenchFleet(b, n)
			b.Run("idle", func(b *testing.B) {
				// Each pass follows a reference sweep, so that both
				// see the same load on a shared machine.
				rows, bytes := f.st.RowsWritten(), f.dbBytes(b)
				var ref float64
				var cpu time.Duration
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					b.StopTimer()
					ref += f.infoRate(b)
					c := cpuTime(b)
					b.StartTimer()
					f.pass(b, n)
					cpu += cpuTime(b) - c
				}
				b.StopTimer()
				if f.agents.elsewhere {
					// Only the core runs here: what one sync costs it.
					b.ReportMetric(cpu.Seconds()*1000/float64(n*b.N), fmt.Sprintf("core_cpu_ms_per_node_sync_%d", n))
				}
				b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), fmt.Sprintf("core_node_syncs_per_s_%d", n))
				b.ReportMetric(ref/float64(b.N), fmt.Sprintf("agent_info_calls_per_s_%d", n))
				b.ReportMetric(float64(f.st.RowsWritten()-rows)/float64(b.N), "idle_pass_rows_written")
				b.ReportMetric(float64(f.dbBytes(b)-bytes)/float64(b.N), "idle_pass_bytes_written")
			})
			b.Run("changing", func(b *testing.B) {
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					b.StopTimer()
					k := f.change(b)
					b.StartTimer()
					if rep := f.pass(b, n); rep.Changes < k {
						b.Fatalf("pass wrote %d changes, want at least %d", rep.Changes, k)
					}
				}
				b.StopTimer()
				b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), fmt.Sprintf("core_node_syncs_per_s_%d_changing", n))
			})
		})
	}
}

// BenchmarkPassPostgres is BenchmarkPass's idle and changing passes over
// 1,000 real agents with the store on PostgreSQL: the tests' local server,
// which runs with fsync off where the SQLite file syncs, so the rows an idle
// pass writes compare exactly and the rates as an order of magnitude.
func BenchmarkPassPostgres(b *testing.B) {
	const n = 1000
	st, err := postgres.Open(context.Background(), pgtest.NewDatabase(b))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	f := newBenchFleetOn(b, n, st, "")
	b.Run("idle", func(b *testing.B) {
		rows := f.st.RowsWritten()
		for i := 0; i < b.N; i++ {
			f.pass(b, n)
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
			if rep := f.pass(b, n); rep.Changes < k {
				b.Fatalf("pass wrote %d changes, want at least %d", rep.Changes, k)
			}
		}
		b.StopTimer()
		b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "pg_node_syncs_per_s_1000_changing")
	})
}
