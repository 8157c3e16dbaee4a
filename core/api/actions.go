package api

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"

	"github.com/labstack/echo/v5"

	"github.com/musterhq/muster/core/ops"
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
			run, err := ops.ResolveRunFor(c.Request().Context(), r, who(c), q.RunID)
			switch {
			case err == nil:
				q.RunID = run.ID
			case !errors.Is(err, store.ErrNotFound):
				return err
			}
		}
		v, err := s.visible(c, r)
		if err != nil {
			return err
		}
		q.ClusterIn = v.In()
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

func (s *Server) showAction(c *echo.Context) error {
	ctx := c.Request().Context()
	var out wire.ActionView
	err := s.st.Read(ctx, func(r store.Reader) error {
		rec, err := ops.ResolveActionFor(ctx, r, who(c), c.Param("id"))
		if err != nil {
			return err
		}
		if err := s.hidden(c, r, "action "+c.Param("id"), rec.ClusterID); err != nil {
			return err
		}
		out.Action = rec.Action
		if out.History, err = r.History(ctx, rec.ID); err != nil {
			return err
		}
		out.Approval, err = s.ops.ActionApproval(ctx, r, rec)
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

func (s *Server) createAction(c *echo.Context) error {
	body, err := readBody(c)
	if err != nil {
		return err
	}
	req, t, err := decodeCreate(body)
	if err != nil {
		return err
	}
	if t != nil {
		recs, existing, err := s.ops.CreateActions(c.Request().Context(), who(c), *req, *t)
		if err != nil {
			return err
		}
		out := wire.CreatedActions{Actions: make([]action.Action, len(recs))}
		for i, rec := range recs {
			out.Actions[i] = rec.Action
		}
		if existing {
			// A retry of a create with its request_id: made already.
			return c.JSON(http.StatusOK, out)
		}
		return c.JSON(http.StatusCreated, out)
	}
	rec, err := s.ops.CreateAction(c.Request().Context(), who(c), *req)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, rec.Action)
}

// reason is the reason of an optional {"reason": "..."} body: stored in the
// history line and the event.
func reason(c *echo.Context) (string, error) {
	var req wire.ReasonRequest
	err := optionalBody(c, &req)
	return req.Reason, err
}

// looseReason is the reason of the body of a call whose body was ignored
// before it took a reason (an action's cancel and retry): {"reason": "..."}
// is read, anything else in it, or a body that is no JSON object, is still
// ignored.
func looseReason(c *echo.Context) (string, error) {
	body, err := readBody(c)
	if err != nil || len(strings.TrimSpace(string(body))) == 0 {
		return "", err
	}
	var req wire.ReasonRequest
	if json.Unmarshal(body, &req) != nil {
		return "", nil
	}
	return req.Reason, nil
}

// decideAction answers one decision on the action the path names: the
// reason of the body, the operation, the action after it.
func (s *Server) decideAction(op func(ctx context.Context, c ops.Caller, ref, reason string) (*store.Record, error)) echo.HandlerFunc {
	return func(c *echo.Context) error {
		why, err := reason(c)
		if err != nil {
			return err
		}
		ctx := c.Request().Context()
		rec, err := op(ctx, who(c), c.Param("id"), why)
		if err != nil {
			return err
		}
		// Where its approval stands now (an approval of one level of
		// several leaves it waiting).
		out := wire.ActionView{Action: rec.Action}
		err = s.st.Read(ctx, func(r store.Reader) error {
			out.Approval, err = s.ops.ActionApproval(ctx, r, rec)
			return err
		})
		if err != nil {
			return err
		}
		return c.JSON(http.StatusOK, out)
	}
}

// cancelAction answers 200 when the action is CANCELLED at once, and 202
// when the cancel is a request the node's next sync settles. An optional
// {"reason": ...} body is recorded.
func (s *Server) cancelAction(c *echo.Context) error {
	why, err := looseReason(c)
	if err != nil {
		return err
	}
	rec, pending, err := s.ops.CancelAction(c.Request().Context(), who(c), c.Param("id"), why)
	if err != nil {
		return err
	}
	if pending {
		return c.JSON(http.StatusAccepted, rec.Action)
	}
	return c.JSON(http.StatusOK, rec.Action)
}

// retryAction creates a new action with the content of a finished one
// (an optional {"reason": ...} body, recorded).
func (s *Server) retryAction(c *echo.Context) error {
	why, err := looseReason(c)
	if err != nil {
		return err
	}
	rec, err := s.ops.RetryAction(c.Request().Context(), who(c), c.Param("id"), why)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, rec.Action)
}
