// Command benchreport runs muster's benchmarks (`make bench`), prints every
// figure beside its reference from the same run and its goal, and writes
// them to a JSON file of numbers (null where a figure was not measured).
//
// A benchmark takes part by reporting a metric whose unit is a results key
// (lowercase letters, digits and underscores), with b.ReportMetric(v, key).
// The benchmarks listed in runs get their own -benchtime; every other
// benchmark of the module runs afterwards with the default one, so a new
// benchmark needs no change here to reach the JSON. A key reported more than
// once keeps its largest value.
//
// With -docs FILE it runs nothing: it rewrites the tables of FILE
// (docs/performance.md) from a results file (-results, bench/results.json).
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"
)

// run is one `go test -bench` invocation.
type run struct {
	pkg, bench, benchtime string
}

// runs are the benchmarks that need a -benchtime of their own; afterwards
// every other benchmark of the module runs with defaultBenchtime.
var runs = []run{
	{"./agent", "^BenchmarkQueueThroughput$", "2s"},
	{"./e2e", "^BenchmarkAgentIdleRSS$", "1x"},
	{"./core/orchestrate", "^BenchmarkPass$", "1x"},           // 100 to 10,000 nodes: its own samples per size
	{"./core/orchestrate", "^BenchmarkRunWaves$", "3x"},       // three runs of ten waves: the median ratio
	{"./core/orchestrate", "^BenchmarkProcedure$", "3x"},      // three runs of ten waves of three steps
	{"./core/orchestrate", "^BenchmarkProcedureGate$", "3x"},  // three pairs of runs: a gate on every node, and none
	{"./e2e", "^BenchmarkCore$/^nodes=10$/^approve$", "200x"}, // one approval at a time, no pass in between
	{"./e2e", "^BenchmarkCore$/^nodes=10$/^rss$", "5x"},       // five nudged passes
	{"./e2e", "^BenchmarkCore$/^nodes=1000$", "20x"},
	{"./e2e", "^BenchmarkHAFailover$", "1x"},     // ten SIGKILLs of a lease holder
	{"./e2e", "^BenchmarkHAScaleOut$", "1x"},     // 1, 2 and 3 replicas over one fleet
	{"./core/ui", "^BenchmarkLargeRuns$", "1x"},  // seeds 300,000 children once, then 3 requests of each
	{"./core/notify", "^BenchmarkNotify$", "3x"}, // 3 × 300 events at 100/s; 3 runs of 7 rounds of writes at 0, 1, 3 destinations
	// 1,000, 10,000 and 50,000 simulated agents (bench/agentsim), 3
	// samples of each figure per size: about 1.5, 2.5 and 6 minutes at
	// load average 10 (docs/performance.md, "Fleets of simulated agents").
	{"./core/orchestrate", "^BenchmarkSimFleet$", "1x"},
}

const defaultBenchtime = "2s"

// required are the keys the JSON always has.
var required = []string{
	"sqlite_commits_per_s", "agent_actions_per_s", "agent_queue_ratio",
	"core_node_syncs_per_s_100", "core_node_syncs_per_s_1000", "core_node_syncs_per_s_5000",
	"idle_pass_rows_written", "approve_to_running_p50_ms", "approve_to_running_p99_ms",
	"agent_idle_rss_mb", "agent_idle_rss_onebinary_mb", "core_rss_mb_per_1000_nodes", "gossip_detect_s",
	"finished_to_visible_p50_ms", "finished_to_visible_p99_ms",
	"run_waves_ratio", "run_waves_overhead_ms", "run_waves_ratio_gossip_100", "run_waves_overhead_ms_gossip_100",
	"approve_busy_p99_ms_1000", "approve_busy_p99_ms_5000",
	"procedure_ratio", "step_latency_p99_ms_gossip_100", "procedure_gate_ratio",
	"core_node_syncs_per_s_10000", "core_node_syncs_per_s_10000_changing",
	"core_ref_ratio_1000", "core_ref_ratio_5000", "core_ref_ratio_10000",
	"core_cpu_ms_per_node_sync_10000", "core_rss_mb_per_1000_nodes_10000", "approve_busy_p99_ms_10000",
	"sim_node_syncs_per_s_50000", "sim_core_cpu_idle_50000", "sim_idle_rows_per_min_50000", "sim_approve_p99_ms_50000",
	"sim_finished_visible_p99_ms_50000", "sim_synced_within_s_50000", "sim_core_rss_mb_per_1000_nodes_50000",
}

