package orchestrate_test

// The large-fleet benchmarks: one core's orchestrator (as muster core wires
// it, default settings, a real SQLite store, the core API on a real
// listener) over simulated agents: bench/agentsim processes of up to
// simPerProcess nodes each, every node a real HTTP endpoint at its own
// address in 127.0.0.0/8 (docs/performance.md, "Fleets of simulated
// agents"). The simulator is held to the real agent by e2e's
// TestAgentSimAnswersAsAgent.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/musterhq/muster/core/orchestrate"
	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/action"
	"github.com/musterhq/muster/shared/wire"
)

const (
	// simPerProcess bounds the nodes of one simulator process: a node
	// costs it a listener and the core's connection, and one more beside
	// a sync, under the usual hard limit of 20,000 descriptors.
	simPerProcess = 5000
	// simPool is the core's bound on idle connections to agents
	// (orchestrate.agent_idle_conns) for a fleet whose connections would
	// not fit in this process's descriptors, one per node; the reference
	// process keeps the same bound.
	simPool = 8192
	// simIdle is one of the three idle periods measured per size. The
	// three make 75 s, longer than ContactEvery (a minute) and an
	// interval with its jitter: a node's last contact, stored once a
	// minute, falls inside; the rows of an idle minute are scaled from
	// them.
	simIdle = 25 * time.Second
	// simRoundActions are the approvals of one of the three rounds of
	// approval → RUNNING and finished → visible.
	simRoundActions = 20
	// simDelay is how long a simulated action runs.
	simDelay = time.Second
)

// agentsimBinary builds bench/agentsim into a directory of b's.
func agentsimBinary(b *testing.B) string {
	b.Helper()
	bin := filepath.Join(b.TempDir(), "agentsim")
	out, err := exec.Command("go", "build", "-o", bin, "github.com/musterhq/muster/bench/agentsim").CombinedOutput()
	if err != nil {
		b.Fatalf("build agentsim: %v\n%s", err, out)
	}
	return bin
}

// simProc is one simulator process: its input takes "mark" and "stats".
type simProc struct {
	in  io.WriteCloser
	out *bufio.Scanner
}

func (p *simProc) ask(b *testing.B, req string) string {
	b.Helper()
	if _, err := io.WriteString(p.in, req+"\n"); err != nil {
		b.Fatal(err)
	}
	if !p.out.Scan() {
		b.Fatalf("agentsim ended: %v", p.out.Err())
	}
	return p.out.Text()
}

// simFleet is the simulator processes of one benchmark.
type simFleet struct{ procs []*simProc }

// mark starts a window of every process's statistics.
func (s *simFleet) mark(b *testing.B) {
	b.Helper()
	for _, p := range s.procs {
		if got := p.ask(b, "mark"); got != "ok" {
			b.Fatalf("agentsim mark: %s", got)
		}
	}
}

// simStats is the fleet's statistics of the window: the requests by route,
// the longest any node went without a sync and the nodes never synced.
type simStats struct {
	WindowS     float64          `json:"window_s"`
	Requests    map[string]int64 `json:"requests"`
	MaxSyncGapS float64          `json:"max_sync_gap_s"`
	Unsynced    int              `json:"unsynced"`
}

func (s *simFleet) stats(b *testing.B) simStats {
	b.Helper()
	all := simStats{Requests: map[string]int64{}}
	for _, p := range s.procs {
		var st simStats
		if err := json.Unmarshal([]byte(p.ask(b, "stats")), &st); err != nil {
			b.Fatal(err)
		}
		all.WindowS = max(all.WindowS, st.WindowS)
		all.MaxSyncGapS = max(all.MaxSyncGapS, st.MaxSyncGapS)
		all.Unsynced += st.Unsynced
		for k, v := range st.Requests {
			all.Requests[k] += v
		}
	}
	return all
}

