package ops_test

import (
	"context"
	"testing"

	"github.com/musterhq/muster/core/ops"
	"github.com/musterhq/muster/core/store"
)

// nodeReads counts the reads of a cluster's every node.
type nodeReads struct {
	store.Reader
	n int
}

func (r *nodeReads) Nodes(ctx context.Context, clusterID string) ([]store.Node, error) {
	r.n++
	return r.Reader.Nodes(ctx, clusterID)
}

// A run's views read the cluster's every node only for a stage whose
// target is by labels: a run of listed nodes reads none.
func TestRunNotInReadsNodesOnlyForLabelTargets(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	listed := &store.Run{ID: "r1", ClusterID: "prod", Stages: []store.RunStage{{Name: "a",
		Target: store.Target{Nodes: []string{"db-1"}}, Nodes: []string{"db-1"}}}}
	byLabels := &store.Run{ID: "r2", ClusterID: "prod", Stages: []store.RunStage{{Name: "a",
		Target: store.Target{Labels: map[string]string{"role": "db"}}}}}
	err := e.st.Read(ctx, func(rd store.Reader) error {
		for _, tc := range []struct {
			r    *store.Run
			want int
		}{{listed, 0}, {byLabels, 1}} {
			counted := &nodeReads{Reader: rd}
			if _, err := ops.RunNotIn(ctx, counted, tc.r); err != nil {
				return err
			}
			if counted.n != tc.want {
				t.Errorf("run %s: %d reads of every node, want %d", tc.r.ID, counted.n, tc.want)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