// simSizes are the fleets of simulated agents BenchmarkSimFleet measures.
var simSizes = []int{1000, 10000, 50000}

// simRows are the rows of the simulated fleets, figure by figure, size by
// size; the goals (issue 37's) are the 50,000-node fleet's.
func simRows() []row {
	var out []row
	for _, f := range []struct {
		label, key, ref, refLabel string
		goal                      *goal
	}{
		{"node syncs/s, %s simulated agents, idle full sync: median of 3", "node_syncs_per_s", "agent_info_calls_per_s", "reference info calls/s (a sync is 2 calls)", nil},
		{"… ÷ (info calls/s ÷ 2), %s simulated agents: median of 3", "ref_ratio", "ref_ratio_spread", "spread", nil},
		{"core CPU with nothing changing (fraction of one core), %s simulated agents: median of 3", "core_cpu_idle", "core_cpu_idle_spread", "spread", &goal{"<=", 0.25}},
		{"rows written by an idle minute, %s simulated agents (75 s, scaled)", "idle_rows_per_min", "idle_rows_period_max", "rows at most in one 25 s period", &goal{"==", 0}},
		{"every node synced within (s), %s simulated agents, measured by the agents", "synced_within_s", "unsynced_nodes", "nodes never synced in 75 s", nil},
		{"approval → RUNNING p99 (ms), %s simulated agents, loop running: median of 3", "approve_p99_ms", "approve_p99_ms_spread", "spread", &goal{"<", 250}},
		{"action finished on the agent → visible in the core p99 (ms), %s simulated agents, no gossip: median of 3", "finished_visible_p99_ms", "finished_visible_p99_ms_spread", "spread", &goal{"<", 1000}},
		{"… p50 (ms), %s simulated agents", "finished_visible_p50_ms", "finished_visible_p50_ms_spread", "spread", nil},
		{"core RSS per 1,000 nodes (MB), %s simulated agents", "core_rss_mb_per_1000_nodes", "core_heap_mb_per_1000_nodes", "MB Go heap per 1,000 nodes", &goal{"<", 20}},
	} {
		for _, n := range simSizes {
			r := row{label: strings.ReplaceAll(f.label, "%s", thousands(n)), key: fmt.Sprintf("sim_%s_%d", f.key, n),
				ref: fmt.Sprintf("sim_%s_%d", f.ref, n), refLabel: f.refLabel}
			if n == simSizes[len(simSizes)-1] {
				r.goal = f.goal
			}
			out = append(out, r)
		}
	}
	return out
}

