package actions

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/musterhq/muster/core/approval"
	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/action"
)

// Reasons of the changes a pass makes.
const (
	ReasonGone = "the agent purged this id (410)"
	// ReasonDrained is the state_reason of an action held because its
	// node is drained.
	ReasonDrained     = "held: the node is drained; it is sent once the node is undrained"
	ReasonMissing     = "the agent no longer has this action"
	ReasonUnconfirmed = "pushed to an agent database since replaced, with no answer: it may have run there"
	ReasonReapprove   = "the action no longer matches its approval"
	ReasonImported    = "imported from the agent"
	// ReasonCancelledOnNode: the agent cancelled an action the core never
	// asked it to cancel, so someone on the node did.
	ReasonCancelledOnNode = "cancelled on the node"
	// UnknownUser stands for an agent record that names no requester.
	UnknownUser = "unknown"
)

// AgentRequester is the requester the core records for an action made on
// node: the agent's requester (the local user), prefixed by the node id, so
// that it can never pass for a core identity.
func AgentRequester(node, requester string) string {
	if requester == "" {
		requester = UnknownUser
	}
	return node + "/" + requester
}

// Import makes the core's record of an action an agent holds and the core
// has never seen. It is an agent-made action whatever the agent's record
// claims: origin agent, requester "<node>/<user>", and no approval (the core
// never takes approved_by, origin core or a core identity from an agent).
func Import(a *action.Action, node *store.Node, now time.Time) *Change {
	rec := store.Record{Action: *a}
	rec.History = nil
	rec.ClusterID, rec.NodeID = node.ClusterID, node.ID
	rec.Origin = action.OriginAgent
	rec.Requester = AgentRequester(node.ID, a.Requester)
	rec.ApprovedBy, rec.RetryOf = "", ""
	rec.RunID, rec.Stage, rec.Step, rec.Wave, rec.Attempt = "", "", "", 0, 0 // an agent's own action belongs to no run
	rec.Output = action.ClipOutput(a.Output)
	rec.CreatedTS = action.UTC(a.CreatedTS)
	if rec.CreatedTS.IsZero() {
		rec.CreatedTS = now
	}
	rec.UpdatedTS = action.UTC(a.UpdatedTS)
	if rec.UpdatedTS.IsZero() {
		rec.UpdatedTS = now
	}
	rec.ScheduledTS, rec.StartedTS, rec.FinishedTS = utcPtr(a.ScheduledTS), utcPtr(a.StartedTS), utcPtr(a.FinishedTS)
	rec.SeenOnAgent = !a.State.Final()
	by := Actor{Name: node.ID}
	c := &Change{Rec: rec, Insert: true}
	c.History = append(c.History, action.Transition{TS: now, To: a.State, Actor: node.ID, Reason: ReasonImported})
	c.event(store.EventActionCreated, by, time.Time{}, fmt.Sprintf("%s %s %s", ReasonImported, a.Kind, a.State),
		map[string]any{"origin": action.OriginAgent, "state": string(a.State), "requester": rec.Requester})
	return c
}

