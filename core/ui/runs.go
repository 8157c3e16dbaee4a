package ui

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/musterhq/muster/core/approval"
	"github.com/musterhq/muster/core/auth"
	"github.com/musterhq/muster/core/ops"
	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/action"
	"github.com/musterhq/muster/shared/wire"
)

// runsPerPage is the size of a page of the Runs list.
const runsPerPage = 50

// stateCount is one state's count in a stage's progress.
type stateCount struct {
	State string
	N     int
}

// stageProgress is a stage's progress as the pages show it, in nodes:
// the counts of its nodes done, in flight, failed, skipped, rolled back
// and waiting, only those above zero (a node's attempts and rollback
// steps are shown on the node, never added here).
type stageProgress struct {
	wire.Stage
	// Total and NodeTotal count its nodes, Finished those that will not
	// move again.
	Total, NodeTotal int
	Finished         int
	Counts           []stateCount
	// More counts the nodes not listed (a brief run lists the first ones).
	More int
}

func progressOf(st wire.Stage) stageProgress {
	n := st.Progress
	if n.Total == 0 {
		n.Total, n.Waiting = st.Size(), st.Size()
	}
	p := stageProgress{Stage: st, Total: n.Total, NodeTotal: st.Size(), More: st.Size() - len(st.Nodes), Finished: n.Finished()}
	for _, c := range []stateCount{{"done", n.Done}, {"in_flight", n.InFlight}, {"failed", n.Failed}, {"skipped", n.Skipped},
		{"rolled_back", n.RolledBack}, {"waiting", n.Waiting}} {
		if c.N > 0 {
			p.Counts = append(p.Counts, c)
		}
	}
	return p
}

// runRow is one line of the Runs list.
type runRow struct {
	wire.Run
	Progress []stageProgress
}

type runsData struct {
	Filter    runFilter
	States    []string
	Clusters  []store.Cluster
	Runs      []runRow
	NextURL   string
	FilterErr string
	// CanCreate: the visitor may start a run (the New run link).
	CanCreate bool
}

func (s *Server) runsList(w http.ResponseWriter, r *http.Request, v *visitor) {
	ctx := r.Context()
	d := runsData{States: runStates}
	f, ferr := decodeRunFilter(r.URL.Query())
	status, why := filterStatus(ferr)
	if ferr != nil {
		d.FilterErr, f = why, runFilter{}
	}
	d.Filter = f
	page := listPage{path: "/ui/runs", filter: f.values()}
	err := s.st.Read(ctx, func(rd store.Reader) error {
		vis, err := v.visible(ctx, rd)
		if err != nil {
			return err
		}
		if d.Clusters, err = rd.Clusters(ctx); err != nil {
			return err
		}
		d.Clusters = visibleClusters(vis, d.Clusters)
		if d.CanCreate, err = canCreateSomewhere(ctx, rd, v); err != nil {
			return err
		}
		q := f.query(runsPerPage)
		q.Brief, q.ClusterIn = true, vis.In()
		list, next, err := store.RunPage(ctx, rd, q)
		if err != nil {
			return err
		}
		d.NextURL = page.url(next)
		byRun, err := childCounts(ctx, rd, list)
		if err != nil {
			return err
		}
		for i := range list {
			row := runRow{Run: ops.RunView(&list[i], byRun[list[i].ID])}
			for _, st := range row.Stages {
				row.Progress = append(row.Progress, progressOf(st))
			}
			d.Runs = append(d.Runs, row)
		}
		return nil
	})
	if errors.Is(err, store.ErrUnknownMarker) {
		s.renderError(w, r, v, http.StatusBadRequest, "The page marker names no run.")
		return
	}
	if err != nil {
		s.storeError(w, r, v, err)
		return
	}
	vw := newView(v, "Runs", "runs")
	vw.Live = page.live(f.Marker, url.Values{"run": {"*"}}, f.Cluster)
	vw.Data = d
	s.render(w, r, status, "runs", vw)
}

