package api

import (
	"context"
	"fmt"

	"github.com/musterhq/muster/core/runs"
	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/action"
)

// Rules creates and cancels actions for the run engine with the same rules
// the API's own handlers follow.
type Rules struct{}

var _ runs.Actions = Rules{}

// Insert stores a new action with its history line and event.
func (Rules) Insert(ctx context.Context, tx store.Tx, rec *store.Record, actor, addr, reason string) error {
	return insertNew(ctx, tx, rec, actor, addr, reason)
}

// Cancel cancels an action never pushed at once, and asks the agent to
// cancel any other unfinished one; a finished action is left as it is.
func (Rules) Cancel(ctx context.Context, tx store.Tx, rec *store.Record, actor, addr, reason string) error {
	if rec.State.Final() {
		return nil
	}
	t := now()
	from := rec.State
	ev := &store.Event{TS: t, Actor: actor, ClientAddr: addr, ClusterID: rec.ClusterID, NodeID: rec.NodeID,
		ActionID: rec.ID, RunID: rec.RunID}
	switch {
	case rec.State == action.PendingApprove, rec.State == action.PendingSchedule && rec.PushedStoreID == "":
		rec.State, rec.StateReason, rec.FinishedTS = action.Cancelled, reason, action.TimePtr(t)
		ev.Type, ev.Message = store.EventActionStateChanged, fmt.Sprintf("%s cancelled %s: %s", actor, rec.ID, reason)
	default:
		if rec.CancelRequested {
			return nil
		}
		rec.CancelRequested = true
		ev.Type, ev.Message = store.EventActionCancelRequested, fmt.Sprintf("%s asked to cancel %s: %s", actor, rec.ID, reason)
	}
	rec.UpdatedTS = t
	if err := tx.UpdateAction(ctx, rec); err != nil {
		return err
	}
	if err := tx.AppendHistory(ctx, rec.ID, action.Transition{TS: t, From: from, To: rec.State, Actor: actor, Reason: reason}); err != nil {
		return err
	}
	ev.Data = map[string]any{"from": string(from), "to": string(rec.State)}
	return tx.AppendEvent(ctx, ev)
}
