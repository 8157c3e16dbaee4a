package ui

import (
	"context"
	"net/http"
	"slices"
	"time"

	"github.com/musterhq/muster/core/approval"
	corenodes "github.com/musterhq/muster/core/nodes"
	"github.com/musterhq/muster/core/ops"
	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/action"
)

// Bounds of the Dashboard: each list reads at most this many rows (and one
// more, to say there are more), whatever the store holds, so that a viewer
// cannot make the landing page expensive.
const (
	dashWaiting = 20
	dashRunning = 20
	dashRuns    = 10
	dashFailed  = 20
	// dashFailedRead bounds the failed actions read to fill dashFailed
	// rows, a run's node's earlier attempts included.
	dashFailedRead = 5 * dashFailed
	dashNodes      = 50
	failedWindow   = 24 * time.Hour
)

type dashNode struct {
	store.Node
	Status string
}

type dashBudget struct {
	ClusterID string
	Budget    *budgetView
}

type dashboardData struct {
	// Waiting: actions waiting for an approval the visitor may give; Runs
	// the same for runs. WaitingMore: there may be more than shown.
	Waiting     []action.Action
	WaitingRuns []runRow
	WaitingMore bool
	// WaitingSchedules: schedules waiting for an approval the visitor may
	// give.
	WaitingSchedules []pendingSchedule
	Running          []action.Action
	RunningMore      bool
	RunningRuns      []runRow
	// PausedRuns wait for a person (promote, resume or abort): they are
	// not "running now".
	PausedRuns []runRow
	Failed     []action.Action
	FailedMore bool
	FailedRuns []runRow
	Nodes      []dashNode
	NodesMore  bool
	Budgets    []dashBudget
}

