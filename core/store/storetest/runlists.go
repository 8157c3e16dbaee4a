package storetest

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/action"
)

// testRunChildCountsFollowTheChildren: the counts a list of runs reads are
// always those of the children as stored, whatever inserts, changes (of
// state, reason or approver) and purges happened, inside the transaction
// that made them and after a rollback.
func testRunChildCountsFollowTheChildren(t *testing.T, db NewDB) {
	s := setup(t, db)
	a, b := testRun(action.NewID(), t0), testRun(action.NewID(), t0.Add(time.Second))
	a.State, b.State = store.RunRunning, store.RunDone
	want := func(ctx context.Context, r store.Reader, what string) {
		t.Helper()
		var kids []store.Record
		for _, id := range []string{a.ID, b.ID} {
			k, err := r.RunChildren(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			kids = append(kids, k...)
		}
		got, err := r.RunChildCounts(ctx, []string{b.ID, a.ID, "no-such-run"})
		if err != nil {
			t.Fatal(err)
		}
		if exp := store.CountChildren(kids); !reflect.DeepEqual(got, exp) {
			t.Errorf("%s: RunChildCounts = %+v\nwant %+v", what, got, exp)
		}
	}
	var kids []*store.Record
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		for _, run := range []*store.Run{a, b} {
			if err := tx.InsertRun(ctx, run); err != nil {
				return err
			}
		}
		kids = nil
		for i := range 6 {
			r := record(action.NewID())
			r.NodeID, r.RunID, r.Stage, r.ApprovedBy = fmt.Sprintf("n%d", i), a.ID, "main", "bob"
			if i%2 == 1 {
				r.Stage = "other"
			}
			if i == 5 {
				r.RunID = b.ID
			}
			if err := tx.InsertAction(ctx, r); err != nil {
				return err
			}
			kids = append(kids, r)
		}
		// An action of its own is no run's child.
		if err := tx.InsertAction(ctx, record(action.NewID())); err != nil {
			return err
		}
		want(ctx, tx, "inside the inserting transaction")
		return nil
	})
	read(t, s, func(ctx context.Context, r store.Reader) error { want(ctx, r, "after inserts"); return nil })

	change := func(what string, fn func(r *store.Record)) {
		t.Helper()
		update(t, s, func(ctx context.Context, tx store.Tx) error {
			for _, k := range kids {
				fn(k)
				if err := tx.UpdateAction(ctx, k); err != nil {
					return err
				}
			}
			return nil
		})
		read(t, s, func(ctx context.Context, r store.Reader) error { want(ctx, r, what); return nil })
	}
	change("some RUNNING", func(r *store.Record) {
		if r.NodeID != "n0" {
			r.State = action.Running
		}
	})
	change("a reason that is not counted", func(r *store.Record) { r.StateReason = "on its way " + r.NodeID })
	change("finished in several ways", func(r *store.Record) {
		switch r.NodeID {
		case "n1", "n2":
			r.State, r.StateReason = action.Cancelled, "run cancelled"
		case "n3":
			r.State, r.StateReason = action.Cancelled, "cancelled by carol"
		case "n4":
			r.State, r.ApprovedBy = action.Failed, "mallory"
		default:
			r.State = action.Done
		}
	})
	change("another cancel reason", func(r *store.Record) {
		if r.NodeID == "n1" {
			r.StateReason = "cancelled by dave"
		}
	})

	// A transaction that fails leaves the counts as they were.
	ctx := context.Background()
	boom := errors.New("boom")
	err := s.Update(ctx, func(tx store.Tx) error {
		for _, k := range kids {
			c := *k
			c.State = action.Lost
			if err := tx.UpdateAction(ctx, &c); err != nil {
				return err
			}
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("update = %v, want boom", err)
	}
	read(t, s, func(ctx context.Context, r store.Reader) error { want(ctx, r, "after a rollback"); return nil })

	// Purging the finished run's children takes them out of its counts.
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		if n, err := tx.PurgeActions(ctx, t0.Add(time.Hour), 100); err != nil || n != 1 {
			t.Errorf("PurgeActions = %d, %v; want 1 (the child of the finished run)", n, err)
		}
		return nil
	})
	read(t, s, func(ctx context.Context, r store.Reader) error {
		want(ctx, r, "after a purge")
		if got, err := r.RunChildCounts(ctx, []string{b.ID}); err != nil || len(got) != 0 {
			t.Errorf("counts of the purged run = %+v, %v; want none", got, err)
		}
		if got, err := r.RunChildCounts(ctx, nil); err != nil || len(got) != 0 {
			t.Errorf("counts of no run = %+v, %v; want none", got, err)
		}
		return nil
	})
}

