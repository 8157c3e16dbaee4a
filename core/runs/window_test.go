package runs_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/musterhq/muster/core/actions"
	"github.com/musterhq/muster/core/runs"
	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/action"
	"github.com/musterhq/muster/shared/limit"
	"github.com/musterhq/muster/shared/wire"
)

// A run with a not_before: its digest covers it, it can be approved until
// the approval TTL after it (not after its creation), and its children
// carry it, so that none is pushed earlier. An urgent mark (an approver
// other than the requester, with a reason) reaches the children not yet
// sent and those to come.
func TestRunNotBeforeAndUrgentReachItsChildren(t *testing.T) {
	t.Parallel()
	env := setupEngine(t)
	nb := env.now.Add(36 * time.Hour)
	one := limit.MustParse("1")
	req := &wire.CreateRunRequest{ClusterID: "c", NotBefore: &nb, Stages: []wire.StageSpec{{
		Kind: "muster.io/debug.ping", Target: wire.Target{All: true}, MaxConcurrency: &one}}}
	var r *store.Run
	env.update(func(ctx context.Context, tx store.Tx) error {
		var err error
		r, err = env.e.Create(ctx, tx, req, actions.Actor{Name: "alice"})
		return err
	})
	if r.Digest == runs.DigestRun("c", r.Stages, 0) || r.NotBefore == nil || !r.NotBefore.Equal(nb) {
		t.Fatalf("digest %s does not cover not_before %v", r.Digest, r.NotBefore)
	}
	env.now = env.now.Add(30 * time.Hour) // past the 24 h TTL from creation
	env.update(func(ctx context.Context, tx store.Tx) error {
		_, err := env.e.MarkUrgent(ctx, tx, r.ID, actions.Actor{Name: "alice", Note: "mine"})
		if !errors.Is(err, runs.ErrForbidden) {
			t.Errorf("the requester marked her run urgent: %v", err)
		}
		if _, err := env.e.MarkUrgent(ctx, tx, r.ID, actions.Actor{Name: "bob"}); err == nil {
			t.Error("marked urgent without a reason")
		}
		var err2 error
		r, err2 = env.e.Approve(ctx, tx, r.ID, "", actions.Actor{Name: "bob"})
		return err2
	})
	kids := env.children(r.ID)
	if len(kids) != 1 || kids[0].NotBefore == nil || !kids[0].NotBefore.Equal(nb) || kids[0].Urgent != "" {
		t.Fatalf("first child %+v", kids)
	}
	env.update(func(ctx context.Context, tx store.Tx) error {
		_, err := env.e.MarkUrgent(ctx, tx, r.ID, actions.Actor{Name: "carol", Note: "security fix"})
		return err
	})
	if kids = env.children(r.ID); kids[0].Urgent != "security fix" {
		t.Fatalf("the unsent child is not urgent: %q", kids[0].Urgent)
	}
	env.finishChild(kids[0].ID, action.Done)
	env.advance(r.ID)
	kids = env.children(r.ID)
	if len(kids) != 2 || kids[1].Urgent != "security fix" || kids[1].NotBefore == nil {
		t.Fatalf("the next child %+v", kids)
	}
}
