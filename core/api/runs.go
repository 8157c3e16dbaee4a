package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/labstack/echo/v5"

	"github.com/musterhq/muster/core/actions"
	"github.com/musterhq/muster/core/auth"
	"github.com/musterhq/muster/core/runs"
	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/action"
	"github.com/musterhq/muster/shared/wire"
)

// MaxRunListLimit bounds GET /api/v1/runs.
const MaxRunListLimit = 200

// MaxShownNodes is how many nodes GET /api/v1/runs/{id} shows a cell of
// (every node of a run up to this size, the nodes in flight of a larger
// one), and the default page of GET /api/v1/runs/{id}/nodes, whose limit
// is at most MaxNodePageLimit.
const (
	MaxShownNodes    = 100
	MaxNodePageLimit = 1000
)

// resolveRun finds the run named by an id or a unique prefix.
func resolveRun(ctx context.Context, r store.Reader, ref string) (*store.Run, error) {
	if action.ValidID(ref) {
		return r.Run(ctx, ref)
	}
	if len(ref) < action.MinPrefix {
		return nil, badRequest("id prefix %q is shorter than %d characters", ref, action.MinPrefix)
	}
	if strings.Trim(strings.ToLower(ref), "0123456789abcdef-") != "" || len(ref) > 36 {
		return nil, fmt.Errorf("run %q: %w", ref, store.ErrNotFound)
	}
	ids, err := r.RunIDsWithPrefix(ctx, strings.ToLower(ref), 10)
	if err != nil {
		return nil, err
	}
	switch len(ids) {
	case 0:
		return nil, fmt.Errorf("run %q: %w", ref, store.ErrNotFound)
	case 1:
		return r.Run(ctx, ids[0])
	}
	return nil, &ambiguousError{prefix: ref, matches: ids}
}

func (s *Server) who(c *echo.Context) actions.Actor {
	return actions.Actor{Name: caller(c).Name, Addr: clientAddr(c)}
}

func (s *Server) createRun(c *echo.Context) error {
	body, err := readBody(c)
	if err != nil {
		return err
	}
	var req wire.CreateRunRequest
	if err := decodeStrict(body, &req); err != nil {
		return err
	}
	if err := checkNotBefore(req.NotBefore); err != nil {
		return err
	}
	// Planned outside the write transaction (runs.Engine.CreateIn).
	ctx := c.Request().Context()
	var counts []store.ChildCount
	run, err := s.cfg.Runs.CreateIn(ctx, s.st, &req, s.who(c), countChildren(ctx, &counts))
	if err != nil {
		return err
	}
	return s.answerNewRun(c, run, counts)
}

// retryRun makes a new run over the failed and skipped nodes of a finished
// run (201), waiting for approval as any run.
func (s *Server) retryRun(c *echo.Context) error {
	if err := optionalBody(c, nil); err != nil {
		return err
	}
	return s.newRun(c, func(ctx context.Context, tx store.Tx) (*store.Run, error) {
		found, err := resolveRun(ctx, tx, c.Param("id"))
		if err != nil {
			return nil, err
		}
		return s.cfg.Runs.Retry(ctx, tx, found.ID, s.who(c))
	})
}

// newRun stores the run fn makes, in one transaction, and answers it (201);
// a run that starts at once nudges a pass to push its first wave.
func (s *Server) newRun(c *echo.Context, fn func(ctx context.Context, tx store.Tx) (*store.Run, error)) error {
	ctx := c.Request().Context()
	var run *store.Run
	var counts []store.ChildCount
	err := s.st.Update(ctx, func(tx store.Tx) error {
		var err error
		if run, err = fn(ctx, tx); err != nil {
			return err
		}
		return countChildren(ctx, &counts)(tx, run)
	})
	if err != nil {
		return err
	}
	return s.answerNewRun(c, run, counts)
}

// countChildren counts into *counts, in the write transaction that stored
// or changed run r, the children r has, for its answer (answerNewRun).
func countChildren(ctx context.Context, counts *[]store.ChildCount) func(tx store.Tx, r *store.Run) error {
	return func(tx store.Tx, r *store.Run) error {
		var err error
		*counts, err = tx.RunChildCounts(ctx, []string{r.ID})
		return err
	}
}

// answerNewRun answers a new run (201); a run that starts at once nudges
// a pass to push its first wave.
func (s *Server) answerNewRun(c *echo.Context, run *store.Run, counts []store.ChildCount) error {
	if len(counts) > 0 {
		s.nudgeCluster(run.ClusterID)
	}
	return c.JSON(http.StatusCreated, runs.View(run, counts))
}

