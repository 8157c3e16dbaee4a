package ui

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/musterhq/muster/core/actions"
	"github.com/musterhq/muster/core/approval"
	"github.com/musterhq/muster/core/auth"
	"github.com/musterhq/muster/core/runs"
	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/action"
	"github.com/musterhq/muster/shared/wire"
)

// RunChanger makes the run changes the Runs page offers: core/runs' engine,
// the one the API uses, inside the UI's transaction. The UI has checked the
// permission; the engine checks the rest (state, four-eyes, digest,
// approval window, forgiving errors on resume) and writes the events.
type RunChanger interface {
	Approve(ctx context.Context, tx store.Tx, id, digest string, who actions.Actor) (*store.Run, error)
	Reject(ctx context.Context, tx store.Tx, id string, who actions.Actor, reason string) (*store.Run, error)
	Pause(ctx context.Context, tx store.Tx, id string, who actions.Actor) (*store.Run, error)
	// ResumeAs and MayResume are the API's rule for resuming: errors are
	// an approver's to forgive, a manual pause an operator's to lift.
	ResumeAs(ctx context.Context, tx store.Tx, id string, who actions.Actor, mayApprove, mayOperate bool) (*store.Run, error)
	MayResume(ctx context.Context, rd store.Reader, r *store.Run, who string, mayApprove, mayOperate bool) error
	Cancel(ctx context.Context, tx store.Tx, id string, who actions.Actor, reason string) (*store.Run, error)
	// Promote and MayPromote are the API's rule for a canary: an
	// approver other than the requester promotes it.
	Promote(ctx context.Context, tx store.Tx, id string, who actions.Actor, mayApprove bool) (*store.Run, error)
	MayPromote(ctx context.Context, rd store.Reader, r *store.Run, who string, mayApprove bool) error
}

// runsPerPage is the size of a page of the Runs list.
const runsPerPage = 50

// stateCount is one state's count in a stage's progress.
type stateCount struct {
	State string
	N     int
}

// stageProgress is a stage's progress as the pages show it: the counts in
// the order of the states, only those above zero.
type stageProgress struct {
	wire.Stage
	// Total counts the children the stage will have at least (a node's
	// steps in a stage with steps), NodeTotal its nodes.
	Total, NodeTotal int
	Finished         int // children in a final state
	Counts           []stateCount
	// More counts the nodes not listed (a brief run lists the first ones).
	More int
}

func progressOf(st wire.Stage) stageProgress {
	p := stageProgress{Stage: st, Total: st.Size(), NodeTotal: st.Size(), More: st.Size() - len(st.Nodes)}
	order := append([]string{"PENDING"}, statesText()...)
	for _, s := range order {
		if n := st.Counts[s]; n > 0 {
			p.Counts = append(p.Counts, stateCount{s, n})
			if s != "PENDING" && action.State(s).Final() {
				p.Finished += n
			}
		}
	}
	// A stage with steps has a child per node and step at least (retries
	// and rollbacks add more): its bar never goes past its end.
	if n := len(st.Steps); n > 0 {
		p.Total = max(st.Size()*n, p.Finished)
	}
	return p
}

