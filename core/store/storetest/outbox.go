package storetest

import (
	"context"
	"errors"
	"fmt"
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
	var ids []int64 // of the deliveries to b, oldest first
	read(t, s, func(ctx context.Context, r store.Reader) error {
		d, err := store.NextDelivery(ctx, r, "b")
		if err != nil {
			return err
		}
		first = *d
		ds, err := r.PendingDeliveries(ctx, "b", 10)
		for _, d := range ds {
			ids = append(ids, d.ID)
		}
		if err == nil && len(ids) != 4 {
			t.Fatalf("pending deliveries to b = %d, want 4", len(ids))
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
		if len(dead) != 1 || dead[0].ID != ids[1] || dead[0].Attempts != 3 || dead[0].LastStatus != 404 ||
			dead[0].LastError != "404 Not Found" || !dead[0].NextTS.Equal(t0.Add(9*time.Hour)) {
			t.Errorf("dead deliveries = %+v, want the second, as updated", dead)
		}
		page, err := r.Deliveries(ctx, store.DeliveryQuery{Destination: "b", Before: ids[3], Limit: 2})
		if err != nil {
			return err
		}
		if len(page) != 2 || page[0].ID != ids[2] || page[1].ID != ids[1] {
			t.Errorf("page before %d = %+v, want the two before it", ids[3], page)
		}
		got, err := r.Delivery(ctx, first.ID)
		if err != nil || got.State != store.DeliveryDelivered {
			t.Errorf("Delivery(first) = %+v, %v", got, err)
		}
		if _, err := r.Delivery(ctx, 1<<40); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("Delivery(missing) = %v, want ErrNotFound", err)
		}
		next, err := store.NextDelivery(ctx, r, "b")
		if err != nil || next.ID != ids[2] {
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

// testMarkDelivered: the head of a destination's queue delivered in one
// record: its cursor moves past them, those retried before get one more
// try and the status, the others show one try; the rest stay pending.
func testMarkDelivered(t *testing.T, db NewDB) {
	s, ds := pendingToB(t, db, 4)
	// The first failed once before.
	first := ds[0]
	first.Attempts, first.LastStatus, first.LastError = 1, 503, "503 Service Unavailable"
	update(t, s, func(ctx context.Context, tx store.Tx) error { return tx.UpdateDelivery(ctx, &first) })
	at := t0.Add(time.Hour)
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		return tx.MarkDelivered(ctx, "b", []int64{ds[0].ID, ds[1].ID}, 204, at)
	})
	read(t, s, func(ctx context.Context, r store.Reader) error {
		for i, want := range []struct {
			state    string
			attempts int
			status   int
			updated  time.Time
		}{{store.DeliveryDelivered, 2, 204, at}, {store.DeliveryDelivered, 1, 0, ds[1].CreatedTS},
			{store.DeliveryPending, 0, 0, ds[2].CreatedTS}} {
			d, err := r.Delivery(ctx, ds[i].ID)
			if err != nil {
				return err
			}
			if d.State != want.state || d.Attempts != want.attempts || d.LastStatus != want.status || d.LastError != "" ||
				!d.UpdatedTS.Equal(want.updated) {
				t.Errorf("delivery %d = %+v, want %s after %d tries, status %d, updated %v, no error", i, d, want.state,
					want.attempts, want.status, want.updated)
			}
		}
		pending, err := r.PendingDeliveries(ctx, "b", 10)
		if err != nil {
			return err
		}
		if len(pending) != 2 || pending[0].ID != ds[2].ID || pending[1].ID != ds[3].ID {
			t.Errorf("pending after two delivered = %+v, want the third and fourth", pending)
		}
		delivered, err := r.Deliveries(ctx, store.DeliveryQuery{Destination: "b", State: store.DeliveryDelivered})
		if err != nil {
			return err
		}
		if len(delivered) != 2 || delivered[0].ID != ds[1].ID || delivered[1].ID != ds[0].ID {
			t.Errorf("delivered = %+v, want the second and first (newest first)", delivered)
		}
		stats, err := r.DeliveryStats(ctx)
		if err == nil && (len(stats) != 1 || stats[0].Backlog != 2 || stats[0].LastSuccess == nil ||
			!stats[0].LastSuccess.Equal(at) || stats[0].LastError != "503 Service Unavailable") {
			t.Errorf("stats = %+v, want b with 2 pending, its last success and failure", stats)
		}
		return err
	})
	update(t, s, func(ctx context.Context, tx store.Tx) error { return tx.MarkDelivered(ctx, "b", nil, 204, at) })
}

// testRedeliveredComesFirst: a dead delivery made pending again (a
// redelivery) is the head of its destination's queue, before the events
// after the cursor, and counts in the backlog; delivered, the queue goes
// on where it was.
func testRedeliveredComesFirst(t *testing.T, db NewDB) {
	s, ds := pendingToB(t, db, 3)
	// The first dies, the second is delivered: the cursor is past both.
	dead := ds[0]
	dead.State, dead.Attempts, dead.LastStatus, dead.LastError = store.DeliveryDead, 3, 404, "404 Not Found"
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		if err := tx.UpdateDelivery(ctx, &dead); err != nil {
			return err
		}
		return tx.MarkDelivered(ctx, "b", []int64{ds[1].ID}, 200, t0.Add(time.Hour))
	})
	again := dead
	again.State, again.Attempts, again.NextTS, again.LastStatus, again.LastError = store.DeliveryPending, 0, t0, 0, ""
	update(t, s, func(ctx context.Context, tx store.Tx) error { return tx.UpdateDelivery(ctx, &again) })
	read(t, s, func(ctx context.Context, r store.Reader) error {
		pending, err := r.PendingDeliveries(ctx, "b", 10)
		if err != nil {
			return err
		}
		if len(pending) != 2 || pending[0].ID != ds[0].ID || pending[1].ID != ds[2].ID {
			t.Errorf("pending = %+v, want the redelivered first, then the third", pending)
		}
		newest, err := r.Deliveries(ctx, store.DeliveryQuery{Destination: "b", State: store.DeliveryPending})
		if err != nil {
			return err
		}
		if len(newest) != 2 || newest[0].ID != ds[2].ID || newest[1].ID != ds[0].ID {
			t.Errorf("pending newest first = %+v, want the third, then the redelivered", newest)
		}
		page, err := r.Deliveries(ctx, store.DeliveryQuery{Destination: "b", State: store.DeliveryPending, Before: ds[2].ID, Limit: 5})
		if err != nil {
			return err
		}
		if len(page) != 1 || page[0].ID != ds[0].ID {
			t.Errorf("pending before the third = %+v, want the redelivered", page)
		}
		if none, err := r.Deliveries(ctx, store.DeliveryQuery{Destination: "b", Before: 5}); err != nil || len(none) != 0 {
			t.Errorf("deliveries before id 5 = %+v, %v, want none", none, err)
		}
		stats, err := r.DeliveryStats(ctx)
		if err == nil && (len(stats) != 1 || stats[0].Backlog != 2 || stats[0].Dead != 0 ||
			stats[0].OldestPending == nil || !stats[0].OldestPending.Equal(ds[0].CreatedTS)) {
			t.Errorf("stats = %+v, want 2 pending since the first, none dead", stats)
		}
		return err
	})
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		return tx.MarkDelivered(ctx, "b", []int64{ds[0].ID}, 200, t0.Add(2*time.Hour))
	})
	read(t, s, func(ctx context.Context, r store.Reader) error {
		pending, err := r.PendingDeliveries(ctx, "b", 10)
		if err != nil {
			return err
		}
		if len(pending) != 1 || pending[0].ID != ds[2].ID {
			t.Errorf("pending = %+v, want the third alone", pending)
		}
		d, err := r.Delivery(ctx, ds[0].ID)
		if err == nil && (d.State != store.DeliveryDelivered || d.Attempts != 1 || d.LastStatus != 200) {
			t.Errorf("redelivered = %+v, want delivered at its one new try", d)
		}
		return err
	})
}

