package lease_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/musterhq/muster/core/lease"
	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/core/store/pgtest"
	"github.com/musterhq/muster/core/store/postgres"
	"github.com/musterhq/muster/shared/startstop"
	"github.com/musterhq/muster/shared/testwait"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

func TestAssign(t *testing.T) {
	t.Parallel()
	six := []string{"c1", "c2", "c3", "c4", "c5", "c6"}
	valid := func(c, h string) store.Lease { return store.Lease{ClusterID: c, Holder: h, Valid: true} }
	cases := []struct {
		name   string
		live   []string
		leases []store.Lease
		want   map[string][]string // replica → its clusters
	}{
		{"none held", []string{"a", "b", "c"}, nil,
			map[string][]string{"a": {"c1", "c2"}, "b": {"c3", "c4"}, "c": {"c5", "c6"}}},
		{"one replica", []string{"a"}, nil, map[string][]string{"a": six}},
		{"a joins b, which held all", []string{"a", "b"},
			[]store.Lease{valid("c1", "b"), valid("c2", "b"), valid("c3", "b"), valid("c4", "b"), valid("c5", "b"), valid("c6", "b")},
			map[string][]string{"b": {"c1", "c2", "c3"}, "a": {"c4", "c5", "c6"}}},
		{"holders keep theirs", []string{"a", "b", "c"},
			[]store.Lease{valid("c1", "c"), valid("c2", "b"), valid("c3", "a"), valid("c4", "c"), valid("c5", "b"), valid("c6", "a")},
			map[string][]string{"a": {"c3", "c6"}, "b": {"c2", "c5"}, "c": {"c1", "c4"}}},
		{"a dead holder's clusters spread", []string{"a", "b"},
			[]store.Lease{valid("c1", "a"), valid("c2", "a"), valid("c3", "b"), valid("c4", "b"), valid("c5", "dead"), valid("c6", "dead")},
			map[string][]string{"a": {"c1", "c2", "c5"}, "b": {"c3", "c4", "c6"}}},
		{"expired leases are free", []string{"a", "b", "c"},
			[]store.Lease{{ClusterID: "c1", Holder: "c"}, {ClusterID: "c2", Holder: "c"}},
			map[string][]string{"a": {"c1", "c2"}, "b": {"c3", "c4"}, "c": {"c5", "c6"}}},
		{"uneven", []string{"a", "b", "c", "d"}, nil,
			map[string][]string{"a": {"c1", "c2"}, "b": {"c3", "c4"}, "c": {"c5"}, "d": {"c6"}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			seen := map[string]string{}
			for _, me := range c.live {
				got := lease.Assign(store.LeaseView{Me: me, Live: c.live, Clusters: six, Leases: c.leases})
				if !slices.Equal(got, c.want[me]) {
					t.Errorf("%s gets %v, want %v", me, got, c.want[me])
				}
				for _, cl := range got {
					if other, ok := seen[cl]; ok {
						t.Errorf("%s given to %s and %s", cl, other, me)
					}
					seen[cl] = me
				}
			}
			if len(seen) != len(six) {
				t.Errorf("%d of %d clusters assigned", len(seen), len(six))
			}
		})
	}
}

const ttl = 600 * time.Millisecond

