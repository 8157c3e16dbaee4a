package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/action"
	"github.com/musterhq/muster/shared/limit"
)

func testRun(id string, created time.Time) *store.Run {
	return &store.Run{
		ID: id, ClusterID: "c1", State: store.RunPendingApprove, Requester: "alice", Digest: "d",
		Stages: []store.RunStage{{
			Name: "main", Kind: "muster.io/debug.sleep", Args: json.RawMessage(`{"seconds":1}`),
			Target: store.Target{All: true}, Nodes: []string{"n1", "n2"}, MaxConcurrency: limit.Limit{N: 50, Percent: true},
			OnFailure: "abort", DependsOn: []string{}, State: store.StagePending,
		}},
		CreatedTS: created, UpdatedTS: created,
	}
}

func testRunsRoundTripAndList(t *testing.T, db NewDB) {
	s := setup(t, db)
	a, b := testRun("00000000-0000-4000-8000-00000000000a", t0), testRun("00000000-0000-4000-8000-00000000000b", t0.Add(time.Second))
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		if err := tx.InsertRun(ctx, a); err != nil {
			return err
		}
		return tx.InsertRun(ctx, b)
	})
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		if err := tx.InsertRun(ctx, testRun(a.ID, t0)); !errors.Is(err, store.ErrExists) {
			t.Errorf("second insert of %s: %v, want ErrExists", a.ID, err)
		}
		a.State, a.ApprovedBy, a.FinishedTS = store.RunRunning, "bob", action.TimePtr(t0.Add(time.Minute))
		a.Stages[0].State, a.Stages[0].Forgiven = store.StageRunning, 1
		a.NotBefore, a.Urgent = action.TimePtr(t0.Add(time.Hour)), "security fix"
		a.Lock = &store.Lock{Name: "db", Scope: store.LockGlobal}
		a.Stages[0].Lock = &store.Lock{Name: "lb"}
		a.Stages[0].KindLocks = []store.KindLock{{Lock: store.Lock{Name: "db", Scope: store.LockCluster}, Kinds: []string{"example.com/db.migrate"}}}
		a.Stages[0].Reuse = map[string][]store.ReusedStep{"n1": {{Step: "drain", ActionID: "x", Outputs: []byte(`{"a":"b"}`)}}}
		return tx.UpdateRun(ctx, a)
	})
	read(t, s, func(ctx context.Context, r store.Reader) error {
		got, err := r.Run(ctx, a.ID)
		if err != nil {
			return err
		}
		if !reflect.DeepEqual(got, a) {
			t.Errorf("Run = %+v\nwant %+v", got, a)
		}
		list, err := r.ListRuns(ctx, store.RunQuery{})
		if err != nil || len(list) != 2 || list[0].ID != b.ID {
			t.Errorf("ListRuns = %v, %v; want b then a", list, err)
		}
		page, err := r.ListRuns(ctx, store.RunQuery{Marker: b.ID, Limit: 5})
		if err != nil || len(page) != 1 || page[0].ID != a.ID {
			t.Errorf("ListRuns after b = %v, %v; want a", page, err)
		}
		running, err := r.RunsInState(ctx, "c1", store.RunRunning, store.RunPaused)
		if err != nil || len(running) != 1 || running[0].ID != a.ID {
			t.Errorf("RunsInState = %v, %v; want a", running, err)
		}
		ids, err := r.RunIDsWithPrefix(ctx, "00000000-0000-4000-8000-00000000000", 10)
		if err != nil || len(ids) != 2 {
			t.Errorf("RunIDsWithPrefix = %v, %v", ids, err)
		}
		if _, err := r.Run(ctx, "nope"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("Run(nope) = %v, want ErrNotFound", err)
		}
		return nil
	})
}