// testSkipToPassesTheIdle: a destination with nothing pending moved to the
// newest event finds its next delivery after it, and only then.
func testSkipToPassesTheIdle(t *testing.T, db NewDB) {
	s := setup(t, db)
	s.SetOutbox(outboxTo)
	var seqs []int64
	appendType := func(typ string) {
		update(t, s, func(ctx context.Context, tx store.Tx) error {
			e := &store.Event{Type: typ, Actor: "core"}
			err := tx.AppendEvent(ctx, e)
			seqs = append(seqs, e.Seq)
			return err
		})
	}
	appendType("x") // to a and b
	var first []store.Delivery
	read(t, s, func(ctx context.Context, r store.Reader) error {
		var err error
		first, err = r.PendingDeliveries(ctx, "a", 10)
		return err
	})
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		return tx.MarkDelivered(ctx, "a", []int64{first[0].ID}, 200, t0)
	})
	for range 5 {
		appendType("y") // to b alone
	}
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		if err := tx.SkipTo(ctx, "a", seqs[len(seqs)-1]); err != nil {
			return err
		}
		return tx.SkipTo(ctx, "a", seqs[0]) // never backwards
	})
	appendType("x")
	read(t, s, func(ctx context.Context, r store.Reader) error {
		pending, err := r.PendingDeliveries(ctx, "a", 10)
		if err != nil {
			return err
		}
		if len(pending) != 1 || pending[0].EventSeq != seqs[len(seqs)-1] {
			t.Errorf("pending to a = %+v, want the newest event's alone", pending)
		}
		b, err := r.PendingDeliveries(ctx, "b", 10)
		if err == nil && len(b) != 7 {
			t.Errorf("pending to b = %d, want 7 (its cursor did not move)", len(b))
		}
		return err
	})
}

