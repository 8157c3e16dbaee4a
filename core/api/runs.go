package api

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"

	"github.com/labstack/echo/v5"

	"github.com/musterhq/muster/core/ops"
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

func (s *Server) createRun(c *echo.Context) error {
	body, err := readBody(c)
	if err != nil {
		return err
	}
	var req wire.CreateRunRequest
	if err := decodeStrict(body, &req); err != nil {
		return err
	}
	out, err := s.ops.CreateRun(c.Request().Context(), who(c), &req)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, out.View())
}

// retryRun makes a new run over the failed and skipped nodes of a finished
// run (201), waiting for approval as any run; {"from": "failed"} re-runs
// each failed node from its failed step.
func (s *Server) retryRun(c *echo.Context) error {
	var req wire.RetryRunRequest
	if err := optionalBody(c, &req); err != nil {
		return err
	}
	out, err := s.ops.RetryRun(c.Request().Context(), who(c), c.Param("id"), req.From)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, out.View())
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
			store.RunCancelled, store.RunAborted:
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
		v, err := s.visible(c, r)
		if err != nil {
			return err
		}
		q.ClusterIn = v.In()
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
			w := ops.RunView(&list[i], byRun[list[i].ID])
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
	var waits *wire.Approval
	err := s.st.Read(ctx, func(r store.Reader) error {
		run, err := ops.ResolveRunFor(ctx, r, who(c), c.Param("id"))
		if err != nil {
			return err
		}
		if err := s.hidden(c, r, "run "+c.Param("id"), run.ClusterID); err != nil {
			return err
		}
		if waits, err = s.ops.RunApproval(ctx, r, run); err != nil {
			return err
		}
		// Counted by the store's counters; the children read are those of
		// a bounded set of nodes, whatever the run's size.
		counts, err := r.RunChildCounts(ctx, []string{run.ID})
		if err != nil {
			return err
		}
		nodes := ops.RunNodes(run)
		if len(nodes) <= MaxShownNodes {
			kids, err := r.ListActions(ctx, store.ListQuery{RunID: run.ID, NodeIDs: nodes})
			if err != nil {
				return err
			}
			out = ops.RunView(run, counts)
			out.Children = ops.RunGrid(run, kids)
			return ops.RunNotInRun(ctx, r, run, &out)
		}
		// A large run: its cells in flight, and the first nodes of each
		// stage; GET /api/v1/runs/{id}/nodes pages the rest.
		flying, err := r.ListActions(ctx, store.ListQuery{RunID: run.ID, States: ops.RunInFlightStates, Limit: MaxShownNodes})
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
		children := ops.RunGridOf(run, kids, func(stage, node string) bool { return cells[stage+"\x00"+node] })
		brief := *run
		brief.Stages = store.Brief(run.Stages)
		out = ops.RunView(&brief, counts)
		out.Children, out.NodesPaged = children, true
		return ops.RunNotInRun(ctx, r, run, &out)
	})
	if err != nil {
		return err
	}
	out.Approval = waits
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
		run, err := ops.ResolveRunFor(ctx, r, who(c), c.Param("id"))
		if err != nil {
			return err
		}
		if err := s.hidden(c, r, "run "+c.Param("id"), run.ClusterID); err != nil {
			return err
		}
		page, next, ok := ops.RunNodePage(ops.RunNodes(run), marker, limit)
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
		cells := ops.RunGridOf(run, kids, func(_, node string) bool { return on[node] })
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
	return decodeStrict(body, into)
}

// runAnswer answers a run as a change left it (200).
func runAnswer(c *echo.Context, out ops.RunResult, err error) error {
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, out.View())
}

// approveRun approves a run. With {"digest": "..."}, the approval holds only
// if it is the digest of the run as stored: the approver approves what was
// shown to them, or gets a 409.
func (s *Server) approveRun(c *echo.Context) error {
	var req wire.ApproveRunRequest
	if err := optionalBody(c, &req); err != nil {
		return err
	}
	out, err := s.ops.ApproveRun(c.Request().Context(), who(c), c.Param("id"), req.Digest)
	return runAnswer(c, out, err)
}

// cancelRun cancels a run; with {"rollback": true} its started nodes roll
// back and it ends ABORTED.
func (s *Server) cancelRun(c *echo.Context) error {
	var req wire.CancelRunRequest
	if err := optionalBody(c, &req); err != nil {
		return err
	}
	cancel := s.ops.CancelRun
	if req.Rollback {
		cancel = s.ops.CancelRunRollback
	}
	out, err := cancel(c.Request().Context(), who(c), c.Param("id"), req.Reason)
	return runAnswer(c, out, err)
}

// runWithReason answers a run change whose body is an optional
// {"reason": "..."}.
func (s *Server) runWithReason(op func(ctx context.Context, c ops.Caller, ref, reason string) (ops.RunResult, error)) echo.HandlerFunc {
	return func(c *echo.Context) error {
		why, err := reason(c)
		if err != nil {
			return err
		}
		out, err := op(c.Request().Context(), who(c), c.Param("id"), why)
		return runAnswer(c, out, err)
	}
}

// runWithoutBody answers a run change that takes no body (or {}).
func (s *Server) runWithoutBody(op func(ctx context.Context, c ops.Caller, ref string) (ops.RunResult, error)) echo.HandlerFunc {
	return func(c *echo.Context) error {
		if err := optionalBody(c, nil); err != nil {
			return err
		}
		out, err := op(c.Request().Context(), who(c), c.Param("id"))
		return runAnswer(c, out, err)
	}
}
