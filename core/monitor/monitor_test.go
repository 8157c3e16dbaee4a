package monitor

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"

	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/core/store/sqlite"
	"github.com/musterhq/muster/shared/action"
)

func setup(t *testing.T) (*sqlite.Store, *prometheus.Registry) {
	t.Helper()
	st, err := sqlite.Open(context.Background(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	reg := prometheus.NewRegistry()
	if err := Register(reg, st, nil); err != nil {
		t.Fatal(err)
	}
	return st, reg
}

// The fleet's metrics are the store's state at the scrape: nodes by
// status, a DOWN node's last contact, a cluster in ALERT, approvals
// waiting and the oldest of them.
func TestFleetMetricsAreTheStoresState(t *testing.T) {
	t.Parallel()
	st, reg := setup(t)
	ctx := context.Background()
	contact := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	created := time.Now().Add(-3 * time.Hour).UTC().Truncate(time.Second)
	if err := st.Update(ctx, func(tx store.Tx) error {
		for _, c := range []store.Cluster{{ID: "prod", Status: store.ClusterAlert}, {ID: "dev", Status: store.ClusterHealthy}} {
			if err := tx.PutCluster(ctx, &c); err != nil {
				return err
			}
		}
		for _, n := range []store.Node{
			{ClusterID: "prod", ID: "a", Status: store.NodeUp, Source: store.SourceStatic},
			{ClusterID: "prod", ID: "b", Status: store.NodeDown, Source: store.SourceStatic, LastContact: &contact, Drained: true},
			{ClusterID: "dev", ID: "c", Status: store.NodeUnknown, Source: store.SourceStatic},
		} {
			if err := tx.PutNode(ctx, &n); err != nil {
				return err
			}
		}
		return tx.InsertAction(ctx, &store.Record{Action: action.Action{ID: action.NewID(), ClusterID: "prod", NodeID: "a",
			Kind: "example.com/x", Args: []byte("{}"), State: action.PendingApprove, CreatedTS: created, UpdatedTS: created}})
	}); err != nil {
		t.Fatal(err)
	}
	for name, exp := range map[string]string{
		`muster_core_nodes{cluster="prod",status="UP"}`:                          "1",
		`muster_core_nodes{cluster="prod",status="DOWN"}`:                        "1",
		`muster_core_nodes{cluster="dev",status="UNKNOWN"}`:                      "1",
		`muster_core_nodes{cluster="dev",status="UP"}`:                           "0",
		`muster_core_nodes_drained{cluster="prod"}`:                              "1",
		`muster_core_node_down_since_timestamp_seconds{cluster="prod",node="b"}`: "1.7961156e+09",
		`muster_core_cluster_alert{cluster="prod"}`:                              "1",
		`muster_core_cluster_alert{cluster="dev"}`:                               "0",
		`muster_core_approvals_waiting{cluster="prod"}`:                          "1",
		`muster_core_approvals_waiting{cluster="dev"}`:                           "0",
		`muster_core_runs{cluster="prod",state="RUNNING"}`:                       "0",
		`muster_core_monitor_scrape_errors`:                                      "0",
	} {
		if got := sample(t, reg, name); got != exp {
			t.Errorf("%s = %s, want %s", name, got, exp)
		}
	}
	if got := sample(t, reg, `muster_core_approval_oldest_waiting_timestamp_seconds{cluster="prod"}`); got == "" {
		t.Error("no oldest approval for prod")
	}
	if got := sample(t, reg, `muster_core_approval_oldest_waiting_timestamp_seconds{cluster="dev"}`); got != "" {
		t.Errorf("an oldest approval for dev, where none waits: %s", got)
	}
}

// sample is the value of one series as the text exposition writes it ("" when absent).
func sample(t *testing.T, reg *prometheus.Registry, series string) string {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, mf := range mfs {
		if _, err := expfmt.MetricFamilyToText(&b, mf); err != nil {
			t.Fatal(err)
		}
	}
	for _, line := range strings.Split(b.String(), "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			return v
		}
	}
	return ""
}

// Every write is timed, by result.
func TestTimedStoreObservesEachWrite(t *testing.T) {
	t.Parallel()
	st, _ := setup(t)
	reg := prometheus.NewRegistry()
	timed, err := NewTimed(st, reg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	_ = timed.Update(ctx, func(tx store.Tx) error {
		return tx.PutCluster(ctx, &store.Cluster{ID: "x", Status: store.ClusterHealthy})
	})
	_ = timed.Update(ctx, func(store.Tx) error { return errors.New("no") })
	if got := sample(t, reg, `muster_core_store_write_duration_seconds_count{result="ok"}`); got != "1" {
		t.Errorf("ok writes counted %s, want 1", got)
	}
	if got := sample(t, reg, `muster_core_store_write_duration_seconds_count{result="error"}`); got != "1" {
		t.Errorf("failed writes counted %s, want 1", got)
	}
}
