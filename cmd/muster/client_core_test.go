package main

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/musterhq/muster/core/api"
	"github.com/musterhq/muster/core/auth"
	"github.com/musterhq/muster/core/store/sqlite"
	"github.com/musterhq/muster/shared/wire"
)

// replicaList is a fixed answer of GET /api/v1/core/replicas.
type replicaList struct{ out wire.CoreReplicas }

func (r replicaList) Replicas(context.Context) (*wire.CoreReplicas, error) { return &r.out, nil }

func TestCoreStatus(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	now := time.Now().UTC()
	list := replicaList{wire.CoreReplicas{Store: "postgres", Self: "core-a", LeaseTTLS: 10, Replicas: []wire.CoreReplica{
		{ID: "core-a", Addr: "10.0.0.1:7410", Live: true, HeartbeatTS: now, Version: "v1",
			Leases: []wire.ClusterLease{{ClusterID: "db", Epoch: 3}, {ClusterID: "web", Epoch: 1}}},
		{ID: "core-b", Addr: "10.0.0.2:7410", HeartbeatTS: now.Add(-time.Minute), Leases: []wire.ClusterLease{}},
	}}}
	srv := api.New(api.Config{Replicas: list}, st, nil, slog.New(slog.DiscardHandler))
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(func() { srv.Close(); ts.Close() })
	secret, err := auth.CreateToken(ctx, st, "viewer", []string{"viewer"}, "test", "")
	if err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) string {
		t.Helper()
		root := newRootCmd()
		root.SetArgs(append(args, "--addr", ts.URL, "--token", secret))
		var out lockedBuffer
		root.SetOut(&out)
		root.SetErr(&lockedBuffer{})
		if err := root.ExecuteContext(ctx); err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		return out.String()
	}
	out := run("core", "status")
	for _, want := range []string{"Store:     postgres", "Lease TTL: 10s", "core-a (this)", "10.0.0.1:7410", "db@3 web@1", "core-b"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if last := lines[len(lines)-1]; !strings.Contains(last, "core-b") || !strings.Contains(last, " no ") {
		t.Errorf("core-b is not shown dead: %q", last)
	}
	var got wire.CoreReplicas
	if err := json.Unmarshal([]byte(run("core", "status", "-o", "json")), &got); err != nil || len(got.Replicas) != 2 || got.Replicas[0].Leases[0].Epoch != 3 {
		t.Fatalf("json: %+v, %v", got, err)
	}
}