// RunsInStateBrief lists the heads of the runs RunsInState lists, in its
// order, for one cluster or every one.
func testRunsInStateBriefMatchesRunsInState(t *testing.T, db NewDB) {
	s := setup(t, db)
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		for i, x := range []struct{ id, cluster, state string }{
			{"00000000-0000-4000-8000-0000000000a1", "c1", store.RunRunning},
			{"00000000-0000-4000-8000-0000000000a2", "c1", store.RunPaused},
			{"00000000-0000-4000-8000-0000000000a3", "c2", store.RunRunning},
			{"00000000-0000-4000-8000-0000000000a4", "c1", store.RunDone},
			{"00000000-0000-4000-8000-0000000000a5", "c1", store.RunRunning},
		} {
			r := testRun(x.id, t0.Add(time.Duration(5-i)*time.Second))
			r.ClusterID, r.State = x.cluster, x.state
			if err := tx.InsertRun(ctx, r); err != nil {
				return err
			}
		}
		return nil
	})
	read(t, s, func(ctx context.Context, r store.Reader) error {
		for _, q := range []struct {
			cluster string
			states  []string
		}{{"c1", []string{store.RunRunning, store.RunPaused}}, {"", []string{store.RunRunning}}, {"c2", []string{store.RunPaused}}} {
			full, err := r.RunsInState(ctx, q.cluster, q.states...)
			if err != nil {
				return err
			}
			var want []store.RunHead
			for _, run := range full {
				want = append(want, store.RunHead{ID: run.ID, ClusterID: run.ClusterID, State: run.State})
			}
			got, err := r.RunsInStateBrief(ctx, q.cluster, q.states...)
			if err != nil || !reflect.DeepEqual(got, want) {
				t.Errorf("RunsInStateBrief(%q, %v) = %+v, %v; want %+v", q.cluster, q.states, got, err, want)
			}
		}
		if got, err := r.RunsInStateBrief(ctx, "c1", store.RunRunning); err != nil || len(got) != 2 ||
			got[0].ID != "00000000-0000-4000-8000-0000000000a5" {
			t.Errorf("RunsInStateBrief(c1, RUNNING) = %+v, %v; want a5 then a1, oldest first", got, err)
		}
		return nil
	})
}

func testARunHasOneChildPerStageAndNode(t *testing.T, db NewDB) {
	s := setup(t, db)
	child := func(id, stage, node string) *store.Record {
		r := record(id)
		r.NodeID, r.RunID, r.Stage, r.Wave = node, "run-1", stage, 1
		r.Output, r.Progress, r.Outputs = "printed", json.RawMessage(`{"at":1}`), json.RawMessage(`{"previous":"1.2"}`)
		r.State, r.StateReason, r.ApprovedBy, r.PushedStoreID = action.Done, "ok", "bob", "store-1"
		r.Step, r.Attempt, r.FinishedTS = "upgrade", 2, action.TimePtr(t0.Add(time.Second))
		return r
	}
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		if err := tx.InsertAction(ctx, child("00000000-0000-4000-8000-000000000001", "main", "n1")); err != nil {
			return err
		}
		return tx.InsertAction(ctx, child("00000000-0000-4000-8000-000000000002", "other", "n1"))
	})
	ctx := context.Background()
	err := s.Update(ctx, func(tx store.Tx) error {
		return tx.InsertAction(ctx, child("00000000-0000-4000-8000-000000000003", "main", "n1"))
	})
	if !errors.Is(err, store.ErrExists) {
		t.Fatalf("a second child of run-1/main on n1: %v, want ErrExists", err)
	}
	read(t, s, func(ctx context.Context, r store.Reader) error {
		kids, err := r.RunChildren(ctx, "run-1")
		if err != nil || len(kids) != 2 || kids[0].Stage != "main" || kids[0].Wave != 1 {
			t.Errorf("RunChildren = %+v, %v", kids, err)
		}
		// The brief children are the same, with only what a run's planner reads.
		brief, err := r.RunChildrenBrief(ctx, "run-1")
		if err != nil || len(brief) != len(kids) {
			t.Fatalf("RunChildrenBrief = %+v, %v; want %d children", brief, err, len(kids))
		}
		for i := range kids {
			if len(kids[i].Args) == 0 || kids[i].Output == "" || len(kids[i].Progress) == 0 {
				t.Fatalf("child %d has no args, output or progress to leave out: %+v", i, kids[i])
			}
			k := kids[i]
			want := store.Record{Action: action.Action{ID: k.ID, ClusterID: k.ClusterID, NodeID: k.NodeID,
				RunID: k.RunID, Stage: k.Stage, Step: k.Step, Attempt: k.Attempt, State: k.State,
				StateReason: k.StateReason, ApprovedBy: k.ApprovedBy, FinishedTS: k.FinishedTS, Outputs: k.Outputs},
				PushedStoreID: k.PushedStoreID}
			if !reflect.DeepEqual(brief[i], want) {
				t.Errorf("RunChildrenBrief[%d] =\n  %+v\nwant\n  %+v", i, brief[i], want)
			}
		}
		return nil
	})
}

