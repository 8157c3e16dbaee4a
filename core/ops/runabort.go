package ops

import (
	"context"

	"github.com/musterhq/muster/core/auth"
	"github.com/musterhq/muster/core/store"
)

// AbortRun aborts a paused run, or one whose canary is in progress: its
// started nodes roll back and it ends ABORTED (runs.Decider.Abort). An
// approver of the run's cluster or the run's requester aborts; the
// reason is optional.
func (o *Ops) AbortRun(ctx context.Context, c Caller, ref, reason string) (RunResult, error) {
	if err := checkReasonAs(c, auth.Continue, reason, false); err != nil {
		return RunResult{}, err
	}
	return o.changeRun(ctx, c, auth.Continue, ref, func(tx store.Tx, id string) (*store.Run, error) {
		r, err := o.runOn(ctx, tx, c, auth.Continue, id)
		if err != nil {
			return nil, err
		}
		return o.cfg.Runs.Abort(ctx, tx, id, c.actor(""), AuthorizeOn(c, auth.Approve, r.ClusterID) == nil, reason)
	})
}

// CancelRunRollback is an operator's cancel that rolls back: any RUNNING
// or PAUSED run stops as an abort stops it (runs.Decider.CancelRollback).
func (o *Ops) CancelRunRollback(ctx context.Context, c Caller, ref, reason string) (RunResult, error) {
	if err := checkReasonAs(c, auth.Cancel, reason, false); err != nil {
		return RunResult{}, err
	}
	return o.changeRun(ctx, c, auth.Cancel, ref, func(tx store.Tx, id string) (*store.Run, error) {
		return o.cfg.Runs.CancelRollback(ctx, tx, id, c.actor(""), reason)
	})
}

// MayAbort says, for a page that offers the button, whether the caller may
// abort run now (nil) or why not.
func (o *Ops) MayAbort(c Caller, run *store.Run) error {
	if err := AuthorizeOn(c, auth.Continue, run.ClusterID); err != nil {
		return err
	}
	return o.cfg.Runs.MayAbort(run, c.Name, AuthorizeOn(c, auth.Approve, run.ClusterID) == nil)
}
