package notify

import (
	"context"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/core/store/sqlite"
	"github.com/musterhq/muster/shared/testwait"
)

// reload does what the core does on SIGHUP: the worker's destinations,
// then the store's outbox.
func (s setupOut) reload(t *testing.T, dests []Destination) Change {
	t.Helper()
	ch, err := s.w.Reload(dests, true)
	if err != nil {
		t.Fatalf("reload: %v", err)
	}
	s.st.SetOutbox(Route(dests))
	return ch
}

// deliveries returns every delivery of a destination, oldest first.
func (s setupOut) deliveries(t *testing.T, dest string) []store.Delivery {
	t.Helper()
	var ds []store.Delivery
	if err := s.st.Read(context.Background(), func(r store.Reader) error {
		var err error
		ds, err = r.Deliveries(context.Background(), store.DeliveryQuery{Destination: dest, Oldest: true, Limit: 1000})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return ds
}

// A destination added by a reload gets the next events, signed with its
// secret; a destination whose secret file changed signs the next
// deliveries with the new secret; one whose events changed gets only those.
func TestReloadAddsAndChangesDestinations(t *testing.T) {
	t.Parallel()
	a, b := newReceiver(t, "old-secret"), newReceiver(t, "b-secret")
	aSecret := writeSecret(t, "old-secret", 0o600)
	orig := []Destination{{Name: "a", URL: a.srv.URL, Format: FormatJSON, SecretFile: aSecret}}
	s := setup(t, orig)
	appendEvents(t, s.st, 1, "run.paused")
	testwait.For(t, "a has the first event", func() bool { ids, _ := a.got(); return len(ids) == 1 })

	if err := os.WriteFile(aSecret, []byte("new-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	a.secret.Store(ptr("new-secret"))
	next := []Destination{
		{Name: "a", URL: a.srv.URL, Format: FormatJSON, SecretFile: aSecret, Events: []string{"run.*"}},
		{Name: "b", URL: b.srv.URL, Format: FormatJSON, SecretFile: writeSecret(t, "b-secret", 0o600)},
	}
	ch := s.reload(t, next)
	if !slices.Equal(ch.Added, []string{"b"}) || !slices.Equal(ch.Changed, []string{"a"}) || len(ch.Removed) != 0 {
		t.Fatalf("change = %+v, want b added, a changed", ch)
	}
	if got := s.w.Destinations(); len(got) != 2 || got[1].Name != "b" {
		t.Fatalf("destinations in use = %+v", got)
	}
	seqs := appendEvents(t, s.st, 1, "run.paused")
	seqs = append(seqs, appendEvents(t, s.st, 1, "node.down")...)
	testwait.For(t, "b has both new events", func() bool { ids, _ := b.got(); return len(ids) == 2 })
	testwait.For(t, "a has the run.paused", func() bool { ids, _ := a.got(); return len(ids) == 2 })
	if _, got := b.got(); !slices.Equal(got, seqs) {
		t.Errorf("b got events %v, want %v", got, seqs)
	}
	if ds := s.deliveries(t, "a"); len(ds) != 2 {
		t.Errorf("a has %d deliveries, want 2: node.down no longer matches its events", len(ds))
	}
	if n := a.bad.Load() + b.bad.Load(); n != 0 {
		t.Errorf("%d deliveries failed the signature check: not signed with the reloaded secret", n)
	}
}

func ptr[T any](v T) *T { return &v }

// Deliveries pending for a destination a reload removed are made dead with
// a reason, one notify.dead event says how many, and its URL gets nothing
// more, while the destinations that stay go on.
func TestReloadRemovedDestinationDeliveriesAreDeadNeverSent(t *testing.T) {
	t.Parallel()
	gone, stay := newReceiver(t, "s"), newReceiver(t, "s")
	gone.status.Store(500)
	secret := writeSecret(t, "s", 0o600)
	keep := Destination{Name: "stay", URL: stay.srv.URL, Format: FormatJSON, SecretFile: secret}
	s := setup(t, []Destination{keep, {Name: "gone", URL: gone.srv.URL, Format: FormatJSON, SecretFile: secret}})
	appendEvents(t, s.st, 3, "run.paused")
	testwait.For(t, "a refused try", func() bool { return gone.tries.Load() > 0 })

	ch := s.reload(t, []Destination{keep})
	if !slices.Equal(ch.Removed, []string{"gone"}) {
		t.Fatalf("change = %+v, want gone removed", ch)
	}
	testwait.For(t, "gone's deliveries dead", func() bool {
		ds := s.deliveries(t, "gone")
		return len(ds) == 3 && !slices.ContainsFunc(ds, func(d store.Delivery) bool { return d.State != store.DeliveryDead })
	})
	for _, d := range s.deliveries(t, "gone") {
		if d.LastError != ReasonRemoved {
			t.Errorf("delivery %d: last error %q, want %q", d.ID, d.LastError, ReasonRemoved)
		}
	}
	tries := gone.tries.Load()
	var dead []store.Event
	testwait.For(t, "the notify.dead event", func() bool {
		dead = nil
		_ = s.st.Read(context.Background(), func(r store.Reader) error {
			evs, err := r.Events(context.Background(), 0, 100)
			for _, e := range evs {
				if e.Type == store.EventNotifyDead {
					dead = append(dead, e)
				}
			}
			return err
		})
		return len(dead) > 0
	})
	if len(dead) != 1 || dead[0].Data["destination"] != "gone" || dead[0].Data["dropped"] != float64(3) {
		t.Errorf("notify.dead events = %+v, want one for gone, 3 dropped", dead)
	}
	// The stayer gets what follows (the notify.dead event too); the
	// removed destination's URL nothing.
	appendEvents(t, s.st, 2, "run.paused")
	testwait.For(t, "stay has every event", func() bool { ids, _ := stay.got(); return len(ids) == 3+1+2 })
	if n := gone.tries.Load(); n != tries {
		t.Errorf("the removed destination's URL got %d more tries", n-tries)
	}
	if ds := s.deliveries(t, "gone"); len(ds) != 3 {
		t.Errorf("%d deliveries for the removed destination, want the 3 from before", len(ds))
	}
}

// A reload whose secret file cannot be read changes nothing.
func TestReloadWithABadSecretKeepsTheDestinationsInUse(t *testing.T) {
	t.Parallel()
	rc := newReceiver(t, "s")
	orig := []Destination{{Name: "a", URL: rc.srv.URL, Format: FormatJSON, SecretFile: writeSecret(t, "s", 0o600)}}
	s := setup(t, orig)
	bad := []Destination{{Name: "b", URL: rc.srv.URL, Format: FormatJSON, SecretFile: writeSecret(t, "s", 0o644)}}
	if _, err := s.w.Reload(bad, true); err == nil {
		t.Fatal("a world-readable secret was taken")
	}
	if got := s.w.Destinations(); len(got) != 1 || got[0].Name != "a" {
		t.Fatalf("destinations after a failed reload = %+v", got)
	}
	appendEvents(t, s.st, 1, "run.paused")
	testwait.For(t, "a still delivers", func() bool { ids, _ := rc.got(); return len(ids) == 1 })
}

// A destination removed then added again under the same name delivers its
// new deliveries, one loop at a time.
func TestReloadRemoveThenAddAgain(t *testing.T) {
	t.Parallel()
	rc := newReceiver(t, "s")
	d := Destination{Name: "a", URL: rc.srv.URL, Format: FormatJSON, SecretFile: writeSecret(t, "s", 0o600)}
	s := setup(t, []Destination{d})
	s.reload(t, nil)
	s.reload(t, []Destination{d})
	seqs := appendEvents(t, s.st, 3, "run.paused")
	testwait.For(t, "three deliveries", func() bool { ids, _ := rc.got(); return len(ids) == 3 })
	if _, got := rc.got(); !slices.Equal(got, seqs) {
		t.Errorf("got %v, want %v in order", got, seqs)
	}
}

// The events of a batch are read whether they lie close together (one
// read of their range) or apart (one by one); an event no longer stored
// is nil.
func TestReadEventsOfABatch(t *testing.T) {
	t.Parallel()
	s := setup(t, nil)
	seqs := appendEvents(t, s.st, 12, "run.paused")
	for _, tc := range []struct {
		name string
		seqs []int64
	}{
		{"close together", []int64{seqs[1], seqs[2], seqs[4]}},
		{"apart", []int64{seqs[0], seqs[11]}},
		{"one", []int64{seqs[5]}},
		{"one gone", []int64{seqs[10], seqs[11], seqs[11] + 1}},
	} {
		var batch []store.Delivery
		for _, q := range tc.seqs {
			batch = append(batch, store.Delivery{EventSeq: q})
		}
		events := map[int64]*store.Event{}
		if err := s.st.Read(context.Background(), func(r store.Reader) error {
			return readEvents(context.Background(), r, batch, events)
		}); err != nil {
			t.Fatal(err)
		}
		if len(events) != len(tc.seqs) {
			t.Errorf("%s: %d events read, want %d", tc.name, len(events), len(tc.seqs))
		}
		for _, q := range tc.seqs {
			e, ok := events[q]
			switch {
			case !ok:
				t.Errorf("%s: event %d not read", tc.name, q)
			case q > seqs[11] && e != nil:
				t.Errorf("%s: event %d does not exist, read %+v", tc.name, q, e)
			case q <= seqs[11] && (e == nil || e.Seq != q):
				t.Errorf("%s: event %d read as %+v", tc.name, q, e)
			}
		}
	}
}

// Deliveries pending for a destination this worker never had configured
// (another replica added it and this one has not reloaded yet, or it was
// removed while the core was stopped) are left pending and not sent: the
// worker drops only what a reload of its own removed.
func TestADestinationOnlyUnknownHereKeepsItsDeliveries(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	st.SetOutbox(Route([]Destination{{Name: "theirs"}, {Name: "gone"}}))
	appendEvents(t, st, 2, "run.paused")
	st.SetOutbox(nil)
	w, err := New(Config{Poll: 20 * time.Millisecond, AllowLoopback: true, Destinations: []Destination{{Name: "gone", URL: "https://127.0.0.1:1/hook"}}}, st, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	// A reload here removes "gone": its deliveries die. "theirs" was never
	// configured here: its deliveries stay pending.
	if _, err := w.Reload(nil, false); err != nil {
		t.Fatal(err)
	}
	s := setupOut{st, w}
	testwait.For(t, "gone's deliveries dead", func() bool {
		ds := s.deliveries(t, "gone")
		return len(ds) == 2 && ds[0].State == store.DeliveryDead && ds[1].State == store.DeliveryDead
	})
	// Three wake-ups through a buffer of one: when the third is taken in,
	// the pass for the first has ended.
	for range 3 {
		w.retireWake <- struct{}{}
	}
	for _, d := range s.deliveries(t, "theirs") {
		if d.State != store.DeliveryPending {
			t.Fatalf("a delivery of a destination unknown here is %s, want pending", d.State)
		}
	}
}