func testPlaybookVersions(t *testing.T, db NewDB) {
	s := setup(t, db)
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		for _, p := range []store.Playbook{
			{Name: "b", Version: 1, Document: "v1", Digest: "1"},
			{Name: "b", Version: 2, Document: "v2", Digest: "2", Source: "file:policy.yaml"},
			{Name: "a", Version: 1, Document: "a1", Digest: "a"},
		} {
			if err := tx.InsertPlaybook(ctx, &p); err != nil {
				return err
			}
		}
		if err := tx.InsertPlaybook(ctx, &store.Playbook{Name: "b", Version: 2}); !errors.Is(err, store.ErrExists) {
			t.Errorf("a second version 2: %v, want ErrExists", err)
		}
		return nil
	})
	read(t, s, func(ctx context.Context, r store.Reader) error {
		latest, err := r.Playbook(ctx, "b", 0)
		if err != nil || latest.Version != 2 || latest.Document != "v2" || latest.Source != "file:policy.yaml" {
			t.Errorf("newest b = %+v, %v", latest, err)
		}
		v1, err := r.Playbook(ctx, "b", 1)
		if err != nil || v1.Document != "v1" || v1.Source != "" {
			t.Errorf("b v1 = %+v, %v", v1, err)
		}
		if _, err := r.Playbook(ctx, "b", 3); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("b v3: %v", err)
		}
		all, err := r.Playbooks(ctx)
		if err != nil || len(all) != 2 || all[0].Name != "a" || all[1].Version != 2 {
			t.Errorf("Playbooks = %+v, %v", all, err)
		}
		vs, err := r.PlaybookVersions(ctx, "b")
		if err != nil || len(vs) != 2 || vs[0].Version != 1 {
			t.Errorf("versions = %+v, %v", vs, err)
		}
		return nil
	})
}

// TestTokenNamesAreUniqueIgnoringCase: a name becomes requester and
// approved_by, and four-eyes compares them ignoring case, so the store refuses
// a second token whose name differs from another only in case.
func testTokenNamesAreUniqueIgnoringCase(t *testing.T, db NewDB) {
	s := setup(t, db)
	ctx := context.Background()
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		return tx.InsertToken(ctx, &store.Token{Name: "alice", Roles: []string{store.RoleOperator}, Hash: "h1", CreatedTS: t0})
	})
	for _, name := range []string{"Alice", "ALICE", "aLiCe"} {
		err := s.Update(ctx, func(tx store.Tx) error {
			return tx.InsertToken(ctx, &store.Token{Name: name, Roles: []string{store.RoleApprover}, Hash: "h-" + name, CreatedTS: t0})
		})
		if !errors.Is(err, store.ErrExists) {
			t.Errorf("insert %s beside alice: %v, want ErrExists", name, err)
		}
	}
	// Once alice is revoked, the name is free again, in any case.
	update(t, s, func(ctx context.Context, tx store.Tx) error { return tx.DeleteToken(ctx, "alice") })
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		return tx.InsertToken(ctx, &store.Token{Name: "Alice", Roles: []string{store.RoleApprover}, Hash: "h2", CreatedTS: t0})
	})
	read(t, s, func(ctx context.Context, r store.Reader) error {
		all, err := r.Tokens(ctx)
		if err != nil || len(all) != 1 || all[0].Name != "Alice" {
			t.Errorf("Tokens = %+v, %v", all, err)
		}
		return nil
	})
}