func setup(t *testing.T, clusters int) *postgres.Store {
	t.Helper()
	ctx := context.Background()
	st, err := postgres.Open(ctx, pgtest.NewDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	err = st.Update(ctx, func(tx store.Tx) error {
		for i := 1; i <= clusters; i++ {
			if err := tx.PutCluster(ctx, &store.Cluster{ID: fmt.Sprintf("c%d", i), Status: store.ClusterHealthy}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func start(t *testing.T, st lease.Store, id string, onAcquire func(string)) *lease.Manager {
	t.Helper()
	m, err := lease.New(lease.Config{TTL: ttl, Replica: store.Replica{ID: id}, OnAcquire: onAcquire}, st, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Stop)
	return m
}

// spread reports whether the managers hold the wanted numbers of leases and
// no cluster twice.
func spread(ms []*lease.Manager, want ...int) bool {
	seen := map[string]bool{}
	for i, m := range ms {
		h := m.Held()
		if len(h) != want[i] {
			return false
		}
		for c := range h {
			if seen[c] {
				return false
			}
			seen[c] = true
		}
	}
	return true
}

// TestManagersSpreadAndMove: three replicas share six clusters 2/2/2; when
// one stops, the other two take its clusters (3/3); when a new one starts,
// they spread again.
func TestManagersSpreadAndMove(t *testing.T) {
	t.Parallel()
	st := setup(t, 6)
	var acquired atomic.Int64
	nudge := func(string) { acquired.Add(1) }
	a, b, c := start(t, st, "a", nudge), start(t, st, "b", nudge), start(t, st, "c", nudge)
	testwait.For(t, "a 2/2/2 spread", func() bool { return spread([]*lease.Manager{a, b, c}, 2, 2, 2) })
	if acquired.Load() < 6 {
		t.Fatalf("OnAcquire called %d times for 6 leases", acquired.Load())
	}
	c.Stop()
	testwait.For(t, "a 3/3 spread after c stopped", func() bool { return spread([]*lease.Manager{a, b}, 3, 3) })
	d := start(t, st, "d", nudge)
	testwait.For(t, "a 2/2/2 spread after d started", func() bool { return spread([]*lease.Manager{a, b, d}, 2, 2, 2) })
}

// failing is a lease.Store whose rounds fail once broken is set (the
// database cannot be reached).
type failing struct {
	lease.Store
	broken atomic.Bool
}

func (f *failing) Coordinate(ctx context.Context, me store.Replica, ttl time.Duration, assign func(store.LeaseView) []string) (map[string]int64, error) {
	if f.broken.Load() {
		return nil, errors.New("database unreachable")
	}
	return f.Store.Coordinate(ctx, me, ttl, assign)
}

// TestALeaseThatCannotBeRenewedStopsPasses: when rounds fail, the pass under
// way is cancelled and no new pass starts, within the TTL.
func TestALeaseThatCannotBeRenewedStopsPasses(t *testing.T) {
	t.Parallel()
	f := &failing{Store: setup(t, 1)}
	m := start(t, f, "a", nil)
	testwait.For(t, "the lease", func() bool { return len(m.Held()) == 1 })
	pctx, done, ok := m.PassContext(context.Background(), "c1")
	if !ok {
		t.Fatal("no pass context for a held lease")
	}
	defer done()
	if fence, ok := store.FenceOf(pctx); !ok || fence.ClusterID != "c1" || fence.Holder != "a" || fence.Epoch != 1 {
		t.Fatalf("pass context fence %+v, %v", fence, ok)
	}
	f.broken.Store(true)
	select { // due within the TTL; ten times that leaves room for a loaded machine
	case <-pctx.Done():
	case <-time.After(10 * ttl):
		t.Fatal("the pass was not cancelled after the lease could not be renewed")
	}
	if _, _, ok := m.PassContext(context.Background(), "c1"); ok {
		t.Fatal("a pass may start on a lease that expired")
	}
	f.broken.Store(false)
	testwait.For(t, "the lease again once the database answers", func() bool { return len(m.Held()) == 1 })
}

// TestAManagerWhoseContextEndsGivesUpItsLeases: the context Start was given
// ends as Stop would: the manager's leases are dropped and given up in the
// database at once, not left to expire after the TTL.
func TestAManagerWhoseContextEndsGivesUpItsLeases(t *testing.T) {
	t.Parallel()
	st := setup(t, 2)
	m, err := lease.New(lease.Config{TTL: time.Hour, Replica: store.Replica{ID: "b"}}, st, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	if err := m.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Stop)
	testwait.For(t, "b to hold both leases", func() bool { return len(m.Held()) == 2 })
	cancel()
	m.Stop() // returns once the leases are given up
	if held := m.Held(); len(held) != 0 {
		t.Fatalf("still holds %v after its context ended", held)
	}
	_, ls, err := st.LeaseStatus(context.Background(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range ls {
		if l.Holder == "b" && l.Valid {
			t.Fatalf("lease %+v still valid in the database: an hour-long TTL would keep it from the others", l)
		}
	}
	if err := m.Start(context.Background()); !errors.Is(err, startstop.ErrStopped) {
		t.Fatalf("Start after Stop: %v", err)
	}
}
