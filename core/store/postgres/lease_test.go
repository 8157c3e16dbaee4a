package postgres

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/core/store/pgtest"
	"github.com/musterhq/muster/shared/testwait"
)

func all(v store.LeaseView) []string { return v.Clusters }
func none(store.LeaseView) []string  { return nil }

func putClusters(t *testing.T, s *Store, ids ...string) {
	t.Helper()
	ctx := context.Background()
	err := s.Update(ctx, func(tx store.Tx) error {
		for _, id := range ids {
			if err := tx.PutCluster(ctx, &store.Cluster{ID: id, Status: store.ClusterHealthy}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestFenceRefusesAStaleEpoch: a write under a fence commits while its
// lease is current, and is refused (writing nothing) once the lease was
// given up, taken by another replica, or has expired.
func TestFenceRefusesAStaleEpoch(t *testing.T) {
	t.Parallel()
	s := open(t, pgtest.NewDatabase(t))
	ctx := context.Background()
	putClusters(t, s, "c1", "c2")
	a, b := store.Replica{ID: "a"}, store.Replica{ID: "b"}
	held, err := s.Coordinate(ctx, a, time.Minute, all)
	if err != nil || held["c1"] != 1 || held["c2"] != 1 {
		t.Fatalf("a holds %v, %v", held, err)
	}
	write := func(f store.Fence, node string) error {
		return s.Update(store.WithFence(ctx, f), func(tx store.Tx) error {
			return tx.PutNode(ctx, &store.Node{ClusterID: f.ClusterID, ID: node, Status: store.NodeUnknown})
		})
	}
	if err := write(store.Fence{ClusterID: "c1", Holder: "a", Epoch: 1}, "n1"); err != nil {
		t.Fatalf("write under the current lease: %v", err)
	}
	// b may not take a lease a holds validly.
	if held, err := s.Coordinate(ctx, b, time.Minute, all); err != nil || len(held) != 0 {
		t.Fatalf("b took %v, %v", held, err)
	}
	// a gives c1 up; b takes it at epoch 2.
	if held, err := s.Coordinate(ctx, a, time.Minute, func(store.LeaseView) []string { return []string{"c2"} }); err != nil || !maps(held, map[string]int64{"c2": 1}) {
		t.Fatalf("a holds %v, %v", held, err)
	}
	if held, err := s.Coordinate(ctx, b, time.Minute, all); err != nil || !maps(held, map[string]int64{"c1": 2}) {
		t.Fatalf("b holds %v, %v", held, err)
	}
	cases := []struct {
		name  string
		fence store.Fence
	}{
		{"old epoch", store.Fence{ClusterID: "c1", Holder: "a", Epoch: 1}},
		{"other holder", store.Fence{ClusterID: "c1", Holder: "a", Epoch: 2}},
		{"no lease", store.Fence{ClusterID: "c3", Holder: "a", Epoch: 1}},
	}
	for _, c := range cases {
		if err := write(c.fence, "n-"+c.name); !errors.Is(err, store.ErrFenced) {
			t.Errorf("%s: %v, want ErrFenced", c.name, err)
		}
	}
	if err := write(store.Fence{ClusterID: "c1", Holder: "b", Epoch: 2}, "n2"); err != nil {
		t.Fatalf("write under b's lease: %v", err)
	}
	// An expired lease fences too, before anyone takes it.
	if _, err := s.Coordinate(ctx, a, time.Millisecond, func(store.LeaseView) []string { return []string{"c2"} }); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, "c2's lease to expire", func() bool {
		_, ls, err := s.LeaseStatus(ctx, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		i := slices.IndexFunc(ls, func(l store.Lease) bool { return l.ClusterID == "c2" })
		return i >= 0 && !ls[i].Valid
	})
	if err := write(store.Fence{ClusterID: "c2", Holder: "a", Epoch: 1}, "n3"); !errors.Is(err, store.ErrFenced) {
		t.Fatalf("write under an expired lease: %v, want ErrFenced", err)
	}
	var nodes []store.Node
	_ = s.Read(ctx, func(r store.Reader) error { nodes, err = r.Nodes(ctx, ""); return err })
	var ids []string
	for _, n := range nodes {
		ids = append(ids, n.ClusterID+"/"+n.ID)
	}
	if !slices.Equal(ids, []string{"c1/n1", "c1/n2"}) {
		t.Fatalf("nodes written: %v, want the two under current leases", ids)
	}
}

func maps(a, b map[string]int64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// TestLeaseStatusAndRelease: the status shows heartbeats and leases; a
// replica that releases leaves the table and its leases are free at once.
func TestLeaseStatusAndRelease(t *testing.T) {
	t.Parallel()
	s := open(t, pgtest.NewDatabase(t))
	ctx := context.Background()
	putClusters(t, s, "c1")
	if _, err := s.Coordinate(ctx, store.Replica{ID: "a", Addr: "127.0.0.1:1", Version: "v1"}, time.Minute, all); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Coordinate(ctx, store.Replica{ID: "b", Addr: "127.0.0.1:2"}, time.Minute, none); err != nil {
		t.Fatal(err)
	}
	reps, ls, err := s.LeaseStatus(ctx, time.Minute)
	if err != nil || len(reps) != 2 || reps[0].ID != "a" || reps[0].Addr != "127.0.0.1:1" || reps[0].Version != "v1" || !reps[0].Live ||
		len(ls) != 1 || ls[0].Holder != "a" || !ls[0].Valid || ls[0].Epoch != 1 {
		t.Fatalf("status: %+v %+v %v", reps, ls, err)
	}
	if err := s.Release(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	held, err := s.Coordinate(ctx, store.Replica{ID: "b"}, time.Minute, all)
	if err != nil || !maps(held, map[string]int64{"c1": 2}) {
		t.Fatalf("b after a released: %v, %v", held, err)
	}
	reps, _, err = s.LeaseStatus(ctx, time.Minute)
	if err != nil || len(reps) != 1 || reps[0].ID != "b" {
		t.Fatalf("replicas after release: %+v, %v", reps, err)
	}
}

// TestSilentReplicasAreForgotten: a replica whose heartbeat is an hour old
// leaves the table at the next round of any replica; a restarted replica
// keeps its id and shows its new start time.
func TestSilentReplicasAreForgotten(t *testing.T) {
	t.Parallel()
	s := open(t, pgtest.NewDatabase(t))
	ctx := context.Background()
	first := time.Now().Add(-time.Minute).UTC().Round(time.Microsecond)
	for _, r := range []store.Replica{{ID: "gone", StartedTS: first}, {ID: "b", StartedTS: first}} {
		if _, err := s.Coordinate(ctx, r, time.Minute, none); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.pool.Exec(ctx, `UPDATE replicas SET heartbeat_ts = now() - interval '61 minutes' WHERE id = 'gone'`); err != nil {
		t.Fatal(err)
	}
	restarted := first.Add(30 * time.Second)
	if _, err := s.Coordinate(ctx, store.Replica{ID: "b", StartedTS: restarted}, time.Minute, none); err != nil {
		t.Fatal(err)
	}
	reps, _, err := s.LeaseStatus(ctx, time.Minute)
	if err != nil || len(reps) != 1 || reps[0].ID != "b" || !reps[0].StartedTS.Equal(restarted) {
		t.Fatalf("replicas %+v, %v; want b alone, started at %s", reps, err, restarted)
	}
}

// TestTheOutboxIsLeasedLikeACluster: with an outbox, one replica holds its
// lease; delivery writes under the lease's fence are refused once another
// replica took it.
func TestTheOutboxIsLeasedLikeACluster(t *testing.T) {
	t.Parallel()
	db := pgtest.NewDatabase(t)
	s := open(t, db)
	s.SetOutbox(func(*store.Event) []string { return []string{"hook"} })
	ctx := context.Background()
	a, b := store.Replica{ID: "a"}, store.Replica{ID: "b"}
	held, err := s.Coordinate(ctx, a, time.Minute, all)
	if err != nil || held[store.OutboxLease] != 1 {
		t.Fatalf("a holds %v, %v; want the outbox", held, err)
	}
	if held, err := s.Coordinate(ctx, b, time.Minute, all); err != nil || len(held) != 0 {
		t.Fatalf("b took %v, %v while a holds the outbox", held, err)
	}
	if err := s.Update(ctx, func(tx store.Tx) error {
		return tx.AppendEvent(ctx, &store.Event{Type: "x", Actor: "t"})
	}); err != nil {
		t.Fatal(err)
	}
	if err := s.Release(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if held, err := s.Coordinate(ctx, b, time.Minute, all); err != nil || held[store.OutboxLease] != 2 {
		t.Fatalf("b holds %v, %v; want the outbox at epoch 2", held, err)
	}
	stale := store.WithFence(ctx, store.Fence{ClusterID: store.OutboxLease, Holder: "a", Epoch: 1})
	err = s.Update(stale, func(tx store.Tx) error {
		d, err := store.NextDelivery(ctx, tx, "hook")
		if err != nil {
			return err
		}
		d.State = store.DeliveryDelivered
		return tx.UpdateDelivery(ctx, d)
	})
	if !errors.Is(err, store.ErrFenced) {
		t.Fatalf("a delivery recorded under a lost outbox lease: %v, want ErrFenced", err)
	}
	// Without an outbox, no replica leases one.
	plain := open(t, pgtest.NewDatabase(t))
	if held, err := plain.Coordinate(ctx, a, time.Minute, all); err != nil || len(held) != 0 {
		t.Fatalf("without an outbox a holds %v, %v", held, err)
	}
}