// childCounts reads the counts of the children of runs, by run, from the
// counters the store keeps with them: a page of runs never reads children.
func childCounts(ctx context.Context, rd store.Reader, list []store.Run) (map[string][]store.ChildCount, error) {
	ids := make([]string, len(list))
	for i := range list {
		ids[i] = list[i].ID
	}
	counts, err := rd.RunChildCounts(ctx, ids)
	if err != nil {
		return nil, err
	}
	return store.CountsByRun(counts), nil
}

// wave is the nodes of one wave of a stage.
type wave struct {
	N     int
	Nodes []string
}

// stageDetail is a stage on the run's page.
type stageDetail struct {
	stageProgress
	// Waves lists the nodes of each wave of a stage of at most
	// nodesPerPage nodes; a larger one says how many waves of how many
	// nodes (WaveCount, WaveSize), each node's wave being in the grid.
	Waves               []wave
	WaveCount, WaveSize int
}

// nodesPerPage is how many nodes a run's page shows at a time: it reads
// the children of those nodes only, so a run of any size costs a page.
const nodesPerPage = 50

// gridRow is one node's line of the per-node grid: a cell per stage, nil
// where the stage does not include the node.
type gridRow struct {
	Node  string
	Cells []*nodeCell
}

// runDecision says whether the visitor may approve or reject a run waiting
// for approval, and why not.
type runDecision struct {
	Mine      bool
	CanDecide bool
	Why       string
	Expires   time.Time
}

type runData struct {
	Run    wire.Run
	Stages []stageDetail
	Grid   []gridRow
	runDecision
	CanPause, CanResume, CanCancel, CanPromote bool
	// CanAbort: the visitor may abort the run (an approver, or its
	// requester, while it is paused or its canary runs: ops.MayAbort).
	CanAbort bool
	// CanRetry: the visitor may retry the finished run over the nodes it
	// did not carry through; CanRetryFailed, from each failed node's
	// failed step (a stage of steps has failed nodes).
	CanRetry, CanRetryFailed bool
	// CanUrgent: the visitor may mark the run urgent (an approver other
	// than its requester, while the run is open); UrgentWhy says why not
	// to an approver.
	CanUrgent bool
	UrgentWhy string
	// OpWhy explains why there are no pause, resume or cancel buttons,
	// or why a paused run has no Resume button for this caller.
	OpWhy string
	Self  string // this page's path, where the forms come back to
	// Nodes counts the run's nodes; FirstNode and LastNode number those
	// of this page (from 1); NextURL and FirstURL page through them.
	Nodes, FirstNode, LastNode int
	NextURL, FirstURL          string
	// Failed and Skipped are the summary's nodes, the first summaryShown
	// of them, and how many more there are.
	Failed, Skipped         []wire.StageNode
	MoreFailed, MoreSkipped int
}

// summaryShown bounds the failed or skipped nodes a run's page names.
const summaryShown = 20

// runDecisionFor works out whether visitor v may decide run r (applier: who
// applied the playbook version the run was made from, "" for none).
func (s *Server) runDecisionFor(pol approval.Policy, v *visitor, r *store.Run, applier string) runDecision {
	d := runDecision{Mine: approval.SamePerson(r.Requester, v.tok.Name)}
	if pol.TTL > 0 {
		d.Expires = ops.ApprovalEnds(pol.TTL, r.CreatedTS, r.NotBefore)
	}
	d.Why = whyNot(pol, v, "this run", r.Requester, applier, r.ClusterID)
	d.CanDecide = d.Why == ""
	return d
}

// levels is d, with the Approve button taken away when no level that
// still needs someone counts v (ops.ApprovalWhyNot).
func (d runDecision) levels(ap *wire.Approval, v *visitor) runDecision {
	if d.CanDecide {
		d.Why = ops.ApprovalWhyNot(ap, v.tok.Name)
		d.CanDecide = d.Why == ""
	}
	return d
}

// whyNot says why visitor v may not approve or reject what (requested by
// requester, made from a playbook version applied by applier, on cluster
// clusterID), by the one rule of approval.Policy.MayApprove under pol, the
// policy loaded once for the decision shown, with the visitor's grants on
// that cluster; "" when they may.
func whyNot(pol approval.Policy, v *visitor, what, requester, applier, clusterID string) string {
	switch pol.MayApprove(requester, applier, v.tok.Name, v.canOn(auth.Approve, clusterID)) {
	case approval.OwnRequest:
		return "You asked for " + what + ": another approver must decide."
	case approval.AppliedPlaybook:
		return "You applied the playbook version of " + what + ": another approver must decide."
	case approval.NoRole:
		return "Your roles (" + v.held() + ") do not include approving on cluster " + clusterID + "."
	}
	return ""
}

