package orchestrate

import (
	"context"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/musterhq/muster/core/actions"
	"github.com/musterhq/muster/core/budget"
	"github.com/musterhq/muster/core/runs"
	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/action"
)

// The disruption budget at push time (docs/architecture.md, "Labels, targets
// and the disruption budget"). Every read of a cluster with a budget before
// its agents are talked to (a batch of a full sync, or a sync of a few nodes)
// builds a budgetView from that snapshot; the workers correct it with what
// the agents answer and ask it before pushing each disruptive action. The
// workers of a batch and of a nudged sync may run at the same time, so the
// pushes a view admits are also kept in the cluster's ledger until an agent
// or a later snapshot shows them settled: two workers never both take the
// last room.

// admission is a disruptive push admitted by the budget, not yet settled.
type admission struct {
	node string
	at   time.Time
}

// ledger is what the workers of a cluster share about its budget: the
// admitted pushes not yet settled and the nodes held. mu guards it and the
// usage of every budgetView of the cluster.
type ledger struct {
	mu       sync.Mutex
	admitted map[string]admission // action id → a disruptive push admitted, not yet settled
	held     map[string]hold      // node → its disruptive action the budget held
}

// hold is an action the budget held, and the reason it was given.
type hold struct {
	id, reason string
}

func newLedger() *ledger {
	return &ledger{admitted: map[string]admission{}, held: map[string]hold{}}
}

// budgetView is the budget of one read of a cluster; nil when the cluster
// has none (every method then admits everything).
type budgetView struct {
	id     string
	led    *ledger
	policy budget.Policy
	usage  *budget.Usage
	// active lists, by node, the disruptive actions that make it
	// unavailable (from the snapshot, then from the agents' answers).
	active map[string]map[string]bool
	// freed is set when an agent showed a disruptive action over.
	freed bool
	// procs are the run stages whose every child waits for the budget,
	// their nodes in flight counted unavailable (budget.Policy.Procedure).
	procs *runs.Procedures
}

// newBudgetView builds the view of a sync from its snapshot, read at
// readAt: every node of the cluster and every open action. Admissions that
// the snapshot shows settled (no longer open, and admitted before it was
// read) are forgotten.
func (o *Orchestrator) newBudgetView(cs *clusterState, nodes []store.Node, open []store.Record, procs *runs.Procedures, readAt time.Time) *budgetView {
	var inFlight map[string]bool
	if procs != nil {
		inFlight = procs.InFlight
	}
	pol := o.cfg.Budget.Load() // the budget as it is now, for this sync
	u := pol.UsageWith(cs.id, nodes, open, inFlight)
	if u == nil {
		return nil
	}
	v := &budgetView{id: cs.id, led: cs.ledger, policy: pol, usage: u, active: map[string]map[string]bool{}, procs: procs}
	isOpen := make(map[string]bool, len(open))
	for i := range open {
		r := &open[i]
		isOpen[r.ID] = true
		if pol.Holds(r) {
			v.hold(r.NodeID, r.ID)
		}
	}
	v.led.mu.Lock()
	for id, a := range v.led.admitted {
		if !isOpen[id] && a.at.Before(readAt) {
			delete(v.led.admitted, id)
		}
	}
	v.led.mu.Unlock()
	return v
}

func (v *budgetView) hold(node, id string) {
	if v.active[node] == nil {
		v.active[node] = map[string]bool{}
	}
	v.active[node][id] = true
}

// observe corrects the view with what a node's agent answered: its
// records (the agent wins), or that it is DOWN (pulled is then nil).
func (v *budgetView) observe(node string, down bool, pulled map[string]*action.Action) {
	if v == nil {
		return
	}
	v.led.mu.Lock()
	defer v.led.mu.Unlock()
	if down {
		v.usage.Unavailable[node] = budget.ReasonDown
		return
	}
	for id, a := range pulled {
		if !v.policy.Disruptive(a.Kind) {
			continue
		}
		switch {
		case a.State.Final():
			if v.active[node][id] {
				v.freed = true
			}
			delete(v.active[node], id)
			delete(v.led.admitted, id)
		case a.State == action.New || a.State == action.Running:
			v.hold(node, id)
		}
	}
	switch why, ok := v.usage.Unavailable[node]; {
	case ok && why != budget.ReasonDown && why != budget.ReasonDisruptive && why != budget.ReasonPushing:
		// Unavailable for a reason of its own (budget.NodeReason) that an
		// answer does not end.
	case len(v.active[node]) > 0:
		v.usage.Unavailable[node] = budget.ReasonDisruptive
	default:
		delete(v.usage.Unavailable, node) // it answered, and runs nothing disruptive
	}
}

