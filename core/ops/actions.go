package ops

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/musterhq/muster/core/actions"
	"github.com/musterhq/muster/core/auth"
	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/core/target"
	"github.com/musterhq/muster/shared/action"
	"github.com/musterhq/muster/shared/secret"
)

// ActionRequest is what a new action asks for (actions.Request without
// what only the core sets).
type ActionRequest = actions.Request

// CheckAction checks what a new action asks for that needs no store, and
// makes its args canonical: the cluster and the node named, the id empty or
// a canonical UUID, the kind well formed, the timeout within bounds, the
// args a JSON object of at most action.MaxArgs bytes, a not_before neither
// past nor too far ahead at now.
func CheckAction(req *ActionRequest, now time.Time) error {
	if req.ClusterID == "" {
		return BadRequest("cluster_id is required")
	}
	if req.NodeID == "" {
		return BadRequest("node_id is required")
	}
	return checkActionBody(req, now)
}

// MaxTargetActions bounds the actions one create over a target makes.
const MaxTargetActions = 1000

// CheckActionTarget is CheckAction of a create over a target (a label
// selector, a list of nodes, or all the cluster's nodes) instead of one
// node: no node_id and no id (each action gets its own), a well-formed
// target.
func CheckActionTarget(req *ActionRequest, t target.Target, now time.Time) error {
	if req.ClusterID == "" {
		return BadRequest("cluster_id is required")
	}
	if req.NodeID != "" {
		return BadRequest(`give node_id or target, not both`)
	}
	if req.ID != "" {
		return BadRequest("id: a create over a target makes one action per node, each with an id of its own: leave id out")
	}
	if err := target.Check(t); err != nil {
		return BadRequest("target: %v", err)
	}
	return checkActionBody(req, now)
}

// checkActionBody checks and makes canonical what any new action asks for
// besides where it runs.
func checkActionBody(req *ActionRequest, now time.Time) error {
	if req.ID != "" && !action.ValidID(req.ID) {
		return BadRequest("id %q is not a canonical UUID", req.ID)
	}
	if !action.ValidKind(req.Kind) {
		return BadRequest("kind %q is not of the form domain/name", req.Kind)
	}
	if err := action.CheckTimeoutS(req.TimeoutS); err != nil {
		return BadRequest("%v", err)
	}
	args, err := action.NormalizeArgs(req.Args)
	if err != nil {
		return BadRequest("%v", err)
	}
	if len(args) > action.MaxArgs {
		return BadRequest("args larger than %d bytes", action.MaxArgs)
	}
	if _, err := secret.FindArgs(args); err != nil {
		return BadRequest("args: %v", err)
	}
	req.Args = args
	return checkNotBefore(req.NotBefore, now)
}

// CreateAction creates an action (CheckAction). Its args are checked
// against the node's schema outside the write transaction
// (actions.Rules.CreateIn); one that may go at once syncs its node.
func (o *Ops) CreateAction(ctx context.Context, c Caller, req ActionRequest) (*store.Record, error) {
	if err := Authorize(c, auth.Create); err != nil {
		return nil, err
	}
	req.RetryOf, req.ArgsCheckedAgainst = "", ""
	if err := CheckAction(&req, o.now()); err != nil {
		return nil, err
	}
	if err := o.authorizeCluster(ctx, c, auth.Create, req.ClusterID); err != nil {
		return nil, err
	}
	rec, err := o.cfg.Rules.CreateIn(ctx, o.st, req, c.actor(""))
	if err != nil {
		return nil, err
	}
	o.nudgeIfScheduled(rec)
	return rec, nil
}