// thousands writes n with a comma between thousands: 50,000.
func thousands(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// goal is a target for a figure.
type goal struct {
	op string // ">=", "<=", "<" or "=="
	v  float64
}

func (g *goal) String() string {
	if g == nil {
		return ""
	}
	return g.op + " " + num(g.v)
}

func (g *goal) met(v float64) string {
	if g == nil {
		return ""
	}
	ok := false
	switch g.op {
	case ">=":
		ok = v >= g.v
	case "<=":
		ok = v <= g.v
	case "<":
		ok = v < g.v
	case "==":
		ok = v == g.v
	}
	if ok {
		return "met"
	}
	return "MISSED"
}

// row is one line of the table: a figure, its reference and its goal.
type row struct {
	label, key string
	ref        string // key of the reference figure, if any
	refLabel   string
	goal       *goal
}

var rows = append([]row{
	{"agent queue throughput (actions/s)", "agent_actions_per_s", "sqlite_commits_per_s", "raw SQLite commits/s", nil},
	{"agent queue ratio (actions/s ÷ (commits/s ÷ 3))", "agent_queue_ratio", "", "", &goal{">=", 0.8}},
	{"idle agent RSS, muster-agent (MB)", "agent_idle_rss_mb", "agent_idle_rss_onebinary_mb", "MB as `muster agent` of the one binary", &goal{"<", 20}},
	{"… of which anonymous (heap, stacks) (MB)", "agent_idle_rss_anon_mb", "agent_idle_rss_file_mb", "MB pages of the binary", nil},
	{"node syncs/s, 100 nodes, idle", "core_node_syncs_per_s_100", "agent_info_calls_per_s_100", "agent info calls/s (a sync is 2 calls)", nil},
	{"node syncs/s, 1,000 nodes, idle", "core_node_syncs_per_s_1000", "agent_info_calls_per_s_1000", "agent info calls/s", nil},
	{"node syncs/s, 5,000 nodes, idle", "core_node_syncs_per_s_5000", "agent_info_calls_per_s_5000", "agent info calls/s", &goal{">=", 1000}},
	{"node syncs/s, 10,000 nodes, idle", "core_node_syncs_per_s_10000", "agent_info_calls_per_s_10000", "agent info calls/s", &goal{">=", 1000}},
	{"node syncs/s ÷ (info calls/s ÷ 2), 1,000 nodes: median of 3", "core_ref_ratio_1000", "core_ref_ratio_spread_1000", "spread", &goal{">=", 0.7}},
	{"node syncs/s ÷ (info calls/s ÷ 2), 5,000 nodes: median of 3", "core_ref_ratio_5000", "core_ref_ratio_spread_5000", "spread", &goal{">=", 0.7}},
	{"node syncs/s ÷ (info calls/s ÷ 2), 10,000 nodes: median of 3", "core_ref_ratio_10000", "core_ref_ratio_spread_10000", "spread", &goal{">=", 0.7}},
	{"core CPU per node sync (ms), 1,000 nodes", "core_cpu_ms_per_node_sync_1000", "", "", nil},
	{"core CPU per node sync (ms), 5,000 nodes", "core_cpu_ms_per_node_sync_5000", "", "", nil},
	{"core CPU per node sync (ms), 10,000 nodes", "core_cpu_ms_per_node_sync_10000", "", "", nil},
	{"node syncs/s, 100 nodes, 10% changing", "core_node_syncs_per_s_100_changing", "core_node_syncs_per_s_100", "idle", nil},
	{"node syncs/s, 1,000 nodes, 10% changing", "core_node_syncs_per_s_1000_changing", "core_node_syncs_per_s_1000", "idle", nil},
	{"node syncs/s, 5,000 nodes, 10% changing", "core_node_syncs_per_s_5000_changing", "core_node_syncs_per_s_5000", "idle", nil},
	{"node syncs/s, 10,000 nodes, 10% changing", "core_node_syncs_per_s_10000_changing", "core_node_syncs_per_s_10000", "idle", nil},
	{"rows written by an idle pass", "idle_pass_rows_written", "", "", &goal{"==", 0}},
	{"bytes written by an idle pass", "idle_pass_bytes_written", "", "", &goal{"==", 0}},
	{"approval → RUNNING p50 (ms), 10 nodes", "approve_to_running_p50_ms", "", "", nil},
	{"approval → RUNNING p99 (ms), 10 nodes", "approve_to_running_p99_ms", "approve_to_running_p99_of_interval", "fraction of the 10 s interval", &goal{"<", 250}},
	{"approval → RUNNING p50 (ms), 1,000 nodes", "approve_to_running_p50_ms_1000", "", "", nil},
	{"approval → RUNNING p99 (ms), 1,000 nodes", "approve_to_running_p99_ms_1000", "approve_to_running_p99_of_interval_1000", "fraction of the 10 s interval", nil},
	{"approval → RUNNING p50 (ms), 1,000 nodes, during passes", "approve_busy_p50_ms_1000", "", "", nil},
	{"approval → RUNNING p99 (ms), 1,000 nodes, during passes", "approve_busy_p99_ms_1000", "approve_busy_pass_ms_1000", "ms, mean pass of 1,000 nodes", &goal{"<", 250}},
	{"approval → RUNNING p50 (ms), 5,000 nodes, during passes", "approve_busy_p50_ms_5000", "", "", nil},
	{"approval → RUNNING p99 (ms), 5,000 nodes, during passes", "approve_busy_p99_ms_5000", "approve_busy_pass_ms_5000", "ms, mean pass of 5,000 nodes", &goal{"<", 250}},
	{"approval → RUNNING p50 (ms), 10,000 nodes, during passes", "approve_busy_p50_ms_10000", "", "", nil},
	{"approval → RUNNING p99 (ms), 10,000 nodes, during passes", "approve_busy_p99_ms_10000", "approve_busy_pass_ms_10000", "ms, mean pass of 10,000 nodes", &goal{"<", 250}},
	{"run of 1,000 nodes × 1 s sleep, 10% at once, no gossip: wall time (s)", "run_waves_wall_s", "run_waves_ideal_s", "s ideal (10 waves × 1 s)", nil},
	{"… as a ratio of the ideal: median of 3", "run_waves_ratio", "run_waves_ratio_spread", "spread", &goal{"<=", 1.3}},
	{"… overhead per wave (ms): (wall − ideal) ÷ 10", "run_waves_overhead_ms", "run_waves_gap_ms", "ms gap: a wave's last finish → next first start", &goal{"<", 300}},
	{"run of 100 nodes × 1 s sleep, 10% at once, gossip on: wall time (s)", "run_waves_wall_s_gossip_100", "run_waves_ideal_s_gossip_100", "s ideal (10 waves × 1 s)", nil},
	{"… as a ratio of the ideal: median of 3", "run_waves_ratio_gossip_100", "run_waves_ratio_spread_gossip_100", "spread", &goal{"<=", 1.3}},
	{"… overhead per wave (ms): (wall − ideal) ÷ 10", "run_waves_overhead_ms_gossip_100", "run_waves_gap_ms_gossip_100", "ms gap: a wave's last finish → next first start", &goal{"<", 300}},
	{"… a slot's turnover p50 (ms): a child ends on its agent → the next node's child starts", "run_waves_turnover_p50_ms", "run_waves_turnover_p99_ms", "ms p99", nil},
	{"procedure of 1,000 nodes × 3 steps of 1 s sleep, 10% at once, no gossip: wall time (s)", "procedure_wall_s", "procedure_ideal_s", "s ideal (10 waves × 3 s)", nil},
	{"… as a ratio of the ideal: median of 3", "procedure_ratio", "procedure_ratio_spread", "spread", &goal{"<=", 1.3}},
	{"… a slot's turnover p50 (ms): a node's last step ends → the next node's first starts", "procedure_turnover_p50_ms", "procedure_turnover_p99_ms", "ms p99", nil},
	{"… a step's end → the node's next step started, p99 (ms)", "step_latency_p99_ms", "step_latency_p50_ms", "ms p50", nil},
	{"procedure of 1,000 nodes × 3 steps of 1 s sleep, an HTTP gate after the first, 10% at once, no gossip: wall time (s)", "procedure_gate_wall_s", "procedure_gate_ideal_s", "s ideal (10 waves × 3 s)", nil},
	{"… as a ratio of the ideal: median of 3", "procedure_gate_ratio", "procedure_gate_ratio_spread", "spread", &goal{"<=", 1.3}},
	{"… the same procedure without the gate, run in turn with it: median of 3", "procedure_gate_plain_ratio", "procedure_gate_plain_ratio_spread", "spread", nil},
	{"… a node's first step ends → its second starts, through the gate, p50 (ms)", "procedure_gate_latency_p50_ms", "procedure_gate_plain_latency_p50_ms", "ms p50 without the gate", nil},
	{"… the gate admitted → passed, p50 (ms)", "procedure_gate_evaluated_p50_ms", "procedure_gate_admitted_p50_ms", "ms p50 from the first step's end to its admission", nil},
	{"procedure of 100 nodes × 3 steps of 1 s sleep, 10% at once, gossip on: wall time (s)", "procedure_wall_s_gossip_100", "procedure_ideal_s_gossip_100", "s ideal (10 waves × 3 s)", nil},
	{"… as a ratio of the ideal: median of 3", "procedure_ratio_gossip_100", "procedure_ratio_spread_gossip_100", "spread", &goal{"<=", 1.3}},
	{"step on its agent DONE → the node's next step RUNNING p50 (ms), gossip on", "step_latency_p50_ms_gossip_100", "step_latency_seen_p50_ms_gossip_100", "ms p50 until the core stored the end", nil},
	{"step on its agent DONE → the node's next step RUNNING p99 (ms), gossip on", "step_latency_p99_ms_gossip_100", "step_latency_started_p50_ms_gossip_100", "ms p50 from the next child's creation to its start", &goal{"<", 500}},
	{"procedures in flight read by a sync with a budget (ms), 20 open runs of 1,000 nodes × 3 steps", "inflight_ms_20_runs", "inflight_children_ms_20_runs", "ms to read their children whole", nil},
	{"notification: event committed → delivered p50 (ms), 100 events/s", "notify_latency_p50_ms", "", "", nil},
	{"notification: event committed → delivered p99 (ms), 100 events/s", "notify_latency_p99_ms", "", "", &goal{"<", 1000}},
	{"outbox cost: event writes/s, one destination ÷ none (worker stopped): median of 3", "notify_write_path_ratio_1", "notify_write_path_ratio_spread_1", "spread", &goal{">=", 0.8}},
	{"outbox cost: event writes/s, three destinations ÷ none (worker stopped): median of 3", "notify_write_path_ratio_3", "notify_write_path_ratio_spread_3", "spread", &goal{">=", 0.8}},
	{"… with the worker posting each to a local receiver on the same cores, one destination", "notify_write_ratio_1", "notify_write_ratio_spread_1", "spread", nil},
	{"… with the worker posting each to local receivers on the same cores, three destinations", "notify_write_ratio_3", "notify_write_ratio_spread_3", "spread", nil},
	{"event writes/s without notify", "notify_event_writes_per_s_0", "", "", nil},
	{"core RSS per 1,000 nodes (MB)", "core_rss_mb_per_1000_nodes", "core_rss_mb_1000_nodes", "core RSS at 1,000 nodes", &goal{"<", 50}},
	{"core RSS, 10 nodes (MB)", "core_rss_mb_base", "", "", nil},
	{"core RSS per 1,000 nodes (MB), 10,000 nodes", "core_rss_mb_per_1000_nodes_10000", "core_rss_mb_10000_nodes", "core RSS at 10,000 nodes", &goal{"<", 50}},
	{"gossip: SIGKILL to node DOWN (s), memberlist LAN defaults", "gossip_detect_s", "", "", nil},
	{"action finished → visible in the core p50 (ms), gossip, 10 s interval", "finished_to_visible_p50_ms", "", "", nil},
	{"action finished → visible in the core p99 (ms), gossip, 10 s interval", "finished_to_visible_p99_ms", "", "", &goal{"<", 1000}},
	{"node syncs/s, 1,000 nodes, idle, PostgreSQL store", "pg_node_syncs_per_s_1000", "core_node_syncs_per_s_1000", "SQLite", nil},
	{"node syncs/s, 1,000 nodes, 10% changing, PostgreSQL store", "pg_node_syncs_per_s_1000_changing", "core_node_syncs_per_s_1000_changing", "SQLite", nil},
	{"rows written by an idle pass, PostgreSQL store", "pg_idle_pass_rows_written", "", "", &goal{"==", 0}},
	{"failover p50 (s): SIGKILL of a lease holder → pass on another replica", "ha_failover_p50_s", "ha_lease_ttl_s", "lease TTL (s)", nil},
	{"failover p99 (s), over 10 kills", "ha_failover_p99_s", "ha_lease_ttl_s", "lease TTL (s)", &goal{"<", 3}},
	{"approval on another replica → RUNNING p50 (ms)", "ha_approve_to_running_p50_ms", "", "", nil},
	{"approval on another replica → RUNNING p99 (ms)", "ha_approve_to_running_p99_ms", "", "", &goal{"<", 250}},
	{"core CPU s per 1,000 node syncs, 1 replica (PostgreSQL)", "ha_cpu_s_per_1000_syncs_r1", "ha_node_syncs_per_s_r1", "node syncs/s", nil},
	{"… 2 replicas, relative to 1", "ha_cost_ratio_r2", "ha_node_syncs_per_s_r2", "node syncs/s", &goal{"<", 1.2}},
	{"… 3 replicas, relative to 1", "ha_cost_ratio_r3", "ha_node_syncs_per_s_r3", "node syncs/s", &goal{"<", 1.2}},
	{"list of 10,000 actions over 100 clusters, unscoped (ms)", "scope_list_10000_unscoped_ms", "scope_list_10000_scoped_ms", "ms scoped (a glob over every cluster)", nil},
	{"… scope filtering: scoped ÷ unscoped, median of 3", "scope_list_10000_ratio", "scope_list_10000_ratio_spread", "spread", &goal{"<", 1.2}},
	{"Approvals, 200 runs of 10,000 nodes waiting: median of 3 (ms)", "approvals_200_runs_10000_nodes_ms", "approvals_200_runs_10000_nodes_spread_ms", "ms spread", &goal{"<", 300}},
	{"… its size (KB)", "approvals_200_runs_10000_nodes_kb", "", "", &goal{"<", 1024}},
	{"GET /api/v1/runs?limit=200, 300,000 children: median of 3 (ms)", "run_list_200_runs_300k_children_ms", "run_list_200_runs_300k_children_spread_ms", "ms spread", &goal{"<", 200}},
	{"… its size (KB)", "run_list_200_runs_300k_children_kb", "", "", nil},
	{"GET /api/v1/runs/{id}, 10,000 nodes (run watch, each second): median of 3 (ms)", "run_api_10000_nodes_ms", "run_api_10000_nodes_spread_ms", "ms spread", &goal{"<", 100}},
	{"… its size (KB)", "run_api_10000_nodes_kb", "", "", &goal{"<", 256}},
}, simRows()...)

var (
	keyRE   = regexp.MustCompile(`^[a-z][a-z0-9_]*$`)
	benchRE = regexp.MustCompile(`^Benchmark\S*\s+\d+\s`)
)

func main() {
	out := flag.String("out", "bench/results.json", "where to write the results")
	docs := flag.String("docs", "", "rewrite the tables of this file (docs/performance.md) from -results, and run nothing")
	results := flag.String("results", "bench/results.json", "the results -docs reads")
	flag.Parse()
	if *docs != "" {
		if err := writeDocs(*docs, *results); err != nil {
			fmt.Fprintln(os.Stderr, "benchreport:", err)
			os.Exit(1)
		}
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := report(ctx, *out, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "benchreport:", err)
		os.Exit(1)
	}
}

func report(ctx context.Context, out string, w io.Writer) error {
	began := time.Now()
	res := map[string]float64{}
	res["nproc"] = float64(runtime.NumCPU())
	res["load_avg_start"] = loadAvg()
	res["load_avg_max"] = res["load_avg_start"]
	var failed []string
	var named []string
	for _, r := range runs {
		named = append(named, strings.SplitN(r.bench, "/", 2)[0])
		res["load_avg_max"] = max(res["load_avg_max"], loadAvg())
		if err := goTest(ctx, w, res, "-bench", r.bench, "-benchtime", r.benchtime, r.pkg); err != nil {
			failed = append(failed, fmt.Sprintf("%s %s: %v", r.pkg, r.bench, err))
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
	// Every other benchmark (a new package's, say) with the default benchtime.
	skip := "^(" + strings.Join(trimAnchors(named), "|") + ")$"
	if err := goTest(ctx, w, res, "-bench", ".", "-skip", skip, "-benchtime", defaultBenchtime, "./..."); err != nil {
		failed = append(failed, fmt.Sprintf("./... (the rest): %v", err))
	}
	res["load_avg_end"] = loadAvg()
	res["load_avg_max"] = max(res["load_avg_max"], res["load_avg_end"])
	res["bench_wall_s"] = time.Since(began).Seconds()
	derive(res)

	if err := writeJSON(out, res); err != nil {
		return err
	}
	printTable(w, res, out)
	if len(failed) > 0 {
		return fmt.Errorf("some benchmarks failed:\n  %s", strings.Join(failed, "\n  "))
	}
	return nil
}

func trimAnchors(res []string) []string {
	out := make([]string, 0, len(res))
	for _, r := range res {
		out = append(out, strings.TrimSuffix(strings.TrimPrefix(r, "^"), "$"))
	}
	return out
}

// goTest runs `go test -run ^$ args...`, copies its output to w and
// collects the metrics of its benchmark lines into res.
func goTest(ctx context.Context, w io.Writer, res map[string]float64, args ...string) error {
	args = append([]string{"test", "-run", "^$", "-count", "1", "-timeout", "30m"}, args...)
	fmt.Fprintf(w, "\n$ go %s\n", strings.Join(args, " "))
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Stderr = w
	pipe, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	sc := bufio.NewScanner(pipe)
	for sc.Scan() {
		line := sc.Text()
		fmt.Fprintln(w, line)
		collect(res, line)
	}
	return cmd.Wait()
}

// collect adds the metrics of one benchmark result line whose unit is a
// results key: "BenchmarkX-2  4  123 ns/op  1094 core_node_syncs_per_s_1000".
func collect(res map[string]float64, line string) {
	if !benchRE.MatchString(line) {
		return
	}
	f := strings.Fields(line)
	for i := 2; i+1 < len(f); i += 2 {
		v, err := strconv.ParseFloat(f[i], 64)
		if err != nil || !keyRE.MatchString(f[i+1]) {
			continue
		}
		if old, ok := res[f[i+1]]; !ok || v > old {
			res[f[i+1]] = v
		}
	}
}

// derive computes the figures made of other measured ones.
func derive(res map[string]float64) {
	// The gossip benchmark reports SIGKILL-to-DOWN per memberlist profile
	// under its own unit; the largest is the LAN defaults'.
	if v, ok := res["s_kill_to_down"]; ok {
		if _, direct := res["gossip_detect_s"]; !direct {
			res["gossip_detect_s"] = v
		}
	}
	total, ok1 := res["core_rss_mb_1000_nodes"]
	base, ok2 := res["core_rss_mb_base"]
	if ok1 && ok2 {
		// The base is a core with 10 nodes: 990 nodes make the difference.
		res["core_rss_mb_per_1000_nodes"] = (total - base) * 1000 / 990
	}
}

func writeJSON(path string, res map[string]float64) error {
	doc := map[string]*float64{}
	for _, k := range required {
		doc[k] = nil
	}
	for k, v := range res {
		if !math.IsNaN(v) && !math.IsInf(v, 0) {
			doc[k] = &v
		}
	}
	b, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

func printTable(w io.Writer, res map[string]float64, out string) {
	fmt.Fprint(w, header(res, time.Now(), cpuModel()))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "figure\tvalue\treference (same run)\tgoal\t")
	shown := map[string]bool{"nproc": true, "load_avg_start": true, "load_avg_end": true, "load_avg_max": true, "bench_wall_s": true}
	for _, r := range rows {
		shown[r.key], shown[r.ref] = true, true
		v, ok := res[r.key]
		val, met := "not measured", ""
		if ok {
			val, met = num(v), r.goal.met(v)
		}
		ref := ""
		if rv, ok := res[r.ref]; ok {
			ref = num(rv) + " " + r.refLabel
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s %s\t\n", r.label, val, ref, r.goal, met)
	}
	var other []string
	for k := range res {
		if !shown[k] {
			other = append(other, k)
		}
	}
	if len(other) > 0 {
		fmt.Fprintln(tw, "\t\t\t\t")
		slices.Sort(other)
		for _, k := range other {
			fmt.Fprintf(tw, "%s\t%s\t\t\t\n", k, num(res[k]))
		}
	}
	tw.Flush()
	fmt.Fprintf(w, "\nwritten to %s\n", out)
}

// header is the table's first lines: when, the machine (nproc and CPU
// model), the load average at the start, at the end and the largest seen
// between runs (the figures move with the neighbours), and how long it took.
func header(res map[string]float64, now time.Time, cpu string) string {
	return fmt.Sprintf("\nmuster benchmarks, %s, %s/%s, %s\nmachine: nproc %s, %s\nload average: %s at the start, %s at the end, %s at most between runs; took %s\n\n",
		now.UTC().Format("2006-01-02 15:04 UTC"), runtime.GOOS, runtime.GOARCH, runtime.Version(),
		num(res["nproc"]), cpu, num(res["load_avg_start"]), num(res["load_avg_end"]), num(res["load_avg_max"]),
		(time.Duration(res["bench_wall_s"]) * time.Second).Round(time.Second))
}

// num formats a figure with three significant digits at most after the point.
func num(v float64) string {
	switch a := math.Abs(v); {
	case a >= 100 || v == math.Trunc(v):
		return strconv.FormatFloat(v, 'f', 0, 64)
	case a >= 1:
		return strconv.FormatFloat(v, 'f', 2, 64)
	default:
		return strconv.FormatFloat(v, 'g', 3, 64)
	}
}

func cpuModel() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return "unknown CPU"
	}
	for _, l := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown CPU"
}

func loadAvg() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return math.NaN()
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return math.NaN()
	}
	v, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		return math.NaN()
	}
	return v
}
