// Package actions is the one home of every change to an action in the core:
// create, approve, reject, cancel, retry, approval expiry and schedule
// timeout (the calls people and the core's own timers make), and the
// changes an orchestration pass makes from what an agent said (import,
// adopt, LOST, refused, re-approval, a settled cancel).
//
// Every change is a *Change: the record as it must be stored, the history
// lines and the events that describe it. Write stores one in a store.Tx, so
// a change and its audit trail always commit together. The calls people make
// are methods of Rules that take a store.Tx: a caller may make many of them
// in one transaction (a run creating, approving or cancelling its child
// actions in bulk). The changes a pass makes are pure functions of the
// core's record and the agent's: the orchestrator plans them, merges the
// changes of one record, and writes them with Write.
package actions

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/action"
)

// ActorCore names the core as the actor of a change it decided itself: of
// an action, a run, a node or a cluster. It is store.ActorCore, the one
// spelling of the core in history lines and events.
const ActorCore = store.ActorCore

// Errors of this package and of core/runs, matched with errors.Is.
var (
	// ErrWrongState: the state of the action or run does not allow the call.
	ErrWrongState = errors.New("wrong state")
	// ErrForbidden: the caller may not make this change (self-approval).
	ErrForbidden = errors.New("forbidden")
	// ErrUnprocessable: the node cannot take the action (unknown kind).
	ErrUnprocessable = errors.New("unprocessable")
)

// What a StateError is about.
const (
	OfAction = "action"
	OfRun    = "run"
)

// StateError is a call on an action or a run (Of) in a state that does not
// allow it. It is the one state error of the action and run rules; the API
// answers it 409 with the state.
type StateError struct {
	Of    string // OfAction or OfRun
	ID    string
	State string
	What  string
}

func (e *StateError) Error() string {
	return fmt.Sprintf("%s: %s %s is %s", e.What, e.Of, e.ID, e.State)
}

// Unwrap makes a StateError match ErrWrongState.
func (e *StateError) Unwrap() error { return ErrWrongState }

func wrongState(r *store.Record, what string) error {
	return &StateError{Of: OfAction, ID: r.ID, State: string(r.State), What: what}
}

// Actor is who makes a change, to an action, a run or a node: a token name,
// ActorCore or a node id, and the client address of the request that asked
// for it ("" for the core). core/runs and core/nodes take it too.
type Actor struct {
	Name string
	Addr string
	// Note is what the person said about the change (the reason given with
	// an approval or a rejection in the web UI), "" for none. It follows
	// the fixed reason in the history line and is the event's "note".
	Note string
}

// Core is the core itself as an Actor.
var Core = Actor{Name: ActorCore}

// Change is what one decision does to one record: the record as it must be
// stored, and the history lines and events that describe it.
type Change struct {
	Rec     store.Record
	Insert  bool // a new record
	History []action.Transition
	Events  []store.Event
	// Lost is set when the change made the record LOST (the cluster raises
	// an alert).
	Lost bool
}

// begin starts a change of cur (its history, if loaded, is not carried).
func begin(cur *store.Record) *Change {
	c := &Change{Rec: *cur}
	c.Rec.History = nil
	return c
}

// event appends an event about the record.
func (c *Change) event(typ string, by Actor, ts time.Time, msg string, data map[string]any) {
	c.Events = append(c.Events, store.Event{TS: ts, Type: typ, Actor: by.Name, ClientAddr: by.Addr,
		ClusterID: c.Rec.ClusterID, NodeID: c.Rec.NodeID, ActionID: c.Rec.ID, RunID: c.Rec.RunID, Message: msg, Data: data})
}

