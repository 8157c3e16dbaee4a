package orchestrate

import (
	"bytes"
	"fmt"
	"time"

	"github.com/musterhq/muster/core/approval"
	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/action"
)

// ActorCore names the core as the actor of a change it decided itself.
const ActorCore = "core"

// Reasons the orchestrator gives.
const (
	ReasonIdentityMismatch = "identity mismatch"
	ReasonUnreachable      = "unreachable"
	ReasonGone             = "the agent purged this id (410)"
	ReasonMissing          = "the agent no longer has this action"
	ReasonUnconfirmed      = "pushed to an agent database since replaced, with no answer: it may have run there"
	ReasonReapprove        = "the action no longer matches its approval"
	ReasonExpired          = "expired"
	ReasonImported         = "imported from the agent"
)

// change is what one step of reconciliation does to one record: the record
// as it must be stored, and the history and events that describe it.
type change struct {
	rec     store.Record
	insert  bool
	history []action.Transition
	events  []store.Event
	lost    bool
}

func (c *change) event(typ, actor, msg string, data map[string]any) {
	c.events = append(c.events, store.Event{Type: typ, Actor: actor, ClusterID: c.rec.ClusterID,
		NodeID: c.rec.NodeID, ActionID: c.rec.ID, Message: msg, Data: data})
}

// move records a state change in history and as an event.
func (c *change) move(to action.State, actor, reason string, now time.Time) {
	from := c.rec.State
	c.rec.State, c.rec.StateReason = to, reason
	c.history = append(c.history, action.Transition{TS: now, From: from, To: to, Actor: actor, Reason: reason})
	typ := store.EventActionStateChanged
	if to == action.Lost {
		typ, c.lost = store.EventActionLost, true
	}
	msg := fmt.Sprintf("%s → %s", from, to)
	if reason != "" {
		msg += ": " + reason
	}
	c.event(typ, actor, msg, map[string]any{"from": string(from), "to": string(to), "reason": reason})
}

func timeEq(a, b *time.Time) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Equal(*b)
}

func utcPtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	return action.TimePtr(*t)
}

// sameRecord reports whether storing b over a would change nothing.
func sameRecord(a, b *store.Record) bool {
	return a.ID == b.ID && a.ClusterID == b.ClusterID && a.NodeID == b.NodeID &&
		a.Kind == b.Kind && bytes.Equal(a.Args, b.Args) && a.State == b.State &&
		a.StateReason == b.StateReason && bytes.Equal(a.Progress, b.Progress) &&
		a.Output == b.Output && a.Origin == b.Origin && a.Requester == b.Requester &&
		a.ApprovedBy == b.ApprovedBy && a.TimeoutS == b.TimeoutS &&
		a.CreatedTS.Equal(b.CreatedTS) && timeEq(a.ScheduledTS, b.ScheduledTS) &&
		timeEq(a.StartedTS, b.StartedTS) && timeEq(a.FinishedTS, b.FinishedTS) &&
		a.UpdatedTS.Equal(b.UpdatedTS) && a.RetryOf == b.RetryOf &&
		a.ApprovalDigest == b.ApprovalDigest && a.CancelRequested == b.CancelRequested &&
		a.SeenOnAgent == b.SeenOnAgent
}

// importAgent makes the core record of an action the core has never seen.
func importAgent(a *action.Action, node *store.Node, now time.Time) *change {
	rec := store.Record{Action: *a}
	rec.History = nil
	rec.ClusterID, rec.NodeID = node.ClusterID, node.ID
	rec.Origin = action.OriginAgent
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
	c := &change{rec: rec, insert: true}
	c.history = append(c.history, action.Transition{TS: now, To: a.State, Actor: node.ID, Reason: ReasonImported})
	c.event(store.EventActionCreated, node.ID, fmt.Sprintf("%s %s %s", ReasonImported, a.Kind, a.State),
		map[string]any{"origin": action.OriginAgent, "state": string(a.State)})
	return c
}