// Adopt applies the agent's record a to the core's record cur: the agent
// wins, whatever the core's state, because what the agent holds is what ran
// or will run. The core takes the agent's state, kind, args, progress,
// output and times. When the agent's content differs, or its state cannot
// follow the core's (the core had decided a final state, such as CANCELLED
// "rejected", for an action someone pushed to the agent directly), the old
// values stay in the history and an action.conflict event says what the
// core had decided and what happened. An approval does not follow other
// content: it is voided. A cancel the core had decided (CANCELLED) for an
// action the agent still holds unfinished stays pending as a cancel request,
// stored with the record, so the next pass (after a restart too) asks the
// agent again. Adopt returns nil when nothing changes.
func Adopt(cur *store.Record, a *action.Action, node string, now time.Time) *Change {
	c := begin(cur)
	by := Actor{Name: node}
	var why []string
	data := map[string]any{}
	if !action.SameContent(&cur.Action, a) {
		why = append(why, fmt.Sprintf("the agent holds kind %s args %s; the core had kind %s args %s",
			a.Kind, a.Args, cur.Kind, cur.Args))
		data["old_kind"], data["old_args"], data["kind"], data["args"] = cur.Kind, string(cur.Args), a.Kind, string(a.Args)
		if cur.ApprovedBy != "" || cur.ApprovalDigest != "" {
			// The approval was given to the old content: it does not
			// follow the agent's, and approved_by no longer claims it does.
			why = append(why, fmt.Sprintf("the approval by %s covered the old content only and is void", cur.ApprovedBy))
			data["void_approval_by"] = cur.ApprovedBy
			c.Rec.ApprovedBy, c.Rec.ApprovalDigest = "", ""
		}
		c.Rec.Kind, c.Rec.Args = a.Kind, a.Args
	}
	stateConflict := a.State != cur.State && !action.CanReach(cur.State, a.State)
	if stateConflict {
		why = append(why, fmt.Sprintf("the core had decided %s (%s); the agent's record is %s (%s)",
			cur.State, cur.StateReason, a.State, a.StateReason))
		data["core_state"], data["core_reason"] = string(cur.State), cur.StateReason
		data["state"], data["reason"] = string(a.State), a.StateReason
		if cur.State == action.Cancelled && !a.State.Final() {
			// The core's cancel still stands: the agent is asked again.
			c.Rec.CancelRequested = true
			data["cancel_requested"] = true
		}
	}
	if len(why) > 0 {
		to := cur.State
		if stateConflict {
			to = a.State
			c.Rec.State = a.State
		}
		reason := "conflict: " + joinWhy(why)
		c.History = append(c.History, action.Transition{TS: now, From: cur.State, To: to, Actor: node, Reason: reason})
		msg := "the agent holds other content for this id; the agent wins"
		if stateConflict {
			msg = fmt.Sprintf("the core had decided %s (%s) but the agent's record is %s: the agent wins",
				cur.State, cur.StateReason, a.State)
		}
		c.event(store.EventActionConflict, by, time.Time{}, msg, data)
	}
	reason := a.StateReason
	switch {
	case a.State == action.Cancelled && cur.State != action.Cancelled && !cur.CancelRequested:
		// Not the core's cancel: say where it came from, whatever the
		// agent calls it.
		reason = ReasonCancelledOnNode
		if a.StateReason != "" && a.StateReason != action.ReasonCancelled {
			reason += ": " + a.StateReason
		}
	case a.State == action.Cancelled && cur.State == action.Cancelled && strings.HasPrefix(cur.StateReason, ReasonCancelledOnNode):
		// Told already: the same record pulled again (it changed once
		// more after it ended, or a second sync read it) keeps saying so.
		reason = cur.StateReason
	}
	if c.Rec.State != a.State {
		c.move(a.State, by, reason, "", "", now)
	}
	c.Rec.StateReason = reason
	c.Rec.Progress = a.Progress
	c.Rec.Output = action.ClipOutput(a.Output)
	if len(a.Outputs) > 0 {
		c.Rec.Outputs = a.Outputs
	}
	c.Rec.TimeoutS = a.TimeoutS
	c.Rec.ScheduledTS, c.Rec.StartedTS, c.Rec.FinishedTS = utcPtr(a.ScheduledTS), utcPtr(a.StartedTS), utcPtr(a.FinishedTS)
	if !a.State.Final() {
		c.Rec.SeenOnAgent = true
	} else {
		c.Rec.CancelRequested = false
	}
	if sameRecord(cur, &c.Rec) {
		return nil
	}
	if u := action.UTC(a.UpdatedTS); u.After(c.Rec.UpdatedTS) {
		c.Rec.UpdatedTS = u
	}
	return c
}

func joinWhy(why []string) string {
	s := why[0]
	for _, w := range why[1:] {
		s += "; " + w
	}
	return s
}

// MarkLost makes an action LOST with reason: the agent answered 410 for it,
// a full listing lacks it, or it was pushed to an agent database since
// replaced. A final record is not changed (nil). The three cases have their
// own rule below (LoseGone, LoseMissing, LoseUnconfirmed).
func MarkLost(cur *store.Record, reason string, now time.Time) *Change {
	return finish(cur, action.Lost, Core, reason, "", "", now)
}

// When an action becomes LOST (docs/architecture.md, "Action states"): the
// agent purged its id; a full listing of the agent lacks an action it held;
// or it was pushed to an agent database since replaced and no answer says
// whether it arrived. A LOST action is never pushed again.

// LoseGone makes LOST an action whose push the agent answered 410: it had
// the id once and purged it.
func LoseGone(cur *store.Record, now time.Time) *Change {
	return MarkLost(cur, ReasonGone, now)
}

// MissingIsLost reports whether an action that a full listing of its agent
// lacks is LOST: the agent had it (seen there, in a state only the agent
// moves) and no longer has it.
func MissingIsLost(r *store.Record) bool {
	return r.SeenOnAgent && !r.State.Final() && r.State.OnAgent()
}

// LoseMissing makes LOST an action that a full listing of its agent lacks,
// when MissingIsLost says so (else nil).
func LoseMissing(cur *store.Record, now time.Time) *Change {
	if !MissingIsLost(cur) {
		return nil
	}
	return MarkLost(cur, ReasonMissing, now)
}

// UnconfirmedIsLost reports whether an action not yet seen on its agent was
// pushed to an agent database other than storeID, the agent's database now:
// the push may have run there, so it is LOST, never pushed again.
func UnconfirmedIsLost(r *store.Record, storeID string) bool {
	return r.State == action.PendingSchedule && r.PushedStoreID != "" && r.PushedStoreID != storeID
}

