package actions_test

import (
	"context"
	"errors"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/musterhq/muster/core/actions"
	"github.com/musterhq/muster/core/api"
	"github.com/musterhq/muster/core/approval"
	"github.com/musterhq/muster/core/auth"
	"github.com/musterhq/muster/core/orchestrate"
	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/core/store/sqlite"
	"github.com/musterhq/muster/shared/action"
	"github.com/musterhq/muster/shared/client"
	"github.com/musterhq/muster/shared/live"
	"github.com/musterhq/muster/shared/wire"
)

// One rule, two callers: the approval window (approval.ttl) is decided by
// actions.Rules alone. Through the API, an action past its window cannot be
// approved, and the refusal changes nothing; through the orchestrator's
// sweep, the same action is CANCELLED "expired" with an action.expired
// event, while one inside its window is left alone and can be approved.
func TestTheApprovalWindowIsOneRuleForTheAPIAndTheOrchestrator(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	err = st.Update(ctx, func(tx store.Tx) error {
		if err := tx.PutCluster(ctx, &store.Cluster{ID: "prod", Status: store.ClusterHealthy}); err != nil {
			return err
		}
		return tx.PutNode(ctx, &store.Node{ClusterID: "prod", ID: "db-1", Addr: "127.0.0.1:1",
			Source: store.SourceStatic, Status: store.NodeUnknown})
	})
	if err != nil {
		t.Fatal(err)
	}
	const ttl = time.Hour
	policy := approval.DefaultPolicy()
	policy.TTL = ttl
	srv := api.New(api.Config{Policy: live.New(policy)}, st, nil, nil)
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(func() { srv.Close(); ts.Close() })
	orch, err := orchestrate.New(orchestrate.Config{Rules: &actions.Rules{Policy: live.New(policy)}}, st, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(orch.Stop)
	token := func(name, role string) *client.Core {
		secret, err := auth.CreateToken(ctx, st, name, []string{role}, "test", "")
		if err != nil {
			t.Fatal(err)
		}
		return client.NewCore(ts.URL, secret, nil)
	}
	alice, bob := token("alice", store.RoleOperator), token("bob", store.RoleApprover)

	create := func() string {
		a, err := alice.CreateAction(ctx, &wire.CreateActionRequest{ClusterID: "prod", NodeID: "db-1", Kind: "muster.io/debug.ping"})
		if err != nil {
			t.Fatal(err)
		}
		return a.ID
	}
	get := func(id string) *store.Record {
		var rec *store.Record
		if err := st.Read(ctx, func(r store.Reader) error {
			var err error
			rec, err = r.Action(ctx, id)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		return rec
	}
	old, fresh := create(), create()
	// old was created two windows ago.
	err = st.Update(ctx, func(tx store.Tx) error {
		r, err := tx.Action(ctx, old)
		if err != nil {
			return err
		}
		r.CreatedTS = r.CreatedTS.Add(-2 * ttl)
		return tx.UpdateAction(ctx, r)
	})
	if err != nil {
		t.Fatal(err)
	}
	before := get(old)

	if _, err := bob.Approve(ctx, old); !errors.Is(err, client.ErrConflict) {
		t.Fatalf("API approve past the window: %v, want a conflict", err)
	}
	if after := get(old); after.State != action.PendingApprove || !after.UpdatedTS.Equal(before.UpdatedTS) {
		t.Fatalf("a refused approval changed the action: %+v", after)
	}

	n, err := orch.ExpireApprovals(ctx)
	if err != nil || n != 1 {
		t.Fatalf("orchestrator expired %d (%v), want 1", n, err)
	}
	if r := get(old); r.State != action.Cancelled || r.StateReason != actions.ReasonExpired {
		t.Fatalf("expired action %s %q", r.State, r.StateReason)
	}
	evs, err := bob.Events(ctx, 0, 100, client.EventFilter{})
	if err != nil {
		t.Fatal(err)
	}
	var expired int
	for _, e := range evs.Events {
		if e.Type == store.EventActionExpired && e.ActionID == old && e.Actor == actions.ActorCore {
			expired++
		}
	}
	if expired != 1 {
		t.Fatalf("%d action.expired events for %s, want 1", expired, old)
	}

	if r := get(fresh); r.State != action.PendingApprove {
		t.Fatalf("an action inside its window became %s", r.State)
	}
	if a, err := bob.Approve(ctx, fresh); err != nil || a.State != action.PendingSchedule {
		t.Fatalf("API approve inside the window: %v, %v", a, err)
	}
}
