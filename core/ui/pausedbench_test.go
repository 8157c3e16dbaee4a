package ui

import (
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/musterhq/muster/core/store"
)

// BenchmarkPausedApprovals measures the Approvals page with the 20 paused
// runs it shows, each of 10,000 nodes with a child per node (200,000
// children): median of 3 (ms) and size (KB). A paused run costs its
// counters and a count in the run child index, not its children.
func BenchmarkPausedApprovals(b *testing.B) {
	e := setup(b)
	seedRuns(b, e.st, pausedShown, 10_000, store.RunPaused, time.Now().UTC().Add(-time.Hour))
	appr := e.browser().signIn("appr")
	b.ResetTimer()
	for range b.N {
		var ms []float64
		size := 0
		for range 3 {
			t := time.Now()
			status, _, body := appr.get("/ui/approvals")
			ms = append(ms, float64(time.Since(t).Microseconds())/1000)
			if status != http.StatusOK || !strings.Contains(body, "20 paused runs") {
				b.Fatalf("approvals: %d, no paused run shown", status)
			}
			size = max(size, len(body))
		}
		slices.Sort(ms)
		b.ReportMetric(ms[1], "approvals_20_paused_runs_10000_nodes_ms")
		b.ReportMetric(float64(size)/1024, "approvals_20_paused_runs_10000_nodes_kb")
	}
}
