package runs

import (
	"context"
	"fmt"
	"time"

	"github.com/musterhq/muster/core/actions"
	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/action"
)

// The one write path of a run's row (docs/architecture.md, "Runs and
// playbooks"): every change of a run (its state and reason, its stages,
// its approval, its urgency) is a runChange, the row as it must be stored
// and the events that describe it, and save stores both in the caller's
// transaction, as actions.Write does for an action. Nothing else in this
// package writes a run's row.

// runChange is one change of a run: the row, changed in place, and the
// events it raises.
type runChange struct {
	run    *store.Run
	insert bool   // a new run
	from   string // the run's state when the change began ("" for a new run)
	events []store.Event
}

// changeOf begins a change of stored run r.
func changeOf(r *store.Run) *runChange { return &runChange{run: r, from: r.State} }

// newRunChange begins the change that stores new run r.
func newRunChange(r *store.Run) *runChange { return &runChange{run: r, insert: true} }

// event adds an event about the run.
func (c *runChange) event(typ string, who actions.Actor, t time.Time, msg string, data map[string]any) {
	c.events = append(c.events, store.Event{TS: t, Type: typ, Actor: who.Name, ClientAddr: who.Addr,
		ClusterID: c.run.ClusterID, RunID: c.run.ID, Message: msg, Data: data})
}

// finish ends the run in a final state at t, with an event of type typ.
func (c *runChange) finish(state, reason, typ string, who actions.Actor, msg string, t time.Time) {
	r := c.run
	r.State, r.StateReason, r.UpdatedTS, r.FinishedTS = state, reason, t, action.TimePtr(t)
	c.event(typ, who, t, msg, map[string]any{"state": state, "reason": reason})
}

// save stores the row (inserted or updated), then its events, in tx. A new
// run, or a change of state, that raises no event is refused before
// anything is written: no run changes state unseen. Once saved, c goes on
// as a change of the run as stored.
func (c *runChange) save(ctx context.Context, tx store.Tx) error {
	r := c.run
	if (c.insert || r.State != c.from) && len(c.events) == 0 {
		return fmt.Errorf("run %s: the change %q → %s raises no event", r.ID, c.from, r.State)
	}
	var err error
	if c.insert {
		err = tx.InsertRun(ctx, r)
	} else {
		err = tx.UpdateRun(ctx, r)
	}
	if err != nil {
		return err
	}
	if store.RunFinal(r.State) && !store.RunFinal(c.from) && !c.insert && takesLocks(r) {
		// A run ends: the locks it holds go to the runs waiting for them.
		if _, err := tx.ReleaseRunLocks(ctx, r.ID); err != nil {
			return err
		}
	}
	for i := range c.events {
		if err := tx.AppendEvent(ctx, &c.events[i]); err != nil {
			return err
		}
	}
	c.insert, c.from, c.events = false, r.State, nil
	return nil
}

// finishRun ends run r in a final state at t and stores it, with an event
// of type typ.
func finishRun(ctx context.Context, tx store.Tx, r *store.Run, state, reason, typ string, who actions.Actor, msg string,
	t time.Time) error {
	c := changeOf(r)
	c.finish(state, reason, typ, who, msg, t)
	return c.save(ctx, tx)
}
