package sqlite

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/limit"
)

// BenchmarkActiveRunReads is the read the orchestration loop makes of a
// cluster's active runs every pass, to pick those it moves on: the whole
// rows (RunsInState: every stage, its nodes and its gates' results,
// decoded) against their heads (RunsInStateBrief). Five RUNNING runs of
// a four-step procedure over 1,000 nodes, a gate result per node; the
// brief sub-benchmark reports what the full read costs in bytes and
// allocations for each of its own.
func BenchmarkActiveRunReads(b *testing.B) {
	ctx := context.Background()
	st, err := Open(ctx, b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	err = st.Update(ctx, func(tx store.Tx) error {
		for i := range 5 {
			stage := store.RunStage{Name: "upgrade", Target: store.Target{All: true}, MaxConcurrency: limit.Limit{N: 10, Percent: true},
				OnFailure: "abort", DependsOn: []string{}, State: store.StageRunning, Core: map[string][]store.CoreStep{}}
			for _, s := range []string{"drain", "upgrade", "verify", "undrain"} {
				stage.Steps = append(stage.Steps, store.RunStep{Name: s, Kind: "example.com/" + s, Args: json.RawMessage(`{}`)})
			}
			for n := range 1000 {
				node := fmt.Sprintf("node-%04d", n)
				stage.Nodes = append(stage.Nodes, node)
				at := t0.Add(time.Duration(n) * time.Second)
				stage.Core[node] = []store.CoreStep{{Step: "healthy", Attempt: 1, State: "DONE", Value: "200", Reason: "status 200",
					Args: json.RawMessage(`{"http":{"url":"http://` + node + `:8080/health","expect_status":200}}`), Created: at, At: &at}}
			}
			r := &store.Run{ID: fmt.Sprintf("00000000-0000-4000-8000-%012d", i), ClusterID: "c", State: store.RunRunning,
				Requester: "alice", ApprovedBy: "bob", Digest: "d", Stages: []store.RunStage{stage},
				CreatedTS: t0.Add(time.Duration(i) * time.Second), UpdatedTS: t0}
			if err := tx.InsertRun(ctx, r); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	full := func() int {
		var n int
		if err := st.Read(ctx, func(r store.Reader) error {
			runs, err := r.RunsInState(ctx, "c", store.RunRunning, store.RunPaused)
			n = len(runs)
			return err
		}); err != nil {
			b.Fatal(err)
		}
		return n
	}
	brief := func() int {
		var n int
		if err := st.Read(ctx, func(r store.Reader) error {
			runs, err := r.RunsInStateBrief(ctx, "c", store.RunRunning, store.RunPaused)
			n = len(runs)
			return err
		}); err != nil {
			b.Fatal(err)
		}
		return n
	}
	// cost is the bytes and allocations of one call of read, averaged.
	cost := func(read func() int) (bytes, allocs float64) {
		const n = 20
		read()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		for range n {
			if read() != 5 {
				b.Fatal("not the five runs")
			}
		}
		runtime.ReadMemStats(&after)
		return float64(after.TotalAlloc-before.TotalAlloc) / n, float64(after.Mallocs-before.Mallocs) / n
	}
	b.Run("full", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			full()
		}
	})
	b.Run("brief", func(b *testing.B) {
		fb, fa := cost(full)
		bb, ba := cost(brief)
		b.ReportAllocs()
		for b.Loop() {
			brief()
		}
		b.ReportMetric(fb/bb, "full_bytes_per_brief_byte")
		b.ReportMetric(fa/ba, "full_allocs_per_brief_alloc")
	})
}
