// Package storetest is the behaviour every core/store implementation must
// have, as one suite: core/store/sqlite and core/store/postgres each run it
// from a test (Run), each on fresh databases of its own kind.
package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/action"
)

// Opener opens a store on one database and closes it when the test ends.
// Each call opens another store on the same database: a restart, or a
// second replica.
type Opener func(t *testing.T) store.Store

// NewDB makes a fresh, empty database for t and returns its Opener.
type NewDB func(t *testing.T) Opener

// Run runs every test of the suite, in parallel, each on its own database.
func Run(t *testing.T, db NewDB) {
	tests := []struct {
		name string
		fn   func(t *testing.T, db NewDB)
	}{
		{"ClusterAndNodeRoundTrip", testClusterAndNodeRoundTrip},
		{"NodeErrors", testNodeErrors},
		{"DownNodesOfOneClusterOnly", testDownNodesOfOneClusterOnly},
		{"ActionRoundTrip", testActionRoundTrip},
		{"History", testHistory},
		{"Tokens", testTokens},
		{"TokenNamesAreUniqueIgnoringCase", testTokenNamesAreUniqueIgnoringCase},
		{"Sessions", testSessions},
		{"Approvals", testApprovals},
		{"JoinTokenFieldsRoundTrip", testJoinTokenFieldsRoundTrip},
		{"UseTokenCountsDownAtomically", testUseTokenCountsDownAtomically},
		{"AgentCertsAndRevocation", testAgentCertsAndRevocation},
		{"SessionsEndWithTheirToken", testSessionsEndWithTheirToken},
		{"PersonSessionsAndPeople", testPersonSessionsAndPeople},
		{"RunsRoundTripAndList", testRunsRoundTripAndList},
		{"RunsInStateBriefMatchesRunsInState", testRunsInStateBriefMatchesRunsInState},
		{"ARunHasOneChildPerStageAndNode", testARunHasOneChildPerStageAndNode},
		{"RunChildCountsFollowTheChildren", testRunChildCountsFollowTheChildren},
		{"RunStartedNodesCountsNodesNotChildren", testRunStartedNodesCountsNodesNotChildren},
		{"BriefRunLists", testBriefRunLists},
		{"RunLocksHaveOneHolder", testRunLocksHaveOneHolder},
		{"RunLocksOneHolderAcrossStores", testRunLocksOneHolderAcrossStores},
		{"PagesOfActionsAndRuns", testPagesOfActionsAndRuns},
		{"PlaybookVersions", testPlaybookVersions},
		{"SchedulesRoundTrip", testSchedulesRoundTrip},
		{"UpdateRollsBack", testUpdateRollsBack},
		{"ErrorsLeaveTheTransactionUsable", testErrorsLeaveTheTransactionUsable},
		{"ConcurrentUpdatesSerialize", testConcurrentUpdatesSerialize},
		{"ActionIDsWithPrefix", testActionIDsWithPrefix},
		{"ListActionsFilters", testListActionsFilters},
		{"ListActionsSortAndPaging", testListActionsSortAndPaging},
		{"ListActionsPagingWithFilter", testListActionsPagingWithFilter},
		{"ListActionsErrors", testListActionsErrors},
		{"OpenActionsAndApprovalsBefore", testOpenActionsAndApprovalsBefore},
		{"ScheduledBefore", testScheduledBefore},
		{"TeamsAndMembership", testTeamsAndMembership},
		{"Grants", testGrants},
		{"Freezes", testFreezes},
		{"Policies", testPolicies},
		{"ReplaceRequests", testReplaceRequests},
		{"OnAlert", testOnAlert},
		{"ClusterLabelsAndScopedLists", testClusterLabelsAndScopedLists},
		{"Purge", testPurge},
		{"PurgeKeepsChildrenOfOpenRuns", testPurgeKeepsChildrenOfOpenRuns},
		{"PurgeRuns", testPurgeRuns},
		{"EventsSequenceAndSubscribe", testEventsSequenceAndSubscribe},
		{"EventsAreNumberedInCommitOrder", testEventsAreNumberedInCommitOrder},
		{"EventSequenceSurvivesReopen", testEventSequenceSurvivesReopen},
		{"LatestSeq", testLatestSeq},
		{"RowsWritten", testRowsWritten},
		{"ReadIsASnapshot", testReadIsASnapshot},
		{"OutboxEnqueuesWithTheEvent", testOutboxEnqueuesWithTheEvent},
		{"DeliveryLifecycle", testDeliveryLifecycle},
		{"EventDeliveries", testEventDeliveries},
		{"MarkDelivered", testMarkDelivered},
		{"RedeliveredComesFirst", testRedeliveredComesFirst},
		{"SkipToPassesTheIdle", testSkipToPassesTheIdle},
		{"DeliveryIDsFollowEvents", testDeliveryIDsFollowEvents},
		{"PurgeDeliveriesStopsAtTheFirstKept", testPurgeDeliveriesStopsAtTheFirstKept},
		{"LazyCommitKeepsWritesButNoEvent", testLazyCommitKeepsWritesButNoEvent},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.fn(t, db)
		})
	}
}

var t0 = time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)

// setup opens a store on a fresh database.
func setup(t *testing.T, db NewDB) store.Store {
	t.Helper()
	return db(t)(t)
}

func update(t *testing.T, s store.Store, fn func(ctx context.Context, tx store.Tx) error) {
	t.Helper()
	ctx := context.Background()
	if err := s.Update(ctx, func(tx store.Tx) error { return fn(ctx, tx) }); err != nil {
		t.Fatal(err)
	}
}

func read(t *testing.T, s store.Store, fn func(ctx context.Context, r store.Reader) error) {
	t.Helper()
	ctx := context.Background()
	if err := s.Read(ctx, func(r store.Reader) error { return fn(ctx, r) }); err != nil {
		t.Fatal(err)
	}
}

// record returns a record with every field set.
func record(id string) *store.Record {
	return &store.Record{
		Action: action.Action{
			ID: id, ClusterID: "c1", NodeID: "n1", Kind: "muster.io/debug.sleep",
			Args: json.RawMessage(`{"seconds":1}`), State: action.PendingSchedule,
			Origin: action.OriginCore, TimeoutS: 60, CreatedTS: t0, UpdatedTS: t0,
		},
	}
}

func putClusterNode(t *testing.T, s store.Store, cluster string, nodes ...string) {
	t.Helper()
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		if err := tx.PutCluster(ctx, &store.Cluster{ID: cluster, Status: store.ClusterHealthy}); err != nil {
			return err
		}
		for _, n := range nodes {
			if err := tx.PutNode(ctx, &store.Node{ClusterID: cluster, ID: n, Addr: n + ":7420",
				Source: store.SourceStatic, Status: store.NodeUnknown}); err != nil {
				return err
			}
		}
		return nil
	})
}

