package actions

import (
	"context"

	"github.com/musterhq/muster/core/store"
)

// Children makes the changes a run makes to its child actions, in the
// shape the run engine declares (core/runs.Actions), with the same rules as
// every other action: a child is stored like any new action, and cancelled
// by the cancel rule of Rules.Cancel.
type Children struct {
	Rules *Rules
}

// Insert stores a child the run engine built, already approved with its run,
// with its history line and action.created event (see Insert).
func (ch Children) Insert(ctx context.Context, tx store.Tx, rec *store.Record, actor, addr, reason string) error {
	return Insert(ctx, tx, rec, Actor{Name: actor, Addr: addr}, reason)
}

// Cancel cancels an unfinished child, at once when no push was attempted,
// otherwise as a request the next pass settles; reason says why (the run
// was cancelled). A finished child is left as it is.
func (ch Children) Cancel(ctx context.Context, tx store.Tx, rec *store.Record, actor, addr, reason string) error {
	if rec.State.Final() {
		return nil
	}
	r := ch.Rules
	if r == nil {
		r = &Rules{}
	}
	got, _, err := r.cancel(ctx, tx, rec, Actor{Name: actor, Addr: addr}, reason)
	if err == nil {
		*rec = *got
	}
	return err
}
