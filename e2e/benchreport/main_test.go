package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestCollectTakesKeyUnitsAndKeepsTheLargest(t *testing.T) {
	t.Parallel()
	res := map[string]float64{}
	for _, line := range []string{
		"BenchmarkPass/nodes=100/idle-2   \t  49\t  52027618 ns/op\t  6157 agent_info_calls_per_s_100\t  1922 core_node_syncs_per_s_100\t  0 idle_pass_rows_written",
		"BenchmarkPass/nodes=1000/idle-2  \t   3\t 1064056690 ns/op\t 939.8 core_node_syncs_per_s_1000\t  2 idle_pass_rows_written",
		"BenchmarkOld-2 \t 10\t 5 ns/op\t 550 actions/s",
		"    bench_test.go:12: 7 core_node_syncs_per_s_5000",
		"PASS",
	} {
		collect(res, line)
	}
	want := map[string]float64{
		"agent_info_calls_per_s_100": 6157, "core_node_syncs_per_s_100": 1922,
		"core_node_syncs_per_s_1000": 939.8, "idle_pass_rows_written": 2,
	}
	if len(res) != len(want) {
		t.Fatalf("collected %v, want %v", res, want)
	}
	for k, v := range want {
		if res[k] != v {
			t.Errorf("%s = %v, want %v", k, res[k], v)
		}
	}
}

func TestResultsHaveEveryRequiredKeyAsNumberOrNull(t *testing.T) {
	t.Parallel()
	res := map[string]float64{"core_rss_mb_base": 27, "core_rss_mb_1000_nodes": 64.6, "extra_figure": 1}
	derive(res)
	path := filepath.Join(t.TempDir(), "bench", "results.json")
	if err := writeJSON(path, res); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]*float64
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatalf("not a map of numbers: %v\n%s", err, b)
	}
	for _, k := range required {
		if _, ok := doc[k]; !ok {
			t.Errorf("key %s missing", k)
		}
	}
	if doc["gossip_detect_s"] != nil {
		t.Errorf("gossip_detect_s = %v, want null", *doc["gossip_detect_s"])
	}
	if v := doc["core_rss_mb_per_1000_nodes"]; v == nil || *v < 37.9 || *v > 38.1 {
		t.Errorf("core_rss_mb_per_1000_nodes = %v, want (64.6-27)*1000/990 = 38", v)
	}
	if v := doc["extra_figure"]; v == nil || *v != 1 {
		t.Errorf("extra_figure = %v, want 1", v)
	}
}

func TestGossipKillToDownFillsGossipDetect(t *testing.T) {
	t.Parallel()
	res := map[string]float64{}
	collect(res, "BenchmarkGossipKillToDown/lan-2 \t 1\t 9 ns/op\t 5.93 s_kill_to_down")
	collect(res, "BenchmarkGossipKillToDown/local-2 \t 1\t 9 ns/op\t 1.20 s_kill_to_down")
	derive(res)
	if res["gossip_detect_s"] != 5.93 {
		t.Fatalf("gossip_detect_s = %v, want the LAN figure 5.93", res["gossip_detect_s"])
	}
	direct := map[string]float64{"gossip_detect_s": 2, "s_kill_to_down": 6}
	derive(direct)
	if direct["gossip_detect_s"] != 2 {
		t.Fatalf("a reported gossip_detect_s was replaced: %v", direct["gossip_detect_s"])
	}
}

func TestGoalsCompareTheirOwnWay(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		g    goal
		v    float64
		want string
	}{
		{goal{"<=", 1.3}, 1.3, "met"}, {goal{"<=", 1.3}, 1.31, "MISSED"},
		{goal{"<", 250}, 249, "met"}, {goal{"<", 250}, 250, "MISSED"},
		{goal{">=", 0.8}, 0.8, "met"}, {goal{">=", 0.8}, 0.79, "MISSED"},
		{goal{"==", 0}, 0, "met"}, {goal{"==", 0}, 1, "MISSED"},
	} {
		if got := c.g.met(c.v); got != c.want {
			t.Errorf("%v against %s: %s, want %s", c.v, c.g.String(), got, c.want)
		}
	}
}

func TestHeaderNotesTheMachineAndTheLoad(t *testing.T) {
	t.Parallel()
	res := map[string]float64{"nproc": 2, "load_avg_start": 5.1, "load_avg_end": 2.8, "load_avg_max": 14, "bench_wall_s": 1024}
	got := header(res, time.Date(2026, 11, 25, 20, 0, 0, 0, time.UTC), "AMD EPYC 7B13")
	for _, want := range []string{"2026-11-25 20:00 UTC", "nproc 2, AMD EPYC 7B13",
		"5.10 at the start, 2.80 at the end, 14 at most between runs", "took 17m4s"} {
		if !strings.Contains(got, want) {
			t.Errorf("header lacks %q:\n%s", want, got)
		}
	}
}

func TestSimRowsCoverEverySizeAndTheLargestCarriesTheGoals(t *testing.T) {
	t.Parallel()
	keys := map[string]row{}
	for _, r := range rows {
		keys[r.key] = r
	}
	for _, k := range []string{"sim_core_cpu_idle_1000", "sim_core_cpu_idle_10000", "sim_core_cpu_idle_50000",
		"sim_approve_p99_ms_50000", "sim_synced_within_s_10000", "sim_core_rss_mb_per_1000_nodes_1000"} {
		r, ok := keys[k]
		if !ok {
			t.Errorf("no row shows %s", k)
			continue
		}
		if tableOf(k) != "fleet" {
			t.Errorf("%s is in table %q, want fleet", k, tableOf(k))
		}
		if strings.HasSuffix(k, "_50000") != (r.goal != nil) && !strings.Contains(k, "synced_within") {
			t.Errorf("%s: goal %v; only the 50,000-node rows carry the goals", k, r.goal)
		}
	}
	if got := keys["sim_core_cpu_idle_50000"]; got.goal == nil || got.goal.v != 0.25 || !strings.Contains(got.label, "50,000") {
		t.Errorf("sim_core_cpu_idle_50000: %+v, want the ≤ 0.25 goal and the size in its label", got)
	}
	if thousands(1000) != "1,000" || thousands(50000) != "50,000" || thousands(100) != "100" {
		t.Errorf("thousands: %s %s %s", thousands(1000), thousands(50000), thousands(100))
	}
}