// testDeliveryIDsFollowEvents: a delivery's id is store.DeliveryID of its
// event and its rank among the event's destinations, so ids order
// deliveries by event.
func testDeliveryIDsFollowEvents(t *testing.T, db NewDB) {
	s := setup(t, db)
	s.SetOutbox(outboxTo)
	var seqs []int64
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		for _, typ := range []string{"x", "y", "x"} {
			e := &store.Event{Type: typ, Actor: "core"}
			if err := tx.AppendEvent(ctx, e); err != nil {
				return err
			}
			seqs = append(seqs, e.Seq)
		}
		return nil
	})
	read(t, s, func(ctx context.Context, r store.Reader) error {
		for _, want := range []struct {
			seq  int64
			rank int
			dest string
		}{{seqs[0], 0, "a"}, {seqs[0], 1, "b"}, {seqs[1], 0, "b"}, {seqs[2], 0, "a"}, {seqs[2], 1, "b"}} {
			d, err := r.Delivery(ctx, store.DeliveryID(want.seq, want.rank))
			if err != nil {
				return err
			}
			if d.EventSeq != want.seq || d.Destination != want.dest {
				t.Errorf("delivery %d = event %d to %s, want event %d to %s", d.ID, d.EventSeq, d.Destination, want.seq, want.dest)
			}
		}
		return nil
	})
	many := make([]string, store.MaxDestinations+1)
	for i := range many {
		many[i] = fmt.Sprintf("d%d", i)
	}
	s.SetOutbox(func(*store.Event) []string { return many })
	if err := s.Update(context.Background(), func(tx store.Tx) error {
		return tx.AppendEvent(context.Background(), &store.Event{Type: "x", Actor: "core"})
	}); err == nil {
		t.Errorf("an event with %d destinations was stored, want an error", store.MaxDestinations+1)
	}
}

// testPurgeDeliveriesStopsAtTheFirstKept: deliveries are purged oldest
// first, by event, up to the first created at or after the bound, and no
// more than the limit.
func testPurgeDeliveriesStopsAtTheFirstKept(t *testing.T, db NewDB) {
	s := setup(t, db)
	s.SetOutbox(outboxTo)
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		for i := range 5 {
			if err := tx.AppendEvent(ctx, &store.Event{TS: t0.Add(time.Duration(i) * time.Hour), Type: "x", Actor: "core"}); err != nil {
				return err
			}
		}
		return nil
	})
	purge := func(before time.Time, limit int) int {
		var n int
		update(t, s, func(ctx context.Context, tx store.Tx) error {
			var err error
			n, err = tx.PurgeDeliveries(ctx, before, limit)
			return err
		})
		return n
	}
	// Two events before 1h30: a limit of 1 takes one event's row.
	if n := purge(t0.Add(90*time.Minute), 1); n != 1 {
		t.Errorf("PurgeDeliveries(1h30, 1) = %d, want 1", n)
	}
	if n := purge(t0.Add(90*time.Minute), 3); n != 1 {
		t.Errorf("PurgeDeliveries(1h30, 3) = %d, want the 1 left before 1h30", n)
	}
	if n := purge(t0.Add(90*time.Minute), 3); n != 0 {
		t.Errorf("PurgeDeliveries(1h30, 3) again = %d, want 0", n)
	}
	read(t, s, func(ctx context.Context, r store.Reader) error {
		a, err := r.Deliveries(ctx, store.DeliveryQuery{Destination: "a", Oldest: true})
		if err == nil && (len(a) != 3 || !a[0].CreatedTS.Equal(t0.Add(2*time.Hour))) {
			t.Errorf("deliveries to a left = %+v, want the three from 2h", a)
		}
		return err
	})
	if n := purge(t0.Add(24*time.Hour), 100); n != 3 {
		t.Errorf("PurgeDeliveries(all) = %d, want the 3 left", n)
	}
	if n := purge(t0.Add(24*time.Hour), 100); n != 0 {
		t.Errorf("PurgeDeliveries(empty) = %d, want 0", n)
	}
}