func (s *Server) listRuns(c *echo.Context) error {
	q := store.RunQuery{ClusterID: c.QueryParam("cluster"), Marker: c.QueryParam("marker"), Limit: DefaultListLimit}
	states, err := listParam(c, "state")
	if err != nil {
		return err
	}
	for _, st := range states {
		st = strings.ToUpper(st)
		switch st {
		case store.RunPendingApprove, store.RunRunning, store.RunPaused, store.RunDone, store.RunPartial, store.RunFailed,
			store.RunCancelled:
		default:
			return badRequest("state: %q is not a run state", st)
		}
		q.States = append(q.States, st)
	}
	if q.Limit, err = limitParam(c.QueryParam("limit"), q.Limit, MaxRunListLimit); err != nil {
		return err
	}
	if q.Marker != "" && !action.ValidID(q.Marker) {
		return badRequest("marker %q is not a run id", q.Marker)
	}
	q.Brief = true // the first nodes of each stage and their count
	ctx := c.Request().Context()
	out := wire.RunList{Runs: []wire.Run{}}
	err = s.st.Read(ctx, func(r store.Reader) error {
		list, next, err := store.RunPage(ctx, r, q)
		if err != nil {
			return err
		}
		out.NextMarker = next
		ids := make([]string, len(list))
		for i := range list {
			ids[i] = list[i].ID
		}
		// Counted with the children by the store: a list never reads them.
		counts, err := r.RunChildCounts(ctx, ids)
		if err != nil {
			return err
		}
		byRun := store.CountsByRun(counts)
		for i := range list {
			w := runs.View(&list[i], byRun[list[i].ID])
			for j := range w.Stages {
				w.Stages[j].Args = nil // in the run's own answer, not in lists
			}
			out.Runs = append(out.Runs, w)
		}
		return nil
	})
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, out)
}

func (s *Server) showRun(c *echo.Context) error {
	ctx := c.Request().Context()
	var out wire.Run
	err := s.st.Read(ctx, func(r store.Reader) error {
		run, err := resolveRun(ctx, r, c.Param("id"))
		if err != nil {
			return err
		}
		// Counted by the store's counters; the children read are those of
		// a bounded set of nodes, whatever the run's size.
		counts, err := r.RunChildCounts(ctx, []string{run.ID})
		if err != nil {
			return err
		}
		nodes := runs.Nodes(run)
		if len(nodes) <= MaxShownNodes {
			kids, err := r.ListActions(ctx, store.ListQuery{RunID: run.ID, NodeIDs: nodes})
			if err != nil {
				return err
			}
			out = runs.View(run, counts)
			out.Children = runs.Grid(run, kids)
			return nil
		}
		// A large run: its cells in flight, and the first nodes of each
		// stage; GET /api/v1/runs/{id}/nodes pages the rest.
		flying, err := r.ListActions(ctx, store.ListQuery{RunID: run.ID, States: runs.InFlightStates, Limit: MaxShownNodes})
		if err != nil {
			return err
		}
		cells := map[string]bool{}
		var ids []string
		for _, k := range flying {
			cells[k.Stage+"\x00"+k.NodeID] = true
			ids = append(ids, k.NodeID)
		}
		slices.Sort(ids)
		var kids []store.Record
		if ids = slices.Compact(ids); len(ids) > 0 {
			if kids, err = r.ListActions(ctx, store.ListQuery{RunID: run.ID, NodeIDs: ids}); err != nil {
				return err
			}
		}
		children := runs.GridOf(run, kids, func(stage, node string) bool { return cells[stage+"\x00"+node] })
		brief := *run
		brief.Stages = store.Brief(run.Stages)
		out = runs.View(&brief, counts)
		out.Children, out.NodesPaged = children, true
		return nil
	})
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, out)
}

// runNodes answers GET /api/v1/runs/{id}/nodes: the grid's cells of a page
// of the run's nodes, sorted by node id, after marker (a node id).
func (s *Server) runNodes(c *echo.Context) error {
	limit, err := limitParam(c.QueryParam("limit"), MaxShownNodes, MaxNodePageLimit)
	if err != nil {
		return err
	}
	marker := c.QueryParam("marker")
	ctx := c.Request().Context()
	out := wire.RunNodeList{Children: []wire.RunChild{}}
	errMarker := errors.New("marker")
	err = s.st.Read(ctx, func(r store.Reader) error {
		run, err := resolveRun(ctx, r, c.Param("id"))
		if err != nil {
			return err
		}
		page, next, ok := runs.NodePage(runs.Nodes(run), marker, limit)
		if !ok {
			return errMarker
		}
		out.NextMarker = next
		if len(page) == 0 {
			return nil
		}
		kids, err := r.ListActions(ctx, store.ListQuery{RunID: run.ID, NodeIDs: page})
		if err != nil {
			return err
		}
		on := map[string]bool{}
		for _, n := range page {
			on[n] = true
		}
		cells := runs.GridOf(run, kids, func(_, node string) bool { return on[node] })
		// Node by node, each node's cells in stage order.
		slices.SortStableFunc(cells, func(a, b wire.RunChild) int { return strings.Compare(a.NodeID, b.NodeID) })
		out.Children = append(out.Children, cells...)
		return nil
	})
	if errors.Is(err, errMarker) {
		return badRequest("marker %q is not a node of this run", marker)
	}
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, out)
}

