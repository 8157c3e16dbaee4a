package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v5"

	"github.com/musterhq/muster/core/approval"
	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/action"
	"github.com/musterhq/muster/shared/wire"
)

// Reasons recorded in the history by the API.
const (
	ReasonCreated         = "created"
	ReasonRetry           = "retry"
	ReasonApproved        = "approved"
	ReasonRejected        = "rejected"
	ReasonCancelRequested = "cancel requested"
)

// DefaultSort orders action lists when the caller gives no sort.
var DefaultSort = []store.SortKey{{Field: "created_ts", Desc: true}}

func now() time.Time { return action.UTC(time.Now()) }

// parseList turns the query string of GET /api/v1/actions into a ListQuery.
func parseList(c *echo.Context) (store.ListQuery, error) {
	q := store.ListQuery{
		ClusterID: c.QueryParam("cluster"),
		NodeID:    c.QueryParam("node"),
		Marker:    c.QueryParam("marker"),
		Limit:     DefaultListLimit,
		Sort:      DefaultSort,
	}
	states, err := listParam(c, "state")
	if err != nil {
		return q, err
	}
	for _, s := range states {
		st, err := action.ParseState(strings.ToUpper(s))
		if err != nil {
			return q, badRequest("state: %v", err)
		}
		q.States = append(q.States, st)
	}
	if q.Kinds, err = listParam(c, "kind"); err != nil {
		return q, err
	}
	if v := c.QueryParam("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > MaxListLimit {
			return q, badRequest("limit must be an integer from 1 to %d, not %q", MaxListLimit, v)
		}
		q.Limit = n
	}
	sort, err := listParam(c, "sort")
	if err != nil {
		return q, err
	}
	if len(sort) > 0 {
		if q.Sort, err = parseSort(sort); err != nil {
			return q, err
		}
	} else if c.QueryParam("sort") != "" {
		return q, badRequest("sort: empty")
	}
	if q.Marker != "" && !action.ValidID(q.Marker) {
		return q, badRequest("marker %q is not an action id", q.Marker)
	}
	return q, nil
}

// parseSort reads the keys of "created_ts:desc,id:asc".
func parseSort(parts []string) ([]store.SortKey, error) {
	var keys []store.SortKey
	seen := map[string]bool{}
	for _, part := range parts {
		field, dir, _ := strings.Cut(part, ":")
		if !slices.Contains(store.SortFields, field) {
			return nil, badRequest("sort: unknown field %q (want one of %s)", field, strings.Join(store.SortFields, ", "))
		}
		if seen[field] {
			return nil, badRequest("sort: field %q given twice", field)
		}
		seen[field] = true
		k := store.SortKey{Field: field}
		switch strings.ToLower(dir) {
		case "", "asc":
		case "desc":
			k.Desc = true
		default:
			return nil, badRequest("sort: direction %q of %s is not asc or desc", dir, field)
		}
		keys = append(keys, k)
	}
	return keys, nil
}

