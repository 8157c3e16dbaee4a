package runs

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/musterhq/muster/core/actions"
	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/core/store/sqlite"
)

// TestASilentChangeOfARunIsRefused: the one write path of a run's row
// refuses a new run, or a change of its state, that raises no event, and
// writes nothing then; a change that raises its event is stored with it.
func TestASilentChangeOfARunIsRefused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	now := time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)
	r := &store.Run{ID: "r1", ClusterID: "c", State: store.RunRunning, Requester: "alice", CreatedTS: now, UpdatedTS: now}
	err = st.Update(ctx, func(tx store.Tx) error {
		if err := tx.PutCluster(ctx, &store.Cluster{ID: "c", Status: store.ClusterHealthy}); err != nil {
			return err
		}
		if err := newRunChange(r).save(ctx, tx); err == nil {
			t.Error("a new run with no event was stored")
		}
		if _, err := tx.Run(ctx, r.ID); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("a refused new run was written: %v", err)
		}
		c := newRunChange(r)
		c.event(store.EventRunCreated, actions.Core, now, "created", nil)
		if err := c.save(ctx, tx); err != nil {
			return err
		}

		c = changeOf(r)
		r.State, r.StateReason = store.RunPaused, "paused by alice"
		if err := c.save(ctx, tx); err == nil {
			t.Error("a change of state with no event was stored")
		}
		if got, err := tx.Run(ctx, r.ID); err != nil || got.State != store.RunRunning {
			t.Errorf("a refused change was written: %v %v", got, err)
		}
		c.event(store.EventRunPaused, actions.Actor{Name: "alice"}, now, "paused", nil)
		if err := c.save(ctx, tx); err != nil {
			return err
		}

		// No change of state: the row is written alone.
		r.StateReason = "paused by alice: waiting"
		return c.save(ctx, tx)
	})
	if err != nil {
		t.Fatal(err)
	}
	var evs []store.Event
	err = st.Read(ctx, func(rd store.Reader) error {
		got, err := rd.Run(ctx, r.ID)
		if err != nil {
			return err
		}
		if got.State != store.RunPaused || got.StateReason != "paused by alice: waiting" {
			t.Errorf("run stored %s (%q), want PAUSED with the last reason", got.State, got.StateReason)
		}
		evs, err = rd.Events(ctx, 0, 100)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	var types []string
	for _, e := range evs {
		if e.RunID == r.ID {
			types = append(types, e.Type)
		}
	}
	if len(types) != 2 || types[0] != store.EventRunCreated || types[1] != store.EventRunPaused {
		t.Fatalf("run events %v, want [run.created run.paused]", types)
	}
}
