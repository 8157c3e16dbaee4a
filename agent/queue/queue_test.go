package queue

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/musterhq/muster/shared/action"
)

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func setup(t *testing.T) (*Queue, *clock, string) {
	t.Helper()
	dir := t.TempDir()
	q, err := Open(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	c := &clock{t: time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)}
	q.SetClock(c.now)
	t.Cleanup(func() { q.Close() })
	return q, c, dir
}

func newAction(kind, args string) *action.Action {
	return &action.Action{ID: action.NewID(), Kind: kind, Args: json.RawMessage(args), Origin: action.OriginAgent, TimeoutS: 60}
}

func enqueue(t *testing.T, q *Queue, a *action.Action) *action.Action {
	t.Helper()
	rec, created, err := q.Enqueue(context.Background(), a, "test")
	if err != nil || !created {
		t.Fatalf("Enqueue = %v, created %v", err, created)
	}
	return rec
}

func TestEnqueueIdempotenceConflictAndGone(t *testing.T) {
	t.Parallel()
	q, c, _ := setup(t)
	ctx := context.Background()
	a := newAction("muster.io/debug.sleep", `{"seconds":1}`)
	rec := enqueue(t, q, a)
	if rec.State != action.New {
		t.Fatalf("state = %s", rec.State)
	}

	same := *a
	same.Args = json.RawMessage(`{ "seconds": 1 }`)
	got, created, err := q.Enqueue(ctx, &same, "test")
	if err != nil || created || got.ID != a.ID {
		t.Fatalf("same content: created=%v err=%v", created, err)
	}

	other := *a
	other.Args = json.RawMessage(`{"seconds":2}`)
	_, _, err = q.Enqueue(ctx, &other, "test")
	var ce *ConflictError
	if !errors.As(err, &ce) || !errors.Is(err, ErrConflict) || string(ce.Existing.Args) != `{"seconds":1}` {
		t.Fatalf("other content: %v", err)
	}

	// Finish it, let retention_max pass, purge: the id is now a tombstone.
	claimAndFinish(t, q, action.Done)
	c.add(48 * time.Hour)
	n, _, err := q.Purge(ctx, Retention{Retention: time.Hour, Max: 24 * time.Hour, Tombstones: 90 * 24 * time.Hour})
	if err != nil || n != 1 {
		t.Fatalf("purge = %d, %v", n, err)
	}
	if _, _, err := q.Enqueue(ctx, a, "test"); !errors.Is(err, ErrGone) {
		t.Fatalf("enqueue of a purged id = %v, want ErrGone", err)
	}
}