func (s *Server) dashboard(w http.ResponseWriter, r *http.Request, v *visitor) {
	// The budget as it is now, loaded once for the whole page.
	budgets := s.ops.Budget().Load()
	ctx := r.Context()
	var d dashboardData
	since := s.now().Add(-failedWindow)
	err := s.st.Read(ctx, func(rd store.Reader) error {
		vis, err := v.visible(ctx, rd)
		if err != nil {
			return err
		}
		in := vis.In()
		pend, err := rd.ListActions(ctx, store.ListQuery{States: []action.State{action.PendingApprove}, ClusterIn: in,
			Sort: []store.SortKey{{Field: "created_ts"}}, Limit: dashWaiting + 1})
		if err != nil {
			return err
		}
		d.WaitingMore = len(pend) > dashWaiting
		pol := s.ops.Policy().Load()
		for _, rec := range pend[:min(len(pend), dashWaiting)] {
			if whyNot(pol, v, "this", rec.Requester, "", rec.ClusterID) == "" && !approval.SamePerson(rec.Requester, v.tok.Name) {
				d.Waiting = append(d.Waiting, rec.Action)
			}
		}
		prs, _, err := s.pendingRuns(ctx, rd, v, "")
		if err != nil {
			return err
		}
		for _, p := range prs {
			if p.CanDecide {
				d.WaitingRuns = append(d.WaitingRuns, runRow{Run: p.Run, Progress: p.Progress})
			}
		}
		// Runs paused for an approver (errors, canary) wait for one too.
		paused, more, err := s.pausedRuns(ctx, rd, v)
		if err != nil {
			return err
		}
		d.WaitingMore = d.WaitingMore || more
		for _, p := range paused {
			if !p.Mine && (p.CanResume || p.CanPromote) {
				d.WaitingRuns = append(d.WaitingRuns, runRow{Run: p.Run, Progress: p.Progress})
			}
		}
		scs, err := s.pendingSchedules(ctx, rd, v)
		if err != nil {
			return err
		}
		for _, p := range scs {
			if p.CanDecide {
				d.WaitingSchedules = append(d.WaitingSchedules, p)
			}
		}
		running, err := rd.ListActions(ctx, store.ListQuery{States: []action.State{action.Running}, ClusterIn: in,
			Sort: []store.SortKey{{Field: "updated_ts", Desc: true}}, Limit: dashRunning + 1})
		if err != nil {
			return err
		}
		d.RunningMore = len(running) > dashRunning
		for _, rec := range running[:min(len(running), dashRunning)] {
			d.Running = append(d.Running, rec.Action)
		}
		if d.RunningRuns, err = s.briefRuns(ctx, rd, store.RunQuery{States: []string{store.RunRunning},
			ClusterIn: in, Limit: dashRuns, Brief: true}, time.Time{}); err != nil {
			return err
		}
		if d.PausedRuns, err = s.briefRuns(ctx, rd, store.RunQuery{States: []string{store.RunPaused},
			ClusterIn: in, Limit: dashRuns, Brief: true}, time.Time{}); err != nil {
			return err
		}
		// A run's node is one row, its last failed attempt (the newest):
		// its earlier attempts are read (a bounded number more) and skipped.
		failed, err := rd.ListActions(ctx, store.ListQuery{States: []action.State{action.Failed, action.Lost}, ClusterIn: in,
			Sort: []store.SortKey{{Field: "updated_ts", Desc: true}}, Limit: dashFailedRead})
		if err != nil {
			return err
		}
		seen := map[[2]string]bool{}
		for _, rec := range failed {
			if rec.UpdatedTS.Before(since) {
				break
			}
			if rec.RunID != "" {
				k := [2]string{rec.RunID, rec.NodeID}
				if seen[k] {
					continue
				}
				seen[k] = true
			}
			if len(d.Failed) == dashFailed {
				d.FailedMore = true
				break
			}
			d.Failed = append(d.Failed, rec.Action)
		}
		d.FailedMore = d.FailedMore || len(failed) == dashFailedRead && len(d.Failed) == dashFailed
		if d.FailedRuns, err = s.briefRuns(ctx, rd, store.RunQuery{States: []string{store.RunFailed},
			ClusterIn: in, Limit: dashRuns, Brief: true}, since); err != nil {
			return err
		}
		// Nodes are read whole, as the Clusters page does: their number is
		// the fleet's, not something a visitor can grow.
		all, err := rd.Nodes(ctx, "")
		if err != nil {
			return err
		}
		all = slices.DeleteFunc(all, func(n store.Node) bool { return !vis.Has(n.ClusterID) })
		for i := range all {
			n := &all[i]
			st := corenodes.Status(n)
			if st == store.NodeUp {
				continue
			}
			if len(d.Nodes) == dashNodes {
				d.NodesMore = true
				break
			}
			d.Nodes = append(d.Nodes, dashNode{Node: *n, Status: st})
		}
		cs, err := rd.Clusters(ctx)
		if err != nil {
			return err
		}
		for _, c := range visibleClusters(vis, cs) {
			if _, ok := budgets.Limit(c.ID); !ok {
				continue
			}
			var nodes []store.Node
			for i := range all {
				if all[i].ClusterID == c.ID {
					nodes = append(nodes, all[i])
				}
			}
			open, err := rd.OpenActions(ctx, c.ID, "")
			if err != nil {
				return err
			}
			b, err := budgetOf(ctx, rd, budgets, c.ID, nodes, open)
			if err != nil {
				return err
			}
			d.Budgets = append(d.Budgets, dashBudget{ClusterID: c.ID, Budget: b})
		}
		return nil
	})
	if err != nil {
		s.storeError(w, r, v, err)
		return
	}
	vw := newView(v, "Dashboard", "dashboard")
	vw.Live = &liveRegion{URL: "/ui/dashboard?part=live", Stream: ""}
	vw.Data = d
	s.render(w, r, http.StatusOK, "dashboard", vw)
}

// briefRuns reads a page of brief runs with their progress; runs last
// changed before since (when not zero) are left out.
func (s *Server) briefRuns(ctx context.Context, rd store.Reader, q store.RunQuery, since time.Time) ([]runRow, error) {
	list, err := rd.ListRuns(ctx, q)
	if err != nil {
		return nil, err
	}
	var kept []store.Run
	for i := range list {
		if since.IsZero() || !list[i].UpdatedTS.Before(since) {
			kept = append(kept, list[i])
		}
	}
	byRun, err := childCounts(ctx, rd, kept)
	if err != nil {
		return nil, err
	}
	var out []runRow
	for i := range kept {
		row := runRow{Run: ops.RunView(&kept[i], byRun[kept[i].ID])}
		for _, st := range row.Stages {
			row.Progress = append(row.Progress, progressOf(st))
		}
		out = append(out, row)
	}
	return out, nil
}