// CreateActions creates one action per node of the cluster that t picks
// (CheckActionTarget), all or none: each node's args_schema checks the
// args, and one refused names its node and creates nothing. A target that
// picks no node, or a node the cluster does not have, is ErrUnprocessable.
// The actions are sorted by node id; those that may go at once sync their
// nodes.
func (o *Ops) CreateActions(ctx context.Context, c Caller, req ActionRequest, t target.Target) ([]*store.Record, error) {
	if err := Authorize(c, auth.Create); err != nil {
		return nil, err
	}
	req.RetryOf, req.ArgsCheckedAgainst = "", ""
	if err := CheckActionTarget(&req, t, o.now()); err != nil {
		return nil, err
	}
	if err := o.authorizeCluster(ctx, c, auth.Create, req.ClusterID); err != nil {
		return nil, err
	}
	var ids []string
	err := o.st.Read(ctx, func(r store.Reader) error {
		if _, err := r.Cluster(ctx, req.ClusterID); err != nil {
			if errors.Is(err, store.ErrNotFound) {
				return fmt.Errorf("cluster %q: %w", req.ClusterID, store.ErrNotFound)
			}
			return err
		}
		nodes, err := r.Nodes(ctx, req.ClusterID)
		if err != nil {
			return err
		}
		ids, err = target.Resolve(t, nodes)
		return err
	})
	switch {
	case errors.Is(err, target.ErrNoMatch), errors.Is(err, target.ErrUnknownNode):
		return nil, fmt.Errorf("%w: cluster %s: %v", ErrUnprocessable, req.ClusterID, err)
	case err != nil:
		return nil, err
	case len(ids) > MaxTargetActions:
		return nil, BadRequest("target %s picks %d nodes; one create makes at most %d actions: narrow the selector",
			target.String(t), len(ids), MaxTargetActions)
	}
	reqs := make([]actions.Request, len(ids))
	for i, id := range ids {
		reqs[i] = req
		reqs[i].NodeID = id
	}
	recs, err := o.cfg.Rules.CreateManyIn(ctx, o.st, reqs, c.actor(""))
	if err != nil {
		return nil, err
	}
	for _, rec := range recs {
		o.nudgeIfScheduled(rec)
	}
	return recs, nil
}

// RetryAction creates a new action with the content of a finished one; the
// optional reason is recorded in its first history line and its event.
func (o *Ops) RetryAction(ctx context.Context, c Caller, ref, reason string) (*store.Record, error) {
	if err := checkReasonAs(c, auth.Retry, reason, false); err != nil {
		return nil, err
	}
	var id string
	err := o.st.Read(ctx, func(r store.Reader) error {
		cur, err := ResolveActionFor(ctx, r, c, ref)
		if err != nil {
			return err
		}
		id = cur.ID
		return authorizeIn(ctx, r, c, auth.Retry, cur.ClusterID)
	})
	if err != nil {
		return nil, err
	}
	rec, err := o.cfg.Rules.RetryIn(ctx, o.st, id, c.actor(reason))
	if err != nil {
		return nil, err
	}
	o.nudgeIfScheduled(rec)
	return rec, nil
}

// nudgeIfScheduled syncs the node of a new action that may be pushed now.
func (o *Ops) nudgeIfScheduled(rec *store.Record) {
	if rec.State == action.PendingSchedule {
		o.nudgeNode(rec.ClusterID, rec.NodeID)
	}
}

// ApproveAction records an approval of an action (an approver on its
// cluster other than its requester, within the approval window the policy
// says now) at the first level of its rule not met that the caller is
// eligible for; once every level is met it is approved, in the same
// transaction, and its node is synced. A refused approval (the requester,
// approved already, eligible at no level) is a *RefusedError and changes
// nothing.
func (o *Ops) ApproveAction(ctx context.Context, c Caller, ref, reason string) (*store.Record, error) {
	if err := checkReasonAs(c, auth.Approve, reason, false); err != nil {
		return nil, err
	}
	approved := false
	rec, err := o.changeAction(ctx, c, auth.Approve, ref, func(tx store.Tx, id string) (*store.Record, error) {
		approved = false
		cur, err := tx.Action(ctx, id)
		if err != nil {
			return nil, err
		}
		if err := AuthorizeOn(c, auth.Approve, cur.ClusterID); err != nil {
			return nil, err
		}
		if err := o.cfg.Rules.MayApprove(cur, c.Name); err != nil {
			return nil, err
		}
		s := o.actionSubject(tx, cur)
		t, err := o.recordApproval(ctx, tx, c, &s)
		if err != nil || !t.Satisfied {
			return cur, err
		}
		approved = true
		return o.cfg.Rules.Approve(ctx, tx, id, c.actor(reason))
	})
	if err != nil {
		return nil, err
	}
	if approved {
		o.nudgeNode(rec.ClusterID, rec.NodeID)
	}
	return rec, nil
}