func claimAndFinish(t *testing.T, q *Queue, st action.State) *action.Action {
	t.Helper()
	a, _, _, err := q.Claim(context.Background(), "runner")
	if err != nil || a == nil {
		t.Fatalf("claim: %v %v", a, err)
	}
	rec, err := q.SaveStep(context.Background(), a.ID, "runner", Step{State: st, Output: "out"})
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

func TestClaimOrderAndSingleRunning(t *testing.T) {
	t.Parallel()
	q, c, _ := setup(t)
	ctx := context.Background()
	base := c.now()
	// Accepted in this order, but b was created earlier: creation order wins,
	// acceptance order breaks ties.
	a := newAction("k.io/a", `{}`)
	a.CreatedTS = base.Add(time.Second)
	b := newAction("k.io/b", `{}`)
	b.CreatedTS = base
	d := newAction("k.io/d", `{}`)
	d.CreatedTS = base.Add(time.Second)
	for _, x := range []*action.Action{a, b, d} {
		enqueue(t, q, x)
	}
	var order []string
	for i := 0; i < 3; i++ {
		got, resumed, _, err := q.Claim(ctx, "runner")
		if err != nil || got == nil || resumed {
			t.Fatalf("claim %d: %v %v resumed=%v", i, got, err, resumed)
		}
		// While it runs, Claim hands back the same RUNNING action, never a second one.
		again, resumed, _, err := q.Claim(ctx, "runner")
		if err != nil || again.ID != got.ID || !resumed {
			t.Fatalf("second claim while running: %v resumed=%v err=%v", again, resumed, err)
		}
		counts, _ := q.Counts(ctx)
		if counts[action.Running] != 1 {
			t.Fatalf("running = %d", counts[action.Running])
		}
		order = append(order, got.Kind)
		if _, err := q.SaveStep(ctx, got.ID, "runner", Step{State: action.Done}); err != nil {
			t.Fatal(err)
		}
	}
	if want := []string{"k.io/b", "k.io/a", "k.io/d"}; order[0] != want[0] || order[1] != want[1] || order[2] != want[2] {
		t.Fatalf("order = %v, want %v", order, want)
	}
	if got, _, _, err := q.Claim(ctx, "runner"); got != nil || err != nil {
		t.Fatalf("empty queue claim = %v, %v", got, err)
	}
}

func TestDatabaseRefusesTwoRunning(t *testing.T) {
	t.Parallel()
	q, _, _ := setup(t)
	ctx := context.Background()
	enqueue(t, q, newAction("k.io/a", `{}`))
	enqueue(t, q, newAction("k.io/b", `{}`))
	if _, _, _, err := q.Claim(ctx, "runner"); err != nil {
		t.Fatal(err)
	}
	_, err := q.db.W.ExecContext(ctx, `UPDATE actions SET state = 'RUNNING' WHERE state = 'NEW'`)
	if err == nil {
		t.Fatal("the database accepted a second RUNNING action")
	}
}

func TestChangesCursorAndPaging(t *testing.T) {
	t.Parallel()
	q, _, _ := setup(t)
	ctx := context.Background()
	var ids []string
	for i := 0; i < 5; i++ {
		ids = append(ids, enqueue(t, q, newAction("k.io/a", `{}`)).ID)
	}
	page, next, more, err := q.Changes(ctx, 0, 3)
	if err != nil || len(page) != 3 || !more {
		t.Fatalf("page 1: %d more=%v err=%v", len(page), more, err)
	}
	page2, next2, more, err := q.Changes(ctx, next, 3)
	if err != nil || len(page2) != 2 || more {
		t.Fatalf("page 2: %d more=%v err=%v", len(page2), more, err)
	}
	if page[0].ID != ids[0] || page2[1].ID != ids[4] {
		t.Fatal("changes not in change order")
	}
	// Nothing changed: an empty page and the same cursor.
	page3, next3, _, err := q.Changes(ctx, next2, 3)
	if err != nil || len(page3) != 0 || next3 != next2 {
		t.Fatalf("idle: %d, cursor %d → %d", len(page3), next2, next3)
	}
	// A change to the first action brings it back, alone.
	claimAndFinish(t, q, action.Failed)
	page4, _, _, err := q.Changes(ctx, next2, 10)
	if err != nil || len(page4) != 1 || page4[0].ID != ids[0] || page4[0].State != action.Failed {
		t.Fatalf("after change: %+v %v", page4, err)
	}
}

func TestSaveStepWithoutChangeWritesNothing(t *testing.T) {
	t.Parallel()
	q, _, _ := setup(t)
	ctx := context.Background()
	enqueue(t, q, newAction("k.io/a", `{}`))
	a, _, _, _ := q.Claim(ctx, "runner")
	if _, err := q.SaveStep(ctx, a.ID, "runner", Step{State: action.Running, Progress: json.RawMessage(`{"n":1}`)}); err != nil {
		t.Fatal(err)
	}
	_, before, _, _ := q.Changes(ctx, 0, 100)
	if _, err := q.SaveStep(ctx, a.ID, "runner", Step{State: action.Running, Progress: json.RawMessage(`{"n":1}`)}); err != nil {
		t.Fatal(err)
	}
	_, after, _, _ := q.Changes(ctx, 0, 100)
	if before != after {
		t.Fatalf("an unchanged step bumped the change sequence %d → %d", before, after)
	}
	rec, _ := q.Get(ctx, a.ID)
	if string(rec.Progress) != `{"n":1}` {
		t.Fatalf("progress = %s", rec.Progress)
	}
}

func TestFinalStateNeverChanges(t *testing.T) {
	t.Parallel()
	q, _, _ := setup(t)
	ctx := context.Background()
	enqueue(t, q, newAction("k.io/a", `{}`))
	rec := claimAndFinish(t, q, action.Done)
	if _, err := q.SaveStep(ctx, rec.ID, "runner", Step{State: action.Failed}); !errors.Is(err, action.ErrTransition) {
		t.Fatalf("step on a final action = %v", err)
	}
	if _, _, err := q.Cancel(ctx, rec.ID, "api"); !errors.Is(err, ErrFinal) {
		t.Fatalf("cancel of a final action = %v", err)
	}
	got, _ := q.Get(ctx, rec.ID)
	if got.State != action.Done {
		t.Fatalf("state = %s", got.State)
	}
}

func TestCancel(t *testing.T) {
	t.Parallel()
	q, _, _ := setup(t)
	ctx := context.Background()
	first := enqueue(t, q, newAction("k.io/a", `{}`))
	second := enqueue(t, q, newAction("k.io/b", `{}`))
	if _, _, _, err := q.Claim(ctx, "runner"); err != nil {
		t.Fatal(err)
	}
	rec, running, err := q.Cancel(ctx, second.ID, "api")
	if err != nil || running || rec.State != action.Cancelled || rec.StateReason != action.ReasonCancelled {
		t.Fatalf("cancel NEW: %+v running=%v err=%v", rec, running, err)
	}
	rec, running, err = q.Cancel(ctx, first.ID, "api")
	if err != nil || !running || rec.State != action.Running {
		t.Fatalf("cancel RUNNING: %+v running=%v err=%v", rec, running, err)
	}
	// The request survives: a resumed claim reports it.
	_, resumed, cancelRequested, err := q.Claim(ctx, "runner")
	if err != nil || !resumed || !cancelRequested {
		t.Fatalf("claim after cancel: resumed=%v cancel=%v err=%v", resumed, cancelRequested, err)
	}
	if _, _, err := q.Cancel(ctx, action.NewID(), "api"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("cancel unknown = %v", err)
	}
	full, _ := q.Get(ctx, second.ID)
	if len(full.History) != 2 || full.History[1].To != action.Cancelled {
		t.Fatalf("history = %+v", full.History)
	}
}

func TestRetention(t *testing.T) {
	t.Parallel()
	r := Retention{Retention: 7 * 24 * time.Hour, Max: 30 * 24 * time.Hour, Tombstones: 90 * 24 * time.Hour}
	cases := []struct {
		name       string
		age        time.Duration
		acked      bool
		wantPurged bool
	}{
		{"young acked", 6 * 24 * time.Hour, true, false},
		{"old acked", 8 * 24 * time.Hour, true, true},
		{"old not acked", 8 * 24 * time.Hour, false, false},
		{"past max not acked", 31 * 24 * time.Hour, false, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			q, c, _ := setup(t)
			ctx := context.Background()
			rec := enqueue(t, q, newAction("k.io/a", `{}`))
			claimAndFinish(t, q, action.Done)
			_, cursor, _, _ := q.Changes(ctx, 0, 100)
			if tc.acked {
				if err := q.Ack(ctx, cursor); err != nil {
					t.Fatal(err)
				}
			}
			c.add(tc.age)
			n, _, err := q.Purge(ctx, r)
			if err != nil {
				t.Fatal(err)
			}
			if (n == 1) != tc.wantPurged {
				t.Fatalf("purged %d, want purged=%v", n, tc.wantPurged)
			}
			gone, _ := q.Tombstoned(ctx, rec.ID)
			if gone != tc.wantPurged {
				t.Fatalf("tombstone = %v", gone)
			}
			if !tc.wantPurged {
				return
			}
			c.add(91 * 24 * time.Hour)
			if _, tn, err := q.Purge(ctx, r); err != nil || tn != 1 {
				t.Fatalf("tombstone purge = %d, %v", tn, err)
			}
		})
	}
}