// splitList splits a comma list, dropping blanks.
func splitList(v string) []string {
	var out []string
	for _, p := range strings.Split(v, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

func (s *Server) listActions(c *echo.Context) error {
	q, err := parseList(c)
	if err != nil {
		return err
	}
	limit := q.Limit
	q.Limit = limit + 1 // one more tells whether a next page exists
	var recs []store.Record
	err = s.st.Read(c.Request().Context(), func(r store.Reader) error {
		if q.Marker != "" {
			if _, err := r.Action(c.Request().Context(), q.Marker); err != nil {
				if errors.Is(err, store.ErrNotFound) {
					return badRequest("marker %s is not an action", q.Marker)
				}
				return err
			}
		}
		var err error
		recs, err = r.ListActions(c.Request().Context(), q)
		return err
	})
	if err != nil {
		return err
	}
	out := wire.ActionList{Actions: make([]action.Action, 0, min(len(recs), limit))}
	for i := range recs {
		if i == limit {
			out.NextMarker = recs[i-1].ID
			break
		}
		out.Actions = append(out.Actions, recs[i].Action)
	}
	return c.JSON(http.StatusOK, out)
}

// resolve finds the action named by an id or a unique prefix of at least
// action.MinPrefix characters.
func resolve(ctx context.Context, r store.Reader, ref string) (*store.Record, error) {
	if action.ValidID(ref) {
		return r.Action(ctx, ref)
	}
	if len(ref) < action.MinPrefix {
		return nil, badRequest("id prefix %q is shorter than %d characters", ref, action.MinPrefix)
	}
	if strings.Trim(strings.ToLower(ref), "0123456789abcdef-") != "" || len(ref) > 36 {
		return nil, fmt.Errorf("action %q: %w", ref, store.ErrNotFound)
	}
	ids, err := r.ActionIDsWithPrefix(ctx, strings.ToLower(ref), 10)
	if err != nil {
		return nil, err
	}
	switch len(ids) {
	case 0:
		return nil, fmt.Errorf("action %q: %w", ref, store.ErrNotFound)
	case 1:
		return r.Action(ctx, ids[0])
	}
	return nil, &ambiguousError{prefix: ref, matches: ids}
}

func (s *Server) showAction(c *echo.Context) error {
	ctx := c.Request().Context()
	var out action.Action
	err := s.st.Read(ctx, func(r store.Reader) error {
		rec, err := resolve(ctx, r, c.Param("id"))
		if err != nil {
			return err
		}
		out = rec.Action
		out.History, err = r.History(ctx, rec.ID)
		return err
	})
	if err != nil {
		return err
	}
	if out.History == nil {
		out.History = []action.Transition{}
	}
	return c.JSON(http.StatusOK, out)
}

// newRecord checks that the node can take an action of this kind and builds
// the record of a new action requested by requester.
func (s *Server) newRecord(ctx context.Context, r store.Reader, req *wire.CreateActionRequest, requester string) (*store.Record, error) {
	if _, err := r.Cluster(ctx, req.ClusterID); err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return nil, fmt.Errorf("cluster %q: %w", req.ClusterID, store.ErrNotFound)
		}
		return nil, err
	}
	node, err := r.Node(ctx, req.ClusterID, req.NodeID)
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
	id := req.ID
	if id == "" {
		id = action.NewID()
	}
	t := now()
	rec := &store.Record{Action: action.Action{
		ID:        id,
		ClusterID: req.ClusterID,
		NodeID:    req.NodeID,
		Kind:      req.Kind,
		Args:      req.Args,
		State:     action.PendingApprove,
		Progress:  []byte("{}"),
		Origin:    action.OriginCore,
		Requester: requester,
		TimeoutS:  req.TimeoutS,
		CreatedTS: t,
		UpdatedTS: t,
	}}
	if !s.cfg.Policy.NeedsApproval(req.Kind, req.ClusterID) {
		rec.State = action.PendingSchedule
		rec.ScheduledTS = action.TimePtr(t)
	}
	return rec, nil
}

// insertNew stores a new action with its first history line and its
// action.created event.
func insertNew(ctx context.Context, tx store.Tx, rec *store.Record, actor, addr, reason string) error {
	if err := tx.InsertAction(ctx, rec); err != nil {
		if errors.Is(err, store.ErrExists) {
			return fmt.Errorf("action %s: %w", rec.ID, store.ErrExists)
		}
		return err
	}
	if err := tx.AppendHistory(ctx, rec.ID, action.Transition{
		TS: rec.CreatedTS, To: rec.State, Actor: actor, Reason: reason,
	}); err != nil {
		return err
	}
	data := map[string]any{"kind": rec.Kind, "state": string(rec.State)}
	msg := fmt.Sprintf("%s created %s on %s/%s (%s)", actor, rec.Kind, rec.ClusterID, rec.NodeID, rec.State)
	if rec.RetryOf != "" {
		data["retry_of"] = rec.RetryOf
		msg = fmt.Sprintf("%s retried %s as %s on %s/%s (%s)", actor, rec.RetryOf, rec.Kind, rec.ClusterID, rec.NodeID, rec.State)
	}
	return tx.AppendEvent(ctx, &store.Event{
		TS: rec.CreatedTS, Type: store.EventActionCreated, Actor: actor, ClientAddr: addr,
		ClusterID: rec.ClusterID, NodeID: rec.NodeID, ActionID: rec.ID, RunID: rec.RunID, Message: msg, Data: data,
	})
}