func testClusterAndNodeRoundTrip(t *testing.T, db NewDB) {
	s := setup(t, db)
	c := store.Cluster{ID: "c1", Status: store.ClusterAlert, StatusReason: "node n1 down", UpdatedTS: t0}
	contact := t0.Add(time.Second)
	n := store.Node{ClusterID: "c1", ID: "n1", Addr: "10.0.0.1:7420", Source: store.SourceGossip,
		Status: store.NodeDown, StatusReason: "left", DownCause: store.CauseLeft, Drained: true, DrainedBy: "alice", DrainReason: "disk swap", StoreID: "sid", Cursor: 42,
		Kinds: []string{"a/b", "c/d"}, Version: "1.2.3", LastContact: &contact, UpdatedTS: t0,
		Secrets:    []string{"api-token", "db-password"},
		Labels:     map[string]string{"role": "replica", "zone": "eu-1"},
		CoreLabels: map[string]string{"zone": "eu-1"}, Replaces: "n0",
		ArgsSchemas: map[string]json.RawMessage{"c/d": json.RawMessage(`{"properties":{"a b":{"type":"string"}},"required":["a b"]}`)}}
	n2 := store.Node{ClusterID: "c1", ID: "n2", Addr: "x:1", Source: store.SourceStatic, Status: store.NodeUnknown, UpdatedTS: t0}
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		if err := tx.PutCluster(ctx, &c); err != nil {
			return err
		}
		if err := tx.PutNode(ctx, &n2); err != nil {
			return err
		}
		return tx.PutNode(ctx, &n)
	})
	read(t, s, func(ctx context.Context, r store.Reader) error {
		got, err := r.Cluster(ctx, "c1")
		if err != nil || !reflect.DeepEqual(*got, c) {
			t.Errorf("Cluster = %+v, %v; want %+v", got, err, c)
		}
		all, err := r.Clusters(ctx)
		if err != nil || len(all) != 1 {
			t.Errorf("Clusters = %+v, %v", all, err)
		}
		gn, err := r.Node(ctx, "c1", "n1")
		if err != nil || !reflect.DeepEqual(*gn, n) {
			t.Errorf("Node = %+v, %v; want %+v", gn, err, n)
		}
		nodes, err := r.Nodes(ctx, "c1")
		if err != nil || len(nodes) != 2 || nodes[0].ID != "n1" || nodes[1].ID != "n2" {
			t.Errorf("Nodes(c1) = %+v, %v", nodes, err)
		}
		if !reflect.DeepEqual(nodes[1], n2) {
			t.Errorf("node without kinds or contact = %+v, want %+v", nodes[1], n2)
		}
		if all, _ := r.Nodes(ctx, ""); len(all) != 2 {
			t.Errorf("Nodes(\"\") = %d nodes", len(all))
		}
		if _, err := r.Cluster(ctx, "nope"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("missing cluster: %v", err)
		}
		if _, err := r.Node(ctx, "c1", "nope"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("missing node: %v", err)
		}
		return nil
	})
	// Put replaces (labels too).
	n.Cursor, n.Status, n.LastContact = 43, store.NodeUp, nil
	n.Labels = map[string]string{"role": "primary"}
	n.CoreLabels, n.Replaces = nil, ""
	c.Status = store.ClusterHealthy
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		if err := tx.PutCluster(ctx, &c); err != nil {
			return err
		}
		return tx.PutNode(ctx, &n)
	})
	read(t, s, func(ctx context.Context, r store.Reader) error {
		gn, _ := r.Node(ctx, "c1", "n1")
		gc, _ := r.Cluster(ctx, "c1")
		if !reflect.DeepEqual(*gn, n) || gc.Status != store.ClusterHealthy {
			t.Errorf("after put: node %+v cluster %+v", gn, gc)
		}
		return nil
	})
}

func testNodeErrors(t *testing.T, db NewDB) {
	s := setup(t, db)
	ctx := context.Background()
	err := s.Update(ctx, func(tx store.Tx) error {
		return tx.PutNode(ctx, &store.Node{ClusterID: "nope", ID: "n1", Status: store.NodeUnknown})
	})
	if !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("node of a missing cluster: %v, want ErrNotFound", err)
	}
	putClusterNode(t, s, "c1", "n1")
	update(t, s, func(ctx context.Context, tx store.Tx) error { return tx.DeleteNode(ctx, "c1", "n1") })
	err = s.Update(ctx, func(tx store.Tx) error { return tx.DeleteNode(ctx, "c1", "n1") })
	if !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("delete a missing node: %v, want ErrNotFound", err)
	}
}

func testActionRoundTrip(t *testing.T, db NewDB) {
	s := setup(t, db)
	ctx := context.Background()
	full := record(action.NewID())
	full.State, full.StateReason = action.Failed, "timeout"
	full.Progress = json.RawMessage(`{"step":3}`)
	full.Output = "héllo\n"
	full.Origin, full.Requester, full.ApprovedBy = action.OriginAgent, "alice", "bob"
	full.ScheduledTS = action.TimePtr(t0.Add(time.Second))
	full.StartedTS = action.TimePtr(t0.Add(2 * time.Second))
	full.FinishedTS = action.TimePtr(t0.Add(3*time.Second + 1500*time.Nanosecond))
	full.UpdatedTS = t0.Add(4 * time.Second)
	full.RetryOf = action.NewID()
	full.ApprovalDigest, full.CancelRequested, full.SeenOnAgent, full.PushedStoreID = "digest", true, true, "store-1"
	full.RunID, full.Stage, full.Wave = "run-1", "main", 3
	full.NotBefore, full.Urgent = action.TimePtr(t0.Add(time.Hour)), "the disk fills up"
	minimal := record(action.NewID())
	minimal.Args = nil

	update(t, s, func(ctx context.Context, tx store.Tx) error {
		for _, r := range []*store.Record{full, minimal} {
			if err := tx.InsertAction(ctx, r); err != nil {
				return err
			}
		}
		return nil
	})
	// Stored at microsecond precision.
	full.FinishedTS = action.TimePtr(*full.FinishedTS)
	read(t, s, func(ctx context.Context, r store.Reader) error {
		for _, want := range []*store.Record{full, minimal} {
			got, err := r.Action(ctx, want.ID)
			if err != nil || !reflect.DeepEqual(got, want) {
				t.Errorf("Action(%s)\n got %+v, %v\nwant %+v", want.ID, got, err, want)
			}
		}
		return nil
	})

	err := s.Update(ctx, func(tx store.Tx) error { return tx.InsertAction(ctx, record(full.ID)) })
	if !errors.Is(err, store.ErrExists) {
		t.Fatalf("insert a taken id: %v, want ErrExists", err)
	}
	err = s.Update(ctx, func(tx store.Tx) error { return tx.UpdateAction(ctx, record(action.NewID())) })
	if !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("update a missing id: %v, want ErrNotFound", err)
	}
	err = s.Read(ctx, func(r store.Reader) error { _, err := r.Action(ctx, action.NewID()); return err })
	if !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("read a missing id: %v, want ErrNotFound", err)
	}

	minimal.State, minimal.Output, minimal.SeenOnAgent = action.Running, "out", true
	minimal.StartedTS = action.TimePtr(t0.Add(time.Minute))
	minimal.NotBefore, minimal.Urgent = action.TimePtr(t0.Add(2*time.Hour)), "now"
	update(t, s, func(ctx context.Context, tx store.Tx) error { return tx.UpdateAction(ctx, minimal) })
	read(t, s, func(ctx context.Context, r store.Reader) error {
		got, err := r.Action(ctx, minimal.ID)
		if err != nil || !reflect.DeepEqual(got, minimal) {
			t.Errorf("after update\n got %+v, %v\nwant %+v", got, err, minimal)
		}
		return nil
	})
}