// adoptAgent applies the agent's record a to the core's record cur: the agent
// wins. It returns nil when nothing changes, and ok false when the agent's
// state cannot follow the core's (the agent's other fields are then not
// taken either). A core-final record never changes.
func adoptAgent(cur *store.Record, a *action.Action, node *store.Node, now time.Time) (c *change, ok bool) {
	if cur.State.Final() {
		return nil, true
	}
	if a.State != cur.State && !action.CanReach(cur.State, a.State) {
		return nil, false
	}
	c = &change{rec: *cur}
	c.rec.History = nil
	if !action.SameContent(&cur.Action, a) {
		reason := fmt.Sprintf("conflict: the agent holds kind %s args %s; the core had kind %s args %s",
			a.Kind, a.Args, cur.Kind, cur.Args)
		data := map[string]any{"old_kind": cur.Kind, "old_args": string(cur.Args), "kind": a.Kind, "args": string(a.Args)}
		if cur.ApprovedBy != "" || cur.ApprovalDigest != "" {
			// The approval was given to the old content: it does not
			// follow the agent's, and approved_by no longer claims it does.
			reason += fmt.Sprintf("; the approval by %s covered the old content only and is void", cur.ApprovedBy)
			data["void_approval_by"] = cur.ApprovedBy
			c.rec.ApprovedBy, c.rec.ApprovalDigest = "", ""
		}
		c.history = append(c.history, action.Transition{TS: now, From: cur.State, To: cur.State, Actor: node.ID, Reason: reason})
		c.rec.Kind, c.rec.Args = a.Kind, a.Args
		c.event(store.EventActionConflict, node.ID, "the agent holds other content for this id; the agent wins", data)
	}
	if a.State != cur.State {
		c.move(a.State, node.ID, a.StateReason, now)
	}
	c.rec.StateReason = a.StateReason
	c.rec.Progress = a.Progress
	c.rec.Output = action.ClipOutput(a.Output)
	c.rec.TimeoutS = a.TimeoutS
	c.rec.ScheduledTS, c.rec.StartedTS, c.rec.FinishedTS = utcPtr(a.ScheduledTS), utcPtr(a.StartedTS), utcPtr(a.FinishedTS)
	if !a.State.Final() {
		c.rec.SeenOnAgent = true
	} else {
		c.rec.CancelRequested = false
	}
	if sameRecord(cur, &c.rec) {
		return nil, true
	}
	if u := action.UTC(a.UpdatedTS); u.After(c.rec.UpdatedTS) {
		c.rec.UpdatedTS = u
	}
	return c, true
}

// coreMove moves a non-final record to a state the core decides (LOST,
// FAILED, PENDING_APPROVE), or returns nil when cur cannot make that move.
func coreMove(cur *store.Record, to action.State, actor, reason string, now time.Time) *change {
	if cur.State.Final() || !action.CanReach(cur.State, to) {
		return nil
	}
	c := &change{rec: *cur}
	c.rec.History = nil
	c.move(to, actor, reason, now)
	c.rec.UpdatedTS = now
	if to.Final() {
		c.rec.FinishedTS = &now
		c.rec.CancelRequested = false
	}
	return c
}

// markLost makes a record the agent has lost LOST.
func markLost(cur *store.Record, reason string, now time.Time) *change {
	return coreMove(cur, action.Lost, ActorCore, reason, now)
}

// markRefused makes a PENDING_SCHEDULE record the agent refused (422) FAILED.
func markRefused(cur *store.Record, node *store.Node, msg string, now time.Time) *change {
	if cur.State != action.PendingSchedule {
		return nil
	}
	return coreMove(cur, action.Failed, node.ID, msg, now)
}

// approvalHolds reports whether an action may be pushed as far as approval
// goes: it needed none, or the approved content is still its content.
func approvalHolds(r *store.Record) bool {
	if r.ApprovalDigest == "" && r.ApprovedBy == "" {
		return true
	}
	return r.ApprovalDigest == approval.Digest(&r.Action)
}

// markReapprove sends a PENDING_SCHEDULE record whose content no longer
// matches its approval back to PENDING_APPROVE, voiding the approval.
func markReapprove(cur *store.Record, now time.Time) *change {
	if cur.State != action.PendingSchedule || approvalHolds(cur) {
		return nil
	}
	c := coreMove(cur, action.PendingApprove, ActorCore, ReasonReapprove, now)
	c.rec.ApprovedBy, c.rec.ApprovalDigest = "", ""
	return c
}