// startSimFleet starts n simulated nodes node-1… in simulator processes of
// up to simPerProcess nodes, each process on its own /16 of 127.0.0.0/8.
func startSimFleet(b *testing.B, bin string, n int) (*agentSet, *simFleet) {
	b.Helper()
	began := time.Now()
	procs := (n + simPerProcess - 1) / simPerProcess
	sims := &simFleet{}
	all := &agentSet{elsewhere: true, stop: func() error { return nil }}
	var cmds []*exec.Cmd
	var ins []io.Closer
	b.Cleanup(func() {
		for _, in := range ins {
			in.Close() // the simulator stops at the end of its input
		}
		for _, cmd := range cmds {
			if err := cmd.Wait(); err != nil {
				b.Errorf("agentsim: %v", err)
			}
		}
	})
	var outs []*bufio.Scanner
	for h := range procs {
		first, count := 1+h*n/procs, (h+1)*n/procs-h*n/procs
		// A second octet of its own per process and per run, so that two
		// benchmarks on one machine do not meet.
		ip := fmt.Sprintf("127.%d.0.1", 10+(h+rand.IntN(20)*procs)%240)
		cmd := exec.Command(bin, "-cluster", benchCluster, "-first", fmt.Sprint(first), "-count", fmt.Sprint(count),
			"-ip", ip, "-delay", simDelay.String())
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
		cmds, ins = append(cmds, cmd), append(ins, in)
		sc := bufio.NewScanner(out)
		outs = append(outs, sc)
		sims.procs = append(sims.procs, &simProc{in: in, out: sc})
	}
	for h, sc := range outs {
		ready := false
		for sc.Scan() {
			if sc.Text() == "ready" {
				ready = true
				break
			}
			var node, addr string
			if _, err := fmt.Sscan(sc.Text(), &node, &addr); err != nil {
				b.Fatalf("agentsim said %q", sc.Text())
			}
			all.nodes, all.addrs = append(all.nodes, node), append(all.addrs, addr)
		}
		if !ready {
			b.Fatalf("agentsim %d ended before it was ready", h)
		}
	}
	if len(all.nodes) != n {
		b.Fatalf("the simulators started %d nodes, want %d", len(all.nodes), n)
	}
	b.Logf("%d simulated nodes in %d processes, started in %v", n, procs, time.Since(began).Round(time.Millisecond))
	return all, sims
}

// raiseNoFile raises this process's RLIMIT_NOFILE to at least want, the
// hard limit too when the process may (as root); it fails the benchmark
// when it cannot.
func raiseNoFile(b *testing.B, want uint64) {
	b.Helper()
	if err := setNoFile(want); err != nil {
		b.Skipf("RLIMIT_NOFILE of %d descriptors is out of reach (ulimit -Hn): %v", want, err)
	}
}

// setNoFile is raiseNoFile for a process of the benchmark's own (the
// reference).
func setNoFile(want uint64) error {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		return err
	}
	if rl.Cur >= want {
		return nil
	}
	if want <= rl.Max {
		rl.Cur = want
	} else {
		rl.Cur, rl.Max = want, want
	}
	return syscall.Setrlimit(syscall.RLIMIT_NOFILE, &rl)
}

// heapMB is the heap in use after a collection, in MB.
func heapMB() float64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return float64(ms.HeapInuse) / (1 << 20)
}

// BenchmarkSimFleet measures one core over 1,000, 10,000 and 50,000
// simulated agents, every figure the median of 3 samples with their spread
// (largest − smallest), its key ending with the size:
//
//   - sim_node_syncs_per_s: node syncs per second of a full sync (called back
//     to back, the loop not started), and its ratio to the reference process's
//     info sweeps of the same nodes before and after the samples (a sync is
//     two calls);
//   - with the loop and the scheduler started (default settings) and nothing
//     changing, over three periods of simIdle: the core's CPU as a fraction
//     of one core, the rows it wrote per idle minute (the three periods'
//     rows scaled to a minute, beside each period's fewest and most), and (over the three
//     periods at once, from the simulators' side) the longest any node went
//     without a sync: every node synced within;
//   - the core's RSS and Go heap per 1,000 nodes (this process runs only the
//     core: the agents and the reference run elsewhere);
//   - three groups of simRoundActions actions, each created by one person and
//     approved by another through the core API at a random point of the same
//     interval: approval → RUNNING on the agent p99 (its started_ts), and
//     finished on the agent (its finished_ts, simDelay later) → DONE in the
//     core's store p99 (polled every 20 ms), without gossip.
//
// Run it with -benchtime 1x.
func BenchmarkSimFleet(b *testing.B) {
	bin := agentsimBinary(b)
	for _, n := range []int{1000, 10000, 50000} {
		b.Run(fmt.Sprintf("nodes=%d", n), func(b *testing.B) { simFleetBench(b, bin, n) })
	}
}

