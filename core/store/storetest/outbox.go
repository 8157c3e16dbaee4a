package storetest

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/musterhq/muster/core/store"
)

// outboxTo routes every event of type "x" to a and b, "y" to b, the rest nowhere.
func outboxTo(e *store.Event) []string {
	switch e.Type {
	case "x":
		return []string{"a", "b"}
	case "y":
		return []string{"b"}
	}
	return nil
}

// testOutboxEnqueuesWithTheEvent: an event's deliveries are written by the
// transaction that appends it, and rolled back with it.
func testOutboxEnqueuesWithTheEvent(t *testing.T, db NewDB) {
	s := setup(t, db)
	s.SetOutbox(outboxTo)
	ctx := context.Background()
	var seqs []int64
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		for _, typ := range []string{"x", "z", "y"} {
			e := &store.Event{TS: t0, Type: typ, Actor: "core"}
			if err := tx.AppendEvent(ctx, e); err != nil {
				return err
			}
			seqs = append(seqs, e.Seq)
		}
		return nil
	})
	boom := errors.New("boom")
	if err := s.Update(ctx, func(tx store.Tx) error {
		if err := tx.AppendEvent(ctx, &store.Event{Type: "x", Actor: "core"}); err != nil {
			return err
		}
		return boom
	}); !errors.Is(err, boom) {
		t.Fatalf("Update = %v, want boom", err)
	}
	read(t, s, func(ctx context.Context, r store.Reader) error {
		a, err := r.Deliveries(ctx, store.DeliveryQuery{Destination: "a"})
		if err != nil {
			return err
		}
		b, err := r.Deliveries(ctx, store.DeliveryQuery{Destination: "b"})
		if err != nil {
			return err
		}
		if len(a) != 1 || a[0].EventSeq != seqs[0] || a[0].State != store.DeliveryPending || !a[0].CreatedTS.Equal(t0) {
			t.Errorf("deliveries to a = %+v, want one pending of event %d", a, seqs[0])
		}
		if len(b) != 2 || b[0].EventSeq != seqs[2] || b[1].EventSeq != seqs[0] {
			t.Errorf("deliveries to b = %+v, want events %d then %d (newest first)", b, seqs[2], seqs[0])
		}
		next, err := store.NextDelivery(ctx, r, "b")
		if err != nil {
			return err
		}
		if next.EventSeq != seqs[0] {
			t.Errorf("NextDelivery(b) = event %d, want the oldest, %d", next.EventSeq, seqs[0])
		}
		if _, err := store.NextDelivery(ctx, r, "c"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("NextDelivery(c) = %v, want ErrNotFound", err)
		}
		e, err := store.EventBySeq(ctx, r, next.EventSeq)
		if err != nil || e.Type != "x" {
			t.Errorf("EventBySeq = %+v, %v, want the x event", e, err)
		}
		return nil
	})
	s.SetOutbox(nil)
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		return tx.AppendEvent(ctx, &store.Event{Type: "x", Actor: "core"})
	})
	read(t, s, func(ctx context.Context, r store.Reader) error {
		a, err := r.Deliveries(ctx, store.DeliveryQuery{Destination: "a"})
		if err == nil && len(a) != 1 {
			t.Errorf("without an outbox, deliveries to a = %d, want still 1", len(a))
		}
		return err
	})
}

// testDeliveryLifecycle: updates, the head of the queue moving on, states
// filtered, paging, stats and purge.
func testDeliveryLifecycle(t *testing.T, db NewDB) {
	s := setup(t, db)
	s.SetOutbox(outboxTo)
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		for i := range 4 {
			if err := tx.AppendEvent(ctx, &store.Event{TS: t0.Add(time.Duration(i) * time.Hour), Type: "y", Actor: "core"}); err != nil {
				return err
			}
		}
		return nil
	})
	var first store.Delivery
	read(t, s, func(ctx context.Context, r store.Reader) error {
		d, err := store.NextDelivery(ctx, r, "b")
		if err == nil {
			first = *d
		}
		return err
	})
	// The first is delivered, the second dies after trying.
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		d := first
		d.State, d.Attempts, d.LastStatus, d.UpdatedTS = store.DeliveryDelivered, 1, 204, t0.Add(5*time.Hour)
		if err := tx.UpdateDelivery(ctx, &d); err != nil {
			return err
		}
		next, err := store.NextDelivery(ctx, tx, "b")
		if err != nil {
			return err
		}
		next.State, next.Attempts, next.LastStatus, next.LastError = store.DeliveryDead, 3, 404, "404 Not Found"
		next.NextTS, next.UpdatedTS = t0.Add(9*time.Hour), t0.Add(6*time.Hour)
		if err := tx.UpdateDelivery(ctx, next); err != nil {
			return err
		}
		missing := store.Delivery{ID: 1 << 40, State: store.DeliveryDead}
		if err := tx.UpdateDelivery(ctx, &missing); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("UpdateDelivery(missing) = %v, want ErrNotFound", err)
		}
		return nil
	})
	read(t, s, func(ctx context.Context, r store.Reader) error {
		dead, err := r.Deliveries(ctx, store.DeliveryQuery{Destination: "b", State: store.DeliveryDead})
		if err != nil {
			return err
		}
		if len(dead) != 1 || dead[0].ID != first.ID+1 || dead[0].Attempts != 3 || dead[0].LastStatus != 404 ||
			dead[0].LastError != "404 Not Found" || !dead[0].NextTS.Equal(t0.Add(9*time.Hour)) {
			t.Errorf("dead deliveries = %+v, want the second, as updated", dead)
		}
		page, err := r.Deliveries(ctx, store.DeliveryQuery{Destination: "b", Before: first.ID + 3, Limit: 2})
		if err != nil {
			return err
		}
		if len(page) != 2 || page[0].ID != first.ID+2 || page[1].ID != first.ID+1 {
			t.Errorf("page before %d = %+v, want the two before it", first.ID+3, page)
		}
		got, err := r.Delivery(ctx, first.ID)
		if err != nil || got.State != store.DeliveryDelivered {
			t.Errorf("Delivery(first) = %+v, %v", got, err)
		}
		if _, err := r.Delivery(ctx, 1<<40); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("Delivery(missing) = %v, want ErrNotFound", err)
		}
		next, err := store.NextDelivery(ctx, r, "b")
		if err != nil || next.ID != first.ID+2 {
			t.Errorf("NextDelivery after two = %+v, %v, want the third", next, err)
		}
		stats, err := r.DeliveryStats(ctx)
		if err != nil {
			return err
		}
		if len(stats) != 1 {
			t.Fatalf("stats = %+v, want b alone", stats)
		}
		st := stats[0]
		if st.Destination != "b" || st.Backlog != 2 || st.Dead != 1 || st.OldestPending == nil ||
			!st.OldestPending.Equal(t0.Add(2*time.Hour)) || st.LastSuccess == nil || !st.LastSuccess.Equal(t0.Add(5*time.Hour)) ||
			st.LastFailure == nil || !st.LastFailure.Equal(t0.Add(6*time.Hour)) || st.LastError != "404 Not Found" {
			t.Errorf("stats = %+v", st)
		}
		return nil
	})
	var n int
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		var err error
		n, err = tx.PurgeDeliveries(ctx, t0.Add(150*time.Minute), 10)
		return err
	})
	if n != 3 {
		t.Errorf("PurgeDeliveries = %d, want 3 (created before 2h30)", n)
	}
	read(t, s, func(ctx context.Context, r store.Reader) error {
		left, err := r.Deliveries(ctx, store.DeliveryQuery{Destination: "b"})
		if err == nil && (len(left) != 1 || !left[0].CreatedTS.Equal(t0.Add(3*time.Hour))) {
			t.Errorf("left after purge = %+v, want the newest", left)
		}
		return err
	})
}