// move changes the state, with a history line and an event of type typ
// (action.state_changed when ""; action.lost for LOST). The event's data
// carries from, to and reason; msg "" says "FROM → TO: reason".
func (c *Change) move(to action.State, by Actor, reason, typ, msg string, now time.Time) {
	from := c.Rec.State
	c.Rec.State, c.Rec.StateReason = to, reason
	line := reason
	if by.Note != "" {
		line += ": " + by.Note
	}
	c.History = append(c.History, action.Transition{TS: now, From: from, To: to, Actor: by.Name, Reason: line})
	if typ == "" {
		typ = store.EventActionStateChanged
		if to == action.Lost {
			typ = store.EventActionLost
		}
	}
	if to == action.Lost {
		c.Lost = true
	}
	if msg == "" {
		msg = fmt.Sprintf("%s → %s", from, to)
		if reason != "" {
			msg += ": " + reason
		}
	}
	data := map[string]any{"from": string(from), "to": string(to), "reason": reason}
	if by.Note != "" {
		data["note"] = by.Note
	}
	c.event(typ, by, now, msg, data)
}

// Then merges next, a later change of the same record decided against
// c.Rec, into c: the record becomes next's, the history and events add up.
func (c *Change) Then(next *Change) {
	c.Rec = next.Rec
	c.History = append(c.History, next.History...)
	c.Events = append(c.Events, next.Events...)
	c.Lost = c.Lost || next.Lost
}

// Write stores c in tx: the record (inserted or updated), its history lines,
// then its events.
func Write(ctx context.Context, tx store.Tx, c *Change) error {
	var err error
	if c.Insert {
		err = tx.InsertAction(ctx, &c.Rec)
		if errors.Is(err, store.ErrExists) {
			err = fmt.Errorf("action %s: %w", c.Rec.ID, store.ErrExists)
		}
	} else {
		err = tx.UpdateAction(ctx, &c.Rec)
	}
	if err != nil {
		return err
	}
	for _, h := range c.History {
		if err := tx.AppendHistory(ctx, c.Rec.ID, h); err != nil {
			return err
		}
	}
	for i := range c.Events {
		if err := tx.AppendEvent(ctx, &c.Events[i]); err != nil {
			return err
		}
	}
	return nil
}

// finish moves a non-final record to a state the core decides, or returns
// nil when cur cannot make that move. A final state sets finished_ts and
// ends a pending cancel request.
func finish(cur *store.Record, to action.State, by Actor, reason, typ, msg string, now time.Time) *Change {
	if cur.State.Final() || !action.CanReach(cur.State, to) {
		return nil
	}
	c := begin(cur)
	c.move(to, by, reason, typ, msg, now)
	c.Rec.UpdatedTS = now
	if to.Final() {
		c.Rec.FinishedTS = action.TimePtr(now)
		c.Rec.CancelRequested = false
	}
	return c
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
		a.Kind == b.Kind && string(a.Args) == string(b.Args) && a.State == b.State &&
		a.StateReason == b.StateReason && string(a.Progress) == string(b.Progress) &&
		a.Output == b.Output && a.Origin == b.Origin && a.Requester == b.Requester &&
		a.ApprovedBy == b.ApprovedBy && a.TimeoutS == b.TimeoutS &&
		a.CreatedTS.Equal(b.CreatedTS) && timeEq(a.ScheduledTS, b.ScheduledTS) &&
		timeEq(a.StartedTS, b.StartedTS) && timeEq(a.FinishedTS, b.FinishedTS) &&
		a.UpdatedTS.Equal(b.UpdatedTS) && a.RetryOf == b.RetryOf &&
		a.ApprovalDigest == b.ApprovalDigest && a.CancelRequested == b.CancelRequested &&
		a.SeenOnAgent == b.SeenOnAgent && a.PushedStoreID == b.PushedStoreID &&
		a.RunID == b.RunID && a.Stage == b.Stage && a.Wave == b.Wave && a.Step == b.Step &&
		a.Attempt == b.Attempt && string(a.Outputs) == string(b.Outputs) &&
		timeEq(a.NotBefore, b.NotBefore) && a.Urgent == b.Urgent
}