// RejectAction rejects an action waiting for approval (a caller eligible
// at one of its levels); nothing is synced.
func (o *Ops) RejectAction(ctx context.Context, c Caller, ref, reason string) (*store.Record, error) {
	if err := checkReasonAs(c, auth.Reject, reason, false); err != nil {
		return nil, err
	}
	return o.changeAction(ctx, c, auth.Reject, ref, func(tx store.Tx, id string) (*store.Record, error) {
		cur, err := tx.Action(ctx, id)
		if err != nil {
			return nil, err
		}
		if cur.State == action.PendingApprove {
			if err := o.checkReject(ctx, tx, c, o.actionSubject(tx, cur)); err != nil {
				return nil, err
			}
		}
		return o.cfg.Rules.Reject(ctx, tx, id, c.actor(reason))
	})
}

// MarkActionUrgent lets an action pass its cluster's closed maintenance
// window, never a freeze; the reason is required. Its node is synced.
func (o *Ops) MarkActionUrgent(ctx context.Context, c Caller, ref, reason string) (*store.Record, error) {
	if err := checkReasonAs(c, auth.Approve, reason, true); err != nil {
		return nil, err
	}
	rec, err := o.changeAction(ctx, c, auth.Approve, ref, func(tx store.Tx, id string) (*store.Record, error) {
		return o.cfg.Rules.MarkUrgent(ctx, tx, id, c.actor(reason))
	})
	if err != nil {
		return nil, err
	}
	o.nudgeNode(rec.ClusterID, rec.NodeID)
	return rec, nil
}

// CancelAction cancels an action: at once (pending false), or as a request
// its node's next sync settles (pending true; the node is synced now). The
// optional reason is recorded in its history and the event.
func (o *Ops) CancelAction(ctx context.Context, c Caller, ref, reason string) (rec *store.Record, pending bool, err error) {
	// Who may not cancel hears so (403) before anything of the reason.
	if err := checkReasonAs(c, auth.Cancel, reason, false); err != nil {
		return nil, false, err
	}
	var outcome actions.CancelOutcome
	rec, err = o.changeAction(ctx, c, auth.Cancel, ref, func(tx store.Tx, id string) (*store.Record, error) {
		r, out, err := o.cfg.Rules.Cancel(ctx, tx, id, c.actor(reason))
		outcome = out
		return r, err
	})
	if err != nil {
		return nil, false, err
	}
	if outcome == actions.Requested {
		o.nudgeNode(rec.ClusterID, rec.NodeID)
		return rec, true, nil
	}
	return rec, false, nil
}

// changeAction authorizes p, then resolves the action named by ref and runs
// fn on its id, in one transaction.
func (o *Ops) changeAction(ctx context.Context, c Caller, p auth.Permission, ref string,
	fn func(tx store.Tx, id string) (*store.Record, error)) (*store.Record, error) {
	if err := Authorize(c, p); err != nil {
		return nil, err
	}
	var rec *store.Record
	err := o.st.Update(ctx, func(tx store.Tx) error {
		cur, err := ResolveActionFor(ctx, tx, c, ref)
		if err != nil {
			return err
		}
		if err := authorizeIn(ctx, tx, c, p, cur.ClusterID); err != nil {
			return err
		}
		rec, err = fn(tx, cur.ID)
		return err
	})
	return rec, err
}

// ApprovalEnds is when the approval window of ttl of what was created at
// created (or asked for not before notBefore) passes: the rule approvals
// are refused by (actions.WindowPassed). Zero when ttl is zero (no window).
func ApprovalEnds(ttl time.Duration, created time.Time, notBefore *time.Time) time.Time {
	if ttl <= 0 {
		return time.Time{}
	}
	return actions.LaterOf(created, notBefore).Add(ttl)
}