// simIdleConns is the core's orchestrate.agent_idle_conns over n agents:
// 0 (one per node) when they fit in this process's descriptors, else
// simPool.
func simIdleConns(n int) int {
	if n+fdReserve <= fdLimit() {
		return 0
	}
	return simPool
}

func simFleetBench(b *testing.B, bin string, n int) {
	const samples = 3
	// The core keeps a connection to every node (or simPool in all), may
	// open a second one to a node, and holds its store and listeners
	// beside them.
	conns := n + 4*orchestrate.DefaultConfig().NodeConcurrency
	if simIdleConns(n) > 0 {
		conns = simIdleConns(n) + 4*orchestrate.DefaultConfig().NodeConcurrency
	}
	raiseNoFile(b, uint64(conns+fdReserve))
	debug.FreeOSMemory()
	rss0, heap0 := rssMB(b), heapMB()
	agents, sims := startSimFleet(b, bin, n)
	began := time.Now()
	cfg := coreConfig()
	cfg.AgentIdleConns = simIdleConns(n)
	f := newFleetOver(b, agents, cfg)
	b.Logf("first two full syncs of %d nodes: %v", n, time.Since(began).Round(time.Millisecond))
	key := func(name string) string { return fmt.Sprintf("sim_%s_%d", name, n) }
	report := func(name string, v []float64) {
		med, spread := medianSpread(v)
		b.ReportMetric(med, key(name))
		b.ReportMetric(spread, key(name+"_spread"))
	}

	// Node syncs per second, between two reference sweeps (one after
	// each sample would cost make bench a minute at 50,000 nodes).
	var rates, ratios []float64
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		before := f.infoRate(b)
		for range samples {
			t := time.Now()
			f.fullSync(b, n)
			rates = append(rates, float64(n)/time.Since(t).Seconds())
		}
		ref := (before + f.infoRate(b)) / 2
		for _, r := range rates[len(rates)-samples:] {
			ratios = append(ratios, r/(ref/2))
		}
		b.ReportMetric(ref, key("agent_info_calls_per_s"))
	}
	b.StopTimer()
	report("node_syncs_per_s", rates)
	report("ref_ratio", ratios)

	// Idle, the loop running.
	c := startCoreAPI(b, f, cfg)
	ctx := context.Background()
	var cpu, rows []float64
	sims.mark(b)
	r0, t0 := f.st.RowsWritten(), time.Now()
	for range samples {
		c0, r0, t0 := cpuTime(b), f.st.RowsWritten(), time.Now()
		time.Sleep(simIdle) // a measured period, nothing awaited
		el := time.Since(t0)
		cpu = append(cpu, (cpuTime(b)-c0).Seconds()/el.Seconds())
		rows = append(rows, float64(f.st.RowsWritten()-r0))
	}
	idleRows, idle := f.st.RowsWritten()-r0, time.Since(t0)
	st := sims.stats(b)
	report("core_cpu_idle", cpu)
	// A node's last contact is stored once a minute (ContactEvery), so
	// the rows come in bursts: the figure is the whole window's, scaled
	// to a minute, beside the rows of each period.
	b.ReportMetric(float64(idleRows)*float64(time.Minute)/float64(idle), key("idle_rows_per_min"))
	slices.Sort(rows)
	b.ReportMetric(rows[0], key("idle_rows_period_min"))
	b.ReportMetric(rows[len(rows)-1], key("idle_rows_period_max"))
	b.ReportMetric(st.MaxSyncGapS, key("synced_within_s"))
	b.ReportMetric(float64(st.Unsynced), key("unsynced_nodes"))
	b.ReportMetric(float64(st.Requests["info"])/st.WindowS, key("idle_info_calls_per_s"))
	rss, heap := rssMB(b), heapMB()
	b.ReportMetric(rss, key("core_rss_mb"))
	b.ReportMetric((rss-rss0)*1000/float64(n), key("core_rss_mb_per_1000_nodes"))
	b.ReportMetric((heap-heap0)*1000/float64(n), key("core_heap_mb_per_1000_nodes"))

	// Approval → RUNNING and finished → visible: three groups of
	// simRoundActions, approved side by side over one interval (one
	// after another, the wait for the next pass at 50,000 nodes would
	// cost make bench minutes).
	type sample struct {
		approve, visible time.Duration
		err              error
	}
	got := make([][]sample, samples)
	// An action is seen DONE at the pass after its end: allow two passes
	// of this fleet on a loaded machine.
	within := 3*time.Minute + time.Duration(n)*5*time.Millisecond
	var wg sync.WaitGroup
	for g := range samples {
		got[g] = make([]sample, simRoundActions)
		for k := range simRoundActions {
			j := (g*simRoundActions + k) * 7919 % n
			rec, err := c.alice.CreateAction(ctx, &wire.CreateActionRequest{ClusterID: benchCluster,
				NodeID: agents.nodes[j], Kind: "muster.io/debug.ping"})
			if err != nil {
				b.Fatal(err)
			}
			wg.Add(1)
			go func(s *sample) {
				defer wg.Done()
				s.approve, s.visible, s.err = approveAndWatch(ctx, c, rec.ID, time.Duration(rand.Int64N(int64(cfg.Interval))), within)
			}(&got[g][k])
		}
	}
	wg.Wait()
	var approveP99, approveP50, visibleP99, visibleP50 []float64
	for _, group := range got {
		var ap, vis []time.Duration
		for _, s := range group {
			if s.err != nil {
				b.Fatal(s.err)
			}
			ap, vis = append(ap, s.approve), append(vis, s.visible)
		}
		slices.Sort(ap)
		slices.Sort(vis)
		approveP99, approveP50 = append(approveP99, ms(percentile(ap, 99))), append(approveP50, ms(percentile(ap, 50)))
		visibleP99, visibleP50 = append(visibleP99, ms(percentile(vis, 99))), append(visibleP50, ms(percentile(vis, 50)))
	}
	report("approve_p99_ms", approveP99)
	report("approve_p50_ms", approveP50)
	report("finished_visible_p99_ms", visibleP99)
	report("finished_visible_p50_ms", visibleP50)
	b.ReportMetric(time.Since(began).Seconds(), key("bench_s"))
}

// approveAndWatch approves the action id as bob after pause (a random point
// of an interval), then polls the core's store every 20 ms until the action
// is DONE there: approve runs from the approval request to the agent's
// started_ts, visible from the agent's finished_ts to the poll that saw DONE.
func approveAndWatch(ctx context.Context, c *coreAPI, id string, pause, within time.Duration) (approve, visible time.Duration, err error) {
	time.Sleep(pause)
	t0 := time.Now()
	if _, err := c.bob.Approve(ctx, id); err != nil {
		return 0, 0, err
	}
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		var r *store.Record
		err := c.f.st.Read(ctx, func(tx store.Reader) error {
			var err error
			r, err = tx.Action(ctx, id)
			return err
		})
		if err != nil {
			return 0, 0, err
		}
		if r.State == action.Done && r.StartedTS != nil && r.FinishedTS != nil {
			return r.StartedTS.Sub(t0), time.Since(*r.FinishedTS), nil
		}
		time.Sleep(20 * time.Millisecond) // the poll's resolution
	}
	return 0, 0, fmt.Errorf("action %s not DONE in the core within %v", id, within)
}
