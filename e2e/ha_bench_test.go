package e2e

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/musterhq/muster/core/store/pgtest"
	"github.com/musterhq/muster/shared/testwait"
)

// metricAt sums the samples of the series starting with prefix on the
// /metrics of the core at addr (-1 when it does not answer).
func metricAt(addr, prefix string) float64 {
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var total float64
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, prefix) {
			if v, err := strconv.ParseFloat(l[strings.LastIndex(l, " ")+1:], 64); err == nil {
				total += v
			}
		}
	}
	return total
}

// BenchmarkHAScaleOut measures what several replicas cost: the same fleet
// (six clusters of 50 in-process agents, passes every second) orchestrated by
// 1, 2 and 3 `muster core` replicas on one PostgreSQL database. Over a 10 s
// window it sums the replicas' CPU seconds and node syncs, and reports the
// CPU seconds per 1,000 node syncs for each count (ha_cpu_s_per_1000_syncs_rN),
// 2 and 3 replicas' cost relative to one (ha_cost_ratio_rN, goal ≤ 1.2: each
// added machine adds its capacity) and the node syncs per second
// (ha_node_syncs_per_s_rN, bounded here by the interval, not by the cores).
func BenchmarkHAScaleOut(b *testing.B) {
	const clusters, perCluster, window = 6, 50, 10 * time.Second
	agents := inProcessAgentsIn(b, clusters*perCluster, func(i int) string { return fmt.Sprintf("s%d", i%clusters+1) })
	var spec strings.Builder
	for c := 1; c <= clusters; c++ {
		fmt.Fprintf(&spec, "  - id: s%d\n    nodes:\n", c)
		for i := c - 1; i < clusters*perCluster; i += clusters {
			node := fmt.Sprintf("node-%d", i+1)
			fmt.Fprintf(&spec, "      - {id: %s, addr: %q}\n", node, agents[node])
		}
	}
	var base float64
	for range b.N {
		for replicas := 1; replicas <= 3; replicas++ {
			dsn := pgtest.NewDatabase(b)
			var cores []*proc
			for i := range replicas {
				dir := b.TempDir()
				cfg := fmt.Sprintf("data_dir: %s\napi:\n  addr: 127.0.0.1:%d\nstore:\n  driver: postgres\n  dsn: %q\n"+
					"ha:\n  lease_ttl: 3s\n  replica_id: core-%d\norchestrate:\n  interval: 1s\nclusters:\n%s",
					filepath.Join(dir, "data"), freePort(b), dsn, i, spec.String())
				path := filepath.Join(dir, "core.yaml")
				if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
					b.Fatal(err)
				}
				cores = append(cores, start(b, fmt.Sprintf("core-%d", i), nil, "core", "--config", path))
			}
			held := func() []float64 {
				out := make([]float64, len(cores))
				for i, c := range cores {
					out[i] = metricAt(c.Addr(), "muster_core_leases_held")
				}
				return out
			}
			testwait.Within(b, 2*time.Minute, "the leases spread and every node synced", func() bool {
				for _, h := range held() {
					if h != float64(clusters/replicas) {
						return false
					}
				}
				var syncs float64
				for _, c := range cores {
					syncs += metricAt(c.Addr(), `muster_core_orchestrate_node_syncs_total{status="UP"}`)
				}
				return syncs >= 2*clusters*perCluster
			})
			sample := func() (cpu, syncs float64) {
				for _, c := range cores {
					cpu += metricAt(c.Addr(), "process_cpu_seconds_total")
					syncs += metricAt(c.Addr(), "muster_core_orchestrate_node_syncs_total")
				}
				return cpu, syncs
			}
			cpu0, syncs0 := sample()
			time.Sleep(window) // the measurement window, not a synchronisation
			cpu1, syncs1 := sample()
			cost := (cpu1 - cpu0) / (syncs1 - syncs0) * 1000
			if replicas == 1 {
				base = cost
			} else {
				b.ReportMetric(cost/base, fmt.Sprintf("ha_cost_ratio_r%d", replicas))
			}
			b.ReportMetric(cost, fmt.Sprintf("ha_cpu_s_per_1000_syncs_r%d", replicas))
			b.ReportMetric((syncs1-syncs0)/window.Seconds(), fmt.Sprintf("ha_node_syncs_per_s_r%d", replicas))
			for _, c := range cores {
				c.kill()
			}
		}
	}
}