// admit decides whether the disruptive action r may be pushed to node now.
// A push it admits counts against the budget until it settles (release,
// or an agent's final state). Actions of other kinds are always admitted.
// When it refuses, it returns the state_reason that says why.
func (v *budgetView) admit(node string, r *store.Record) (bool, string) {
	if v == nil || (!v.policy.Disruptive(r.Kind) && !v.procs.Holds(r)) {
		return true, ""
	}
	v.led.mu.Lock()
	defer v.led.mu.Unlock()
	u := v.now()
	if !u.Admits(node) {
		why := u.HeldReason()
		v.led.held[node] = hold{id: r.ID, reason: why}
		return false, why
	}
	delete(v.led.held, node)
	v.led.admitted[r.ID] = admission{node: node, at: time.Now()}
	return true, ""
}

// now is the usage as the view sees it with the pushes admitted and not
// yet settled. v.led.mu is held.
func (v *budgetView) now() *budget.Usage {
	u := &budget.Usage{Limit: v.usage.Limit, Total: v.usage.Total, Max: v.usage.Max, Unavailable: map[string]string{}}
	for n, why := range v.usage.Unavailable {
		u.Unavailable[n] = why
	}
	for _, a := range v.led.admitted {
		if _, ok := u.Unavailable[a.node]; !ok {
			u.Unavailable[a.node] = budget.ReasonPushing
		}
	}
	return u
}

// refreshHeld rewrites, once a sync has committed, the state_reason of
// every action the budget holds whose reason the budget's use, as this
// sync saw it, no longer matches (a node went DOWN, another push was
// admitted), without talking to their agents. It writes nothing when every
// reason still holds, and reports whether it wrote.
func (o *Orchestrator) refreshHeld(ctx context.Context, v *budgetView) bool {
	if v == nil {
		return false
	}
	v.led.mu.Lock()
	why := v.now().HeldReason()
	stale := map[string]string{} // node → action id
	for n, h := range v.led.held {
		if h.reason != why {
			stale[n] = h.id
		}
	}
	v.led.mu.Unlock()
	if len(stale) == 0 {
		return false
	}
	now := action.UTC(time.Now())
	o.TestSignals.Steps.Send(Step{Cluster: v.id, Kind: StepCommit, Begin: true})
	defer o.TestSignals.Steps.Send(Step{Cluster: v.id, Kind: StepCommit})
	err := o.st.Update(ctx, func(tx store.Tx) error {
		for _, id := range stale {
			cur, err := tx.Action(ctx, id)
			if errors.Is(err, store.ErrNotFound) {
				continue
			} else if err != nil {
				return err
			}
			if !strings.HasPrefix(cur.StateReason, budget.HeldPrefix) {
				continue // no longer held by the budget
			}
			if c := actions.Hold(cur, why, now); c != nil {
				if err := actions.Write(ctx, tx, c); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		if ctx.Err() == nil {
			o.log.Warn("refresh the reasons of held actions", "cluster", v.id, "err", err)
		}
		return false
	}
	v.led.mu.Lock()
	for n, id := range stale {
		if h, ok := v.led.held[n]; ok && h.id == id {
			v.led.held[n] = hold{id: id, reason: why}
		}
	}
	v.led.mu.Unlock()
	return true
}

// heldToNudge returns, once a sync has committed, every node whose
// disruptive action the budget held, when that sync saw a disruptive action
// end: the loop syncs them, so that the held actions go at once, not at the
// next full sync. A node that is held again waits for the next end.
func (v *budgetView) heldToNudge() []string {
	if v == nil {
		return nil
	}
	v.led.mu.Lock()
	defer v.led.mu.Unlock()
	var nodes []string
	if v.freed {
		for n := range v.led.held {
			nodes = append(nodes, n)
		}
		clear(v.led.held)
	}
	return nodes
}

// release forgets the admission of an action whose push was not made or
// was refused.
func (v *budgetView) release(id string) {
	if v == nil {
		return
	}
	v.led.mu.Lock()
	delete(v.led.admitted, id)
	v.led.mu.Unlock()
}
