package e2e

// The benchmarks measure real muster processes. Where a benchmark needs a
// large fleet, the agents run inside the benchmark's own process (the real
// agent package: its own SQLite file and HTTP listener each), since a
// thousand agent processes would not fit on a small machine; the core under
// measurement is always a real `muster core` process.

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/musterhq/muster/agent"
	"github.com/musterhq/muster/shared/action"
	"github.com/musterhq/muster/shared/client"
	"github.com/musterhq/muster/shared/testwait"
	"github.com/musterhq/muster/shared/wire"
)

// rssMB reads the resident set size of pid from /proc.
func rssMB(b *testing.B, pid int) float64 {
	b.Helper()
	return statusMB(b, pid, "VmRSS")
}

// statusMB reads a field in kB of /proc/<pid>/status, in MB: VmRSS, or
// its parts RssAnon (heap, stacks: the process's own) and RssFile (pages
// of the binary and libraries, shared with the page cache).
func statusMB(b *testing.B, pid int, field string) float64 {
	b.Helper()
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == field+":" {
			kb, _ := strconv.ParseFloat(f[1], 64)
			return kb / 1024
		}
	}
	b.Fatalf("no %s in /proc/%d/status", field, pid)
	return 0
}

// BenchmarkAgentIdleRSS starts a real agent, lets it settle for a few
// seconds, and reports its resident memory, and the two parts of it: the
// anonymous pages (the agent's heap and stacks) and the file pages (of its
// binary: the kernel may map a whole large folio of the page cache on one
// fault, so that this part follows the binary's size more than what the
// agent runs). The agent is muster-agent, the binary the nodes install;
// beside it, as the reference, `muster agent` of the one binary, which
// carries the core too (docs/performance.md, "Idle agent RSS"). The goal
// is under 20 MB.
func BenchmarkAgentIdleRSS(b *testing.B) {
	var total, anon, file, oneBinary float64
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		t, a, f := idleAgentRSS(b, agentBinary)
		total, anon, file = total+t, anon+a, file+f
		t, _, _ = idleAgentRSS(b, binary, "agent")
		oneBinary += t
		b.StartTimer()
	}
	n := float64(b.N)
	b.ReportMetric(total/n, "agent_idle_rss_mb")
	b.ReportMetric(anon/n, "agent_idle_rss_anon_mb")
	b.ReportMetric(file/n, "agent_idle_rss_file_mb")
	b.ReportMetric(oneBinary/n, "agent_idle_rss_onebinary_mb")
}

// idleAgentRSS starts the agent as bin cmd..., and returns its VmRSS,
// RssAnon and RssFile in MB 3 s after it started; then it kills it.
func idleAgentRSS(b *testing.B, bin string, cmd ...string) (total, anon, file float64) {
	b.Helper()
	p, _, _ := agentProcOf(b, bin, cmd, b.TempDir(), "rss", "")
	defer p.kill()
	time.Sleep(3 * time.Second) // the measurement is "a few seconds after start"
	pid := p.cmd.Process.Pid
	return rssMB(b, pid), statusMB(b, pid, "RssAnon"), statusMB(b, pid, "RssFile")
}

const benchCluster = "bench"

// inProcessAgents starts n agents node-1…node-n in this process, eight at
// a time, and returns their API addresses by node id. They stop when the
// benchmark ends.
func inProcessAgents(b *testing.B, n int) map[string]string {
	b.Helper()
	return inProcessAgentsIn(b, n, func(int) string { return benchCluster })
}