// optionalBody reads the optional body of a call (a run's change, a drain)
// into into. nil means the call takes none: no body or an empty object {}
// (what a client library that sends JSON with every write sends), and
// anything else is refused.
func optionalBody(c *echo.Context, into any) error {
	body, err := readBody(c)
	if err != nil || len(strings.TrimSpace(string(body))) == 0 {
		return err
	}
	if into == nil {
		if decodeStrict(body, &struct{}{}) != nil {
			return badRequest("this call takes no body, or an empty object {}")
		}
		return nil
	}
	if err := decodeStrict(body, into); err != nil {
		return err
	}
	if r, ok := into.(*wire.ReasonRequest); ok && len(r.Reason) > wire.MaxReason {
		return badRequest("reason is longer than %d bytes", wire.MaxReason)
	}
	return nil
}

// changeRun reads the call's body into body (nil: none allowed), runs one
// engine change on the run named by the path, and answers the run as it is
// after it, nudging a pass of its cluster.
func (s *Server) changeRun(c *echo.Context, body any, fn func(ctx context.Context, tx store.Tx, id string) (*store.Run, error)) error {
	if err := optionalBody(c, body); err != nil {
		return err
	}
	ctx := c.Request().Context()
	var run *store.Run
	var counts []store.ChildCount
	err := s.st.Update(ctx, func(tx store.Tx) error {
		found, err := resolveRun(ctx, tx, c.Param("id"))
		if err != nil {
			return err
		}
		if run, err = fn(ctx, tx, found.ID); err != nil {
			return err
		}
		return countChildren(ctx, &counts)(tx, run)
	})
	if err != nil {
		return err
	}
	s.nudgeCluster(run.ClusterID)
	return c.JSON(http.StatusOK, runs.View(run, counts))
}

// approveRun approves a run. With {"digest": "..."}, the approval holds only
// if it is the digest of the run as stored: the approver approves what was
// shown to them, or gets a 409.
func (s *Server) approveRun(c *echo.Context) error {
	var req wire.ApproveRunRequest
	return s.changeRun(c, &req, func(ctx context.Context, tx store.Tx, id string) (*store.Run, error) {
		return s.cfg.Runs.Approve(ctx, tx, id, req.Digest, s.who(c))
	})
}

// urgentRun marks a run urgent: {"reason": "..."} (required). Its children
// pass the cluster's closed maintenance window, never a freeze.
func (s *Server) urgentRun(c *echo.Context) error {
	var req wire.ReasonRequest
	return s.changeRun(c, &req, func(ctx context.Context, tx store.Tx, id string) (*store.Run, error) {
		by := s.who(c)
		by.Note = strings.TrimSpace(req.Reason)
		if by.Note == "" {
			return nil, badRequest("reason is required: say why it may not wait for the window")
		}
		if strings.ContainsFunc(by.Note, unicode.IsControl) || !utf8.ValidString(by.Note) {
			return nil, badRequest("reason contains control characters")
		}
		return s.cfg.Runs.MarkUrgent(ctx, tx, id, by)
	})
}

func (s *Server) rejectRun(c *echo.Context) error {
	var req wire.ReasonRequest
	return s.changeRun(c, &req, func(ctx context.Context, tx store.Tx, id string) (*store.Run, error) {
		return s.cfg.Runs.Reject(ctx, tx, id, s.who(c), req.Reason)
	})
}

func (s *Server) pauseRun(c *echo.Context) error {
	return s.changeRun(c, nil, func(ctx context.Context, tx store.Tx, id string) (*store.Run, error) {
		return s.cfg.Runs.Pause(ctx, tx, id, s.who(c))
	})
}

func (s *Server) resumeRun(c *echo.Context) error {
	return s.changeRun(c, nil, func(ctx context.Context, tx store.Tx, id string) (*store.Run, error) {
		roles := caller(c).Roles
		return s.cfg.Runs.ResumeAs(ctx, tx, id, s.who(c), auth.Can(roles, auth.Approve), auth.Can(roles, auth.Cancel))
	})
}

// promoteRun lets a run paused after its canary go on (an approver other
// than the requester).
func (s *Server) promoteRun(c *echo.Context) error {
	return s.changeRun(c, nil, func(ctx context.Context, tx store.Tx, id string) (*store.Run, error) {
		return s.cfg.Runs.Promote(ctx, tx, id, s.who(c), auth.Can(caller(c).Roles, auth.Approve))
	})
}

func (s *Server) cancelRun(c *echo.Context) error {
	var req wire.ReasonRequest
	return s.changeRun(c, &req, func(ctx context.Context, tx store.Tx, id string) (*store.Run, error) {
		return s.cfg.Runs.Cancel(ctx, tx, id, s.who(c), req.Reason)
	})
}

// runError maps the run specs' errors to the API's; a run's state and
// forbidden errors are the action rules' and map with them.
func runError(err error) (int, string, bool) {
	switch {
	case errors.Is(err, runs.ErrInvalid):
		return http.StatusBadRequest, wire.CodeBadRequest, true
	case errors.Is(err, runs.ErrUnresolvable):
		return http.StatusUnprocessableEntity, wire.CodeUnprocessable, true
	case errors.Is(err, runs.ErrReplan):
		return http.StatusConflict, wire.CodeConflict, true
	}
	return 0, "", false
}
