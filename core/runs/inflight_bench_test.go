package runs_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/musterhq/muster/core/actions"
	"github.com/musterhq/muster/core/approval"
	"github.com/musterhq/muster/core/runs"
	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/core/store/sqlite"
	"github.com/musterhq/muster/shared/action"
	"github.com/musterhq/muster/shared/limit"
	"github.com/musterhq/muster/shared/live"
	"github.com/musterhq/muster/shared/wire"
)

// BenchmarkInFlight measures runs.InFlight, which every sync of a cluster
// with a disruption budget reads (the nodes a procedure holds in flight):
// a cluster of 1,000 nodes with 20 open runs, each a procedure of three
// steps over every node, 10% of them in flight, with the output a
// command leaves (4 KiB) on every finished child. It reports the time of
// one call (inflight_ms_20_runs) and, for reference, of reading every
// child of those runs (inflight_children_ms_20_runs).
func BenchmarkInFlight(b *testing.B) {
	const (
		nodes = 1000
		open  = 20
	)
	ctx := context.Background()
	st, err := sqlite.Open(ctx, b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	pol := approval.Policy{Default: "none"}
	e := runs.NewEngine(live.New(pol), &actions.Rules{Policy: live.New(pol)}, nil)
	update := func(fn func(tx store.Tx) error) {
		b.Helper()
		if err := st.Update(ctx, fn); err != nil {
			b.Fatal(err)
		}
	}
	update(func(tx store.Tx) error {
		if err := tx.PutCluster(ctx, &store.Cluster{ID: "c", Status: store.ClusterHealthy}); err != nil {
			return err
		}
		for i := range nodes {
			if err := tx.PutNode(ctx, &store.Node{ClusterID: "c", ID: fmt.Sprintf("n%04d", i), Addr: "127.0.0.1:1",
				Source: store.SourceStatic, Status: store.NodeUp}); err != nil {
				return err
			}
		}
		return nil
	})
	mc := limit.MustParse("10%")
	output := string(make([]byte, 4096))
	var ids []string
	for range open {
		req := &wire.CreateRunRequest{ClusterID: "c", Stages: []wire.StageSpec{{
			Name: "upgrade", Target: wire.Target{All: true}, MaxConcurrency: &mc,
			Steps: []wire.StepSpec{
				{Name: "drain", Kind: "example.com/node.drain"},
				{Name: "upgrade", Kind: "example.com/pkg.upgrade"},
				{Name: "undrain", Kind: "example.com/node.undrain"},
			},
		}}}
		var id string
		update(func(tx store.Tx) error {
			r, err := e.Create(ctx, tx, req, actions.Actor{Name: "alice"})
			if err == nil {
				id = r.ID
			}
			return err
		})
		ids = append(ids, id)
		// Every node of the first waves through, the next wave in flight.
		for wave := 0; wave < 5; wave++ {
			update(func(tx store.Tx) error {
				for step := 0; step < 3; step++ {
					kids, err := tx.RunChildren(ctx, id)
					if err != nil {
						return err
					}
					for i := range kids {
						k := &kids[i]
						if k.State.Final() || (wave == 4 && step == 1) {
							continue
						}
						t := action.UTC(time.Now())
						k.State, k.PushedStoreID, k.Output, k.StartedTS, k.FinishedTS = action.Done, "s", output, &t, &t
						if err := tx.UpdateAction(ctx, k); err != nil {
							return err
						}
					}
					if _, err := e.AdvanceNodes(ctx, tx, id); err != nil {
						return err
					}
				}
				return nil
			})
		}
	}
	holds := func([]string) bool { return true }
	var p *runs.Procedures
	read := func() {
		if err := st.Read(ctx, func(r store.Reader) error {
			var err error
			p, err = runs.InFlight(ctx, r, "c", time.Now(), holds)
			return err
		}); err != nil {
			b.Fatal(err)
		}
	}
	read()
	if len(p.Stages) != open || len(p.InFlight) != nodes/10 {
		b.Fatalf("%d stages, %d nodes in flight; want %d and %d", len(p.Stages), len(p.InFlight), open, nodes/10)
	}
	start := time.Now()
	if err := st.Read(ctx, func(r store.Reader) error {
		for _, id := range ids {
			if _, err := r.RunChildren(ctx, id); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		b.Fatal(err)
	}
	children := time.Since(start)
	b.ResetTimer()
	for b.Loop() {
		read()
	}
	b.ReportMetric(float64(b.Elapsed())/float64(b.N)/float64(time.Millisecond), "inflight_ms_20_runs")
	b.ReportMetric(float64(children)/float64(time.Millisecond), "inflight_children_ms_20_runs")
}