func testHistory(t *testing.T, db NewDB) {
	s := setup(t, db)
	ctx := context.Background()
	r := record(action.NewID())
	want := []action.Transition{
		{TS: t0, From: action.PendingApprove, To: action.PendingSchedule, Actor: "bob", Reason: "approved"},
		{TS: t0.Add(time.Second), From: action.PendingSchedule, To: action.New, Actor: "n1"},
		{TS: t0.Add(time.Second), From: action.New, To: action.Done, Actor: "n1", Reason: "ok"},
	}
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		if err := tx.InsertAction(ctx, r); err != nil {
			return err
		}
		for _, h := range want {
			if err := tx.AppendHistory(ctx, r.ID, h); err != nil {
				return err
			}
		}
		return nil
	})
	read(t, s, func(ctx context.Context, rd store.Reader) error {
		got, err := rd.History(ctx, r.ID)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("History = %+v, %v; want %+v", got, err, want)
		}
		return nil
	})
	err := s.Update(ctx, func(tx store.Tx) error {
		return tx.AppendHistory(ctx, action.NewID(), want[0])
	})
	if !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("history of a missing action: %v, want ErrNotFound", err)
	}
}

func testTokens(t *testing.T, db NewDB) {
	s := setup(t, db)
	ctx := context.Background()
	alice := store.Token{Name: "alice", Roles: []string{store.RoleOperator, store.RoleViewer}, Hash: "h1", CreatedTS: t0}
	bob := store.Token{Name: "bob", Roles: []string{store.RoleApprover}, Hash: "h2", CreatedTS: t0}
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		if err := tx.InsertToken(ctx, &bob); err != nil {
			return err
		}
		return tx.InsertToken(ctx, &alice)
	})
	cases := []struct {
		name string
		tok  store.Token
	}{
		{"same name", store.Token{Name: "alice", Hash: "h3"}},
		{"same hash", store.Token{Name: "carol", Hash: "h1"}},
	}
	for _, c := range cases {
		err := s.Update(ctx, func(tx store.Tx) error { return tx.InsertToken(ctx, &c.tok) })
		if !errors.Is(err, store.ErrExists) {
			t.Errorf("%s: %v, want ErrExists", c.name, err)
		}
	}
	read(t, s, func(ctx context.Context, r store.Reader) error {
		all, err := r.Tokens(ctx)
		if err != nil || !reflect.DeepEqual(all, []store.Token{alice, bob}) {
			t.Errorf("Tokens = %+v, %v", all, err)
		}
		got, err := r.TokenByHash(ctx, "h2")
		if err != nil || !reflect.DeepEqual(*got, bob) {
			t.Errorf("TokenByHash = %+v, %v", got, err)
		}
		if _, err := r.TokenByHash(ctx, "nope"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("missing hash: %v", err)
		}
		return nil
	})
	update(t, s, func(ctx context.Context, tx store.Tx) error { return tx.DeleteToken(ctx, "alice") })
	err := s.Update(ctx, func(tx store.Tx) error { return tx.DeleteToken(ctx, "alice") })
	if !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("delete a missing token: %v", err)
	}
	read(t, s, func(ctx context.Context, r store.Reader) error {
		if _, err := r.TokenByHash(ctx, "h1"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("revoked token still found: %v", err)
		}
		return nil
	})
}

// testSessions: a web UI session round-trips, its hash is unique, it is
// deleted alone or with every session expired by a time, and another store
// on the same database (a restart, or another replica) sees it.
func testSessions(t *testing.T, db NewDB) {
	open := db(t)
	s := open(t)
	ctx := context.Background()
	a := store.Session{Hash: "sa", TokenHash: "h1", CSRF: "c1", CreatedTS: t0, ExpiresTS: t0.Add(time.Hour)}
	b := store.Session{Hash: "sb", TokenHash: "h2", CSRF: "c2", CreatedTS: t0, ExpiresTS: t0.Add(2 * time.Hour)}
	c := store.Session{Hash: "sc", TokenHash: "h1", CSRF: "c3", CreatedTS: t0, ExpiresTS: t0.Add(3 * time.Hour)}
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		for _, x := range []*store.Session{&a, &b, &c} {
			if err := tx.InsertSession(ctx, x); err != nil {
				return err
			}
		}
		return nil
	})
	dup := store.Session{Hash: "sa", TokenHash: "h9", CSRF: "x", CreatedTS: t0, ExpiresTS: t0}
	if err := s.Update(ctx, func(tx store.Tx) error { return tx.InsertSession(ctx, &dup) }); !errors.Is(err, store.ErrExists) {
		t.Fatalf("a session hash twice: %v, want ErrExists", err)
	}
	other := open(t)
	read(t, other, func(ctx context.Context, r store.Reader) error {
		got, err := r.Session(ctx, "sb")
		if err != nil || !reflect.DeepEqual(*got, b) {
			t.Errorf("Session = %+v, %v, want %+v", got, err, b)
		}
		if _, err := r.Session(ctx, "nope"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("missing session: %v", err)
		}
		if n, err := r.SessionCount(ctx); n != 3 || err != nil {
			t.Errorf("SessionCount = %d, %v, want 3", n, err)
		}
		return nil
	})
	update(t, other, func(ctx context.Context, tx store.Tx) error {
		if err := tx.DeleteSession(ctx, "sc"); err != nil {
			return err
		}
		if err := tx.DeleteSession(ctx, "sc"); err != nil { // gone already: no error
			return err
		}
		n, err := tx.DeleteSessionsBefore(ctx, t0.Add(time.Hour))
		if n != 1 {
			t.Errorf("DeleteSessionsBefore removed %d, want 1 (the one expiring then)", n)
		}
		return err
	})
	read(t, s, func(ctx context.Context, r store.Reader) error {
		for hash, want := range map[string]bool{"sa": false, "sb": true, "sc": false} {
			_, err := r.Session(ctx, hash)
			if found := err == nil; found != want {
				t.Errorf("session %s found %v, want %v (%v)", hash, found, want, err)
			}
		}
		return nil
	})
}