func TestUnfinishedNeverPurged(t *testing.T) {
	t.Parallel()
	q, c, _ := setup(t)
	ctx := context.Background()
	enqueue(t, q, newAction("k.io/a", `{}`))
	enqueue(t, q, newAction("k.io/b", `{}`))
	if _, _, _, err := q.Claim(ctx, "runner"); err != nil {
		t.Fatal(err)
	}
	c.add(365 * 24 * time.Hour)
	n, _, err := q.Purge(ctx, Retention{Retention: time.Hour, Max: time.Hour, Tombstones: time.Hour})
	if err != nil || n != 0 {
		t.Fatalf("purged %d unfinished records (err %v)", n, err)
	}
}

func TestAckOnlyMovesForward(t *testing.T) {
	t.Parallel()
	q, _, _ := setup(t)
	ctx := context.Background()
	enqueue(t, q, newAction("k.io/a", `{}`))
	enqueue(t, q, newAction("k.io/a", `{}`))
	if err := q.Ack(ctx, 2); err != nil {
		t.Fatal(err)
	}
	if err := q.Ack(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if err := q.Ack(ctx, 1000); err != nil { // beyond the sequence: clipped
		t.Fatal(err)
	}
	var acked int64
	if err := q.db.R.QueryRow(`SELECT acked_seq FROM counters`).Scan(&acked); err != nil || acked != 2 {
		t.Fatalf("acked = %d, %v", acked, err)
	}
}

func TestStoreIDSurvivesReopenAndChangesWithNewDatabase(t *testing.T) {
	t.Parallel()
	q, _, dir := setup(t)
	id := q.StoreID()
	if !action.ValidID(id) {
		t.Fatalf("store id %q", id)
	}
	q.Close()
	q2, err := Open(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	defer q2.Close()
	if q2.StoreID() != id {
		t.Fatal("store id changed on reopen")
	}
	q3, err := Open(context.Background(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer q3.Close()
	if q3.StoreID() == id {
		t.Fatal("a new database has the old store id")
	}
}

// An idle runner asks for work every second: on an empty queue that must not
// need the single writer connection (it would contend with every push).
func TestClaimOnAnIdleQueueDoesNotTakeTheWriter(t *testing.T) {
	t.Parallel()
	q, _, _ := setup(t)
	ctx := context.Background()
	// Hold the only writer connection in an open transaction.
	tx, err := q.db.W.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	short, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if a, _, _, err := q.Claim(short, "runner"); a != nil || err != nil {
		t.Fatalf("claim on an empty queue while the writer is busy: %v %v", a, err)
	}
}

func TestOutputsAreKeptWithTheFinalState(t *testing.T) {
	t.Parallel()
	q, _, dir := setup(t)
	ctx := context.Background()
	a := enqueue(t, q, newAction("k.io/a", `{}`))
	if _, _, _, err := q.Claim(ctx, "runner"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := q.Finish(ctx, a.ID, "runner", Step{State: action.Done, Outputs: json.RawMessage(`{"previous":"1.2"}`)}); err != nil {
		t.Fatal(err)
	}
	q.Close()
	q2, err := Open(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer q2.Close()
	got, err := q2.Get(ctx, a.ID)
	if err != nil || string(got.Outputs) != `{"previous":"1.2"}` {
		t.Fatalf("outputs after reopening: %s, %v", got.Outputs, err)
	}
}

// closed reports whether ch is closed now.
func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// TestChangedIsClosedByEveryCommittedChange: a channel taken from Changed
// is closed by the next change that moves the change sequence (queued,
// claimed, a step that changed something, finished, cancelled) and by
// nothing else, so a blocking GET of the changes wakes for each of them.
func TestChangedIsClosedByEveryCommittedChange(t *testing.T) {
	t.Parallel()
	q, _, _ := setup(t)
	ctx := context.Background()
	step := func(name string, wantWake bool, fn func() error) {
		t.Helper()
		ch := q.Changed()
		if err := fn(); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if got := closed(ch); got != wantWake {
			t.Fatalf("%s: waiter woken %v, want %v", name, got, wantWake)
		}
	}
	a := newAction("muster.io/debug.sleep", `{"seconds":1}`)
	b := newAction("muster.io/debug.ping", `{}`)
	step("enqueue", true, func() error { _, _, err := q.Enqueue(ctx, a, "test"); return err })
	step("repeat enqueue", false, func() error { _, _, err := q.Enqueue(ctx, a, "test"); return err })
	step("enqueue another", true, func() error { _, _, err := q.Enqueue(ctx, b, "test"); return err })
	step("claim", true, func() error { _, _, _, err := q.Claim(ctx, "n1"); return err })
	step("resume", false, func() error { _, _, _, err := q.Claim(ctx, "n1"); return err })
	step("step with progress", true, func() error {
		_, err := q.SaveStep(ctx, a.ID, "n1", Step{State: action.Running, Progress: json.RawMessage(`{"d":1}`)})
		return err
	})
	step("step without change", false, func() error {
		_, err := q.SaveStep(ctx, a.ID, "n1", Step{State: action.Running, Progress: json.RawMessage(`{"d":1}`)})
		return err
	})
	step("cancel of the running one", false, func() error { _, _, err := q.Cancel(ctx, a.ID, "test"); return err })
	step("finish", true, func() error { _, _, err := q.Finish(ctx, a.ID, "n1", Step{State: action.Done}); return err })
	c := newAction("muster.io/debug.ping", `{}`)
	enqueue(t, q, c)
	step("cancel of a new one", true, func() error { _, _, err := q.Cancel(ctx, c.ID, "test"); return err })
	step("ack", false, func() error { return q.Ack(ctx, 1) })
}

// TestChangedLosesNoWakeup: readers that take Changed before reading the
// changes after their cursor, and wait on it when there are none, see
// every change of writers that commit meanwhile, however the two
// interleave: none waits for a change that was already committed.
func TestChangedLosesNoWakeup(t *testing.T) {
	t.Parallel()
	q, _, _ := setup(t)
	ctx := context.Background()
	const readers, writes = 4, 50
	var wg sync.WaitGroup
	seen := make([]int, readers)
	for r := range readers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var cursor int64
			deadline := time.After(30 * time.Second)
			for seen[r] < writes {
				ch := q.Changed()
				acts, next, _, err := q.Changes(ctx, cursor, 1000)
				if err != nil {
					t.Error(err)
					return
				}
				seen[r] += len(acts)
				cursor = next
				if len(acts) > 0 {
					continue
				}
				select {
				case <-ch:
				case <-deadline:
					t.Errorf("reader %d saw %d of %d changes: a wake-up was lost", r, seen[r], writes)
					return
				}
			}
		}()
	}
	for range writes {
		enqueue(t, q, newAction("muster.io/debug.ping", `{}`))
	}
	wg.Wait()
}