func (s *Server) createAction(c *echo.Context) error {
	body, err := readBody(c)
	if err != nil {
		return err
	}
	req, err := decodeCreate(body)
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	tok := caller(c)
	var rec *store.Record
	err = s.st.Update(ctx, func(tx store.Tx) error {
		var err error
		rec, err = s.newRecord(ctx, tx, req, tok.Name)
		if err != nil {
			return err
		}
		return insertNew(ctx, tx, rec, tok.Name, clientAddr(c), ReasonCreated)
	})
	if err != nil {
		return err
	}
	if rec.State == action.PendingSchedule {
		s.nudgeCluster(rec.ClusterID)
	}
	return c.JSON(http.StatusCreated, rec.Action)
}

// change loads the action named by the path, lets fn change it, and stores
// it with one history line and one event, all in one transaction. fn returns
// the event to append (its type, message and data) and the reason of the
// history line, or a nil event when there is nothing to record. The record's
// UpdatedTS, the event's time, actor, address and ids, and its from/to data
// are filled here; a state change outside the transition table is refused.
func (s *Server) change(ctx context.Context, ref, actor, addr string, fn func(r *store.Record, t time.Time) (*store.Event, string, error)) (*store.Record, error) {
	var rec *store.Record
	err := s.st.Update(ctx, func(tx store.Tx) error {
		var err error
		rec, err = resolve(ctx, tx, ref)
		if err != nil {
			return err
		}
		from := rec.State
		t := now()
		ev, reason, err := fn(rec, t)
		if err != nil {
			return err
		}
		if ev == nil { // nothing to do
			return nil
		}
		if from != rec.State {
			if err := action.CheckTransition(from, rec.State); err != nil {
				return err
			}
		}
		rec.UpdatedTS = t
		if err := tx.UpdateAction(ctx, rec); err != nil {
			return err
		}
		if err := tx.AppendHistory(ctx, rec.ID, action.Transition{
			TS: t, From: from, To: rec.State, Actor: actor, Reason: reason,
		}); err != nil {
			return err
		}
		ev.TS, ev.Actor, ev.ClientAddr = t, actor, addr
		ev.ClusterID, ev.NodeID, ev.ActionID = rec.ClusterID, rec.NodeID, rec.ID
		if ev.Data == nil {
			ev.Data = map[string]any{}
		}
		ev.Data["from"], ev.Data["to"] = string(from), string(rec.State)
		return tx.AppendEvent(ctx, ev)
	})
	return rec, err
}

func (s *Server) approveAction(c *echo.Context) error {
	rec, err := s.Approve(c.Request().Context(), c.Param("id"), caller(c).Name, clientAddr(c), "")
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, rec.Action)
}

// withReason appends a person's reason to the fixed one of a history line.
func withReason(fixed, reason string) string {
	if reason == "" {
		return fixed
	}
	return fixed + ": " + reason
}

// Approve approves the action named by ref (an id or a unique prefix) on
// behalf of actor, calling from addr, with an optional reason kept in the
// history and the event. It checks the state, the four-eyes rule and the
// approval window, records the digest of what was approved and nudges the
// action's cluster. The caller has checked that actor may approve.
func (s *Server) Approve(ctx context.Context, ref, actor, addr, reason string) (*store.Record, error) {
	rec, err := s.change(ctx, ref, actor, addr, func(r *store.Record, t time.Time) (*store.Event, string, error) {
		if r.State != action.PendingApprove {
			return nil, "", wrongState(r, "approve")
		}
		if approval.SamePerson(r.Requester, actor) && !s.cfg.Policy.SelfApproval {
			return nil, "", fmt.Errorf("%w: %s requested action %s and may not approve it too", ErrForbidden, actor, r.ID)
		}
		if ttl := s.cfg.Policy.TTL; ttl > 0 && t.Sub(r.CreatedTS) > ttl {
			return nil, "", &stateError{id: r.ID, state: r.State, what: fmt.Sprintf("approve: the approval window of %s has passed", ttl)}
		}
		r.State = action.PendingSchedule
		r.StateReason = ReasonApproved
		r.ApprovedBy = actor
		r.ApprovalDigest = approval.Digest(&r.Action)
		r.ScheduledTS = action.TimePtr(t)
		ev := &store.Event{
			Type:    store.EventActionApproved,
			Message: fmt.Sprintf("%s approved %s (%s on %s/%s)", actor, r.ID, r.Kind, r.ClusterID, r.NodeID),
		}
		if reason != "" {
			ev.Data = map[string]any{"reason": reason}
		}
		return ev, withReason(ReasonApproved, reason), nil
	})
	if err != nil {
		return nil, err
	}
	s.nudgeCluster(rec.ClusterID)
	return rec, nil
}