// testPersonSessionsAndPeople (issue 32): a single sign-on session keeps its
// person, groups and ID token expiry; a person is one row whatever the case
// of their name, with the groups of their last sign-in.
func testPersonSessionsAndPeople(t *testing.T, db NewDB) {
	open := db(t)
	s := open(t)
	idExp := t0.Add(30 * time.Minute)
	p := store.Session{Hash: "sp", TokenHash: store.PersonSessionKey("Dana@Example.com"), CSRF: "c", CreatedTS: t0,
		ExpiresTS: idExp, Person: "Dana@Example.com", Groups: []string{"db-oncall", "<sre>"}, IDExpiresTS: &idExp}
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		if err := tx.InsertSession(ctx, &p); err != nil {
			return err
		}
		if err := tx.UpsertPerson(ctx, &store.Person{Name: "Dana@Example.com", Source: "oidc",
			Groups: []string{"db-oncall", "sre"}, LastSeenTS: t0}); err != nil {
			return err
		}
		return tx.UpsertPerson(ctx, &store.Person{Name: "dana@example.com", Source: "oidc",
			Groups: []string{"sre"}, LastSeenTS: t0.Add(time.Hour)})
	})
	read(t, open(t), func(ctx context.Context, r store.Reader) error {
		got, err := r.Session(ctx, "sp")
		if err != nil || !reflect.DeepEqual(*got, p) {
			t.Errorf("Session = %+v, %v, want %+v", got, err, p)
		}
		// Names are kept lowercase (store.PersonKey).
		who, err := r.Person(ctx, "DANA@example.com")
		want := store.Person{Name: "dana@example.com", Source: "oidc", Groups: []string{"sre"}, LastSeenTS: t0.Add(time.Hour)}
		if err != nil || !reflect.DeepEqual(*who, want) {
			t.Errorf("Person = %+v, %v, want %+v (one row, the last groups)", who, err, want)
		}
		if _, err := r.Person(ctx, "nobody"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("unknown person: %v, want ErrNotFound", err)
		}
		return nil
	})
}

// testSessionsEndWithTheirToken (issue 17, item 3): TrimSessions keeps a
// token's newest sessions and ends the rest; revoking a token deletes its
// sessions in the same transaction, as another store on the database (a
// restart, another replica) sees.
func testSessionsEndWithTheirToken(t *testing.T, db NewDB) {
	open := db(t)
	s := open(t)
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		for _, tok := range []store.Token{
			{Name: "viewer", Roles: []string{store.RoleViewer}, Hash: "hv", CreatedTS: t0},
			{Name: "admin2", Roles: []string{store.RoleAdmin}, Hash: "ha", CreatedTS: t0},
		} {
			if err := tx.InsertToken(ctx, &tok); err != nil {
				return err
			}
		}
		for i := range 5 {
			ts := t0.Add(time.Duration(i) * time.Second)
			if err := tx.InsertSession(ctx, &store.Session{Hash: fmt.Sprintf("v%d", i), TokenHash: "hv", CSRF: "c",
				CreatedTS: ts, ExpiresTS: ts.Add(time.Hour)}); err != nil {
				return err
			}
		}
		return tx.InsertSession(ctx, &store.Session{Hash: "a0", TokenHash: "ha", CSRF: "c", CreatedTS: t0, ExpiresTS: t0.Add(time.Hour)})
	})
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		n, err := tx.TrimSessions(ctx, "hv", 2)
		if n != 3 {
			t.Errorf("TrimSessions removed %d, want 3", n)
		}
		return err
	})
	found := func(st store.Store) map[string]bool {
		got := map[string]bool{}
		read(t, st, func(ctx context.Context, r store.Reader) error {
			for _, h := range []string{"v0", "v1", "v2", "v3", "v4", "a0"} {
				if _, err := r.Session(ctx, h); err == nil {
					got[h] = true
				}
			}
			return nil
		})
		return got
	}
	if got, want := found(s), map[string]bool{"v3": true, "v4": true, "a0": true}; !reflect.DeepEqual(got, want) {
		t.Fatalf("after TrimSessions(keep 2): %v, want the two newest and the other token's: %v", got, want)
	}
	update(t, s, func(ctx context.Context, tx store.Tx) error { return tx.DeleteToken(ctx, "viewer") })
	if got, want := found(open(t)), map[string]bool{"a0": true}; !reflect.DeepEqual(got, want) {
		t.Fatalf("after revoking the viewer, another store sees sessions %v, want %v", got, want)
	}
}

func testUpdateRollsBack(t *testing.T, db NewDB) {
	boom := errors.New("boom")
	cases := []struct {
		name string
		fail func() error
	}{
		{"error", func() error { return boom }},
		{"panic", func() error { panic(boom) }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			s := setup(t, db)
			ctx := context.Background()
			events, cancel := s.Subscribe()
			defer cancel()
			r := record(action.NewID())
			func() {
				defer func() { _ = recover() }()
				err := s.Update(ctx, func(tx store.Tx) error {
					if err := tx.InsertAction(ctx, r); err != nil {
						return err
					}
					if err := tx.AppendEvent(ctx, &store.Event{Type: store.EventActionCreated, Actor: "t"}); err != nil {
						return err
					}
					return c.fail()
				})
				if !errors.Is(err, boom) {
					t.Errorf("Update error = %v, want boom", err)
				}
			}()
			read(t, s, func(ctx context.Context, rd store.Reader) error {
				if _, err := rd.Action(ctx, r.ID); !errors.Is(err, store.ErrNotFound) {
					t.Errorf("rolled back action is there: %v", err)
				}
				if ev, _ := rd.Events(ctx, 0, 0); len(ev) != 0 {
					t.Errorf("rolled back events are there: %+v", ev)
				}
				return nil
			})
			if n := s.RowsWritten(); n != 0 {
				t.Errorf("RowsWritten = %d after a rollback", n)
			}
			select {
			case seq := <-events:
				t.Errorf("subscriber notified of rolled back event %d", seq)
			default:
			}
		})
	}
}

func testActionIDsWithPrefix(t *testing.T, db NewDB) {
	s := setup(t, db)
	ids := []string{
		"3f0c8a52-7e4e-4a8e-9a4e-4f5a3b0f2c11",
		"3f0c8a52-0000-4a8e-9a4e-4f5a3b0f2c11",
		"3f0c8a99-7e4e-4a8e-9a4e-4f5a3b0f2c11",
		"ffffffff-7e4e-4a8e-9a4e-4f5a3b0f2c11",
	}
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		for _, id := range ids {
			if err := tx.InsertAction(ctx, record(id)); err != nil {
				return err
			}
		}
		return nil
	})
	cases := []struct {
		prefix string
		max    int
		want   []string
	}{
		{"3f0c8a52", 10, []string{ids[1], ids[0]}},
		{"3f0c8a", 10, []string{ids[1], ids[0], ids[2]}},
		{"3f0c8a", 2, []string{ids[1], ids[0]}},
		{ids[0], 10, []string{ids[0]}},
		{"ffff", 10, []string{ids[3]}},
		{"3f0c8a5%", 10, nil},
		{"0000", 10, nil},
		{"", 10, []string{ids[1], ids[0], ids[2], ids[3]}},
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("%s/%d", c.prefix, c.max), func(t *testing.T) {
			t.Parallel()
			read(t, s, func(ctx context.Context, r store.Reader) error {
				got, err := r.ActionIDsWithPrefix(ctx, c.prefix, c.max)
				if err != nil || !slices.Equal(got, c.want) {
					t.Errorf("got %v, %v; want %v", got, err, c.want)
				}
				return nil
			})
		})
	}
}

