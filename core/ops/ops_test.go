package ops_test

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/musterhq/muster/core/approval"
	"github.com/musterhq/muster/core/auth"
	"github.com/musterhq/muster/core/ops"
	"github.com/musterhq/muster/core/ops/opstest"
	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/core/store/sqlite"
	"github.com/musterhq/muster/shared/action"
	"github.com/musterhq/muster/shared/live"
	"github.com/musterhq/muster/shared/wire"
)

const kindSleep = "muster.io/debug.sleep"

type env struct {
	t      *testing.T
	st     *sqlite.Store
	ops    *ops.Ops
	policy *live.Value[approval.Policy]
	syncs  *opstest.Syncs
}

// Callers of each role.
var (
	operator = ops.Caller{Name: "op", Roles: []string{store.RoleOperator}, Addr: "192.0.2.2"}
	approver = ops.Caller{Name: "appr", Roles: []string{store.RoleApprover}, Addr: "192.0.2.3"}
	both     = ops.Caller{Name: "self", Roles: []string{store.RoleOperator, store.RoleApprover}, Addr: "192.0.2.4"}
)

// setup makes the operations over a fresh SQLite store holding cluster prod
// with nodes db-1 and db-2, which know the sleep kind; every action needs
// approval.
func setup(t *testing.T) *env {
	t.Helper()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	now := time.Now().UTC()
	err = st.Update(ctx, func(tx store.Tx) error {
		if err := tx.PutCluster(ctx, &store.Cluster{ID: "prod", Status: store.ClusterHealthy, UpdatedTS: now}); err != nil {
			return err
		}
		for _, id := range []string{"db-1", "db-2"} {
			if err := tx.PutNode(ctx, &store.Node{ClusterID: "prod", ID: id, Addr: "127.0.0.1:1", Source: store.SourceStatic,
				Status: store.NodeUp, Kinds: []string{kindSleep}, UpdatedTS: now, LastContact: &now}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, st: st, policy: live.New(approval.DefaultPolicy()), syncs: &opstest.Syncs{}}
	e.ops = ops.New(ops.Config{Store: st, Policy: e.policy, Nudge: e.syncs})
	return e
}

// create makes an action on node as who, through the operations.
func (e *env) create(who ops.Caller, node string) *store.Record {
	e.t.Helper()
	rec, err := e.ops.CreateAction(context.Background(), who, ops.ActionRequest{ClusterID: "prod", NodeID: node,
		Kind: kindSleep, Args: []byte(`{"seconds":1}`)})
	if err != nil {
		e.t.Fatal(err)
	}
	e.syncs.Take()
	return rec
}

func (e *env) events() int {
	e.t.Helper()
	n := 0
	_, err := store.EachEvent(context.Background(), e.st, 0, 500, func(*store.Event) error { n++; return nil })
	if err != nil {
		e.t.Fatal(err)
	}
	return n
}

// TestApprovingAnActionSyncsOneNodeNotTheCluster: an approval has one
// node's action to push, so it costs one sync of that node, whichever
// transport asked; an undrain may let a wave go, so it syncs the cluster.
func TestApprovingAnActionSyncsOneNodeNotTheCluster(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	rec := e.create(operator, "db-2")
	if rec.State != action.PendingApprove {
		t.Fatalf("created %s, want PENDING_APPROVE", rec.State)
	}
	if _, err := e.ops.ApproveAction(ctx, approver, rec.ID[:8], "CH-1"); err != nil {
		t.Fatal(err)
	}
	if got := e.syncs.Take(); !slices.Equal(got, []string{"node:prod/db-2"}) {
		t.Fatalf("an approval asked for syncs %v, want one of node prod/db-2", got)
	}
	urgent := e.create(operator, "db-1")
	if _, err := e.ops.MarkActionUrgent(ctx, approver, urgent.ID, "outage 12"); err != nil {
		t.Fatal(err)
	}
	if got := e.syncs.Take(); !slices.Equal(got, []string{"node:prod/db-1"}) {
		t.Fatalf("marking urgent asked for syncs %v, want one of node prod/db-1", got)
	}
	if _, err := e.ops.DrainNode(ctx, operator, "prod", "db-1", "disk"); err != nil {
		t.Fatal(err)
	}
	if got := e.syncs.Take(); !slices.Equal(got, []string{"node:prod/db-1"}) {
		t.Fatalf("a drain asked for syncs %v, want one of node prod/db-1", got)
	}
	if _, err := e.ops.UndrainNode(ctx, operator, "prod", "db-1"); err != nil {
		t.Fatal(err)
	}
	if got := e.syncs.Take(); !slices.Equal(got, []string{"prod"}) {
		t.Fatalf("an undrain asked for syncs %v, want one of cluster prod", got)
	}
	rej := e.create(operator, "db-1")
	if _, err := e.ops.RejectAction(ctx, approver, rej.ID, ""); err != nil {
		t.Fatal(err)
	}
	if got := e.syncs.Take(); len(got) != 0 {
		t.Fatalf("a rejection asked for syncs %v, want none", got)
	}
}

// TestEveryVerbTakesItsRoutesPermission: each verb refuses every role
// that lacks the permission its API route and its web UI route take,
// with a 403 naming the roles that may and nothing written or synced,
// and lets every role that has it past the check.
func TestEveryVerbTakesItsRoutesPermission(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	rec := e.create(operator, "db-1")
	run := &wire.CreateRunRequest{ClusterID: "prod", Stages: []wire.StageSpec{{Name: "s", Kind: kindSleep,
		Target: wire.Target{All: true}}}}
	verbs := []struct {
		name string
		perm auth.Permission
		call func(c ops.Caller) error
	}{
		{"create action", auth.Create, func(c ops.Caller) error {
			_, err := e.ops.CreateAction(ctx, c, ops.ActionRequest{ClusterID: "prod", NodeID: "db-1", Kind: kindSleep})
			return err
		}},
		{"approve action", auth.Approve, func(c ops.Caller) error { _, err := e.ops.ApproveAction(ctx, c, rec.ID, ""); return err }},
		{"reject action", auth.Reject, func(c ops.Caller) error { _, err := e.ops.RejectAction(ctx, c, rec.ID, ""); return err }},
		{"urgent action", auth.Approve, func(c ops.Caller) error { _, err := e.ops.MarkActionUrgent(ctx, c, rec.ID, "now"); return err }},
		{"cancel action", auth.Cancel, func(c ops.Caller) error { _, _, err := e.ops.CancelAction(ctx, c, action.NewID(), ""); return err }},
		{"retry action", auth.Retry, func(c ops.Caller) error { _, err := e.ops.RetryAction(ctx, c, rec.ID, ""); return err }},
		{"create run", auth.Create, func(c ops.Caller) error { _, err := e.ops.CreateRun(ctx, c, run); return err }},
		{"retry run", auth.Create, func(c ops.Caller) error { _, err := e.ops.RetryRun(ctx, c, action.NewID(), ""); return err }},
		{"approve run", auth.Approve, func(c ops.Caller) error { _, err := e.ops.ApproveRun(ctx, c, action.NewID(), ""); return err }},
		{"reject run", auth.Reject, func(c ops.Caller) error { _, err := e.ops.RejectRun(ctx, c, action.NewID(), ""); return err }},
		{"pause run", auth.Cancel, func(c ops.Caller) error { _, err := e.ops.PauseRun(ctx, c, action.NewID()); return err }},
		{"resume run", auth.Continue, func(c ops.Caller) error { _, err := e.ops.ResumeRun(ctx, c, action.NewID(), ""); return err }},
		{"promote run", auth.Approve, func(c ops.Caller) error { _, err := e.ops.PromoteRun(ctx, c, action.NewID(), ""); return err }},
		{"cancel run", auth.Cancel, func(c ops.Caller) error { _, err := e.ops.CancelRun(ctx, c, action.NewID(), ""); return err }},
		{"urgent run", auth.Approve, func(c ops.Caller) error { _, err := e.ops.MarkRunUrgent(ctx, c, action.NewID(), "now"); return err }},
		{"apply playbook", auth.Create, func(c ops.Caller) error { _, _, err := e.ops.ApplyPlaybook(ctx, c, "not: yaml: ["); return err }},
		{"plan playbook", auth.Read, func(c ops.Caller) error {
			_, err := e.ops.PlanPlaybook(ctx, c, "nope", &wire.PlanRequest{ClusterID: "prod"})
			return err
		}},
		{"plan a document", auth.Create, func(c ops.Caller) error {
			_, err := e.ops.PlanPlaybook(ctx, c, "nope", &wire.PlanRequest{ClusterID: "prod", Document: "name: nope"})
			return err
		}},
		{"start playbook", auth.Create, func(c ops.Caller) error {
			_, err := e.ops.StartPlaybook(ctx, c, "nope", &wire.PlanRequest{ClusterID: "prod"})
			return err
		}},
		{"drain", auth.Drain, func(c ops.Caller) error { _, err := e.ops.DrainNode(ctx, c, "prod", "gone", ""); return err }},
		{"undrain", auth.Drain, func(c ops.Caller) error { _, err := e.ops.UndrainNode(ctx, c, "prod", "gone"); return err }},
		{"forget", auth.Forget, func(c ops.Caller) error { _, err := e.ops.ForgetNode(ctx, c, "prod", "gone"); return err }},
		{"revoke", auth.Revoke, func(c ops.Caller) error { _, err := e.ops.RevokeNode(ctx, c, "prod", "gone", ""); return err }},
		{"replace", auth.Forget, func(c ops.Caller) error { _, _, err := e.ops.ReplaceNode(ctx, c, "prod", "gone", "db-2"); return err }},
		{"sync cluster", auth.Orchestrate, func(c ops.Caller) error { return e.ops.SyncCluster(ctx, c, "nope") }},
		{"apply schedule", auth.Create, func(c ops.Caller) error {
			_, err := e.ops.ApplySchedule(ctx, c, &wire.CreateScheduleRequest{Name: "bad name"})
			return err
		}},
		{"approve schedule", auth.Approve, func(c ops.Caller) error { _, err := e.ops.ApproveSchedule(ctx, c, "nope", ""); return err }},
		{"reject schedule", auth.Reject, func(c ops.Caller) error { _, err := e.ops.RejectSchedule(ctx, c, "nope", ""); return err }},
		{"pause schedule", auth.Cancel, func(c ops.Caller) error { _, err := e.ops.PauseSchedule(ctx, c, "nope", ""); return err }},
		{"resume schedule", auth.Continue, func(c ops.Caller) error { _, err := e.ops.ResumeSchedule(ctx, c, "nope", ""); return err }},
		{"delete schedule", auth.Cancel, func(c ops.Caller) error { return e.ops.DeleteSchedule(ctx, c, "nope", "") }},
		{"create token", auth.Tokens, func(c ops.Caller) error {
			_, err := e.ops.CreateToken(ctx, c, &wire.CreateTokenRequest{Name: "bad name", Roles: []string{"viewer"}})
			return err
		}},
		{"revoke token", auth.Tokens, func(c ops.Caller) error { return e.ops.RevokeToken(ctx, c, "nope") }},
		{"redeliver", auth.Notify, func(c ops.Caller) error { _, err := e.ops.Redeliver(ctx, c, 1); return err }},
		{"test notify", auth.Notify, func(c ops.Caller) error { _, err := e.ops.TestNotify(ctx, c, "hook"); return err }},
	}
	for _, v := range verbs {
		for _, role := range auth.Roles {
			c := ops.Caller{Name: "someone", Roles: []string{role}, Addr: "192.0.2.9"}
			before := e.events()
			err := v.call(c)
			var fe *ops.ForbiddenError
			refused := errors.As(err, &fe)
			if may := c.Can(v.perm); may == refused {
				t.Errorf("%s by %s: %v; want refused %v (it takes %s)", v.name, role, err, !may, v.perm)
				continue
			}
			if !refused {
				continue
			}
			// Refused for the verb's permission, or for reading, which a
			// plan of a document takes first.
			p := ops.Describe(err)
			if p.Status != http.StatusForbidden || p.Code != wire.CodeForbidden || (fe.Perm != v.perm && fe.Perm != auth.Read) ||
				!slices.Equal(p.Allowed, auth.Granting(fe.Perm)) || slices.Contains(p.Allowed, role) {
				t.Errorf("%s by %s: %+v, want 403 naming the roles that may %s", v.name, role, p, fe.Perm)
			}
			if after := e.events(); after != before {
				t.Errorf("%s refused to %s wrote %d events", v.name, role, after-before)
			}
			if got := e.syncs.Take(); len(got) != 0 {
				t.Errorf("%s refused to %s asked for syncs %v", v.name, role, got)
			}
		}
		e.syncs.Take()
	}
}

// TestFourEyesHoldsWhateverTheTransport: the requester of an action may not
// approve it, even holding the approver role; another approver may.
func TestFourEyesHoldsWhateverTheTransport(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	rec := e.create(both, "db-1")
	_, err := e.ops.ApproveAction(ctx, both, rec.ID, "")
	if p := ops.Describe(err); p.Status != http.StatusForbidden {
		t.Fatalf("self-approval: %v (%d), want 403", err, p.Status)
	}
	if got := e.syncs.Take(); len(got) != 0 {
		t.Fatalf("a refused approval asked for syncs %v", got)
	}
	if _, err := e.ops.ApproveAction(ctx, approver, rec.ID, ""); err != nil {
		t.Fatalf("another approver: %v", err)
	}
}

// TestOperationsDecideWithThePolicyAsItIsNow: a reload that makes a kind
// need no approval applies to the next call, with nothing rebuilt.
func TestOperationsDecideWithThePolicyAsItIsNow(t *testing.T) {
	t.Parallel()
	e := setup(t)
	if rec := e.create(operator, "db-1"); rec.State != action.PendingApprove {
		t.Fatalf("before the reload: %s, want PENDING_APPROVE", rec.State)
	}
	p := approval.DefaultPolicy()
	p.Rules = []approval.Rule{{Kind: kindSleep, Approval: approval.None}}
	e.policy.Store(p)
	if rec := e.create(operator, "db-1"); rec.State != action.PendingSchedule {
		t.Fatalf("after the reload: %s, want PENDING_SCHEDULE", rec.State)
	}
}

// TestBadInputChangesNothing: an unknown action, an ambiguous or short
// prefix, a reason with control characters, an urgent mark without a
// reason: each is a clear error of its own status, and nothing is written.
func TestBadInputChangesNothing(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	rec := e.create(operator, "db-1")
	for _, id := range []string{"abcdef01-0000-4000-8000-000000000001", "abcdef01-0000-4000-8000-000000000002"} {
		if _, err := e.ops.CreateAction(ctx, operator, ops.ActionRequest{ID: id, ClusterID: "prod", NodeID: "db-1",
			Kind: kindSleep, Args: []byte(`{}`)}); err != nil {
			t.Fatal(err)
		}
	}
	e.syncs.Take()
	before := e.events()
	_, err := e.ops.ApproveAction(ctx, approver, "abcdef01", "")
	if p := ops.Describe(err); p.Status != http.StatusConflict || len(p.Matches) != 2 {
		t.Errorf("an ambiguous prefix: %v answers %+v, want 409 with both ids", err, p)
	}
	for name, tc := range map[string]struct {
		err    func() error
		status int
	}{
		"unknown id":   {func() error { _, err := e.ops.ApproveAction(ctx, approver, action.NewID(), ""); return err }, 404},
		"short prefix": {func() error { _, err := e.ops.ApproveAction(ctx, approver, "ab", ""); return err }, 400},
		"control characters": {func() error {
			_, err := e.ops.ApproveAction(ctx, approver, rec.ID, "ok\x1b[2J")
			return err
		}, 400},
		"urgent without a reason": {func() error { _, err := e.ops.MarkActionUrgent(ctx, approver, rec.ID, " "); return err }, 400},
		"unknown node":            {func() error { _, err := e.ops.DrainNode(ctx, operator, "prod", "nope", ""); return err }, 404},
		"bad schedule name":       {func() error { _, err := e.ops.PauseSchedule(ctx, operator, "../x", ""); return err }, 400},
	} {
		err := tc.err()
		if p := ops.Describe(err); p.Status != tc.status || p.Message == "" || p.Internal {
			t.Errorf("%s: %v answers %+v, want %d", name, err, p, tc.status)
		}
	}
	if after := e.events(); after != before {
		t.Fatalf("refused calls wrote %d events", after-before)
	}
	if got := e.syncs.Take(); len(got) != 0 {
		t.Fatalf("refused calls asked for syncs %v", got)
	}
}