// testEventDeliveries: the deliveries of a range of events, in one read
// bounded by the events' numbers, their times and a limit.
func testEventDeliveries(t *testing.T, db NewDB) {
	s := setup(t, db)
	s.SetOutbox(outboxTo)
	var evs []store.Event
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		for i, typ := range []string{"x", "z", "y", "x"} {
			e := store.Event{TS: t0.Add(time.Duration(i) * time.Minute), Type: typ, Actor: "core"}
			if err := tx.AppendEvent(ctx, &e); err != nil {
				return err
			}
			evs = append(evs, e)
		}
		return nil
	})
	type mark struct {
		seq  int64
		dest string
	}
	marks := func(ds []store.Delivery) []mark {
		var out []mark
		for _, d := range ds {
			out = append(out, mark{d.EventSeq, d.Destination})
		}
		return out
	}
	for _, tc := range []struct {
		name string
		q    store.EventDeliveryQuery
		want []mark
	}{
		{"the first three", store.EventDeliveryQuery{FromSeq: evs[0].Seq, ToSeq: evs[2].Seq, FromTS: evs[0].TS, ToTS: evs[2].TS, Limit: 10},
			[]mark{{evs[2].Seq, "b"}, {evs[0].Seq, "a"}, {evs[0].Seq, "b"}}},
		{"all, limited", store.EventDeliveryQuery{FromSeq: evs[0].Seq, ToSeq: evs[3].Seq, FromTS: evs[0].TS, ToTS: evs[3].TS, Limit: 2},
			[]mark{{evs[3].Seq, "a"}, {evs[3].Seq, "b"}}},
		{"the times bound too", store.EventDeliveryQuery{FromSeq: evs[0].Seq, ToSeq: evs[3].Seq, FromTS: evs[2].TS, ToTS: evs[2].TS, Limit: 10},
			[]mark{{evs[2].Seq, "b"}}},
		{"an event without deliveries", store.EventDeliveryQuery{FromSeq: evs[1].Seq, ToSeq: evs[1].Seq, FromTS: evs[1].TS, ToTS: evs[1].TS, Limit: 10},
			nil},
	} {
		read(t, s, func(ctx context.Context, r store.Reader) error {
			ds, err := r.EventDeliveries(ctx, tc.q)
			if err != nil {
				return err
			}
			if got := marks(ds); !slices.Equal(got, tc.want) {
				t.Errorf("%s: EventDeliveries = %v, want %v", tc.name, got, tc.want)
			}
			return nil
		})
	}
	// A delivery's state and tries are read as stored.
	var d *store.Delivery
	read(t, s, func(ctx context.Context, r store.Reader) error {
		var err error
		d, err = store.NextDelivery(ctx, r, "a")
		return err
	})
	d.State, d.Attempts = store.DeliveryDead, 3
	update(t, s, func(ctx context.Context, tx store.Tx) error { return tx.UpdateDelivery(ctx, d) })
	read(t, s, func(ctx context.Context, r store.Reader) error {
		ds, err := r.EventDeliveries(ctx, store.EventDeliveryQuery{FromSeq: evs[0].Seq, ToSeq: evs[0].Seq,
			FromTS: evs[0].TS, ToTS: evs[0].TS, Limit: 10})
		if err == nil && (len(ds) != 2 || ds[0].Destination != "a" || ds[0].State != store.DeliveryDead || ds[0].Attempts != 3 ||
			ds[1].State != store.DeliveryPending) {
			t.Errorf("EventDeliveries of event %d = %+v, want a dead after 3 tries, b pending", evs[0].Seq, ds)
		}
		return err
	})
}
