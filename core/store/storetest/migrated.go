package storetest

import (
	"context"
	"errors"
	"testing"

	"github.com/musterhq/muster/core/store"
)

// DeliveryWant is what a delivery read back must be.
type DeliveryWant struct {
	ID       int64
	Dest     string
	State    string
	Attempts int
}

// CheckDeliveries reads each delivery of wants and reports those that
// differ.
func CheckDeliveries(t *testing.T, ctx context.Context, r store.Reader, wants ...DeliveryWant) {
	t.Helper()
	for _, want := range wants {
		d, err := r.Delivery(ctx, want.ID)
		if err != nil {
			t.Errorf("delivery %d: %v", want.ID, err)
			continue
		}
		if d.Destination != want.Dest || d.State != want.State || d.Attempts != want.Attempts {
			t.Errorf("delivery %d = %+v, want %s %s after %d tries", want.ID, d, want.Dest, want.State, want.Attempts)
		}
	}
}

// CheckMigratedOutbox checks a store whose outbox was migrated to one row
// per event (SQLite migration 023, PostgreSQL 018) from these deliveries,
// each "event: destination state tries": 6: b delivered 1 (rank 1 alone,
// its rank 0 purged); 7: a delivered 2, b dead 3 (last error "404 Not
// Found"); 9: b pending 2 (last error "503 Service Unavailable", the
// newest), a pending 0; 10: b delivered 1. Ranks, states and tries are
// kept, an event a purge cut short is dropped whole, each queue is event 9
// alone, and the stats keep the last success and failure.
func CheckMigratedOutbox(t *testing.T, s store.Store) {
	t.Helper()
	ctx := context.Background()
	err := s.Read(ctx, func(r store.Reader) error {
		CheckDeliveries(t, ctx, r, DeliveryWant{ID: store.DeliveryID(7, 0), Dest: "a", State: store.DeliveryDelivered, Attempts: 2},
			DeliveryWant{ID: store.DeliveryID(7, 1), Dest: "b", State: store.DeliveryDead, Attempts: 3},
			DeliveryWant{ID: store.DeliveryID(9, 0), Dest: "b", State: store.DeliveryPending, Attempts: 2},
			DeliveryWant{ID: store.DeliveryID(9, 1), Dest: "a", State: store.DeliveryPending, Attempts: 0},
			// Delivered after b's first pending one: it keeps its row,
			// and so its state.
			DeliveryWant{ID: store.DeliveryID(10, 0), Dest: "b", State: store.DeliveryDelivered, Attempts: 1})
		if _, err := r.Delivery(ctx, store.DeliveryID(6, 1)); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("event 6's delivery, cut short by a purge = %v, want ErrNotFound", err)
		}
		for _, dest := range []string{"a", "b"} {
			pending, err := r.PendingDeliveries(ctx, dest, 10)
			if err != nil {
				return err
			}
			if len(pending) != 1 || pending[0].EventSeq != 9 {
				t.Errorf("pending to %s after the migration = %+v, want event 9's alone", dest, pending)
			}
			next, err := store.NextDelivery(ctx, r, dest)
			if err != nil || next.EventSeq != 9 {
				t.Errorf("NextDelivery(%s) = %+v, %v, want event 9's", dest, next, err)
			}
		}
		stats, err := r.DeliveryStats(ctx)
		if err != nil {
			return err
		}
		if len(stats) != 2 || stats[0].Backlog != 1 || stats[0].LastSuccess == nil || stats[1].Backlog != 1 ||
			stats[1].Dead != 1 || stats[1].LastError != "503 Service Unavailable" {
			t.Errorf("stats after the migration = %+v", stats)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