// urgentWhyNot says why an approver may not mark urgent what requester
// asked for ("" when they may): the rule of actions.Rules.MarkUrgent and
// runs.Engine.MarkUrgent.
// mayHoldForWindow reports whether a maintenance window could hold work
// on the cluster (it has one): urgent passes a closed window, never a
// freeze, so it is offered only there.
func (s *Server) mayHoldForWindow(clusterID string) bool {
	cal := s.cfg.Calendars.Load().Of(clusterID)
	return cal != nil && len(cal.Windows) > 0
}

func urgentWhyNot(pol approval.Policy, v *visitor, requester, clusterID string) string {
	if pol.MayApprove(requester, "", v.tok.Name, v.canOn(auth.Approve, clusterID)) == approval.OwnRequest {
		return "You asked for this: another approver may mark it urgent."
	}
	return ""
}

// applierOf returns who applied the playbook version run r was made from.
func applierOf(ctx context.Context, rd store.Reader, r *store.Run) (string, error) {
	if r.Playbook == "" {
		return "", nil
	}
	pb, err := rd.Playbook(ctx, r.Playbook, r.PlaybookVersion)
	if errors.Is(err, store.ErrNotFound) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	return pb.CreatedBy, nil
}

func (s *Server) runDetail(w http.ResponseWriter, r *http.Request, v *visitor) {
	pol := s.ops.Policy().Load() // once, for every decision the page shows
	ctx := r.Context()
	id := r.PathValue("id")
	if !action.ValidID(id) {
		s.renderError(w, r, v, http.StatusNotFound, "There is no such run.")
		return
	}
	marker := r.URL.Query().Get("marker")
	var run *store.Run
	var kids []store.Record
	var counts []store.ChildCount
	var applier string
	var resumeErr, promoteErr error
	var waits *wire.Approval
	var nodes, page []string
	var notIn map[int][]string
	var next string
	errMarker := errors.New("the page marker names no node of this run")
	err := s.st.Read(ctx, func(rd store.Reader) error {
		var err error
		if run, err = rd.Run(ctx, id); err != nil {
			return err
		}
		vis, err := v.visible(ctx, rd)
		if err != nil {
			return err
		}
		if err := vis.Check("run "+id, run.ClusterID); err != nil {
			return err
		}
		// A page of nodes, and the children of those nodes alone: the
		// counts come from the store's counters, never from every child.
		nodes = ops.RunNodes(run)
		var ok bool
		if page, next, ok = ops.RunNodePage(nodes, marker, nodesPerPage); !ok {
			return errMarker
		}
		if len(page) > 0 {
			if kids, err = rd.ListActions(ctx, store.ListQuery{RunID: id, NodeIDs: page}); err != nil {
				return err
			}
		}
		if counts, err = rd.RunChildCounts(ctx, []string{id}); err != nil {
			return err
		}
		if run.State == store.RunPaused && v.canOn(auth.Continue, run.ClusterID) {
			if ops.RunPausedFor(run) == wire.PausedCanary {
				promoteErr = s.ops.MayPromote(ctx, rd, v.caller(r), run)
				if promoteErr != nil && ops.Describe(promoteErr).Internal {
					return promoteErr
				}
			}
			resumeErr = s.ops.MayResume(ctx, rd, v.caller(r), run)
			if resumeErr != nil && ops.Describe(resumeErr).Internal {
				return resumeErr
			}
		}
		if waits, err = s.ops.RunApproval(ctx, rd, run); err != nil {
			return err
		}
		if applier, err = applierOf(ctx, rd, run); err != nil {
			return err
		}
		notIn, err = ops.RunNotIn(ctx, rd, run)
		return err
	})
	if errors.Is(err, store.ErrNotFound) {
		s.renderError(w, r, v, http.StatusNotFound, "There is no such run.")
		return
	}
	if errors.Is(err, errMarker) {
		s.renderError(w, r, v, http.StatusBadRequest, "The page marker names no node of this run.")
		return
	}
	if err != nil {
		s.storeError(w, r, v, err)
		return
	}
	self := "/ui/runs/" + id
	d := runData{Run: ops.RunView(run, counts), Self: self, Nodes: len(nodes)}
	d.Run.Approval = waits
	for i := range d.Run.Stages {
		d.Run.Stages[i].NotInRun = notIn[i]
	}
	paging := listPage{path: self}
	d.NextURL = paging.url(next)
	if marker != "" {
		d.FirstURL = self
	}
	if len(page) > 0 {
		d.FirstNode, _ = slices.BinarySearch(nodes, page[0])
		d.FirstNode++
		d.LastNode = d.FirstNode + len(page) - 1
	}
	if sum := d.Run.Summary; sum != nil {
		d.Failed, d.MoreFailed = sum.Failed[:min(len(sum.Failed), summaryShown)], max(len(sum.Failed)-summaryShown, 0)
		d.Skipped, d.MoreSkipped = sum.Skipped[:min(len(sum.Skipped), summaryShown)], max(len(sum.Skipped)-summaryShown, 0)
	}
	onPage := map[string]bool{}
	for _, n := range page {
		onPage[n] = true
	}
	cells := map[string]*nodeCell{}
	index := map[string]int{} // a node's place in its stage
	for i := range run.Stages {
		for j, n := range run.Stages[i].Nodes {
			if onPage[n] {
				index[run.Stages[i].Name+"\x00"+n] = j
			}
		}
	}
	byCell := map[string][]store.Record{}
	for _, k := range kids {
		byCell[k.Stage+"\x00"+k.NodeID] = append(byCell[k.Stage+"\x00"+k.NodeID], k)
	}
	for _, c := range ops.RunGrid(run, kids) {
		if !onPage[c.NodeID] {
			continue
		}
		key := c.Stage + "\x00" + c.NodeID
		cells[key] = nodeCellOf(&run.Stages[stageIndex(run, c.Stage)], index[key], c, byCell[key], run.ApprovedBy)
	}
	for i, st := range d.Run.Stages {
		stored := &run.Stages[i]
		// The stage's nodes: its first ones; the grid pages through all.
		st.Nodes = st.Nodes[:min(len(st.Nodes), nodesPerPage)]
		sd := stageDetail{stageProgress: progressOf(st)}
		conc := stored.MaxConcurrency.Ceil(len(stored.Nodes))
		if len(stored.Nodes) <= nodesPerPage {
			byWave := map[int][]string{}
			for j, n := range stored.Nodes {
				byWave[ops.RunWave(j, conc)] = append(byWave[ops.RunWave(j, conc)], n)
			}
			for n, ns := range byWave {
				sd.Waves = append(sd.Waves, wave{N: n, Nodes: ns})
			}
			slices.SortFunc(sd.Waves, func(a, b wave) int { return a.N - b.N })
		} else {
			sd.WaveCount, sd.WaveSize = ops.RunWave(len(stored.Nodes)-1, conc), max(conc, 1)
		}
		d.Stages = append(d.Stages, sd)
	}
	for _, n := range page {
		row := gridRow{Node: n}
		for _, st := range run.Stages {
			row.Cells = append(row.Cells, cells[st.Name+"\x00"+n])
		}
		d.Grid = append(d.Grid, row)
	}
	if run.State == store.RunPendingApprove {
		d.runDecision = s.runDecisionFor(pol, v, run, applier).levels(waits, v)
	}
	// Resume and Promote follow the API's rules (MayResume, MayPromote): a
	// run paused by its errors is an approver's to resume, a canary an
	// approver's to promote, a manual pause an operator's.
	d.CanResume = run.State == store.RunPaused && v.canOn(auth.Continue, run.ClusterID) && resumeErr == nil
	d.CanPromote = run.State == store.RunPaused && v.canOn(auth.Approve, run.ClusterID) && ops.RunPausedFor(run) == wire.PausedCanary &&
		promoteErr == nil
	d.CanAbort = s.ops.MayAbort(v.caller(r), run) == nil
	switch run.State {
	case store.RunPendingApprove, store.RunRunning, store.RunPaused:
		if v.canOn(auth.Approve, run.ClusterID) && s.mayHoldForWindow(run.ClusterID) {
			d.UrgentWhy = urgentWhyNot(pol, v, run.Requester, run.ClusterID)
			d.CanUrgent = d.UrgentWhy == ""
		}
	}
	if v.canOn(auth.Create, run.ClusterID) && store.RunFinal(run.State) && run.State != store.RunDone {
		d.CanRetry = true
		for _, st := range run.Stages {
			d.CanRetryFailed = d.CanRetryFailed || (len(st.Steps) > 0 && len(st.Failed) > 0)
		}
	}
	if v.canOn(auth.Cancel, run.ClusterID) {
		d.CanPause = run.State == store.RunRunning
		d.CanCancel = !store.RunFinal(run.State)
	}
	switch {
	case run.State == store.RunPaused && ops.RunPausedFor(run) == wire.PausedCanary && !d.CanPromote:
		why := "your roles (" + v.held() + ") do not include approving"
		if promoteErr != nil {
			why = strings.TrimPrefix(promoteErr.Error(), ops.ErrForbidden.Error()+": ")
		}
		d.OpWhy = "You may not promote this run's canary: " + why + "."
	case run.State == store.RunPaused && v.canOn(auth.Continue, run.ClusterID) && resumeErr != nil:
		d.OpWhy = "You may not resume this run: " + strings.TrimPrefix(resumeErr.Error(), ops.ErrForbidden.Error()+": ") + "."
	case !v.canOn(auth.Cancel, run.ClusterID) && !store.RunFinal(run.State) && !d.CanResume && !d.CanPromote && !d.CanAbort:
		d.OpWhy = "Your roles (" + v.held() + ") do not include pausing, resuming or cancelling runs."
	}
	vw := newView(v, "Run "+id[:8], "runs")
	vw.Flash = runFlash(r)
	vw.Live = paging.live(marker, url.Values{"run": {id}}, "")
	vw.Data = d
	s.render(w, r, http.StatusOK, "run", vw)
}

