package orchestrate_test

import (
	"context"
	"maps"
	"testing"

	"github.com/musterhq/muster/agent"
	"github.com/musterhq/muster/agent/agenttest"
	"github.com/musterhq/muster/core/orchestrate"
	"github.com/musterhq/muster/core/store"
)

// TestFullSyncLaysTheAgentsLabelsOverTheStaticOnes: a full sync writes a node's
// labels as the configured ones with the agent's own laid over them, key by
// key, and an idle full sync rewrites nothing.
func TestFullSyncLaysTheAgentsLabelsOverTheStaticOnes(t *testing.T) {
	t.Parallel()
	e := setup(t, orchestrate.Config{StaticLabels: map[string]map[string]map[string]string{
		cluster: {"n1": {"role": "replica", "dc": "a"}, "n2": {"dc": "b"}},
	}})
	for id, own := range map[string]map[string]string{"n1": {"role": "primary", "zone": "eu-1"}, "n2": nil} {
		cfg := agent.DefaultConfig()
		cfg.NodeID, cfg.ClusterID, cfg.DataDir, cfg.API.Addr, cfg.Labels = id, cluster, t.TempDir(), "127.0.0.1:0", own
		cfg.API.Insecure = true
		r := agenttest.Start(t, cfg)
		e.update(func(ctx context.Context, tx store.Tx) error {
			if err := tx.PutCluster(ctx, &store.Cluster{ID: cluster, Status: store.ClusterHealthy}); err != nil {
				return err
			}
			return tx.PutNode(ctx, &store.Node{ClusterID: cluster, ID: id, Addr: r.Addr, Source: store.SourceStatic,
				Status: store.NodeUnknown})
		})
	}
	e.fullSync()
	got := map[string]map[string]string{}
	ctx := context.Background()
	_ = e.st.Read(ctx, func(r store.Reader) error {
		ns, err := r.Nodes(ctx, cluster)
		for _, n := range ns {
			got[n.ID] = n.Labels
		}
		return err
	})
	if want := map[string]string{"role": "primary", "dc": "a", "zone": "eu-1"}; !maps.Equal(got["n1"], want) {
		t.Errorf("n1 labels %v, want %v", got["n1"], want)
	}
	if want := map[string]string{"dc": "b"}; !maps.Equal(got["n2"], want) {
		t.Errorf("n2 labels %v, want %v", got["n2"], want)
	}
	rows := e.st.RowsWritten()
	if rep := e.fullSync(); rep.Changes != 0 || e.st.RowsWritten() != rows {
		t.Fatalf("idle full sync with labels wrote %d rows", e.st.RowsWritten()-rows)
	}
}