func statesText() []string {
	out := make([]string, len(action.States))
	for i, s := range action.States {
		out[i] = string(s)
	}
	return out
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
		var err error
		if d.Clusters, err = rd.Clusters(ctx); err != nil {
			return err
		}
		q := f.query(runsPerPage)
		q.Brief = true
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
			row := runRow{Run: runs.View(&list[i], byRun[list[i].ID])}
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

// nodeCell is a node in a stage: its wave and state and, in a stage with
// steps, each step in order with its attempts, and the rollback steps that
// ran.
type nodeCell struct {
	wire.RunChild
	// Canary: the node is one of the stage's first Canary nodes.
	Canary bool
	// Ended is how the node ended in a stage with steps: FAILED or
	// SKIPPED (unavailable) as the stage lists it, "" otherwise.
	Ended     string
	Procedure bool
	Steps     []stepCell
	Rollback  []stepCell
}

// stepCell is one attempt of a step on a node, or a step without a child
// (Wait says why: "skipped", "not run", "waiting").
type stepCell struct {
	Name              string
	State             action.State
	Attempt, Attempts int
	ActionID, Reason  string
	Args, Outputs     json.RawMessage
	Wait              string
}

// nodeCellOf is the cell of a node, the index-th of stage st, from its
// grid cell ch and its children there (kids, of a run approved by
// approvedBy).
func nodeCellOf(st *store.RunStage, index int, ch wire.RunChild, kids []store.Record, approvedBy string) *nodeCell {
	c := &nodeCell{RunChild: ch, Canary: index < st.Canary, Procedure: len(st.Steps) > 0}
	latest := map[string]*store.Record{}
	for i := range kids {
		k := &kids[i]
		if l := latest[k.Step]; l == nil || k.Attempt > l.Attempt {
			latest[k.Step] = k
		}
	}
	// A node failed once a step failed past its attempts (its always and
	// rollback steps may still run), or at its turn, unavailable.
	failed := slices.Contains(st.Failed, ch.NodeID) || st.Unreachable[ch.NodeID].As == runs.UnavailableFail
	for i := range st.Steps {
		if k := latest[st.Steps[i].Name]; k != nil && k.State.Final() && runs.IsError(runs.ChildOf(k, approvedBy)) &&
			max(k.Attempt, 1) >= st.Steps[i].Attempts() {
			failed = true
		}
	}
	switch {
	case failed:
		c.Ended = "FAILED"
	case slices.Contains(st.Skipped, ch.NodeID) || st.Unreachable[ch.NodeID].As == runs.UnavailableSkip:
		c.Ended = "SKIPPED"
	}
	if !c.Procedure {
		return c
	}
	steps := func(specs []store.RunStep, rollback bool) []stepCell {
		// The first step that failed past its attempts: those after it
		// without a child were not run, those before it skipped.
		failedAt := len(specs)
		for i := range specs {
			if k := latest[specs[i].Name]; k != nil && k.State.Final() && runs.IsError(runs.ChildOf(k, approvedBy)) &&
				max(k.Attempt, 1) >= specs[i].Attempts() {
				failedAt = min(failedAt, i)
			}
		}
		var out []stepCell
		for i := range specs {
			sp := &specs[i]
			ran := false
			for _, k := range ch.Steps {
				if k.Step != sp.Name {
					continue
				}
				ran = true
				out = append(out, stepCell{Name: sp.Name, State: k.State, Attempt: k.Attempt, Attempts: sp.Attempts(),
					ActionID: k.ActionID, Reason: k.Reason, Args: shownArgs(k.Args), Outputs: shownArgs(k.Outputs)})
			}
			if ran || rollback {
				continue
			}
			// No child: a later step ran (a false when skipped this one),
			// the node failed before it, or it waits for its turn.
			later := false
			for _, next := range specs[i+1:] {
				later = later || latest[next.Name] != nil
			}
			wait := "waiting"
			switch {
			case c.Ended != "" && (i > failedAt || !later):
				wait = "not run"
			case later || st.State == store.StageDone:
				wait = "skipped"
			}
			out = append(out, stepCell{Name: sp.Name, Attempts: sp.Attempts(), Wait: wait})
		}
		return out
	}
	c.Steps, c.Rollback = steps(st.Steps, false), steps(st.Rollback, true)
	return c
}

// runNodes lists every node of a run's stages, sorted, once each.
func runNodes(r *store.Run) []string {
	var out []string
	for i := range r.Stages {
		out = append(out, r.Stages[i].Nodes...)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// nodePage cuts the page of nodes after marker ("": the first), and
// returns the marker of the next page ("" on the last). ok is false when
// marker names no node of the list.
func nodePage(nodes []string, marker string) (page []string, next string, ok bool) {
	from := 0
	if marker != "" {
		i, found := slices.BinarySearch(nodes, marker)
		if !found {
			return nil, "", false
		}
		from = i + 1
	}
	to := min(from+nodesPerPage, len(nodes))
	page = nodes[from:to]
	if to < len(nodes) && len(page) > 0 {
		next = page[len(page)-1]
	}
	return page, next, true
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
func (s *Server) runDecisionFor(v *visitor, r *store.Run, applier string) runDecision {
	d := runDecision{Mine: approval.SamePerson(r.Requester, v.tok.Name)}
	if ttl := s.cfg.Policy.Window(); ttl > 0 {
		d.Expires = r.CreatedTS.Add(ttl)
	}
	d.Why = s.whyNot(v, "this run", r.Requester, applier)
	d.CanDecide = d.Why == ""
	return d
}

// whyNot says why visitor v may not approve or reject what (requested by
// requester, made from a playbook version applied by applier), by the one
// rule of approval.Policy.MayApprove; "" when they may.
func (s *Server) whyNot(v *visitor, what, requester, applier string) string {
	switch s.cfg.Policy.MayApprove(requester, applier, v.tok.Name, v.can(auth.Approve)) {
	case approval.OwnRequest:
		return "You asked for " + what + ": another approver must decide."
	case approval.AppliedPlaybook:
		return "You applied the playbook version of " + what + ": another approver must decide."
	case approval.NoRole:
		return "Your roles (" + strings.Join(v.tok.Roles, ", ") + ") do not include approving."
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
	var nodes, page []string
	var next string
	errMarker := errors.New("the page marker names no node of this run")
	err := s.st.Read(ctx, func(rd store.Reader) error {
		var err error
		if run, err = rd.Run(ctx, id); err != nil {
			return err
		}
		// A page of nodes, and the children of those nodes alone: the
		// counts come from the store's counters, never from every child.
		nodes = runNodes(run)
		var ok bool
		if page, next, ok = nodePage(nodes, marker); !ok {
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
		if run.State == store.RunPaused && v.can(auth.Continue) {
			if runs.PausedFor(run) == runs.PauseCanary {
				promoteErr = s.cfg.Runs.MayPromote(ctx, rd, run, v.tok.Name, v.can(auth.Approve))
				if promoteErr != nil && s.cfg.ErrorStatus(promoteErr) >= 500 {
					return promoteErr
				}
			}
			resumeErr = s.cfg.Runs.MayResume(ctx, rd, run, v.tok.Name, v.can(auth.Approve), v.can(auth.Cancel))
			if resumeErr != nil && s.cfg.ErrorStatus(resumeErr) >= 500 {
				return resumeErr
			}
		}
		applier, err = applierOf(ctx, rd, run)
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
	d := runData{Run: runs.View(run, counts), Self: self, Nodes: len(nodes)}
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
	for _, c := range runs.Grid(run, kids) {
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
				byWave[runs.Wave(j, conc)] = append(byWave[runs.Wave(j, conc)], n)
			}
			for n, ns := range byWave {
				sd.Waves = append(sd.Waves, wave{N: n, Nodes: ns})
			}
			slices.SortFunc(sd.Waves, func(a, b wave) int { return a.N - b.N })
		} else {
			sd.WaveCount, sd.WaveSize = runs.Wave(len(stored.Nodes)-1, conc), max(conc, 1)
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
		d.runDecision = s.runDecisionFor(v, run, applier)
	}
	// Resume and Promote follow the API's rules (MayResume, MayPromote): a
	// run paused by its errors is an approver's to resume, a canary an
	// approver's to promote, a manual pause an operator's.
	d.CanResume = run.State == store.RunPaused && v.can(auth.Continue) && resumeErr == nil
	d.CanPromote = run.State == store.RunPaused && v.can(auth.Approve) && runs.PausedFor(run) == runs.PauseCanary && promoteErr == nil
	if v.can(auth.Cancel) {
		d.CanPause = run.State == store.RunRunning
		d.CanCancel = !store.RunFinal(run.State)
	}
	switch {
	case run.State == store.RunPaused && runs.PausedFor(run) == runs.PauseCanary && !d.CanPromote:
		why := "your roles (" + strings.Join(v.tok.Roles, ", ") + ") do not include approving"
		if promoteErr != nil {
			why = strings.TrimPrefix(promoteErr.Error(), runs.ErrForbidden.Error()+": ")
		}
		d.OpWhy = "You may not promote this run's canary: " + why + "."
	case run.State == store.RunPaused && v.can(auth.Continue) && resumeErr != nil:
		d.OpWhy = "You may not resume this run: " + strings.TrimPrefix(resumeErr.Error(), runs.ErrForbidden.Error()+": ") + "."
	case !v.can(auth.Cancel) && !store.RunFinal(run.State) && !d.CanResume && !d.CanPromote:
		d.OpWhy = "Your roles (" + strings.Join(v.tok.Roles, ", ") + ") do not include pausing, resuming or cancelling runs."
	}
	vw := newView(v, "Run "+id[:8], "runs")
	vw.Flash = runFlash(r)
	vw.Live = paging.live(marker, url.Values{"run": {id}}, "")
	vw.Data = d
	s.render(w, r, http.StatusOK, "run", vw)
}

// stageIndex is the index of the stage named name in r.
func stageIndex(r *store.Run, name string) int {
	for i := range r.Stages {
		if r.Stages[i].Name == name {
			return i
		}
	}
	return 0
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
	case "approved", "rejected", "paused", "resumed", "cancelled", "started", "promoted":
		return strings.ToUpper(q.Get("done")[:1]) + q.Get("done")[1:] + " run " + id + "."
	}
	return ""
}

// changeRun serves the POSTs of a run's buttons: one engine change, in one
// transaction, then back to the page the form came from.
func (s *Server) changeRun(c runChange) handlerFunc {
	done := map[runChange]string{runApprove: "approved", runReject: "rejected", runPause: "paused",
		runResume: "resumed", runCancel: "cancelled", runPromote: "promoted"}[c]
	return func(w http.ResponseWriter, r *http.Request, v *visitor) {
		id := r.PathValue("id")
		if !action.ValidID(id) {
			s.renderError(w, r, v, http.StatusNotFound, "There is no such run.")
			return
		}
		f, err := decodeRunChange(c, r.PostForm)
		if err != nil {
			s.renderError(w, r, v, http.StatusBadRequest, strings.TrimPrefix(err.Error(), errForm.Error()+": "))
			return
		}
		who := actions.Actor{Name: v.tok.Name, Addr: clientAddr(r)}
		var run *store.Run
		err = s.st.Update(r.Context(), func(tx store.Tx) error {
			var err error
			switch c {
			case runApprove:
				run, err = s.cfg.Runs.Approve(r.Context(), tx, id, f.Digest, who)
			case runReject:
				run, err = s.cfg.Runs.Reject(r.Context(), tx, id, who, f.Reason)
			case runPause:
				run, err = s.cfg.Runs.Pause(r.Context(), tx, id, who)
			case runResume:
				run, err = s.cfg.Runs.ResumeAs(r.Context(), tx, id, who, v.can(auth.Approve), v.can(auth.Cancel))
			case runCancel:
				run, err = s.cfg.Runs.Cancel(r.Context(), tx, id, who, f.Reason)
			case runPromote:
				run, err = s.cfg.Runs.Promote(r.Context(), tx, id, who, v.can(auth.Approve))
			}
			return err
		})
		if err != nil {
			status := s.cfg.ErrorStatus(err)
			msg := err.Error()
			if status >= 500 {
				s.log.Error("run change", "change", c, "id", id, "err", err)
				msg = "internal error"
			}
			if status == http.StatusNotFound {
				msg = "there is no such run"
			}
			s.renderError(w, r, v, status, fmt.Sprintf("Could not %s: %s", c, msg))
			return
		}
		if s.nudge != nil {
			s.nudge.Nudge(run.ClusterID)
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
	list, next, err := store.RunPage(ctx, rd, store.RunQuery{States: []string{store.RunPendingApprove}, Marker: marker,
		Limit: runsPerPage, Oldest: true, Brief: true})
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
		p := pendingRun{Run: runs.View(&list[i], byRun[list[i].ID]), runDecision: s.runDecisionFor(v, &list[i], applier)}
		for _, st := range p.Run.Stages {
			p.Progress = append(p.Progress, progressOf(st))
		}
		out = append(out, p)
	}
	return out, next, nil
}

// pausedShown bounds the paused runs the Approvals page shows: each one
// reads its children to say what approving continues.
const pausedShown = 20

// pausedRun is a run PAUSED for an approver (by its errors, or after a
// canary), as the Approvals page shows it: what approving continues, and
// the button the visitor may use.
type pausedRun struct {
	Run      wire.Run
	Progress []stageProgress
	// For is runs.PauseErrors or runs.PauseCanary.
	For string
	// Continues says, a line each, what a resume or a promote continues.
	Continues []string
	Mine      bool
	// CanResume, CanPromote: the engine's MayResume and MayPromote let
	// the visitor; Why says why not otherwise.
	CanResume, CanPromote bool
	Why                   string
}

// pausedRuns lists the oldest runs PAUSED for an approver (errors or a
// canary; a manual pause is an operator's and is not listed), at most
// pausedShown, and says whether there are more.
func (s *Server) pausedRuns(ctx context.Context, rd store.Reader, v *visitor) ([]pausedRun, bool, error) {
	var out []pausedRun
	marker := ""
	for pages := 0; pages < 5; pages++ {
		// Brief runs to find them; the whole run of those shown.
		list, next, err := store.RunPage(ctx, rd, store.RunQuery{States: []string{store.RunPaused}, Marker: marker,
			Limit: runsPerPage, Oldest: true, Brief: true})
		if err != nil {
			return nil, false, err
		}
		for i := range list {
			why := runs.PausedFor(&list[i])
			if why == runs.PauseManual {
				continue
			}
			if len(out) == pausedShown {
				return out, true, nil
			}
			r, err := rd.Run(ctx, list[i].ID)
			if err != nil {
				return nil, false, err
			}
			p, err := s.pausedRun(ctx, rd, v, r, why)
			if err != nil {
				return nil, false, err
			}
			out = append(out, p)
		}
		if next == "" {
			return out, false, nil
		}
		marker = next
	}
	return out, true, nil
}

// pausedRun says what approving run r, paused for why, continues, and
// whether v may.
func (s *Server) pausedRun(ctx context.Context, rd store.Reader, v *visitor, r *store.Run, why string) (pausedRun, error) {
	recs, err := rd.RunChildren(ctx, r.ID)
	if err != nil {
		return pausedRun{}, err
	}
	kids := make([]runs.Child, len(recs))
	for i := range recs {
		kids[i] = runs.ChildOf(&recs[i], r.ApprovedBy)
	}
	p := pausedRun{Run: runs.View(r, store.CountChildren(recs)), For: why, Mine: approval.SamePerson(r.Requester, v.tok.Name)}
	for i := range p.Run.Stages {
		st := p.Run.Stages[i]
		st.Nodes = st.Nodes[:min(len(st.Nodes), store.BriefNodes)]
		p.Progress = append(p.Progress, progressOf(st))
	}
	var pending []string
	for i := range r.Stages {
		st := &r.Stages[i]
		c := runs.Count(st, kids)
		switch {
		case st.State == store.StagePending:
			pending = append(pending, st.Name)
		case st.State != store.StageRunning:
		case why == runs.PauseCanary && st.Canary > 0 && !st.Promoted:
			p.Continues = append(p.Continues, fmt.Sprintf("Promoting lets stage %s go on past its canary: %d of its %d nodes remain. "+
				"The canary: %d node(s) done, %d failed.", st.Name, c.Pending, len(st.Nodes), c.Done, c.Errors))
		case why == runs.PauseErrors && st.OnFailure == runs.OnFailurePause && c.Errors-st.Forgiven > st.MaxErrors.Floor(len(st.Nodes)):
			p.Continues = append(p.Continues, fmt.Sprintf("Resuming forgives the %d error(s) of stage %s (max_errors %s) and goes on: "+
				"%d of its %d nodes remain.", c.Errors-st.Forgiven, st.Name, st.MaxErrors, c.Pending, len(st.Nodes)))
		case c.Pending > 0:
			p.Continues = append(p.Continues, fmt.Sprintf("Stage %s goes on too: %d of its %d nodes remain.", st.Name, c.Pending, len(st.Nodes)))
		}
	}
	if len(pending) > 0 {
		p.Continues = append(p.Continues, "Then stage(s) "+strings.Join(pending, ", ")+".")
	}
	verb, roleWhy, mayErr := "resume", "", error(nil)
	switch {
	case why == runs.PauseCanary && !v.can(auth.Approve):
		verb, roleWhy = "promote", "do not include approving"
	case why == runs.PauseCanary:
		verb, mayErr = "promote", s.cfg.Runs.MayPromote(ctx, rd, r, v.tok.Name, true)
		p.CanPromote = mayErr == nil
	case !v.can(auth.Continue):
		roleWhy = "do not include resuming runs"
	default:
		mayErr = s.cfg.Runs.MayResume(ctx, rd, r, v.tok.Name, v.can(auth.Approve), v.can(auth.Cancel))
		p.CanResume = mayErr == nil
	}
	switch {
	case mayErr != nil && s.cfg.ErrorStatus(mayErr) >= 500:
		return pausedRun{}, mayErr
	case mayErr != nil:
		p.Why = "You may not " + verb + " this run: " + strings.TrimPrefix(mayErr.Error(), runs.ErrForbidden.Error()+": ") + "."
	case roleWhy != "":
		p.Why = "You may not " + verb + " this run: your roles (" + strings.Join(v.tok.Roles, ", ") + ") " + roleWhy + "."
	}
	return p, nil
}

// shownArgs is args as a step shows them: nothing for none or {}.
func shownArgs(raw json.RawMessage) json.RawMessage {
	if t := strings.TrimSpace(string(raw)); t == "" || t == "{}" || t == "null" {
		return nil
	}
	return raw
}
