package runs

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/musterhq/muster/core/actions"
	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/action"
)

// Abort (docs/runs-and-playbooks.md, "Abort"): a run is stopped and put
// back. Its running stages start no node; the children not yet sent of
// their procedures are cancelled; each node they started ends its
// procedure as a failed node's would (its when: always steps, then the
// stage's rollback, each once); then the run ends ABORTED, a final state
// of its own. Meanwhile the run is RUNNING, and its state reason says who
// aborted it and why.

// ReasonAborted begins an aborted run's state reason: "aborted by bob:
// the canary's latency doubled".
const ReasonAborted = "aborted by "

// MayAbort says whether who may abort run r now: nil when they may, the
// error Abort would return otherwise. An approver (mayApprove) or the
// run's requester aborts a paused run, or one whose canary is in progress;
// an operator stops any active run and rolls it back with a cancel
// (CancelRollback). The web UI shows its Abort button by it.
func (d *Decider) MayAbort(r *store.Run, who string, mayApprove bool) error {
	switch {
	case r.State != store.RunRunning && r.State != store.RunPaused:
		return wrongState(r, "abort")
	case Aborting(r):
		return wrongState(r, "abort: it is already rolling back")
	case r.State == store.RunRunning && !inCanary(r):
		return wrongState(r, "abort: only a paused run or a canary in progress is aborted; "+
			"an operator stops a running run with cancel --rollback")
	case !mayApprove && who != r.Requester:
		return fmt.Errorf("%w: aborting run %s is for an approver or its requester, %s", ErrForbidden, r.ID, r.Requester)
	}
	return nil
}

// inCanary reports whether a running stage of r is in its canary (not
// yet promoted).
func inCanary(r *store.Run) bool {
	return slices.ContainsFunc(r.Stages, func(st store.RunStage) bool {
		return st.State == store.StageRunning && st.Canary > 0 && !st.Promoted
	})
}

// Abort aborts run id for who (an approver, mayApprove, or its
// requester), with a reason: see MayAbort.
func (d *Decider) Abort(ctx context.Context, tx store.Tx, id string, who actions.Actor, mayApprove bool, reason string) (*store.Run, error) {
	r, err := load(ctx, tx, id, "abort", store.RunRunning, store.RunPaused)
	if err != nil {
		return nil, err
	}
	if err := d.MayAbort(r, who.Name, mayApprove); err != nil {
		return nil, err
	}
	return d.abort(ctx, tx, r, who, reason)
}

// CancelRollback is an operator's abort: it stops any run RUNNING or
// PAUSED (not yet rolling back) and rolls back the nodes it started, as
// Abort does.
func (d *Decider) CancelRollback(ctx context.Context, tx store.Tx, id string, who actions.Actor, reason string) (*store.Run, error) {
	r, err := load(ctx, tx, id, "cancel", store.RunRunning, store.RunPaused)
	if err != nil {
		return nil, err
	}
	if Aborting(r) {
		return nil, wrongState(r, "cancel --rollback: it is already rolling back")
	}
	return d.abort(ctx, tx, r, who, reason)
}

// abort marks r's running stages aborted, cancels the procedure's children
// not yet sent, and takes the run's next step (the rollbacks, or its end).
func (d *Decider) abort(ctx context.Context, tx store.Tx, r *store.Run, who actions.Actor, reason string) (*store.Run, error) {
	t := d.now()
	var stages []string
	for i := range r.Stages {
		if r.Stages[i].State == store.StageRunning {
			r.Stages[i].Aborted = true
			stages = append(stages, r.Stages[i].Name)
		}
	}
	recs, err := tx.RunChildren(ctx, r.ID)
	if err != nil {
		return nil, err
	}
	for i := range recs {
		k := &recs[i]
		if k.State != action.PendingSchedule || k.PushedStoreID != "" {
			continue
		}
		st := r.Stages[stageIndex(r, k.Stage)]
		if sp := stepOf(&st, k.Step); sp.When == WhenAlways || slices.ContainsFunc(st.Rollback, func(s store.RunStep) bool {
			return s.Name == k.Step
		}) {
			continue // a failed node's too: it goes on
		}
		if _, err := d.actions.CancelChild(ctx, tx, k, who, ReasonRunAborted); err != nil {
			return nil, err
		}
	}
	// The core's own steps not started yet are dropped as unsent children
	// are; a failed node's go on.
	cancelCore(r, ReasonRunAborted, func(st *store.RunStage, step string) bool {
		return stepOf(st, step).When == WhenAlways || slices.ContainsFunc(st.Rollback, func(s store.RunStep) bool {
			return s.Name == step
		})
	}, t)
	c := changeOf(r)
	why := joinReason(ReasonAborted+who.Name, reason)
	msg := fmt.Sprintf("%s aborted run %s", who.Name, r.ID)
	if len(stages) > 0 {
		msg += fmt.Sprintf(": stage(s) %s roll back the nodes they started", strings.Join(stages, ", "))
	}
	if strings.TrimSpace(reason) != "" {
		msg += ": " + strings.TrimSpace(reason)
	}
	data := map[string]any{"reason": strings.TrimSpace(reason), "stages": stages}
	if len(stages) == 0 {
		// Nothing runs: it ends at once.
		c.event(store.EventRunAborted, who, t, msg, data)
		c.finish(store.RunAborted, why, store.EventRunFinished, who, fmt.Sprintf("run %s %s: %s", r.ID, store.RunAborted, why), t)
		return r, c.save(ctx, tx)
	}
	r.State, r.StateReason, r.UpdatedTS = store.RunRunning, why, t
	c.event(store.EventRunAborted, who, t, msg, data)
	if err := c.save(ctx, tx); err != nil {
		return nil, err
	}
	_, err = d.adv.advance(ctx, tx, r, t)
	return r, err
}