// inProcessAgentsIn is inProcessAgents with node-(i+1) in cluster
// clusterOf(i).
func inProcessAgentsIn(b *testing.B, n int, clusterOf func(i int) string) map[string]string {
	b.Helper()
	dir := b.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	var running sync.WaitGroup
	b.Cleanup(func() { cancel(); running.Wait() })
	addrs := make([]string, n)
	errs := make([]error, n)
	var starting sync.WaitGroup
	sem := make(chan struct{}, 8)
	for i := range n {
		starting.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; starting.Done() }()
			node := fmt.Sprintf("node-%d", i+1)
			cfg := agent.DefaultConfig()
			cfg.NodeID, cfg.ClusterID, cfg.DataDir, cfg.API.Addr = node, clusterOf(i), filepath.Join(dir, node), "127.0.0.1:0"
			cfg.API.Insecure = true
			a, err := agent.New(cfg, nil)
			if err != nil {
				errs[i] = err
				return
			}
			done := make(chan error, 1)
			running.Add(1)
			go func() { defer running.Done(); done <- a.Run(ctx) }()
			select {
			case <-a.Ready():
				addrs[i] = a.Addr().String()
			case err := <-done:
				errs[i] = fmt.Errorf("%s: %w", node, err)
			}
		}()
	}
	starting.Wait()
	if err := errors.Join(errs...); err != nil {
		b.Fatal(err)
	}
	out := make(map[string]string, n)
	for i, a := range addrs {
		out[fmt.Sprintf("node-%d", i+1)] = a
	}
	return out
}

// benchCore is a real core process orchestrating in-process agents with
// the default interval (10 s), so that what a benchmark sees after an
// approval is the nudge, not the next periodic pass.
type benchCore struct {
	core   *proc
	agents map[string]string // node id → agent API address
	nodes  []string          // sorted
	alice  *client.Core      // operator
	bob    *client.Core      // approver
	admin  *client.Core
}

func newBenchCore(b *testing.B, n int) *benchCore {
	b.Helper()
	bc := &benchCore{agents: inProcessAgents(b, n)}
	var nodes strings.Builder
	for id, addr := range bc.agents {
		bc.nodes = append(bc.nodes, id)
		fmt.Fprintf(&nodes, "      - {id: %s, addr: %q}\n", id, addr)
	}
	slices.Sort(bc.nodes)
	dir := b.TempDir()
	cfg := fmt.Sprintf("data_dir: %s\napi:\n  addr: 127.0.0.1:%d\nclusters:\n  - id: %s\n    nodes:\n%s",
		filepath.Join(dir, "data"), freePort(b), benchCluster, nodes.String())
	path := filepath.Join(dir, "core.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		b.Fatal(err)
	}
	bc.core = start(b, "core", nil, "core", "--config", path)
	secret, err := os.ReadFile(filepath.Join(dir, "data", "admin.token"))
	if err != nil {
		b.Fatal(err)
	}
	hc := &http.Client{Timeout: 30 * time.Second}
	url := "http://" + bc.core.Addr()
	bc.admin = client.NewCore(url, strings.TrimSpace(string(secret)), hc)
	for _, t := range []struct {
		c    **client.Core
		name string
	}{{&bc.alice, "alice"}, {&bc.bob, "bob"}} {
		role := map[string]string{"alice": "operator", "bob": "approver"}[t.name]
		sec, err := bc.admin.CreateToken(ctxT(b), t.name, []string{role})
		if err != nil {
			b.Fatal(err)
		}
		*t.c = client.NewCore(url, sec.Token, hc)
	}
	testwait.Within(b, 2*time.Minute, "every node UP", func() bool {
		list, err := bc.admin.Nodes(ctxT(b), benchCluster)
		if err != nil || len(list) != n {
			return false
		}
		for _, nd := range list {
			if nd.Status != "UP" {
				return false
			}
		}
		return true
	})
	return bc
}

