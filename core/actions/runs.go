package actions

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/musterhq/muster/core/approval"
	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/action"
)

// Child is a run's child action: what one stage of the run does on one
// node, in one wave. The run's requester is the child's; the run's approver,
// when the run was approved, approved the child too.
type Child struct {
	RunID string
	Stage string
	Wave  int
	// Step is the child's step of its stage's procedure ("" in a stage
	// without steps), Attempt its try of that step (from 1), RetryOf the
	// failed attempt it repeats.
	Step      string
	Attempt   int
	RetryOf   string
	ClusterID string
	NodeID    string
	Kind      string
	Args      json.RawMessage
	TimeoutS  int
	// Requester is the run's requester.
	Requester string
	// ApprovedBy is the run's approver; "" for a run that needed no
	// approval.
	ApprovedBy string
	// NotBefore and Urgent are the run's: no child goes before it, and an
	// urgent run's children pass a closed window.
	NotBefore *time.Time
	Urgent    string
}

// CreateChild stores a run's child with its history line and its
// action.created event naming the run, stage and wave. The child is
// PENDING_SCHEDULE: its approval is the run's, carried with the approval's
// digest of the child's own content (approval.Digest), so that the push
// checks it as it checks every approved action. A child of a run that
// needed no approval carries no approval. A child whose node was forgotten
// since the run was resolved is born CANCELLED with reason "node forgotten"
// and counts against its stage's max_errors.
func (r *Rules) CreateChild(ctx context.Context, tx store.Tx, ch Child, by Actor) (*store.Record, error) {
	t := r.now()
	rec := &store.Record{Action: action.Action{
		ID: action.NewID(), ClusterID: ch.ClusterID, NodeID: ch.NodeID, Kind: ch.Kind, Args: ch.Args,
		State: action.PendingSchedule, StateReason: "run " + ch.RunID, Progress: []byte("{}"),
		Origin: action.OriginCore, Requester: ch.Requester, ApprovedBy: ch.ApprovedBy, TimeoutS: ch.TimeoutS,
		CreatedTS: t, ScheduledTS: action.TimePtr(t), UpdatedTS: t,
		RunID: ch.RunID, Stage: ch.Stage, Wave: ch.Wave, Step: ch.Step, Attempt: ch.Attempt, RetryOf: ch.RetryOf,
		NotBefore: ch.NotBefore, Urgent: ch.Urgent,
	}}
	if ch.ApprovedBy != "" {
		rec.ApprovalDigest = approval.Digest(&rec.Action)
	}
	_, err := tx.Node(ctx, ch.ClusterID, ch.NodeID)
	switch {
	case errors.Is(err, store.ErrNotFound):
		rec.State, rec.StateReason, rec.ScheduledTS, rec.FinishedTS = action.Cancelled, ReasonNodeForgotten, nil, action.TimePtr(t)
		rec.ApprovalDigest = ""
	case err != nil:
		return nil, err
	}
	reason := fmt.Sprintf("run %s, stage %s, wave %d", ch.RunID, ch.Stage, ch.Wave)
	if ch.Step != "" {
		reason += fmt.Sprintf(", step %s", ch.Step)
	}
	if ch.Attempt > 1 {
		reason += fmt.Sprintf(", attempt %d (retry of %s)", ch.Attempt, ch.RetryOf)
	}
	if err := insert(ctx, tx, rec, by, reason); err != nil {
		return nil, fmt.Errorf("run %s: child on %s: %w", ch.RunID, ch.NodeID, err)
	}
	return rec, nil
}

// UrgentChild marks a run's child not yet sent urgent as its run is
// (Engine.MarkUrgent records who and why, in the run's event).
func UrgentChild(ctx context.Context, tx store.Tx, rec *store.Record, reason string, now time.Time) error {
	if rec.State != action.PendingSchedule || rec.PushedStoreID != "" || rec.Urgent == reason {
		return nil
	}
	c := begin(rec)
	c.Rec.Urgent, c.Rec.UpdatedTS = reason, now
	return Write(ctx, tx, c)
}

// CancelChild cancels an unfinished child of a run by the cancel rule of
// Cancel: at once when no push was attempted, otherwise as a request the
// next sync settles; why says why (the run was cancelled, or failed before
// the child was sent). A finished child is returned as it is.
func (r *Rules) CancelChild(ctx context.Context, tx store.Tx, rec *store.Record, by Actor, why string) (*store.Record, error) {
	if rec.State.Final() {
		return rec, nil
	}
	got, _, err := r.cancel(ctx, tx, rec, by, why)
	return got, err
}