// listFixture stores actions on two clusters, several nodes, states and kinds,
// with created_ts values that tie in threes.
func listFixture(t *testing.T, db NewDB) (store.Store, []store.Record) {
	t.Helper()
	s := setup(t, db)
	states := []action.State{action.PendingApprove, action.PendingSchedule, action.Running, action.Done}
	kinds := []string{"muster.io/debug.ping", "muster.io/debug.sleep"}
	var all []store.Record
	for i := range 20 {
		r := record(action.NewID())
		r.ClusterID = []string{"c1", "c2"}[i%2]
		r.NodeID = []string{"n1", "n2", "n3"}[i%3]
		r.State = states[i%4]
		r.Kind = kinds[i%5%2]
		r.CreatedTS = t0.Add(time.Duration(i/3) * time.Second)
		r.UpdatedTS = t0.Add(time.Duration(20-i) * time.Second)
		if i%5 == 1 {
			r.RunID, r.Stage, r.Wave = "run-1", fmt.Sprint("s", i), 1+i/8
		}
		all = append(all, *r)
	}
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		for i := range all {
			if err := tx.InsertAction(ctx, &all[i]); err != nil {
				return err
			}
		}
		return nil
	})
	return s, all
}

func ids(rs []store.Record) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.ID
	}
	return out
}

func list(t *testing.T, s store.Store, q store.ListQuery) []store.Record {
	t.Helper()
	var out []store.Record
	read(t, s, func(ctx context.Context, r store.Reader) error {
		var err error
		out, err = r.ListActions(ctx, q)
		return err
	})
	return out
}

func testListActionsFilters(t *testing.T, db NewDB) {
	s, all := listFixture(t, db)
	cases := []struct {
		name string
		q    store.ListQuery
		keep func(r store.Record) bool
	}{
		{"all", store.ListQuery{}, func(store.Record) bool { return true }},
		{"cluster", store.ListQuery{ClusterID: "c2"}, func(r store.Record) bool { return r.ClusterID == "c2" }},
		{"node", store.ListQuery{NodeID: "n3"}, func(r store.Record) bool { return r.NodeID == "n3" }},
		{"cluster and node", store.ListQuery{ClusterID: "c1", NodeID: "n2"}, func(r store.Record) bool { return r.ClusterID == "c1" && r.NodeID == "n2" }},
		{"one state", store.ListQuery{States: []action.State{action.Done}}, func(r store.Record) bool { return r.State == action.Done }},
		{"states", store.ListQuery{States: []action.State{action.Done, action.PendingApprove}}, func(r store.Record) bool {
			return r.State == action.Done || r.State == action.PendingApprove
		}},
		{"kinds", store.ListQuery{Kinds: []string{"muster.io/debug.sleep", "x/y"}}, func(r store.Record) bool { return r.Kind == "muster.io/debug.sleep" }},
		{"everything", store.ListQuery{ClusterID: "c1", States: []action.State{action.PendingApprove, action.Running}, Kinds: []string{"muster.io/debug.ping"}}, func(r store.Record) bool {
			return r.ClusterID == "c1" && (r.State == action.PendingApprove || r.State == action.Running) && r.Kind == "muster.io/debug.ping"
		}},
		{"run", store.ListQuery{RunID: "run-1"}, func(r store.Record) bool { return r.RunID == "run-1" }},
		{"run and state", store.ListQuery{RunID: "run-1", States: []action.State{action.PendingSchedule}}, func(r store.Record) bool {
			return r.RunID == "run-1" && r.State == action.PendingSchedule
		}},
		{"run and nodes", store.ListQuery{RunID: "run-1", NodeIDs: []string{"n1", "n3", "nope"}}, func(r store.Record) bool {
			return r.RunID == "run-1" && (r.NodeID == "n1" || r.NodeID == "n3")
		}},
		{"no match", store.ListQuery{ClusterID: "c3"}, func(store.Record) bool { return false }},
		{"limit", store.ListQuery{Limit: 4}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			want := sorted(all, []store.SortKey{{Field: "created_ts"}, {Field: "id"}})
			if c.keep != nil {
				want = slices.DeleteFunc(want, func(r store.Record) bool { return !c.keep(r) })
			} else {
				want = want[:c.q.Limit]
			}
			if len(want) == 0 && c.name != "no match" {
				t.Fatal("fixture selects nothing: the case tests nothing")
			}
			got := list(t, s, c.q)
			if !slices.Equal(ids(got), ids(want)) {
				t.Errorf("got %v\nwant %v", ids(got), ids(want))
			}
		})
	}
}

// sorted orders a copy of rs the way ListActions must.
func sorted(rs []store.Record, keys []store.SortKey) []store.Record {
	out := slices.Clone(rs)
	field := func(r store.Record, f string) string {
		switch f {
		case "created_ts":
			return fmt.Sprintf("%020d", r.CreatedTS.UnixMicro())
		case "updated_ts":
			return fmt.Sprintf("%020d", r.UpdatedTS.UnixMicro())
		case "id":
			return r.ID
		case "state":
			return string(r.State)
		case "kind":
			return r.Kind
		case "node_id":
			return r.NodeID
		case "cluster_id":
			return r.ClusterID
		}
		panic(f)
	}
	sort.SliceStable(out, func(i, j int) bool {
		for _, k := range keys {
			a, b := field(out[i], k.Field), field(out[j], k.Field)
			if a != b {
				return (a < b) != k.Desc
			}
		}
		return false
	})
	return out
}