// testLazyCommitKeepsWritesButNoEvent: an Update with a lazy commit (the
// outbox worker's record of deliveries it sent) commits its writes; one
// that appends an event fails with ErrLazyEvent and writes nothing.
func testLazyCommitKeepsWritesButNoEvent(t *testing.T, db NewDB) {
	s := setup(t, db)
	s.SetOutbox(outboxTo)
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		return tx.AppendEvent(ctx, &store.Event{Type: "y", Actor: "core"})
	})
	var d *store.Delivery
	read(t, s, func(ctx context.Context, r store.Reader) error {
		var err error
		d, err = store.NextDelivery(ctx, r, "b")
		return err
	})
	// It failed once before, so it keeps a row of its own.
	d.Attempts, d.LastStatus, d.LastError = 1, 503, "503 Service Unavailable"
	update(t, s, func(ctx context.Context, tx store.Tx) error { return tx.UpdateDelivery(ctx, d) })
	ctx := store.WithLazyCommit(context.Background())
	if err := s.Update(ctx, func(tx store.Tx) error {
		return tx.MarkDelivered(ctx, "b", []int64{d.ID}, 204, t0)
	}); err != nil {
		t.Fatalf("lazy Update = %v", err)
	}
	var latest int64
	read(t, s, func(ctx context.Context, r store.Reader) error {
		got, err := r.Delivery(ctx, d.ID)
		if err == nil && got.State != store.DeliveryDelivered {
			t.Errorf("after a lazy commit, delivery = %+v, want delivered", got)
		}
		latest, err = r.LatestSeq(ctx)
		return err
	})
	err := s.Update(ctx, func(tx store.Tx) error {
		if err := tx.UpdateDelivery(ctx, &store.Delivery{ID: d.ID, Destination: "b", EventSeq: d.EventSeq,
			State: store.DeliveryPending, Attempts: 5, LastStatus: 200, CreatedTS: d.CreatedTS}); err != nil {
			return err
		}
		return tx.AppendEvent(ctx, &store.Event{Type: "z", Actor: "core"})
	})
	if !errors.Is(err, store.ErrLazyEvent) {
		t.Errorf("lazy Update appending an event = %v, want ErrLazyEvent", err)
	}
	read(t, s, func(ctx context.Context, r store.Reader) error {
		got, err := r.Delivery(ctx, d.ID)
		if err == nil && got.LastStatus != 204 {
			t.Errorf("the refused lazy Update changed the delivery: %+v", got)
		}
		seq, err := r.LatestSeq(ctx)
		if err == nil && seq != latest {
			t.Errorf("the refused lazy Update stored an event: latest %d, was %d", seq, latest)
		}
		return err
	})
	// An ordinary Update after a lazy one is not lazy.
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		return tx.AppendEvent(ctx, &store.Event{Type: "z", Actor: "core"})
	})
}

// pendingToB is a store routing events as outboxTo does, n "y" events
// appended a minute apart from t0, and their n pending deliveries to b.
func pendingToB(t *testing.T, db NewDB, n int) (store.Store, []store.Delivery) {
	t.Helper()
	s := setup(t, db)
	s.SetOutbox(outboxTo)
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		for i := range n {
			if err := tx.AppendEvent(ctx, &store.Event{TS: t0.Add(time.Duration(i) * time.Minute), Type: "y", Actor: "core"}); err != nil {
				return err
			}
		}
		return nil
	})
	var ds []store.Delivery
	read(t, s, func(ctx context.Context, r store.Reader) error {
		var err error
		ds, err = r.PendingDeliveries(ctx, "b", 10)
		return err
	})
	if len(ds) != n {
		t.Fatalf("pending = %d, want %d", len(ds), n)
	}
	return s, ds
}
