package actions

import (
	"context"
	"testing"
	"time"

	"github.com/musterhq/muster/core/approval"
	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/action"
)

// The approval window of an action with a not_before counts from it: it
// can be approved, and does not expire, until the TTL after not_before.
func TestApprovalExpiryCountsFromNotBefore(t *testing.T) {
	t.Parallel()
	e := setup(t)
	nb := e.now.Add(48 * time.Hour)
	var later, plain *store.Record
	e.update(func(ctx context.Context, tx store.Tx) error {
		var err error
		if later, err = e.r.Create(ctx, tx, Request{ClusterID: cluster, NodeID: "n1", Kind: "muster.io/debug.ping", NotBefore: &nb}, alice); err != nil {
			return err
		}
		plain, err = e.r.Create(ctx, tx, Request{ClusterID: cluster, NodeID: "n1", Kind: "muster.io/debug.ping"}, alice)
		return err
	})
	e.now = e.now.Add(30 * time.Hour) // past the 24 h TTL from creation, not from not_before
	var out []*store.Record
	e.update(func(ctx context.Context, tx store.Tx) error {
		var err error
		out, err = e.r.ExpireApprovals(ctx, tx)
		return err
	})
	if len(out) != 1 || out[0].ID != plain.ID {
		t.Fatalf("expired %v, want only the action without not_before", out)
	}
	e.update(func(ctx context.Context, tx store.Tx) error {
		rec, err := e.r.Approve(ctx, tx, later.ID, bob)
		if err == nil && rec.ApprovalDigest != approval.Digest(&rec.Action) {
			t.Error("the digest does not match")
		}
		return err
	})
	rec, _ := e.get(later.ID)
	if rec.State != action.PendingSchedule || rec.NotBefore == nil || !rec.NotBefore.Equal(nb) {
		t.Fatalf("approved: %s, not_before %v", rec.State, rec.NotBefore)
	}
	// The digest covers not_before: moving it voids the approval.
	moved := rec.Action
	moved.NotBefore = action.TimePtr(nb.Add(time.Hour))
	if approval.Digest(&moved) == rec.ApprovalDigest {
		t.Fatal("the digest does not cover not_before")
	}
}

// schedule_ttl counts from not_before, and never ends an action that waits
// for its window or the end of a freeze.
func TestScheduleTTLSparesWhatWaitsForItsTime(t *testing.T) {
	t.Parallel()
	e := setup(t)
	var windowed, later, stuck string
	e.update(func(ctx context.Context, tx store.Tx) error {
		for i, p := range []*string{&windowed, &later, &stuck} {
			rec, err := e.childOf(ctx, tx, []string{"windowed", "later", "stuck"}[i])
			if err != nil {
				return err
			}
			*p = rec.ID
		}
		w, err := tx.Action(ctx, windowed)
		if err != nil {
			return err
		}
		if err := Write(ctx, tx, Hold(w, "outside the maintenance window; next opens 2026-11-30T02:00:00Z", e.now)); err != nil {
			return err
		}
		l, err := tx.Action(ctx, later)
		if err != nil {
			return err
		}
		l.NotBefore = action.TimePtr(e.now.Add(2 * time.Hour))
		return tx.UpdateAction(ctx, l)
	})
	e.now = e.now.Add(2 * time.Hour) // past the 1 h schedule_ttl
	var out []*store.Record
	e.update(func(ctx context.Context, tx store.Tx) error {
		var err error
		out, err = e.r.ExpireSchedules(ctx, tx)
		return err
	})
	if len(out) != 1 || out[0].ID != stuck {
		t.Fatalf("expired %d action(s), want only the one waiting for nothing", len(out))
	}
	e.now = e.now.Add(61 * time.Minute) // an hour past not_before
	e.update(func(ctx context.Context, tx store.Tx) error {
		var err error
		out, err = e.r.ExpireSchedules(ctx, tx)
		return err
	})
	if len(out) != 1 || out[0].ID != later {
		t.Fatalf("expired %d action(s), want the one past its not_before by the TTL", len(out))
	}
	if rec, _ := e.get(windowed); rec.State != action.PendingSchedule {
		t.Fatalf("the action waiting for its window was ended: %s", rec.State)
	}
}

// An urgent mark needs an approver other than the requester and a reason,
// and is refused once the action left the core.
func TestMarkUrgent(t *testing.T) {
	t.Parallel()
	e := setup(t)
	var id string
	e.update(func(ctx context.Context, tx store.Tx) error {
		rec, err := e.r.Create(ctx, tx, Request{ClusterID: cluster, NodeID: "n1", Kind: "muster.io/debug.ping"}, alice)
		id = rec.ID
		return err
	})
	for _, c := range []struct {
		by   Actor
		fail bool
	}{{Actor{Name: "alice", Note: "x"}, true}, {Actor{Name: "bob"}, true}, {Actor{Name: "bob", Note: "disk full"}, false}} {
		err := e.st.Update(context.Background(), func(tx store.Tx) error {
			_, err := e.r.MarkUrgent(context.Background(), tx, id, c.by)
			return err
		})
		if (err != nil) != c.fail {
			t.Fatalf("%+v: %v", c.by, err)
		}
	}
	rec, evs := e.get(id)
	if rec.Urgent != "disk full" || evs[len(evs)-1].Type != store.EventActionUrgent || evs[len(evs)-1].Actor != "bob" {
		t.Fatalf("urgent %q, events %+v", rec.Urgent, evs)
	}
	e.update(func(ctx context.Context, tx store.Tx) error {
		if _, err := e.r.Approve(ctx, tx, id, bob); err != nil {
			return err
		}
		_, _, err := MarkSending(ctx, tx, id, "store-1")
		return err
	})
	err := e.st.Update(context.Background(), func(tx store.Tx) error {
		_, err := e.r.MarkUrgent(context.Background(), tx, id, Actor{Name: "bob", Note: "later"})
		return err
	})
	if err == nil {
		t.Fatal("marked urgent after it was pushed")
	}
}