func testListActionsSortAndPaging(t *testing.T, db NewDB) {
	s, all := listFixture(t, db)
	cases := []struct {
		name string
		sort []store.SortKey
		want []store.SortKey // the full order, with the id tie-breaker
	}{
		{"default", nil, []store.SortKey{{Field: "created_ts"}, {Field: "id"}}},
		{"created asc", []store.SortKey{{Field: "created_ts"}}, []store.SortKey{{Field: "created_ts"}, {Field: "id"}}},
		{"created desc", []store.SortKey{{Field: "created_ts", Desc: true}}, []store.SortKey{{Field: "created_ts", Desc: true}, {Field: "id"}}},
		{"created desc id desc", []store.SortKey{{Field: "created_ts", Desc: true}, {Field: "id", Desc: true}}, []store.SortKey{{Field: "created_ts", Desc: true}, {Field: "id", Desc: true}}},
		{"updated desc", []store.SortKey{{Field: "updated_ts", Desc: true}}, []store.SortKey{{Field: "updated_ts", Desc: true}, {Field: "id"}}},
		{"id desc", []store.SortKey{{Field: "id", Desc: true}}, []store.SortKey{{Field: "id", Desc: true}}},
		{"state then created desc", []store.SortKey{{Field: "state"}, {Field: "created_ts", Desc: true}}, []store.SortKey{{Field: "state"}, {Field: "created_ts", Desc: true}, {Field: "id"}}},
		{"kind desc", []store.SortKey{{Field: "kind", Desc: true}}, []store.SortKey{{Field: "kind", Desc: true}, {Field: "id"}}},
		{"cluster node", []store.SortKey{{Field: "cluster_id"}, {Field: "node_id", Desc: true}}, []store.SortKey{{Field: "cluster_id"}, {Field: "node_id", Desc: true}, {Field: "id"}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			want := ids(sorted(all, c.want))
			if got := ids(list(t, s, store.ListQuery{Sort: c.sort})); !slices.Equal(got, want) {
				t.Fatalf("one page:\n got %v\nwant %v", got, want)
			}
			for _, size := range []int{1, 3, 7} {
				var got []string
				marker := ""
				for range len(all) + 1 {
					page := list(t, s, store.ListQuery{Sort: c.sort, Limit: size, Marker: marker})
					got = append(got, ids(page)...)
					if len(page) < size {
						break
					}
					marker = page[len(page)-1].ID
				}
				if !slices.Equal(got, want) {
					t.Fatalf("pages of %d:\n got %v\nwant %v", size, got, want)
				}
			}
		})
	}
}

func testListActionsPagingWithFilter(t *testing.T, db NewDB) {
	s, all := listFixture(t, db)
	q := store.ListQuery{ClusterID: "c1", Sort: []store.SortKey{{Field: "created_ts", Desc: true}}, Limit: 2}
	want := slices.DeleteFunc(sorted(all, []store.SortKey{{Field: "created_ts", Desc: true}, {Field: "id"}}),
		func(r store.Record) bool { return r.ClusterID != "c1" })
	var got []string
	for {
		page := list(t, s, q)
		got = append(got, ids(page)...)
		if len(page) < q.Limit {
			break
		}
		q.Marker = page[len(page)-1].ID
	}
	if !slices.Equal(got, ids(want)) {
		t.Fatalf("got %v\nwant %v", got, ids(want))
	}
}

func testListActionsErrors(t *testing.T, db NewDB) {
	s, _ := listFixture(t, db)
	ctx := context.Background()
	cases := []struct {
		name string
		q    store.ListQuery
		want error
	}{
		{"unknown field", store.ListQuery{Sort: []store.SortKey{{Field: "output"}}}, store.ErrInvalidQuery},
		{"field twice", store.ListQuery{Sort: []store.SortKey{{Field: "state"}, {Field: "state", Desc: true}}}, store.ErrInvalidQuery},
		{"id twice", store.ListQuery{Sort: []store.SortKey{{Field: "id"}, {Field: "id", Desc: true}}}, store.ErrInvalidQuery},
		{"unknown field after id", store.ListQuery{Sort: []store.SortKey{{Field: "id"}, {Field: "output"}}}, store.ErrInvalidQuery},
		{"unknown marker", store.ListQuery{Marker: action.NewID()}, store.ErrNotFound},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			err := s.Read(ctx, func(r store.Reader) error { _, err := r.ListActions(ctx, c.q); return err })
			if !errors.Is(err, c.want) {
				t.Fatalf("err = %v, want %v", err, c.want)
			}
		})
	}
}

func testOpenActionsAndApprovalsBefore(t *testing.T, db NewDB) {
	s := setup(t, db)
	var want, approvals, others []string
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		// Inserted newest first with ties, so that the order must come from
		// created_ts and then the insertion order, not from the id.
		for i, st := range action.States {
			for range 2 {
				r := record(action.NewID())
				r.State = st
				r.CreatedTS = t0.Add(time.Duration(len(action.States)-i) * time.Minute)
				if err := tx.InsertAction(ctx, r); err != nil {
					return err
				}
				if !st.Final() {
					want = append(want, r.ID)
				}
				if st == action.PendingApprove {
					approvals = append(approvals, r.ID)
				}
			}
			other := record(action.NewID())
			other.NodeID = "n2"
			if err := tx.InsertAction(ctx, other); err != nil {
				return err
			}
			others = append(others, other.ID)
			elsewhere := record(action.NewID())
			elsewhere.ClusterID = "c2"
			if err := tx.InsertAction(ctx, elsewhere); err != nil {
				return err
			}
		}
		return nil
	})
	// Non-final states come first in action.States, so they were created last:
	// within each state pair the order is insertion order.
	byTime := func(ids []string) []string {
		var out []string
		for i := len(ids) - 2; i >= 0; i -= 2 {
			out = append(out, ids[i], ids[i+1])
		}
		return out
	}
	read(t, s, func(ctx context.Context, r store.Reader) error {
		got, err := r.OpenActions(ctx, "c1", "n1")
		if err != nil || !slices.Equal(ids(got), byTime(want)) {
			t.Errorf("OpenActions = %v, %v; want %v", ids(got), err, byTime(want))
		}
		// The whole cluster: n2's actions were created first (at t0), and
		// c2's are left out.
		got, err = r.OpenActions(ctx, "c1", "")
		if wantAll := append(slices.Clone(others), byTime(want)...); err != nil || !slices.Equal(ids(got), wantAll) {
			t.Errorf("OpenActions(cluster) = %v, %v; want %v", ids(got), err, wantAll)
		}
		// PENDING_APPROVE actions were created at t0+8m.
		got, err = r.ApprovalsBefore(ctx, t0.Add(8*time.Minute+time.Microsecond))
		if err != nil || !slices.Equal(ids(got), approvals) {
			t.Errorf("ApprovalsBefore = %v, %v; want %v", ids(got), err, approvals)
		}
		got, err = r.ApprovalsBefore(ctx, t0.Add(8*time.Minute))
		if err != nil || len(got) != 0 {
			t.Errorf("ApprovalsBefore(created_ts) = %v, %v; want none", ids(got), err)
		}
		return nil
	})
}