// testBriefRunLists: a brief list holds each stage's first nodes and their
// count, pages oldest first as newest first, and cannot be stored back.
func testBriefRunLists(t *testing.T, db NewDB) {
	s := setup(t, db)
	var runs []*store.Run
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		for i := range 3 {
			r := testRun(fmt.Sprintf("00000000-0000-4000-8000-00000000000%d", i), t0.Add(time.Duration(i)*time.Second))
			r.Stages[0].Nodes = nil
			for n := range 25 * i {
				r.Stages[0].Nodes = append(r.Stages[0].Nodes, fmt.Sprintf("n%03d", n))
			}
			if err := tx.InsertRun(ctx, r); err != nil {
				return err
			}
			runs = append(runs, r)
		}
		return nil
	})
	read(t, s, func(ctx context.Context, r store.Reader) error {
		list, err := r.ListRuns(ctx, store.RunQuery{Brief: true, Oldest: true, Limit: 2})
		if err != nil || len(list) != 2 || list[0].ID != runs[0].ID || list[1].ID != runs[1].ID {
			t.Fatalf("oldest first = %+v, %v; want runs 0 and 1", list, err)
		}
		st := list[1].Stages[0]
		if !list[1].Brief || len(st.Nodes) != store.BriefNodes || st.NodeCount != 25 || st.Size() != 25 ||
			st.Nodes[0] != "n000" || st.Nodes[store.BriefNodes-1] != fmt.Sprintf("n%03d", store.BriefNodes-1) {
			t.Errorf("brief stage = %+v (brief %v); want the first %d of 25 nodes", st, list[1].Brief, store.BriefNodes)
		}
		if st := list[0].Stages[0]; len(st.Nodes) != 0 || st.Size() != 0 {
			t.Errorf("brief stage without nodes = %+v", st)
		}
		next, err := r.ListRuns(ctx, store.RunQuery{Brief: true, Oldest: true, Marker: list[1].ID})
		if err != nil || len(next) != 1 || next[0].ID != runs[2].ID || next[0].Stages[0].Size() != 50 {
			t.Errorf("oldest first after run 1 = %+v, %v; want run 2 of 50 nodes", next, err)
		}
		newest, err := r.ListRuns(ctx, store.RunQuery{Limit: 1})
		if err != nil || len(newest) != 1 || newest[0].Brief || len(newest[0].Stages[0].Nodes) != 50 ||
			newest[0].Stages[0].NodeCount != 0 {
			t.Errorf("a full list = %+v, %v; want run 2 with its 50 nodes", newest, err)
		}
		return nil
	})
	ctx := context.Background()
	err := s.Update(ctx, func(tx store.Tx) error {
		list, err := tx.ListRuns(ctx, store.RunQuery{Brief: true})
		if err != nil {
			return err
		}
		list[0].State = store.RunCancelled
		return tx.UpdateRun(ctx, &list[0])
	})
	if !errors.Is(err, store.ErrBriefRun) {
		t.Fatalf("storing a brief run: %v, want ErrBriefRun", err)
	}
	read(t, s, func(ctx context.Context, r store.Reader) error {
		got, err := r.Run(ctx, runs[2].ID)
		if err != nil || got.State != store.RunPendingApprove || len(got.Stages[0].Nodes) != 50 {
			t.Errorf("run 2 = %+v, %v; want it unchanged", got, err)
		}
		return nil
	})
}

// testRunStartedNodesCountsNodesNotChildren: a node with several children
// in a stage (steps, attempts) counts once there, per stage; other runs'
// children and actions of their own count nowhere.
func testRunStartedNodesCountsNodesNotChildren(t *testing.T, db NewDB) {
	s := setup(t, db)
	a, b := testRun(action.NewID(), t0), testRun(action.NewID(), t0.Add(time.Second))
	a.State, b.State = store.RunRunning, store.RunRunning
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		for _, run := range []*store.Run{a, b} {
			if err := tx.InsertRun(ctx, run); err != nil {
				return err
			}
		}
		for _, c := range []struct {
			run, stage, node, step string
			attempt                int
		}{
			{a.ID, "main", "n1", "drain", 1}, {a.ID, "main", "n1", "drain", 2}, {a.ID, "main", "n1", "verify", 1},
			{a.ID, "main", "n2", "drain", 1}, {a.ID, "other", "n1", "", 0}, {b.ID, "main", "n3", "", 0},
		} {
			r := record(action.NewID())
			r.RunID, r.Stage, r.NodeID, r.Step, r.Attempt = c.run, c.stage, c.node, c.step, c.attempt
			if err := tx.InsertAction(ctx, r); err != nil {
				return err
			}
		}
		return tx.InsertAction(ctx, record(action.NewID()))
	})
	read(t, s, func(ctx context.Context, r store.Reader) error {
		got, err := r.RunStartedNodes(ctx, a.ID)
		if err != nil {
			return err
		}
		if want := map[string]int{"main": 2, "other": 1}; !reflect.DeepEqual(got, want) {
			t.Errorf("RunStartedNodes = %v, want %v", got, want)
		}
		none, err := r.RunStartedNodes(ctx, "no-such-run")
		if err != nil || len(none) != 0 {
			t.Errorf("RunStartedNodes of no run = %v, %v", none, err)
		}
		return nil
	})
}