// runFlash is the message a run form's redirect asked for
// (?done=paused&run=...).
func runFlash(r *http.Request) string {
	q := r.URL.Query()
	id := q.Get("run")
	if !action.ValidID(id) {
		return ""
	}
	switch q.Get("done") {
	case "urgent":
		return "Marked run " + id + " urgent: its nodes pass a closed window, never a freeze."
	case "recorded":
		return "Recorded your approval of run " + id + ": it waits for the approvals of its other levels."
	case "retried":
		return "Run " + id + " retries the nodes its run did not carry through: it waits for approval."
	case "approved", "rejected", "paused", "resumed", "cancelled", "started", "promoted", "aborted":
		return strings.ToUpper(q.Get("done")[:1]) + q.Get("done")[1:] + " run " + id + "."
	}
	return ""
}

// changeRun serves the POSTs of a run's buttons: one engine change, in one
// transaction, then back to the page the form came from.
func (s *Server) changeRun(c runChange) handlerFunc {
	done := map[runChange]string{runApprove: "approved", runReject: "rejected", runPause: "paused",
		runResume: "resumed", runCancel: "cancelled", runPromote: "promoted", runUrgent: "urgent", runAbort: "aborted",
		runRetry: "retried"}[c]
	return func(w http.ResponseWriter, r *http.Request, v *visitor) {
		id := r.PathValue("id")
		if !action.ValidID(id) {
			s.renderError(w, r, v, http.StatusNotFound, "There is no such run.")
			return
		}
		f, err := decodeRunChange(c, r.PostForm)
		if err != nil {
			s.renderError(w, r, v, http.StatusBadRequest, formMessage(err))
			return
		}
		ctx, by := r.Context(), v.caller(r)
		var out ops.RunResult
		var err2 error
		switch c {
		case runApprove:
			out, err2 = s.ops.ApproveRun(ctx, by, id, f.Digest)
		case runReject:
			_, err2 = s.ops.RejectRun(ctx, by, id, f.Reason)
		case runPause:
			_, err2 = s.ops.PauseRun(ctx, by, id)
		case runResume:
			out, err2 = s.ops.ResumeRun(ctx, by, id, f.Reason)
		case runCancel:
			cancel := s.ops.CancelRun
			if f.Rollback {
				cancel = s.ops.CancelRunRollback
			}
			_, err2 = cancel(ctx, by, id, f.Reason)
		case runAbort:
			_, err2 = s.ops.AbortRun(ctx, by, id, f.Reason)
		case runPromote:
			out, err2 = s.ops.PromoteRun(ctx, by, id, f.Reason)
		case runUrgent:
			_, err2 = s.ops.MarkRunUrgent(ctx, by, id, f.Reason)
		case runRetry:
			out, err2 = s.ops.RetryRun(ctx, by, id, f.From)
			if err2 == nil {
				// The new run's page: it waits for approval there.
				id, f.Next = out.Run.ID, ""
			}
		}
		if err2 != nil {
			s.refusedChange(w, r, v, "run", string(c), id, err2)
			return
		}
		done := done
		if out.Approval != nil && !out.Approval.Satisfied && (c == runApprove || c == runResume || c == runPromote) {
			// One level of several: it waits for the others.
			done = "recorded"
		}
		next := f.Next
		if next == "" {
			next = "/ui/runs/" + id
		}
		u, _ := url.Parse(next) // safeNext made it parseable
		q := u.Query()
		q.Set("done", done)
		q.Set("run", id)
		u.RawQuery = q.Encode()
		http.Redirect(w, r, u.RequestURI(), http.StatusSeeOther)
	}
}