// testPagesOfActionsAndRuns: store.ActionPage and store.RunPage, which the
// API's and the UI's lists both use, cut a list to its limit with the
// marker of the next page ("" on the last), and refuse a marker that names
// nothing as an invalid query.
func testPagesOfActionsAndRuns(t *testing.T, db NewDB) {
	s := setup(t, db)
	var actionIDs, runIDs []string
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		for i := range 3 {
			rec := record(action.NewID())
			rec.CreatedTS = t0.Add(time.Duration(i) * time.Second)
			actionIDs = append(actionIDs, rec.ID)
			if err := tx.InsertAction(ctx, rec); err != nil {
				return err
			}
			run := testRun(action.NewID(), t0.Add(time.Duration(i)*time.Second))
			runIDs = append(runIDs, run.ID)
			if err := tx.InsertRun(ctx, run); err != nil {
				return err
			}
		}
		return nil
	})
	read(t, s, func(ctx context.Context, r store.Reader) error {
		sortCreated := []store.SortKey{{Field: "created_ts"}}
		recs, next, err := store.ActionPage(ctx, r, store.ListQuery{Sort: sortCreated, Limit: 2})
		if err != nil || len(recs) != 2 || recs[1].ID != actionIDs[1] || next != actionIDs[1] {
			t.Errorf("first page of actions: %d, next %q, %v; want 2, next %s", len(recs), next, err, actionIDs[1])
		}
		recs, next, err = store.ActionPage(ctx, r, store.ListQuery{Sort: sortCreated, Limit: 2, Marker: next})
		if err != nil || len(recs) != 1 || recs[0].ID != actionIDs[2] || next != "" {
			t.Errorf("last page of actions: %d, next %q, %v; want %s alone", len(recs), next, err, actionIDs[2])
		}
		if recs, next, err := store.ActionPage(ctx, r, store.ListQuery{Sort: sortCreated, Limit: 3}); err != nil || len(recs) != 3 || next != "" {
			t.Errorf("a page of exactly every action: %d, next %q, %v", len(recs), next, err)
		}
		if _, _, err := store.ActionPage(ctx, r, store.ListQuery{Marker: action.NewID()}); !errors.Is(err, store.ErrUnknownMarker) ||
			!errors.Is(err, store.ErrInvalidQuery) {
			t.Errorf("unknown action marker: %v, want ErrUnknownMarker (an ErrInvalidQuery)", err)
		}
		list, next, err := store.RunPage(ctx, r, store.RunQuery{Limit: 2})
		if err != nil || len(list) != 2 || list[0].ID != runIDs[2] || next != runIDs[1] {
			t.Errorf("first page of runs: %d, next %q, %v; want newest first, next %s", len(list), next, err, runIDs[1])
		}
		list, next, err = store.RunPage(ctx, r, store.RunQuery{Limit: 2, Marker: next})
		if err != nil || len(list) != 1 || list[0].ID != runIDs[0] || next != "" {
			t.Errorf("last page of runs: %d, next %q, %v; want %s alone", len(list), next, err, runIDs[0])
		}
		if _, _, err := store.RunPage(ctx, r, store.RunQuery{Marker: action.NewID()}); !errors.Is(err, store.ErrUnknownMarker) ||
			!errors.Is(err, store.ErrInvalidQuery) {
			t.Errorf("unknown run marker: %v, want ErrUnknownMarker (an ErrInvalidQuery)", err)
		}
		return nil
	})
}