func testEventsSequenceAndSubscribe(t *testing.T, db NewDB) {
	s := setup(t, db)
	ch, unsubscribe := s.Subscribe()
	var seqs []int64
	for i := range 3 {
		update(t, s, func(ctx context.Context, tx store.Tx) error {
			for j := range 2 {
				e := &store.Event{Type: store.EventNodeUp, Actor: "core", ClusterID: "c1", NodeID: "n1",
					RunID: "run-1", Message: fmt.Sprintf("%d.%d", i, j), Data: map[string]any{"i": float64(i)}}
				if err := tx.AppendEvent(ctx, e); err != nil {
					return err
				}
				if e.TS.IsZero() {
					t.Error("AppendEvent left TS zero")
				}
				seqs = append(seqs, e.Seq)
			}
			return nil
		})
		if got := <-ch; got != seqs[len(seqs)-1] {
			t.Fatalf("notified %d, want %d", got, seqs[len(seqs)-1])
		}
	}
	for i := 1; i < len(seqs); i++ {
		if seqs[i] != seqs[i-1]+1 {
			t.Fatalf("sequence not consecutive: %v", seqs)
		}
	}
	// A commit without events notifies nobody.
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		return tx.PutCluster(ctx, &store.Cluster{ID: "c1", Status: store.ClusterHealthy})
	})
	select {
	case seq := <-ch:
		t.Fatalf("notified %d after a commit without events", seq)
	default:
	}
	// Two commits before the reader looks: it sees the newest.
	for range 2 {
		update(t, s, func(ctx context.Context, tx store.Tx) error {
			return tx.AppendEvent(ctx, &store.Event{Type: store.EventNodeDown, Actor: "core"})
		})
	}
	if got := <-ch; got != seqs[len(seqs)-1]+2 {
		t.Fatalf("coalesced notification %d, want %d", got, seqs[len(seqs)-1]+2)
	}
	read(t, s, func(ctx context.Context, r store.Reader) error {
		ev, err := r.Events(ctx, seqs[1], 2)
		if err != nil || len(ev) != 2 || ev[0].Seq != seqs[2] || ev[1].Seq != seqs[3] {
			t.Fatalf("Events(since %d, 2) = %+v, %v", seqs[1], ev, err)
		}
		if ev[0].Message != "1.0" || ev[0].Data["i"] != float64(1) || ev[0].ClusterID != "c1" || ev[0].RunID != "run-1" {
			t.Errorf("event round trip: %+v", ev[0])
		}
		all, _ := r.Events(ctx, 0, 0)
		if len(all) != 8 {
			t.Errorf("Events(0, 0) = %d events, want 8", len(all))
		}
		return nil
	})
	unsubscribe()
	if _, ok := <-ch; ok {
		t.Fatal("channel still open after unsubscribe")
	}
	unsubscribe() // twice is harmless
}

// testLatestSeq: LatestSeq is the newest event's number, 0 with none, the
// transaction's own appends included, and unchanged when older events are
// purged.
func testLatestSeq(t *testing.T, db NewDB) {
	s := setup(t, db)
	latest := func() int64 {
		t.Helper()
		var got int64
		read(t, s, func(ctx context.Context, r store.Reader) error {
			var err error
			got, err = r.LatestSeq(ctx)
			return err
		})
		return got
	}
	if got := latest(); got != 0 {
		t.Fatalf("LatestSeq of an empty log = %d, want 0", got)
	}
	var last int64
	for i := range 5 {
		update(t, s, func(ctx context.Context, tx store.Tx) error {
			for range i + 1 {
				e := &store.Event{Type: store.EventNodeUp, Actor: "core", TS: time.Now().Add(-time.Hour)}
				if err := tx.AppendEvent(ctx, e); err != nil {
					return err
				}
				last = e.Seq
			}
			got, err := tx.LatestSeq(ctx)
			if err == nil && got != last {
				t.Errorf("LatestSeq inside the Update = %d, want its own %d", got, last)
			}
			return err
		})
		if got := latest(); got != last {
			t.Fatalf("LatestSeq = %d, want %d", got, last)
		}
	}
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		_, err := tx.PurgeEvents(ctx, time.Now().Add(-time.Minute), 3)
		return err
	})
	if got := latest(); got != last {
		t.Fatalf("LatestSeq after purging older events = %d, want %d", got, last)
	}
}

func testEventSequenceSurvivesReopen(t *testing.T, db NewDB) {
	open := db(t)
	ctx := context.Background()
	var last int64
	for range 2 {
		s := open(t)
		e := &store.Event{Type: store.EventNodeUp, Actor: "core"}
		if err := s.Update(ctx, func(tx store.Tx) error { return tx.AppendEvent(ctx, e) }); err != nil {
			t.Fatal(err)
		}
		if e.Seq <= last {
			t.Fatalf("seq %d after %d", e.Seq, last)
		}
		last = e.Seq
		s.Close()
	}
}

func testRowsWritten(t *testing.T, db NewDB) {
	s := setup(t, db)
	ctx := context.Background()
	steps := []struct {
		name string
		fn   func(tx store.Tx) error
		rows int64
	}{
		{"cluster and two nodes", func(tx store.Tx) error {
			if err := tx.PutCluster(ctx, &store.Cluster{ID: "c1", Status: store.ClusterHealthy}); err != nil {
				return err
			}
			for _, n := range []string{"n1", "n2"} {
				if err := tx.PutNode(ctx, &store.Node{ClusterID: "c1", ID: n, Status: store.NodeUnknown}); err != nil {
					return err
				}
			}
			return nil
		}, 3},
		{"reads only", func(tx store.Tx) error { _, err := tx.Nodes(ctx, ""); return err }, 0},
		{"action, history, event", func(tx store.Tx) error {
			r := record("3f0c8a52-7e4e-4a8e-9a4e-4f5a3b0f2c11")
			if err := tx.InsertAction(ctx, r); err != nil {
				return err
			}
			if err := tx.AppendHistory(ctx, r.ID, action.Transition{From: action.PendingSchedule, To: action.New, Actor: "n1"}); err != nil {
				return err
			}
			return tx.AppendEvent(ctx, &store.Event{Type: store.EventActionStateChanged, Actor: "n1"})
		}, 3},
		{"update of a missing action", func(tx store.Tx) error {
			_ = tx.UpdateAction(ctx, record(action.NewID()))
			return nil
		}, 0},
		{"delete a node", func(tx store.Tx) error { return tx.DeleteNode(ctx, "c1", "n2") }, 1},
	}
	var total int64
	for _, st := range steps {
		if err := s.Update(ctx, st.fn); err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		total += st.rows
		if got := s.RowsWritten(); got != total {
			t.Fatalf("after %s: RowsWritten = %d, want %d", st.name, got, total)
		}
	}
}

