package ops_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/musterhq/muster/core/auth"
	"github.com/musterhq/muster/core/ops"
	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/core/store/sqlite"
	"github.com/musterhq/muster/shared/action"
)

// BenchmarkScopeFilter is the cost of scope filtering (issue 32): listing
// 10,000 actions over 100 clusters as a caller whose grant is a glob over
// every cluster but "*" (its visible set computed, then the list filtered
// by cluster_id IN (...100 ids)) against one reading every cluster (no
// filter): the same rows, so the ratio is the filter's own cost. Median of
// 3 of each, and the spread of the ratios.
func BenchmarkScopeFilter(b *testing.B) {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	now := time.Now().UTC()
	err = st.Update(ctx, func(tx store.Tx) error {
		for c := range 100 {
			if err := tx.PutClusterLabels(ctx, fmt.Sprintf("c-%02d", c), nil); err != nil {
				return err
			}
		}
		for i := range 10000 {
			r := &store.Record{Action: action.Action{ID: action.NewID(), ClusterID: fmt.Sprintf("c-%02d", i%100),
				NodeID: fmt.Sprintf("n-%d", i%7), Kind: "muster.io/debug.ping", Args: []byte(`{}`), State: action.Done,
				Origin: action.OriginCore, TimeoutS: 60, CreatedTS: now.Add(time.Duration(i)), UpdatedTS: now}}
			if err := tx.InsertAction(ctx, r); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	all := ops.Caller{Name: "v", Roles: []string{store.RoleViewer}}
	scoped := ops.Caller{Name: "s", Grants: []auth.Grant{{Role: store.RoleViewer, Scope: auth.Scope{Clusters: "c-*"}}}}
	list := func(c ops.Caller) time.Duration {
		began := time.Now()
		err := st.Read(ctx, func(r store.Reader) error {
			v, err := ops.Visibility(ctx, r, c)
			if err != nil {
				return err
			}
			recs, err := r.ListActions(ctx, store.ListQuery{ClusterIn: v.In()})
			if err == nil && len(recs) != 10000 {
				err = fmt.Errorf("listed %d actions, want 10000", len(recs))
			}
			return err
		})
		if err != nil {
			b.Fatal(err)
		}
		return time.Since(began)
	}
	list(all) // warm the cache
	b.ResetTimer()
	var un, sc, ratios []float64
	for b.Loop() {
		for range 3 {
			u, s := list(all), list(scoped)
			un, sc = append(un, float64(u.Microseconds())/1000), append(sc, float64(s.Microseconds())/1000)
			ratios = append(ratios, float64(s)/float64(u))
		}
	}
	med := func(xs []float64) float64 { ys := slices.Clone(xs); slices.Sort(ys); return ys[len(ys)/2] }
	b.ReportMetric(med(un), "scope_list_10000_unscoped_ms")
	b.ReportMetric(med(sc), "scope_list_10000_scoped_ms")
	b.ReportMetric(med(ratios), "scope_list_10000_ratio")
	b.ReportMetric(slices.Max(ratios)-slices.Min(ratios), "scope_list_10000_ratio_spread")
}
