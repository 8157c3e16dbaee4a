package runs_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/musterhq/muster/core/actions"
	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/wire"
)

// reloadingTx runs reload before its first ListRuns: a policy reload that
// lands while a decision is being made.
type reloadingTx struct {
	store.Tx
	reload func()
}

func (tx *reloadingTx) ListRuns(ctx context.Context, q store.RunQuery) ([]store.Run, error) {
	if tx.reload != nil {
		tx.reload()
		tx.reload = nil
	}
	return tx.Tx.ListRuns(ctx, q)
}

// TestAnExpiryIsDecidedUnderOnePolicy: a reload of the approval policy
// while runs are expired does not mix the TTL before it and the TTL after
// it: the pass decides and reports under the policy it started with.
func TestAnExpiryIsDecidedUnderOnePolicy(t *testing.T) {
	t.Parallel()
	env := setupEngine(t)
	pol := env.policy.Load()
	pol.TTL = time.Hour
	env.policy.Store(pol)
	var r *store.Run
	env.update(func(ctx context.Context, tx store.Tx) error {
		var err error
		r, err = env.e.Create(ctx, tx, &wire.CreateRunRequest{ClusterID: "c", Stages: []wire.StageSpec{{
			Kind: "muster.io/debug.ping", Target: wire.Target{All: true}}}}, actions.Actor{Name: "alice"})
		return err
	})
	env.now = env.now.Add(2 * time.Hour)
	var n int
	env.update(func(ctx context.Context, tx store.Tx) error {
		reloaded := pol
		reloaded.TTL = 0
		var err error
		n, err = env.e.Expire(ctx, &reloadingTx{Tx: tx, reload: func() { env.policy.Store(reloaded) }})
		return err
	})
	if n != 1 {
		t.Fatalf("%d runs expired, want run %s, past the TTL of 1h the pass started with", n, r.ID)
	}
	var evs []store.Event
	env.update(func(ctx context.Context, tx store.Tx) error {
		var err error
		evs, err = tx.Events(ctx, 0, 0)
		return err
	})
	last := evs[len(evs)-1]
	if last.Type != store.EventRunExpired || !strings.Contains(last.Message, "1h0m0s") {
		t.Fatalf("last event %s %q, want the run expired under the TTL of 1h0m0s", last.Type, last.Message)
	}
}
