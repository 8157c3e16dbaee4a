package core

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/core/store/sqlite"
)

// Joins and losses of replicas are events, written once by the first live
// replica; a replica's first lease round only learns who is there.
func TestReplicaMembershipEvents(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	a := &replication{self: store.Replica{ID: "a"}, ttl: 3 * time.Second, st: st, log: slog.New(slog.DiscardHandler)}
	b := &replication{self: store.Replica{ID: "b"}, ttl: 3 * time.Second, st: st, log: slog.New(slog.DiscardHandler)}
	a.membership([]string{"a", "b"}) // first round: no events
	b.membership([]string{"a", "b"})
	a.membership([]string{"a", "b", "c"})
	b.membership([]string{"a", "b", "c"}) // not the first live replica: silent
	a.membership([]string{"a", "c"})
	b.membership([]string{"a", "c"})
	var evs []store.Event
	if err := st.Read(ctx, func(r store.Reader) error {
		var err error
		evs, err = r.Events(ctx, 0, 100)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range evs {
		got = append(got, e.Type+" "+e.Data["replica"].(string))
	}
	want := []string{"core.replica_joined c", "core.replica_lost b"}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("events %v, want %v", got, want)
	}
}

func TestStoppedReplicaLeavesTheListAfterAWhile(t *testing.T) {
	t.Parallel()
	now := time.Now()
	forget := time.Minute
	if !listed(true, now.Add(-time.Hour), now, forget) || !listed(false, now.Add(-30*time.Second), now, forget) ||
		listed(false, now.Add(-2*time.Minute), now, forget) {
		t.Fatal("listed")
	}
}
