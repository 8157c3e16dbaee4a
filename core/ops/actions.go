package ops

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
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
		return BadRequest("id: a create over a target makes one action per node, each with an id of its own: leave id out (give request_id to make a retry create nothing new)")
	}
	if err := CheckRequestID(req.RequestID); err != nil {
		return err
	}
	if err := target.Check(t); err != nil {
		return BadRequest("target: %v", err)
	}
	return checkActionBody(req, now)
}

// MaxRequestID bounds the length of a request_id.
const MaxRequestID = 128

// CheckRequestID checks the optional request_id of a create over a target:
// at most MaxRequestID printable ASCII characters.
func CheckRequestID(id string) error {
	if len(id) > MaxRequestID {
		return BadRequest("request_id longer than %d characters", MaxRequestID)
	}
	for _, r := range id {
		if r <= ' ' || r > '~' {
			return BadRequest("request_id: only printable ASCII characters without spaces")
		}
	}
	return nil
}

// requestNamespace is the UUIDv5 namespace of the ids of actions made by a
// create over a target with a request_id.
var requestNamespace = uuid.MustParse("6f1c3a52-8f0e-4d1b-9a57-3e1f5b0c2d7a")

// RequestActionID is the id of the action on node of cluster made by the
// create over a target named requestID: the same for a retry of it.
func RequestActionID(requestID, cluster, node string) string {
	return uuid.NewSHA1(requestNamespace, []byte(requestID+"\x00"+cluster+"\x00"+node)).String()
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
//
// With a RequestID each action's id is RequestActionID of it, its cluster
// and its node: a retry of the same create (same request_id, caller and
// content) creates nothing and returns the actions made (existing true);
// one whose actions differ (another kind, args, timeout, not_before or
// requester, or a target that now picks other nodes) is ErrConflict.
func (o *Ops) CreateActions(ctx context.Context, c Caller, req ActionRequest, t target.Target) (recs []*store.Record, existing bool, err error) {
	if err := Authorize(c, auth.Create); err != nil {
		return nil, false, err
	}
	req.RetryOf, req.ArgsCheckedAgainst = "", ""
	if err := CheckActionTarget(&req, t, o.now()); err != nil {
		return nil, false, err
	}
	if err := o.authorizeCluster(ctx, c, auth.Create, req.ClusterID); err != nil {
		return nil, false, err
	}
	recs, err = o.createActions(ctx, c, req, t)
	if req.RequestID != "" && errors.Is(err, store.ErrExists) {
		// A retry that came while the first was being stored, or after it.
		recs, err = o.createActions(ctx, c, req, t)
	}
	if errors.Is(err, errMade) {
		return recs, true, nil
	}
	if err != nil {
		return nil, false, err
	}
	for _, rec := range recs {
		o.nudgeIfScheduled(rec)
	}
	return recs, false, nil
}

// errMade is createActions' answer when a create with a request_id was
// made already: recs are the actions it made.
var errMade = errors.New("made already")

// createActions is CreateActions once authorized.
func (o *Ops) createActions(ctx context.Context, c Caller, req ActionRequest, t target.Target) ([]*store.Record, error) {
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
		if req.RequestID != "" {
			reqs[i].ID = RequestActionID(req.RequestID, req.ClusterID, id)
		}
	}
	if req.RequestID != "" {
		made, err := o.madeActions(ctx, c, reqs)
		if err != nil || made != nil {
			return made, err
		}
	}
	return o.cfg.Rules.CreateManyIn(ctx, o.st, reqs, c.actor(""))
}

// madeActions looks for the actions of reqs (ids derived from a
// request_id): none there is nil; all there, each with the content its
// request asks for, is them with errMade; anything else is ErrConflict.
func (o *Ops) madeActions(ctx context.Context, c Caller, reqs []actions.Request) ([]*store.Record, error) {
	var made []*store.Record
	err := o.st.Read(ctx, func(r store.Reader) error {
		for _, q := range reqs {
			rec, err := r.Action(ctx, q.ID)
			if errors.Is(err, store.ErrNotFound) {
				continue
			}
			if err != nil {
				return err
			}
			if !sameRequest(rec, q, c.Name) {
				return fmt.Errorf("%w: request_id %q was used by another create (action %s on %s/%s differs): use a new request_id",
					ErrConflict, q.RequestID, rec.ID, rec.ClusterID, rec.NodeID)
			}
			made = append(made, rec)
		}
		return nil
	})
	switch {
	case err != nil:
		return nil, err
	case len(made) == 0:
		return nil, nil
	case len(made) != len(reqs):
		return nil, fmt.Errorf("%w: request_id %q made %d actions and its target now picks %d nodes: use a new request_id",
			ErrConflict, reqs[0].RequestID, len(made), len(reqs))
	}
	return made, errMade
}

// sameRequest tells whether rec is the action q, asked by requester, makes.
func sameRequest(rec *store.Record, q actions.Request, requester string) bool {
	nb := func(t *time.Time) string {
		if t == nil {
			return ""
		}
		return action.UTC(*t).Format(time.RFC3339Nano) // stored to the microsecond
	}
	return rec.ID == q.ID && rec.ClusterID == q.ClusterID && rec.NodeID == q.NodeID && rec.Kind == q.Kind &&
		bytes.Equal(rec.Args, q.Args) && rec.TimeoutS == q.TimeoutS && nb(rec.NotBefore) == nb(q.NotBefore) &&
		rec.Requester == requester && rec.RunID == "" && rec.RetryOf == ""
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