func (s *Server) rejectAction(c *echo.Context) error {
	rec, err := s.Reject(c.Request().Context(), c.Param("id"), caller(c).Name, clientAddr(c), "")
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, rec.Action)
}

// Reject cancels the action named by ref, waiting for approval, on behalf
// of actor, with an optional reason kept in the history and the event. The
// caller has checked that actor may reject.
func (s *Server) Reject(ctx context.Context, ref, actor, addr, reason string) (*store.Record, error) {
	return s.change(ctx, ref, actor, addr, func(r *store.Record, t time.Time) (*store.Event, string, error) {
		if r.State != action.PendingApprove {
			return nil, "", wrongState(r, "reject")
		}
		r.State = action.Cancelled
		r.StateReason = ReasonRejected
		r.FinishedTS = action.TimePtr(t)
		ev := &store.Event{
			Type:    store.EventActionRejected,
			Message: fmt.Sprintf("%s rejected %s (%s on %s/%s)", actor, r.ID, r.Kind, r.ClusterID, r.NodeID),
		}
		if reason != "" {
			ev.Data = map[string]any{"reason": reason}
		}
		return ev, withReason(ReasonRejected, reason), nil
	})
}

// cancelAction cancels an action no push was ever attempted for at once
// (200): the orchestrator records a push before sending it and sends nothing
// that is cancelled by then. Any other action may be on the agent, or on its
// way there (a push whose answer was lost), so the cancel is a request (202)
// that the next pass settles with the agent's own answer.
func (s *Server) cancelAction(c *echo.Context) error {
	tok := caller(c)
	status := http.StatusOK
	rec, err := s.change(c.Request().Context(), c.Param("id"), tok.Name, clientAddr(c), func(r *store.Record, t time.Time) (*store.Event, string, error) {
		switch {
		case r.State == action.PendingApprove, r.State == action.PendingSchedule && r.PushedStoreID == "":
			r.State = action.Cancelled
			r.StateReason = action.ReasonCancelled
			r.FinishedTS = action.TimePtr(t)
			return &store.Event{
				Type:    store.EventActionStateChanged,
				Message: fmt.Sprintf("%s cancelled %s", tok.Name, r.ID),
			}, action.ReasonCancelled, nil
		case r.State == action.PendingSchedule, r.State == action.New, r.State == action.Running:
			status = http.StatusAccepted
			if r.CancelRequested {
				return nil, "", nil // already asked; nothing new to record
			}
			r.CancelRequested = true
			return &store.Event{
				Type:    store.EventActionCancelRequested,
				Message: fmt.Sprintf("%s asked to cancel %s", tok.Name, r.ID),
			}, ReasonCancelRequested, nil
		}
		return nil, "", wrongState(r, "cancel")
	})
	if err != nil {
		return err
	}
	if status == http.StatusAccepted {
		s.nudgeCluster(rec.ClusterID)
	}
	return c.JSON(status, rec.Action)
}

// retryAction creates a new action with the content of a finished one; it
// goes through approval like any new action.
func (s *Server) retryAction(c *echo.Context) error {
	ctx := c.Request().Context()
	tok := caller(c)
	var rec *store.Record
	err := s.st.Update(ctx, func(tx store.Tx) error {
		old, err := resolve(ctx, tx, c.Param("id"))
		if err != nil {
			return err
		}
		if !old.State.Final() {
			return wrongState(old, "retry (only a finished action can be retried)")
		}
		req := &wire.CreateActionRequest{
			ClusterID: old.ClusterID, NodeID: old.NodeID, Kind: old.Kind, Args: old.Args, TimeoutS: old.TimeoutS,
		}
		if req.Args, err = action.NormalizeArgs(req.Args); err != nil {
			return err
		}
		rec, err = s.newRecord(ctx, tx, req, tok.Name)
		if err != nil {
			return err
		}
		rec.RetryOf = old.ID
		return insertNew(ctx, tx, rec, tok.Name, clientAddr(c), ReasonRetry)
	})
	if err != nil {
		return err
	}
	if rec.State == action.PendingSchedule {
		s.nudgeCluster(rec.ClusterID)
	}
	return c.JSON(http.StatusCreated, rec.Action)
}

func (s *Server) nudgeCluster(id string) {
	if s.nudge != nil {
		s.nudge.Nudge(id)
	}
}
