package actions

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/musterhq/muster/core/approval"
	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/action"
	"github.com/musterhq/muster/shared/live"
)

// Reasons recorded in the history.
const (
	ReasonCreated         = "created"
	ReasonRetry           = "retry"
	ReasonApproved        = "approved"
	ReasonRejected        = "rejected"
	ReasonCancelRequested = "cancel requested"
	ReasonExpired         = "expired"
	ReasonScheduleTimeout = "schedule timeout"
)

// Rules makes the changes people and the core's timers ask for. Each method
// works inside the caller's store.Tx and writes the record, its history and
// its events there; it never commits. A caller may call many of them in one
// transaction.
type Rules struct {
	// Policy decides which actions need approval, whether a requester may
	// approve their own, and how long an approval may wait (Policy.TTL),
	// as it is now: read at each decision (a reload replaces it).
	Policy *live.Value[approval.Policy]
	// ScheduleTTL: a PENDING_SCHEDULE action that never reached its agent
	// this long after it was scheduled is CANCELLED (ExpireSchedules).
	// Zero disables it.
	ScheduleTTL time.Duration
	// Now is the clock (time.Now when nil).
	Now func() time.Time
	// argsChecked, when set (tests), is called after each check of an
	// action's args against its node's args_schema.
	argsChecked func()
}

func (r *Rules) now() time.Time {
	if r.Now != nil {
		return action.UTC(r.Now())
	}
	return action.UTC(time.Now())
}

// Request is a new action. ID "" makes a new id. A run's child is made by
// CreateChild instead.
type Request struct {
	ID        string
	ClusterID string
	NodeID    string
	Kind      string
	Args      json.RawMessage
	TimeoutS  int
	RetryOf   string
	// NotBefore: it is pushed no earlier (nil: at once).
	NotBefore *time.Time
	// ArgsCheckedAgainst is the SchemaDigest of the node's args_schema the
	// args were checked against outside the write transaction (CreateIn);
	// Create checks them again only when the schema is another now. ""
	// (not checked): Create checks them.
	ArgsCheckedAgainst string
	// RequestID names a create over a target so that a retry of it makes
	// nothing new: only ops.CreateActions reads it (each action's id is
	// derived from it).
	RequestID string
}

// CreateIn is Create with the costly part, checking the args against the
// node's args_schema (and compiling it), done outside the write
// transaction (docs/architecture.md, "Runs and playbooks"): the node is
// read in a short read of st and the args checked; the write transaction
// of st then checks them again only when the node's schema for the kind
// changed meanwhile.
func (r *Rules) CreateIn(ctx context.Context, st store.Store, req Request, by Actor) (*store.Record, error) {
	var node *store.Node
	err := st.Read(ctx, func(rd store.Reader) error {
		var err error
		node, err = rd.Node(ctx, req.ClusterID, req.NodeID)
		return err
	})
	if err == nil {
		// Errors are left to Create, which says them as it always has.
		if d, err := r.checkArgs(node, req); err == nil {
			req.ArgsCheckedAgainst = d
		} else if errors.Is(err, ErrUnprocessable) && (len(node.Kinds) == 0 || slices.Contains(node.Kinds, req.Kind)) {
			return nil, err
		}
	}
	var rec *store.Record
	err = st.Update(ctx, func(tx store.Tx) error {
		var err error
		rec, err = r.Create(ctx, tx, req, by)
		return err
	})
	return rec, err
}

