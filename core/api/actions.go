package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/labstack/echo/v5"

	"github.com/musterhq/muster/core/actions"
	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/action"
	"github.com/musterhq/muster/shared/wire"
)

// DefaultSort orders action lists when the caller gives no sort.
var DefaultSort = []store.SortKey{{Field: "created_ts", Desc: true}}

// actionListParams are the query parameters of GET /api/v1/actions; any
// other is a 400.
var actionListParams = []string{"cluster", "node", "run", "state", "kind", "sort", "limit", "marker"}

// parseList turns the query string of GET /api/v1/actions into a ListQuery.
// ?run=ID lists the child actions of one run.
func parseList(c *echo.Context) (store.ListQuery, error) {
	q := store.ListQuery{
		ClusterID: c.QueryParam("cluster"),
		NodeID:    c.QueryParam("node"),
		RunID:     c.QueryParam("run"),
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
	if q.Limit, err = limitParam(c.QueryParam("limit"), q.Limit, MaxListLimit); err != nil {
		return q, err
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

// parseSort reads the keys of "created_ts:desc,id:asc". Which fields may be
// sorted by is the store's to say (store.SortKeys, store.ErrInvalidQuery).
func parseSort(parts []string) ([]store.SortKey, error) {
	var keys []store.SortKey
	for _, part := range parts {
		field, dir, _ := strings.Cut(part, ":")
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
	var recs []store.Record
	var next string
	err = s.st.Read(c.Request().Context(), func(r store.Reader) error {
		// ?run= takes a run's id or a unique prefix, as GET /runs/{id}
		// does; what names no run lists nothing.
		if q.RunID != "" && !action.ValidID(q.RunID) && len(q.RunID) >= action.MinPrefix {
			run, err := resolveRun(c.Request().Context(), r, q.RunID)
			switch {
			case err == nil:
				q.RunID = run.ID
			case !errors.Is(err, store.ErrNotFound):
				return err
			}
		}
		var err error
		recs, next, err = store.ActionPage(c.Request().Context(), r, q)
		return err
	})
	if err != nil {
		return err
	}
	out := wire.ActionList{Actions: make([]action.Action, len(recs)), NextMarker: next}
	for i := range recs {
		out.Actions[i] = recs[i].Action
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

// actor is the caller as the actor of a change.
func actor(c *echo.Context) actions.Actor {
	return actions.Actor{Name: caller(c).Name, Addr: clientAddr(c)}
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
	// Args are checked outside the write transaction (actions.Rules.CreateIn).
	rec, err := s.rules.CreateIn(c.Request().Context(), s.st, actions.Request{ID: req.ID, ClusterID: req.ClusterID,
		NodeID: req.NodeID, Kind: req.Kind, Args: req.Args, TimeoutS: req.TimeoutS, NotBefore: req.NotBefore}, actor(c))
	if err != nil {
		return err
	}
	if rec.State == action.PendingSchedule {
		s.nudgeNode(rec.ClusterID, rec.NodeID)
	}
	return c.JSON(http.StatusCreated, rec.Action)
}

// change resolves the action named by the path and runs fn on its id, in
// one transaction.
func (s *Server) change(c *echo.Context, fn func(ctx context.Context, tx store.Tx, id string) (*store.Record, error)) (*store.Record, error) {
	ctx := c.Request().Context()
	var rec *store.Record
	err := s.st.Update(ctx, func(tx store.Tx) error {
		cur, err := resolve(ctx, tx, c.Param("id"))
		if err != nil {
			return err
		}
		rec, err = fn(ctx, tx, cur.ID)
		return err
	})
	return rec, err
}

// decisionActor is the caller with the reason of an optional
// {"reason": "..."} body: stored in the history line and the event.
func decisionActor(c *echo.Context) (actions.Actor, error) {
	var req wire.ReasonRequest
	if err := optionalBody(c, &req); err != nil {
		return actions.Actor{}, err
	}
	if strings.ContainsFunc(req.Reason, unicode.IsControl) || !utf8.ValidString(req.Reason) {
		return actions.Actor{}, badRequest("reason contains control characters")
	}
	by := actor(c)
	by.Note = strings.TrimSpace(req.Reason)
	return by, nil
}

func (s *Server) approveAction(c *echo.Context) error {
	by, err := decisionActor(c)
	if err != nil {
		return err
	}
	rec, err := s.change(c, func(ctx context.Context, tx store.Tx, id string) (*store.Record, error) {
		return s.rules.Approve(ctx, tx, id, by)
	})
	if err != nil {
		return err
	}
	s.nudgeNode(rec.ClusterID, rec.NodeID)
	return c.JSON(http.StatusOK, rec.Action)
}

// urgentAction marks an action urgent: {"reason": "..."} (required). It
// passes its cluster's closed maintenance window, never a freeze.
func (s *Server) urgentAction(c *echo.Context) error {
	by, err := decisionActor(c)
	if err != nil {
		return err
	}
	if by.Note == "" {
		return badRequest("reason is required: say why it may not wait for the window")
	}
	rec, err := s.change(c, func(ctx context.Context, tx store.Tx, id string) (*store.Record, error) {
		return s.rules.MarkUrgent(ctx, tx, id, by)
	})
	if err != nil {
		return err
	}
	s.nudgeNode(rec.ClusterID, rec.NodeID)
	return c.JSON(http.StatusOK, rec.Action)
}

func (s *Server) rejectAction(c *echo.Context) error {
	by, err := decisionActor(c)
	if err != nil {
		return err
	}
	rec, err := s.change(c, func(ctx context.Context, tx store.Tx, id string) (*store.Record, error) {
		return s.rules.Reject(ctx, tx, id, by)
	})
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, rec.Action)
}

// cancelAction answers 200 when the action is CANCELLED at once, and 202
// when the cancel is a request the next pass settles (actions.Cancel
// decides which).
func (s *Server) cancelAction(c *echo.Context) error {
	var outcome actions.CancelOutcome
	rec, err := s.change(c, func(ctx context.Context, tx store.Tx, id string) (*store.Record, error) {
		rec, o, err := s.rules.Cancel(ctx, tx, id, actor(c))
		outcome = o
		return rec, err
	})
	if err != nil {
		return err
	}
	if outcome == actions.Requested {
		s.nudgeNode(rec.ClusterID, rec.NodeID)
		return c.JSON(http.StatusAccepted, rec.Action)
	}
	return c.JSON(http.StatusOK, rec.Action)
}

// retryAction creates a new action with the content of a finished one.
func (s *Server) retryAction(c *echo.Context) error {
	// Args are checked outside the write transaction (actions.Rules.RetryIn).
	ctx := c.Request().Context()
	var id string
	err := s.st.Read(ctx, func(r store.Reader) error {
		cur, err := resolve(ctx, r, c.Param("id"))
		if err == nil {
			id = cur.ID
		}
		return err
	})
	if err != nil {
		return err
	}
	rec, err := s.rules.RetryIn(ctx, s.st, id, actor(c))
	if err != nil {
		return err
	}
	if rec.State == action.PendingSchedule {
		s.nudgeNode(rec.ClusterID, rec.NodeID)
	}
	return c.JSON(http.StatusCreated, rec.Action)
}

func (s *Server) nudgeCluster(id string) {
	if s.nudge != nil {
		s.nudge.Nudge(id)
	}
}

// nudgeNode asks for a sync of the node of an action that has something to push
// or cancel: it goes at once, not after a pass under way (docs/architecture.md,
// "Node syncs and reactive progress").
func (s *Server) nudgeNode(clusterID, nodeID string) {
	if s.nudge != nil {
		s.nudge.NudgeNode(clusterID, nodeID)
	}
}