func testReadIsASnapshot(t *testing.T, db NewDB) {
	s := setup(t, db)
	ctx := context.Background()
	putClusterNode(t, s, "c1")
	err := s.Read(ctx, func(r store.Reader) error {
		if _, ok := r.(store.Tx); ok {
			t.Error("the reader of Read can write")
		}
		before, err := r.Clusters(ctx)
		if err != nil {
			return err
		}
		putClusterNode(t, s, "c2")
		after, err := r.Clusters(ctx)
		if err != nil {
			return err
		}
		if len(before) != 1 || len(after) != 1 {
			t.Errorf("snapshot changed inside Read: %d then %d clusters", len(before), len(after))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// testErrorsLeaveTheTransactionUsable: a write refused with ErrExists or
// ErrNotFound does not spoil the Update it ran in; what else it wrote commits.
func testErrorsLeaveTheTransactionUsable(t *testing.T, db NewDB) {
	s := setup(t, db)
	putClusterNode(t, s, "c1", "n1")
	taken := record(action.NewID())
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		if err := tx.InsertAction(ctx, taken); err != nil {
			return err
		}
		return tx.InsertToken(ctx, &store.Token{Name: "alice", Roles: []string{store.RoleViewer}, Hash: "h1"})
	})
	later := record(action.NewID())
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		refused := []struct {
			name string
			err  error
			want error
		}{
			{"insert a taken action id", tx.InsertAction(ctx, record(taken.ID)), store.ErrExists},
			{"insert a taken token name", tx.InsertToken(ctx, &store.Token{Name: "alice", Hash: "h2"}), store.ErrExists},
			{"insert a taken token hash", tx.InsertToken(ctx, &store.Token{Name: "bob", Hash: "h1"}), store.ErrExists},
			{"node of a missing cluster", tx.PutNode(ctx, &store.Node{ClusterID: "nope", ID: "n1", Status: store.NodeUnknown}), store.ErrNotFound},
			{"history of a missing action", tx.AppendHistory(ctx, action.NewID(), action.Transition{From: action.New, To: action.Done, Actor: "n1"}), store.ErrNotFound},
			{"update a missing action", tx.UpdateAction(ctx, record(action.NewID())), store.ErrNotFound},
			{"delete a missing node", tx.DeleteNode(ctx, "c1", "nope"), store.ErrNotFound},
			{"delete a missing token", tx.DeleteToken(ctx, "nope"), store.ErrNotFound},
		}
		for _, r := range refused {
			if !errors.Is(r.err, r.want) {
				t.Errorf("%s: %v, want %v", r.name, r.err, r.want)
			}
		}
		if err := tx.InsertAction(ctx, later); err != nil {
			return err
		}
		if err := tx.AppendHistory(ctx, later.ID, action.Transition{From: action.PendingApprove, To: action.PendingSchedule, Actor: "bob"}); err != nil {
			return err
		}
		return tx.AppendEvent(ctx, &store.Event{Type: store.EventActionCreated, Actor: "alice", ActionID: later.ID})
	})
	read(t, s, func(ctx context.Context, r store.Reader) error {
		if _, err := r.Action(ctx, later.ID); err != nil {
			t.Errorf("the write after the refused ones: %v", err)
		}
		if h, err := r.History(ctx, later.ID); err != nil || len(h) != 1 {
			t.Errorf("history = %+v, %v", h, err)
		}
		if toks, err := r.Tokens(ctx); err != nil || len(toks) != 1 {
			t.Errorf("tokens = %+v, %v", toks, err)
		}
		return nil
	})
}

// testConcurrentUpdatesSerialize: read-modify-write Updates from two stores
// on one database (two replicas) lose no increment.
func testConcurrentUpdatesSerialize(t *testing.T, db NewDB) {
	open := db(t)
	stores := []store.Store{open(t), open(t)}
	putClusterNode(t, stores[0], "c1", "n1")
	const workers, each = 4, 10
	var wg sync.WaitGroup
	errs := make(chan error, workers*each)
	for w := range workers {
		s := stores[w%len(stores)]
		wg.Go(func() {
			ctx := context.Background()
			for range each {
				errs <- s.Update(ctx, func(tx store.Tx) error {
					n, err := tx.Node(ctx, "c1", "n1")
					if err != nil {
						return err
					}
					n.Cursor++
					n.UpdatedTS = time.Time{}
					return tx.PutNode(ctx, n)
				})
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	read(t, stores[1], func(ctx context.Context, r store.Reader) error {
		n, err := r.Node(ctx, "c1", "n1")
		if err != nil || n.Cursor != workers*each {
			t.Errorf("cursor = %+v, %v; want %d", n, err, workers*each)
		}
		return nil
	})
}

// testEventsAreNumberedInCommitOrder: a follower that reads the events after
// the last number it saw, while writers on two stores append concurrently,
// misses none (a smaller number never commits after a larger one is seen).
func testEventsAreNumberedInCommitOrder(t *testing.T, db NewDB) {
	open := db(t)
	stores := []store.Store{open(t), open(t)}
	const workers, each = 4, 15
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make(chan error, workers*each)
	for w := range workers {
		s := stores[w%len(stores)]
		wg.Go(func() {
			for i := range each {
				errs <- s.Update(ctx, func(tx store.Tx) error {
					for j := range 2 {
						if err := tx.AppendEvent(ctx, &store.Event{Type: store.EventNodeUp, Actor: "core",
							Message: fmt.Sprintf("%d.%d.%d", w, i, j)}); err != nil {
							return err
						}
					}
					return nil
				})
			}
		})
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	seen := map[int64]bool{}
	var cursor int64
	follow := func() {
		t.Helper()
		read(t, stores[1], func(ctx context.Context, r store.Reader) error {
			evs, err := r.Events(ctx, cursor, 0)
			for _, e := range evs {
				seen[e.Seq] = true
				cursor = e.Seq
			}
			return err
		})
	}
	for finished := false; !finished; {
		select {
		case <-done:
			finished = true
		default:
		}
		follow()
	}
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	read(t, stores[0], func(ctx context.Context, r store.Reader) error {
		all, err := r.Events(ctx, 0, 0)
		if err != nil {
			return err
		}
		if len(all) != workers*each*2 {
			t.Errorf("%d events stored, want %d", len(all), workers*each*2)
		}
		var missed []int64
		for _, e := range all {
			if !seen[e.Seq] {
				missed = append(missed, e.Seq)
			}
		}
		if len(missed) > 0 {
			t.Errorf("the follower missed events %v (committed after a larger number was read)", missed)
		}
		return nil
	})
}

// DownNodes names the DOWN nodes of one cluster, in order, and no other:
// the last commit of a full sync decides the cluster's status from it
// without reading every node whole.
func testDownNodesOfOneClusterOnly(t *testing.T, db NewDB) {
	s := setup(t, db)
	putClusterNode(t, s, "c1", "n1", "n2", "n3", "n4")
	putClusterNode(t, s, "c2", "n1", "n2")
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		for _, n := range []store.Node{
			{ClusterID: "c1", ID: "n3", Addr: "n3:7420", Source: store.SourceStatic, Status: store.NodeDown, StatusReason: "no answer"},
			{ClusterID: "c1", ID: "n1", Addr: "n1:7420", Source: store.SourceStatic, Status: store.NodeDown, StatusReason: "left", DownCause: store.CauseLeft},
			{ClusterID: "c1", ID: "n2", Addr: "n2:7420", Source: store.SourceStatic, Status: store.NodeUp},
			{ClusterID: "c2", ID: "n2", Addr: "n2:7420", Source: store.SourceStatic, Status: store.NodeDown},
		} {
			if err := tx.PutNode(ctx, &n); err != nil {
				return err
			}
		}
		return nil
	})
	read(t, s, func(ctx context.Context, r store.Reader) error {
		for cluster, want := range map[string][]string{"c1": {"n1", "n3"}, "c2": {"n2"}, "none": nil} {
			got, err := r.DownNodes(ctx, cluster)
			if err != nil {
				return err
			}
			if !slices.Equal(got, want) {
				t.Errorf("DownNodes(%s) = %v, want %v", cluster, got, want)
			}
		}
		return nil
	})
}