// CreateManyIn creates one action per request, all or none: each
// request's args are checked against its node's args_schema outside the
// write transaction (as CreateIn does), and the actions are stored in one
// write transaction, so that one refused (its error names its node)
// stores none.
func (r *Rules) CreateManyIn(ctx context.Context, st store.Store, reqs []Request, by Actor) ([]*store.Record, error) {
	nodes := make([]*store.Node, len(reqs))
	err := st.Read(ctx, func(rd store.Reader) error {
		for i := range reqs {
			n, err := rd.Node(ctx, reqs[i].ClusterID, reqs[i].NodeID)
			if err != nil {
				return err
			}
			nodes[i] = n
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	for i := range reqs {
		n := nodes[i]
		if len(n.Kinds) > 0 && !slices.Contains(n.Kinds, reqs[i].Kind) {
			return nil, fmt.Errorf("%w: node %s does not know kind %s (it knows %s)", ErrUnprocessable,
				n.ID, reqs[i].Kind, strings.Join(n.Kinds, ", "))
		}
		d, err := r.checkArgs(n, reqs[i])
		if err != nil {
			return nil, err
		}
		reqs[i].ArgsCheckedAgainst = d
	}
	out := make([]*store.Record, 0, len(reqs))
	err = st.Update(ctx, func(tx store.Tx) error {
		out = out[:0]
		for _, req := range reqs {
			rec, err := r.Create(ctx, tx, req, by)
			if err != nil {
				return err
			}
			out = append(out, rec)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// checkArgs checks req's args against node's args_schema for req's kind
// and returns the SchemaDigest of the schema it checked them against.
func (r *Rules) checkArgs(node *store.Node, req Request) (string, error) {
	err := CheckArgs(node, req.Kind, req.Args, nil)
	if r.argsChecked != nil {
		r.argsChecked()
	}
	if err != nil {
		return "", err
	}
	return SchemaDigest(node, req.Kind), nil
}

// Create stores a new action with its first history line and its
// action.created event. The node must exist and, when it has reported its
// kinds, know the kind, and args must match the kind's args_schema when the
// node announced one (ErrUnprocessable otherwise). The action starts
// PENDING_APPROVE or PENDING_SCHEDULE according to the policy.
func (r *Rules) Create(ctx context.Context, tx store.Tx, req Request, by Actor) (*store.Record, error) {
	if _, err := tx.Cluster(ctx, req.ClusterID); err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return nil, fmt.Errorf("cluster %q: %w", req.ClusterID, store.ErrNotFound)
		}
		return nil, err
	}
	node, err := tx.Node(ctx, req.ClusterID, req.NodeID)
	if err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return nil, fmt.Errorf("node %q of cluster %q: %w", req.NodeID, req.ClusterID, store.ErrNotFound)
		}
		return nil, err
	}
	if len(node.Kinds) > 0 && !slices.Contains(node.Kinds, req.Kind) {
		return nil, fmt.Errorf("%w: node %s does not know kind %s (it knows %s)", ErrUnprocessable,
			req.NodeID, req.Kind, strings.Join(node.Kinds, ", "))
	}
	if req.ArgsCheckedAgainst == "" || req.ArgsCheckedAgainst != SchemaDigest(node, req.Kind) {
		if _, err := r.checkArgs(node, req); err != nil {
			return nil, err
		}
	}
	id := req.ID
	if id == "" {
		id = action.NewID()
	}
	t := r.now()
	rec := &store.Record{Action: action.Action{
		ID:        id,
		ClusterID: req.ClusterID,
		NodeID:    req.NodeID,
		Kind:      req.Kind,
		Args:      req.Args,
		State:     action.PendingApprove,
		Progress:  []byte("{}"),
		Origin:    action.OriginCore,
		Requester: by.Name,
		TimeoutS:  req.TimeoutS,
		CreatedTS: t,
		UpdatedTS: t,
		RetryOf:   req.RetryOf,
	}}
	if req.NotBefore != nil {
		rec.NotBefore = action.TimePtr(*req.NotBefore)
	}
	if !r.Policy.Load().NeedsApproval(req.Kind, req.ClusterID) {
		rec.State = action.PendingSchedule
		rec.ScheduledTS = action.TimePtr(t)
	}
	reason := ReasonCreated
	if rec.RetryOf != "" {
		reason = ReasonRetry
	}
	if err := insert(ctx, tx, rec, by, reason); err != nil {
		return nil, err
	}
	return rec, nil
}

// insert stores a new action built by Create or CreateChild with its first
// history line (reason) and its action.created event.
func insert(ctx context.Context, tx store.Tx, rec *store.Record, by Actor, reason string) error {
	c := &Change{Insert: true, Rec: *rec}
	t := rec.CreatedTS
	data := map[string]any{"kind": rec.Kind, "state": string(rec.State)}
	msg := fmt.Sprintf("%s created %s on %s/%s (%s)", by.Name, rec.Kind, rec.ClusterID, rec.NodeID, rec.State)
	if rec.RetryOf != "" {
		data["retry_of"] = rec.RetryOf
		msg = fmt.Sprintf("%s retried %s as %s on %s/%s (%s)", by.Name, rec.RetryOf, rec.Kind, rec.ClusterID, rec.NodeID, rec.State)
	}
	if rec.ApprovedBy != "" {
		data["approved_by"] = rec.ApprovedBy
	}
	if rec.RunID != "" {
		data["run_id"], data["stage"], data["wave"] = rec.RunID, rec.Stage, rec.Wave
	}
	if by.Note != "" {
		reason, msg = reason+": "+by.Note, msg+": "+by.Note
		data["note"] = by.Note
	}
	c.History = append(c.History, action.Transition{TS: t, To: rec.State, Actor: by.Name, Reason: reason})
	c.event(store.EventActionCreated, by, t, msg, data)
	if rec.State == action.PendingApprove {
		c.event(store.EventApprovalWaiting, by, t, fmt.Sprintf("%s on %s/%s waits for an approver (requested by %s)",
			rec.Kind, rec.ClusterID, rec.NodeID, by.Name), map[string]any{"kind": rec.Kind, "reason": "created"})
	}
	if err := Write(ctx, tx, c); err != nil {
		return err
	}
	*rec = c.Rec
	return nil
}

// load reads the action with exactly this id.
func load(ctx context.Context, tx store.Tx, id string) (*store.Record, error) {
	rec, err := tx.Action(ctx, id)
	if err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return nil, fmt.Errorf("action %q: %w", id, store.ErrNotFound)
		}
		return nil, err
	}
	return rec, nil
}

// ApprovalExpired reports whether rec has waited for approval longer than
// Policy.TTL at now: it can no longer be approved, and ExpireApprovals
// cancels it.
func (r *Rules) ApprovalExpired(rec *store.Record, now time.Time) bool {
	return approvalExpired(rec, now, r.Policy.Load().TTL)
}

func approvalExpired(rec *store.Record, now time.Time, ttl time.Duration) bool {
	return rec.State == action.PendingApprove && WindowPassed(ttl, rec.CreatedTS, rec.NotBefore, now)
}

// WindowPassed reports whether an approval window of ttl (0: none), counted
// from created or a later notBefore, has passed at now: the one rule for
// actions and runs waiting for approval. The caller loads the policy once
// per decision and passes its TTL.
func WindowPassed(ttl time.Duration, created time.Time, notBefore *time.Time, now time.Time) bool {
	return ttl > 0 && now.Sub(LaterOf(created, notBefore)) > ttl
}

// LaterOf is t, or notBefore when it is later: the approval's time, the
// schedule's time and a run's deadline count from a not_before (docs/architecture.md,
// "Windows, freezes and later starts").
func LaterOf(t time.Time, notBefore *time.Time) time.Time {
	if notBefore != nil && notBefore.After(t) {
		return *notBefore
	}
	return t
}

// Approve moves a PENDING_APPROVE action to PENDING_SCHEDULE, binding the
// approval to its content (approval.Digest). The requester may not approve
// their own action, names compared ignoring case (approval.SamePerson),
// unless Policy.SelfApproval (ErrForbidden); an action
// whose approval window has passed cannot be approved (ErrWrongState).
func (r *Rules) Approve(ctx context.Context, tx store.Tx, id string, by Actor) (*store.Record, error) {
	cur, err := load(ctx, tx, id)
	if err != nil {
		return nil, err
	}
	t := r.now()
	if err := r.mayApprove(cur, by.Name, t); err != nil {
		return nil, err
	}
	c := finish(cur, action.PendingSchedule, by, ReasonApproved, store.EventActionApproved,
		fmt.Sprintf("%s approved %s (%s on %s/%s)", by.Name, cur.ID, cur.Kind, cur.ClusterID, cur.NodeID), t)
	c.Rec.ApprovedBy = by.Name
	c.Rec.ApprovalDigest = approval.Digest(&c.Rec.Action)
	c.Rec.ScheduledTS = action.TimePtr(t)
	if err := Write(ctx, tx, c); err != nil {
		return nil, err
	}
	return &c.Rec, nil
}

// MayApprove says whether who may approve cur now, levels aside: nil when
// they may, the error Approve would return otherwise (its state, their own
// request, the approval window). The operations layer checks it before it
// records one approval of several levels (docs/runs-and-playbooks.md,
// "Approval levels").
func (r *Rules) MayApprove(cur *store.Record, who string) error {
	return r.mayApprove(cur, who, r.now())
}

func (r *Rules) mayApprove(cur *store.Record, who string, t time.Time) error {
	if cur.State != action.PendingApprove {
		return wrongState(cur, "approve")
	}
	pol := r.Policy.Load()
	if pol.MayApprove(cur.Requester, "", who, true) == approval.OwnRequest {
		return fmt.Errorf("%w: %s requested action %s and may not approve it too", ErrForbidden, who, cur.ID)
	}
	if approvalExpired(cur, t, pol.TTL) {
		return &StateError{Of: OfAction, ID: cur.ID, State: string(cur.State),
			What: fmt.Sprintf("approve: the approval window of %s has passed", pol.TTL)}
	}
	return nil
}

// MarkUrgent marks an action that has not left the core urgent, with the
// reason by gives (required): it passes its cluster's closed maintenance
// window, never a freeze (docs/architecture.md, "Windows, freezes and later
// starts"). Like an approval, the requester may not mark their own
// (ErrForbidden) unless Policy.SelfApproval. The mark is recorded as an
// action.urgent event and a history line; marking again changes the reason.
func (r *Rules) MarkUrgent(ctx context.Context, tx store.Tx, id string, by Actor) (*store.Record, error) {
	cur, err := load(ctx, tx, id)
	if err != nil {
		return nil, err
	}
	if by.Note == "" {
		return nil, fmt.Errorf("%w: reason is required to mark an action urgent", ErrUnprocessable)
	}
	if (cur.State != action.PendingApprove && cur.State != action.PendingSchedule) || cur.PushedStoreID != "" {
		return nil, wrongState(cur, "mark urgent")
	}
	if r.Policy.Load().MayApprove(cur.Requester, "", by.Name, true) == approval.OwnRequest {
		return nil, fmt.Errorf("%w: %s requested action %s and may not mark it urgent too", ErrForbidden, by.Name, cur.ID)
	}
	if cur.Urgent == by.Note {
		return cur, nil
	}
	t := r.now()
	c := begin(cur)
	c.Rec.Urgent, c.Rec.UpdatedTS = by.Note, t
	c.History = append(c.History, action.Transition{TS: t, From: cur.State, To: cur.State, Actor: by.Name,
		Reason: ReasonUrgent + ": " + by.Note})
	c.event(store.EventActionUrgent, by, t, fmt.Sprintf("%s marked %s urgent (%s on %s/%s): %s", by.Name, cur.ID,
		cur.Kind, cur.ClusterID, cur.NodeID, by.Note), map[string]any{"reason": by.Note})
	if err := Write(ctx, tx, c); err != nil {
		return nil, err
	}
	return &c.Rec, nil
}

// ReasonUrgent starts the history line of an urgent mark.
const ReasonUrgent = "urgent"

// Reject cancels a PENDING_APPROVE action with reason "rejected". If an
// agent turns out to hold the same id (someone pushed it there directly),
// the agent's record wins when a pass sees it, and the cancel is sent on
// (see Adopt).
func (r *Rules) Reject(ctx context.Context, tx store.Tx, id string, by Actor) (*store.Record, error) {
	cur, err := load(ctx, tx, id)
	if err != nil {
		return nil, err
	}
	if cur.State != action.PendingApprove {
		return nil, wrongState(cur, "reject")
	}
	c := finish(cur, action.Cancelled, by, ReasonRejected, store.EventActionRejected,
		fmt.Sprintf("%s rejected %s (%s on %s/%s)", by.Name, cur.ID, cur.Kind, cur.ClusterID, cur.NodeID), r.now())
	if err := Write(ctx, tx, c); err != nil {
		return nil, err
	}
	return &c.Rec, nil
}

// CancelOutcome says what Cancel did.
type CancelOutcome int

const (
	// Cancelled: the action is CANCELLED now.
	Cancelled CancelOutcome = iota
	// Requested: an agent may hold the action; the next pass asks it to
	// cancel and the agent's answer settles the state.
	Requested
)

// Cancel cancels an action. One the core never sent to an agent
// (PENDING_APPROVE, or PENDING_SCHEDULE with no push attempted: MarkSending
// sends nothing cancelled) is CANCELLED at once. Any other unfinished action
// may be on its agent, or on its way there, so the cancel is a request that
// the next pass settles with the agent's answer; asking twice records
// nothing new. A finished action cannot be cancelled (ErrWrongState).
func (r *Rules) Cancel(ctx context.Context, tx store.Tx, id string, by Actor) (*store.Record, CancelOutcome, error) {
	cur, err := load(ctx, tx, id)
	if err != nil {
		return nil, 0, err
	}
	if cur.State.Final() {
		return nil, 0, wrongState(cur, "cancel")
	}
	// The person's reason (by.Note) is the cancel's why: in the history
	// line and the event, once.
	why := by.Note
	by.Note = ""
	return r.cancel(ctx, tx, cur, by, why)
}

// cancel applies the cancel rule to cur, an unfinished action; why, when
// set, is added to the history line and the event (a run's cancel says so).
func (r *Rules) cancel(ctx context.Context, tx store.Tx, cur *store.Record, by Actor, why string) (*store.Record, CancelOutcome, error) {
	t := r.now()
	if cur.State == action.PendingApprove || cur.State == action.PendingSchedule && cur.PushedStoreID == "" {
		reason, msg := action.ReasonCancelled, fmt.Sprintf("%s cancelled %s", by.Name, cur.ID)
		if why != "" {
			reason, msg = why, msg+": "+why
		}
		c := finish(cur, action.Cancelled, by, reason, "", msg, t)
		if err := Write(ctx, tx, c); err != nil {
			return nil, 0, err
		}
		return &c.Rec, Cancelled, nil
	}
	if cur.CancelRequested {
		return cur, Requested, nil
	}
	reason, msg := ReasonCancelRequested, fmt.Sprintf("%s asked to cancel %s", by.Name, cur.ID)
	if why != "" {
		reason, msg = ReasonCancelRequested+": "+why, msg+": "+why
	}
	c := begin(cur)
	c.Rec.CancelRequested = true
	c.Rec.UpdatedTS = t
	c.History = append(c.History, action.Transition{TS: t, From: cur.State, To: cur.State, Actor: by.Name, Reason: reason})
	c.event(store.EventActionCancelRequested, by, t, msg, map[string]any{"from": string(cur.State), "to": string(cur.State)})
	if err := Write(ctx, tx, c); err != nil {
		return nil, 0, err
	}
	return &c.Rec, Requested, nil
}

// Retry creates a new action with the kind, args, node and timeout of a
// finished one, linked to it by retry_of; it goes through approval like any
// new action.
func (r *Rules) Retry(ctx context.Context, tx store.Tx, id string, by Actor) (*store.Record, error) {
	return r.retry(ctx, tx, id, by, "")
}

// RetryIn is Retry with the args checked against the node's args_schema
// outside the write transaction, as CreateIn does.
func (r *Rules) RetryIn(ctx context.Context, st store.Store, id string, by Actor) (*store.Record, error) {
	var checked string
	var req *Request
	var node *store.Node
	if err := st.Read(ctx, func(rd store.Reader) error {
		old, err := rd.Action(ctx, id)
		if err != nil {
			return err
		}
		if req, err = retryRequest(old); err != nil {
			return err
		}
		node, err = rd.Node(ctx, old.ClusterID, old.NodeID)
		return err
	}); err == nil {
		// Errors are left to Retry, which says them as it always has.
		if d, err := r.checkArgs(node, *req); err == nil {
			checked = d
		} else if errors.Is(err, ErrUnprocessable) && (len(node.Kinds) == 0 || slices.Contains(node.Kinds, req.Kind)) {
			return nil, err
		}
	}
	var rec *store.Record
	err := st.Update(ctx, func(tx store.Tx) error {
		var err error
		rec, err = r.retry(ctx, tx, id, by, checked)
		return err
	})
	return rec, err
}

func (r *Rules) retry(ctx context.Context, tx store.Tx, id string, by Actor, checked string) (*store.Record, error) {
	old, err := load(ctx, tx, id)
	if err != nil {
		return nil, err
	}
	req, err := retryRequest(old)
	if err != nil {
		return nil, err
	}
	req.ArgsCheckedAgainst = checked
	return r.Create(ctx, tx, *req, by)
}

// retryRequest is the request that retries old, a finished action.
func retryRequest(old *store.Record) (*Request, error) {
	if !old.State.Final() {
		return nil, wrongState(old, "retry (only a finished action can be retried)")
	}
	args, err := action.NormalizeArgs(old.Args)
	if err != nil {
		return nil, err
	}
	return &Request{ClusterID: old.ClusterID, NodeID: old.NodeID, Kind: old.Kind,
		Args: args, TimeoutS: old.TimeoutS, RetryOf: old.ID}, nil
}

// ExpireApprovals cancels, with reason "expired" and an action.expired
// event, every PENDING_APPROVE action whose approval window (Policy.TTL) has
// passed, and returns them. It writes nothing when there are none.
func (r *Rules) ExpireApprovals(ctx context.Context, tx store.Tx) ([]*store.Record, error) {
	ttl := r.Policy.Load().TTL
	if ttl <= 0 {
		return nil, nil
	}
	t := r.now()
	recs, err := tx.ApprovalsBefore(ctx, t.Add(-ttl))
	if err != nil {
		return nil, err
	}
	return writeEach(ctx, tx, recs, func(cur *store.Record) *Change {
		if !approvalExpired(cur, t, ttl) {
			return nil
		}
		return finish(cur, action.Cancelled, Core, ReasonExpired, store.EventActionExpired, "", t)
	})
}

// writeEach writes the change decide makes of each record (nil: none) and
// returns the records changed.
func writeEach(ctx context.Context, tx store.Tx, recs []store.Record, decide func(cur *store.Record) *Change) ([]*store.Record, error) {
	var out []*store.Record
	for i := range recs {
		c := decide(&recs[i])
		if c == nil {
			continue
		}
		if err := Write(ctx, tx, c); err != nil {
			return nil, err
		}
		out = append(out, &c.Rec)
	}
	return out, nil
}

// ExpireSchedules cancels, with reason "schedule timeout" and an
// action.state_changed event, every PENDING_SCHEDULE action scheduled more
// than ScheduleTTL ago that no push was ever attempted for (its node never
// took it: down, drained, or full). One whose push was attempted may be on
// its agent: it gets a cancel request instead, settled by the next pass. It
// returns the records it changed and writes nothing when there are none.
func (r *Rules) ExpireSchedules(ctx context.Context, tx store.Tx) ([]*store.Record, error) {
	if r.ScheduleTTL <= 0 {
		return nil, nil
	}
	t := r.now()
	recs, err := tx.ScheduledBefore(ctx, t.Add(-r.ScheduleTTL))
	if err != nil {
		return nil, err
	}
	return writeEach(ctx, tx, recs, func(cur *store.Record) *Change {
		if cur.State != action.PendingSchedule || cur.ScheduledTS == nil || t.Sub(LaterOf(*cur.ScheduledTS, cur.NotBefore)) <= r.ScheduleTTL {
			return nil
		}
		if action.HeldByCalendar(cur.StateReason) {
			return nil // it waits for its window, or for a freeze to end, however long
		}
		if cur.PushedStoreID == "" {
			return finish(cur, action.Cancelled, Core, ReasonScheduleTimeout, "",
				fmt.Sprintf("%s never reached node %s within %s: cancelled", cur.ID, cur.NodeID, r.ScheduleTTL), t)
		}
		if cur.CancelRequested {
			return nil
		}
		c := begin(cur)
		c.Rec.CancelRequested, c.Rec.UpdatedTS = true, t
		c.History = append(c.History, action.Transition{TS: t, From: cur.State, To: cur.State, Actor: ActorCore,
			Reason: ReasonScheduleTimeout + ": " + ReasonCancelRequested})
		c.event(store.EventActionCancelRequested, Core, t,
			fmt.Sprintf("%s unconfirmed by node %s within %s: cancel requested", cur.ID, cur.NodeID, r.ScheduleTTL),
			map[string]any{"from": string(cur.State), "to": string(cur.State), "reason": ReasonScheduleTimeout})
		return c
	})
}

// ReasonNodeForgotten ends the open actions of a node that is gone for good.
const ReasonNodeForgotten = "node forgotten"

// ForgetNode ends every open action of a node that is gone for good
// (forgotten by an operator, or removed from the static configuration): LOST
// with reason "node forgotten", or CANCELLED for one still waiting for
// approval (it never left the core), each with its history and event. It
// returns the records changed.
func ForgetNode(ctx context.Context, tx store.Tx, clusterID, nodeID string, by Actor, now time.Time) ([]*store.Record, error) {
	recs, err := tx.OpenActions(ctx, clusterID, nodeID)
	if err != nil {
		return nil, err
	}
	now = action.UTC(now)
	return writeEach(ctx, tx, recs, func(cur *store.Record) *Change {
		if cur.State == action.PendingApprove {
			return finish(cur, action.Cancelled, by, ReasonNodeForgotten, "", "", now)
		}
		return finish(cur, action.Lost, by, ReasonNodeForgotten, "", "", now)
	})
}