// approveToRunning creates a ping on node as alice, approves it as bob and
// returns the time from the approval request to the agent's started_ts. It
// returns as soon as the agent has started the action: the next approval
// may land while the core still commits this one's sync, or during a
// periodic pass, and waits for it as any approval would (docs/architecture.md,
// "Orchestration pass"). Waiting for a whole pass after every sample cost
// one interval (10 s) a sample and measured nothing more.
func (bc *benchCore) approveToRunning(b *testing.B, node string, ag *client.Agent) time.Duration {
	b.Helper()
	ctx := ctxT(b)
	a, err := bc.alice.CreateAction(ctx, &wire.CreateActionRequest{ClusterID: benchCluster, NodeID: node, Kind: "muster.io/debug.ping"})
	if err != nil {
		b.Fatal(err)
	}
	if a.State != action.PendingApprove {
		b.Fatalf("created %s, want %s", a.State, action.PendingApprove)
	}
	t0 := time.Now()
	if _, err := bc.bob.Approve(ctx, a.ID); err != nil {
		b.Fatal(err)
	}
	var started time.Time
	testwait.Within(b, 30*time.Second, "the agent to start "+a.ID, func() bool {
		got, err := ag.Get(ctx, a.ID)
		if err != nil || got.StartedTS == nil {
			return false
		}
		started = *got.StartedTS
		return true
	})
	return started.Sub(t0)
}

// percentile returns the p-th percentile (0 < p ≤ 100) of sorted d, nearest rank.
func percentile(d []time.Duration, p float64) time.Duration {
	i := int(float64(len(d))*p/100+0.999999) - 1
	return d[min(max(i, 0), len(d)-1)]
}

// BenchmarkCore measures a real core process over N in-process agents:
// "approve" is the latency from an approval (through the core API) to the
// agent's started_ts, one action at a time, carried by the nudge an
// approval sends (the interval is 10 s); "rss" is the core's resident
// memory once the fleet is UP and has been orchestrated. With 10 nodes the
// figures are the core's baseline; with 1,000, the difference is its cost
// per 1,000 nodes.
func BenchmarkCore(b *testing.B) {
	const interval = 10 * time.Second // the default orchestrate.interval
	for _, n := range []int{10, 1000} {
		b.Run(fmt.Sprintf("nodes=%d", n), func(b *testing.B) {
			bc := newBenchCore(b, n)
			b.Run("approve", func(b *testing.B) {
				hc := &http.Client{Timeout: 10 * time.Second}
				var lat []time.Duration
				for i := 0; i < b.N; i++ {
					// A prime stride spreads the samples over the
					// fleet, not over the first nodes in id order.
					node := bc.nodes[(i*7919)%len(bc.nodes)]
					lat = append(lat, bc.approveToRunning(b, node, client.NewAgent(bc.agents[node], hc)))
				}
				slices.Sort(lat)
				p50, p99 := percentile(lat, 50), percentile(lat, 99)
				ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
				suffix := ""
				if n != 10 {
					suffix = fmt.Sprintf("_%d", n)
				}
				b.ReportMetric(ms(p50), "approve_to_running_p50_ms"+suffix)
				b.ReportMetric(ms(p99), "approve_to_running_p99_ms"+suffix)
				b.ReportMetric(float64(p99)/float64(interval), "approve_to_running_p99_of_interval"+suffix)
			})
			b.Run("rss", func(b *testing.B) {
				// Every iteration is one nudged pass over the whole
				// fleet; the figure is the largest RSS seen after one.
				metrics := &fleet{core: bc.core} // for its passes()
				pass := func() {
					before := metrics.passes()
					if err := bc.admin.Orchestrate(ctxT(b), benchCluster); err != nil {
						b.Fatal(err)
					}
					testwait.Within(b, time.Minute, "a nudged pass", func() bool { return metrics.passes() > before })
				}
				pass()
				var rss float64
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					pass()
					rss = max(rss, rssMB(b, bc.core.cmd.Process.Pid))
				}
				// The report derives the cost per 1,000 nodes from
				// the two: (core_rss_mb_1000_nodes − core_rss_mb_base).
				key := "core_rss_mb_base"
				if n != 10 {
					key = fmt.Sprintf("core_rss_mb_%d_nodes", n)
				}
				b.ReportMetric(rss, key)
			})
		})
	}
}