// pendingRun is a run waiting for approval, as the Approvals page shows it.
type pendingRun struct {
	Run      wire.Run
	Progress []stageProgress
	runDecision
}

// pendingRuns lists a page of the runs waiting for approval, oldest first:
// runsPerPage of them after the run marker names ("": from the oldest).
// next is the marker of the next page, "" when this is the last. The runs
// are brief: each stage shows its first nodes and how many it has.
func (s *Server) pendingRuns(ctx context.Context, rd store.Reader, v *visitor, marker string) (out []pendingRun, next string, err error) {
	pol := s.ops.Policy().Load() // once, for every run shown
	vis, err := v.visible(ctx, rd)
	if err != nil {
		return nil, "", err
	}
	list, next, err := store.RunPage(ctx, rd, store.RunQuery{States: []string{store.RunPendingApprove}, ClusterIn: vis.In(),
		Marker: marker, Limit: runsPerPage, Oldest: true, Brief: true})
	if err != nil {
		return nil, "", err
	}
	byRun, err := childCounts(ctx, rd, list)
	if err != nil {
		return nil, "", err
	}
	for i := range list {
		applier, err := applierOf(ctx, rd, &list[i])
		if err != nil {
			return nil, "", err
		}
		p := pendingRun{Run: ops.RunView(&list[i], byRun[list[i].ID]), runDecision: s.runDecisionFor(pol, v, &list[i], applier)}
		if p.Run.Approval, err = s.ops.RunApproval(ctx, rd, &list[i]); err != nil {
			return nil, "", err
		}
		p.runDecision = p.runDecision.levels(p.Run.Approval, v)
		for _, st := range p.Run.Stages {
			p.Progress = append(p.Progress, progressOf(st))
		}
		out = append(out, p)
	}
	return out, next, nil
}

// refusedChange answers a change of a run or a schedule (what) that the
// engine or the store refused: the API's status for the error, and its
// reason unless it is a 5xx (logged instead).
func (s *Server) refusedChange(w http.ResponseWriter, r *http.Request, v *visitor, what, verb, id string, err error) {
	p := ops.Describe(err)
	msg := p.Message
	if p.Status >= http.StatusInternalServerError {
		s.log.Error(what+" change", "change", verb, "id", id, "err", err)
	}
	if p.Status == http.StatusNotFound {
		msg = "there is no such " + what
	}
	s.renderError(w, r, v, p.Status, fmt.Sprintf("Could not %s: %s", verb, msg))
}
