package core

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/musterhq/muster/core/discovery"
	"github.com/musterhq/muster/core/schedule"
	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/core/store/sqlite"
)

func countEvents(t *testing.T, st store.Store, typ string) []store.Event {
	t.Helper()
	var out []store.Event
	err := st.Read(context.Background(), func(r store.Reader) error {
		es, err := r.Events(context.Background(), 0, 1000)
		for _, e := range es {
			if e.Type == typ {
				out = append(out, e)
			}
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// The configuration's freezes seed the store once (however often a
// replica starts); a file that disagrees with the store (a configured
// freeze lifted there, a config freeze the file lost) is drift, told once
// by an event, and the store is followed; a reload that removes a freeze
// from the file lifts it.
func TestConfigFreezesSeedTheStoreAndDriftIsTold(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	now := time.Now().UTC()
	spec := schedule.FreezeSpec{From: now.Add(-time.Hour).Format(time.RFC3339), To: now.Add(time.Hour).Format(time.RFC3339), Reason: "year-end"}
	past := schedule.FreezeSpec{From: now.Add(-3 * time.Hour).Format(time.RFC3339), To: now.Add(-2 * time.Hour).Format(time.RFC3339), Reason: "over"}
	withFreeze := Config{Clusters: []discovery.ClusterSpec{{ID: "prod", Freezes: []schedule.FreezeSpec{spec, past}}}}
	without := Config{Clusters: []discovery.ClusterSpec{{ID: "prod"}}}
	id := schedule.ConfigFreezeID("prod", spec)

	for range 2 {
		drift, err := seedFreezes(ctx, st, withFreeze, nil)
		if err != nil || len(drift) != 0 {
			t.Fatalf("seed: %v, %v", drift, err)
		}
	}
	fs, err := schedule.LoadFreezes(ctx, st, now)
	if err != nil || len(fs) != 1 || fs[0].ID != id || fs[0].Source != store.SourceConfig || fs[0].CreatedBy != "config" {
		t.Fatalf("stored freezes after two seeds: %+v, %v", fs, err)
	}
	if evs := countEvents(t, st, store.EventFreezeCreated); len(evs) != 1 || evs[0].ClusterID != "prod" {
		t.Fatalf("freeze.created events: %+v", evs)
	}

	// Another replica's file lacks it: drift, told once; nothing lifted.
	drift, err := seedFreezes(ctx, st, without, nil)
	if err != nil || len(drift) != 1 || !strings.Contains(drift[0], id) || !strings.Contains(drift[0], "not in this file") {
		t.Fatalf("drift of a file without the freeze: %v, %v", drift, err)
	}
	if again, _ := seedFreezes(ctx, st, without, drift); len(again) != 1 {
		t.Fatalf("drift again: %v", again)
	}
	if evs := countEvents(t, st, store.EventCorePolicyDrift); len(evs) != 1 {
		t.Fatalf("policy drift events: %+v, want one", evs)
	}
	if fs, _ := schedule.LoadFreezes(ctx, st, now); len(fs) != 1 {
		t.Fatalf("a start with another file changed the store: %+v", fs)
	}

	// A reload that removes it from this replica's file lifts it; the file
	// that still declares it then disagrees.
	if err := liftRemovedFreezes(ctx, st, withFreeze, without); err != nil {
		t.Fatal(err)
	}
	if fs, _ := schedule.LoadFreezes(ctx, st, now); len(fs) != 0 {
		t.Fatalf("freezes in force after the reload removed it: %+v", fs)
	}
	if evs := countEvents(t, st, store.EventFreezeLifted); len(evs) != 1 || evs[0].Actor != "config" {
		t.Fatalf("freeze.lifted events: %+v", evs)
	}
	drift, err = seedFreezes(ctx, st, withFreeze, nil)
	if err != nil || len(drift) != 1 || !strings.Contains(drift[0], "was lifted by config") {
		t.Fatalf("drift of a file declaring a lifted freeze: %v, %v", drift, err)
	}
	if fs, _ := schedule.LoadFreezes(ctx, st, now); len(fs) != 0 {
		t.Fatalf("a seed brought back a lifted freeze: %+v", fs)
	}
}
