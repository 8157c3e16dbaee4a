package runs

import (
	"context"
	"time"

	"github.com/musterhq/muster/core/actions"
	"github.com/musterhq/muster/core/approval"
	"github.com/musterhq/muster/core/budget"
	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/action"
	"github.com/musterhq/muster/shared/live"
)

// Errors of run changes are those of the action rules, matched with
// errors.Is: a change the run's state does not allow is an
// *actions.StateError (Of: actions.OfRun) matching actions.ErrWrongState (a
// 409); an approval by the run's own requester is actions.ErrForbidden (a
// 403).
var (
	ErrWrongState = actions.ErrWrongState
	ErrForbidden  = actions.ErrForbidden
)

func wrongState(r *store.Run, what string) error {
	return &actions.StateError{Of: actions.OfRun, ID: r.ID, State: r.State, What: what}
}

// Reasons of run changes.
const (
	ReasonApproved  = "approved"
	ReasonRejected  = "rejected"
	ReasonExpired   = "approval expired"
	ReasonPaused    = "paused"
	ReasonResumed   = "resumed"
	ReasonCancelled = "cancelled"
	// ReasonNodeForgotten ends a child whose node was forgotten after its
	// run was resolved (actions.CreateChild).
	ReasonNodeForgotten = actions.ReasonNodeForgotten
)

// Actions is what the engine needs of the action rules (*actions.Rules):
// it creates and cancels child actions only through them, so a child's
// state, approval, digest, history and events are decided where every other
// action's are.
type Actions interface {
	// CreateChild stores a run's child: approved with its run, or born
	// CANCELLED when its node was forgotten.
	CreateChild(ctx context.Context, tx store.Tx, ch actions.Child, by actions.Actor) (*store.Record, error)
	// CancelChild cancels an unfinished child, or asks its agent to (a
	// pushed one); it does nothing to a finished one.
	CancelChild(ctx context.Context, tx store.Tx, rec *store.Record, by actions.Actor, why string) (*store.Record, error)
}

var _ Actions = (*actions.Rules)(nil)

// Engine makes every change to runs, each in the caller's transaction. It
// is its three parts, which share one policy, one set of action rules and
// one clock: the Creator makes runs, the Decider makes the changes people
// (and the expiry sweep) ask for, and the Advancer moves active runs on.
// Each part writes a run's row only through runChange.save (write.go), with
// the events the change raises.
type Engine struct {
	*Creator
	*Decider
	*Advancer
	// watchedAt holds when this core last checked each gate of a canary
	// it watches (RunCore).
	watchedAt watchTimes
}

// NewEngine builds the engine over the approval policy, the action rules
// that create and cancel its children, and now, the current time
// (time.Now when nil).
func NewEngine(policy *live.Value[approval.Policy], acts Actions, now func() time.Time) *Engine {
	b := &base{policy: policy, actions: acts, clock: now}
	adv := &Advancer{base: b}
	create := &Creator{base: b, adv: adv}
	return &Engine{Creator: create, Decider: &Decider{base: b, create: create, adv: adv}, Advancer: adv}
}

// SetKindLocks makes the engine give each stage it plans the locks the
// kinds of its steps declare in kinds (budget.Policy.KindLock), read as
// it is at each plan: a reload changes the next plan. Call it before the
// engine is used.
func (e *Engine) SetKindLocks(kinds *live.Value[budget.Policy]) { e.Creator.kinds = kinds }

// KindLocks is the locks kinds declare now (nil when the engine was given
// none): pass it to playbook plans, so that they plan as the engine does.
func (e *Engine) KindLocks() KindLocks { return e.Creator.kindLocks() }

// SetStaticLabels gives the engine the labels the configuration gives
// nodes, by cluster and node id: with the labels the core holds for a
// node, the only ones by which a stage with follow takes it (Joining).
// Call it before the engine is used.
func (e *Engine) SetStaticLabels(static map[string]map[string]map[string]string) {
	e.Advancer.staticLabels = static
}

// base is what the parts of the engine share.
type base struct {
	// staticLabels are the configured labels of nodes, by cluster and
	// node id (SetStaticLabels).
	staticLabels map[string]map[string]map[string]string
	policy       *live.Value[approval.Policy]
	// kinds declares the locks of kinds (SetKindLocks); nil: none.
	kinds   *live.Value[budget.Policy]
	actions Actions
	// clock returns the current time; time.Now when nil.
	clock func() time.Time
	// prober evaluates gates and sends calls (RunCore); nil: none run.
	prober Prober
}

// kindLocks is the locks kinds declare as the configuration is now.
func (b *base) kindLocks() KindLocks {
	if b.kinds == nil {
		return nil
	}
	pol := b.kinds.Load()
	return pol.KindLock
}

// now is the current time, in UTC to the microsecond.
func (b *base) now() time.Time {
	if b.clock != nil {
		return action.UTC(b.clock())
	}
	return action.UTC(time.Now())
}

// load reads run id and checks that it is in one of the states from.
func load(ctx context.Context, tx store.Tx, id, what string, from ...string) (*store.Run, error) {
	r, err := tx.Run(ctx, id)
	if err != nil {
		return nil, err
	}
	for _, s := range from {
		if r.State == s {
			return r, nil
		}
	}
	return nil, wrongState(r, what)
}

func children(ctx context.Context, r store.Reader, runID, approvedBy string) ([]Child, error) {
	recs, err := r.RunChildrenBrief(ctx, runID)
	if err != nil {
		return nil, err
	}
	out := make([]Child, len(recs))
	for i, rec := range recs {
		out[i] = ChildOf(&rec, approvedBy)
	}
	return out, nil
}