// LoseUnconfirmed makes LOST an action UnconfirmedIsLost says is (else nil).
func LoseUnconfirmed(cur *store.Record, storeID string, now time.Time) *Change {
	if !UnconfirmedIsLost(cur, storeID) {
		return nil
	}
	return MarkLost(cur, ReasonUnconfirmed, now)
}

// Refused makes a PENDING_SCHEDULE action the agent refused (422: unknown
// kind or bad args) FAILED with the agent's message; node is the actor.
func Refused(cur *store.Record, node, msg string, now time.Time) *Change {
	if cur.State != action.PendingSchedule {
		return nil
	}
	return finish(cur, action.Failed, Actor{Name: node}, msg, "", "", now)
}

// ApprovalHolds reports whether an action may be pushed as far as approval
// goes: it needed none, or the approved content is still its content.
func ApprovalHolds(r *store.Record) bool {
	if r.ApprovalDigest == "" && r.ApprovedBy == "" {
		return true
	}
	return r.ApprovalDigest == approval.Digest(&r.Action)
}

// Reapprove sends a PENDING_SCHEDULE action whose content no longer matches
// its approval back to PENDING_APPROVE, voiding the approval and any
// urgent mark: the mark was given for the content approved, and a new
// approval of new content is a new decision.
func Reapprove(cur *store.Record, now time.Time) *Change {
	if cur.State != action.PendingSchedule || ApprovalHolds(cur) {
		return nil
	}
	c := finish(cur, action.PendingApprove, Core, ReasonReapprove, "", "", now)
	c.Rec.ApprovedBy, c.Rec.ApprovalDigest, c.Rec.Urgent = "", "", ""
	return c
}

// Hold records why a PENDING_SCHEDULE action is not pushed yet (the
// disruption budget holds it): its state_reason, with no state change,
// history line or event. nil when the record says so already, so that a
// pass that holds it again writes nothing.
//
// The reasons of a hold: ReasonDrained, or the disruption budget's
// (budget.HeldPrefix...).
func Hold(cur *store.Record, reason string, now time.Time) *Change {
	if cur.State != action.PendingSchedule || cur.StateReason == reason {
		return nil
	}
	c := begin(cur)
	c.Rec.StateReason, c.Rec.UpdatedTS = reason, now
	return c
}

// SettleCancel cancels a PENDING_SCHEDULE action whose cancel was requested
// and that its agent does not hold (it answered 404, or no push was ever
// attempted): it can never run, so it is CANCELLED in the core.
func SettleCancel(cur *store.Record, now time.Time) *Change {
	if cur.State != action.PendingSchedule || !cur.CancelRequested {
		return nil
	}
	return finish(cur, action.Cancelled, Core, action.ReasonCancelled, "", "", now)
}

// MaySend reports whether an action may be pushed now: PENDING_SCHEDULE,
// not cancel-requested, and its approval holds.
func MaySend(r *store.Record) bool {
	return r.State == action.PendingSchedule && !r.CancelRequested && ApprovalHolds(r)
}

// MarkSending records, before a push is sent, the agent database (storeID)
// it goes to, and reports whether the action may still be sent (MaySend as
// stored now: a cancel or an edit that committed meanwhile wins). Cancel
// reads this mark: an action with none was never sent, so it can be
// cancelled at once. A missing action may not be sent.
func MarkSending(ctx context.Context, tx store.Tx, id, storeID string) (*store.Record, bool, error) {
	cur, err := tx.Action(ctx, id)
	if err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return nil, false, nil
		}
		return nil, false, err
	}
	if !MaySend(cur) {
		return cur, false, nil
	}
	if cur.PushedStoreID != storeID {
		cur.PushedStoreID = storeID
		if err := tx.UpdateAction(ctx, cur); err != nil {
			return nil, false, err
		}
	}
	return cur, true, nil
}

// UnmarkSending takes back the mark MarkSending set on action id for
// storeID, when the caller knows the push was never made (held at its push
// by the calendar): the action is then as never sent, so a cancel or an
// urgent mark applies at once and an agent database change does not make
// it LOST.
func UnmarkSending(ctx context.Context, tx store.Tx, id, storeID string) error {
	cur, err := tx.Action(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if cur.State != action.PendingSchedule || cur.PushedStoreID != storeID || cur.SeenOnAgent {
		return nil
	}
	cur.PushedStoreID = ""
	return tx.UpdateAction(ctx, cur)
}

// NotBeforeReason is the state_reason of an action held until t.
func NotBeforeReason(t time.Time) string {
	return action.ReasonNotBefore + t.Format(time.RFC3339)
}
