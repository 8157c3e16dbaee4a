package runs

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/action"
	"github.com/musterhq/muster/shared/wire"
)

// View shows a run as the API and the web UI do: its stages with their
// nodes and counts per state, from counts (the store's RunChildCounts of
// the run, or store.CountChildren of its children). A brief run
// (store.Run.Brief) shows each stage's first nodes and how many it has, so
// a list of runs costs the same whatever their size. A RUNNING stage of a
// PAUSED run is shown PAUSED (store.StagePaused).
func View(r *store.Run, counts []store.ChildCount) wire.Run {
	out := wire.Run{
		ID: r.ID, ClusterID: r.ClusterID, State: r.State, StateReason: r.StateReason, Requester: r.Requester,
		ApprovedBy: r.ApprovedBy, Playbook: r.Playbook, PlaybookVersion: r.PlaybookVersion, Digest: r.Digest,
		CreatedTS: r.CreatedTS, UpdatedTS: r.UpdatedTS, FinishedTS: r.FinishedTS, Stages: []wire.Stage{},
		RetryOf: r.RetryOf, DeadlineS: r.DeadlineS, DeadlineTS: r.DeadlineTS, PausedFor: PausedFor(r), ScheduleID: r.ScheduleID,
		NotBefore: r.NotBefore, Urgent: r.Urgent, Aborting: Aborting(r), Lock: WireLock(r.Lock),
	}
	summary := &wire.RunSummary{Failed: []wire.StageNode{}, Skipped: []wire.StageNode{}}
	for i := range r.Stages {
		st := &r.Stages[i]
		byState := map[string]int{}
		children, errs := 0, 0
		for _, c := range counts {
			if c.RunID != r.ID || c.Stage != st.Name {
				continue
			}
			byState[string(c.State)] += c.N
			children += c.N
			if IsError(Child{Stage: c.Stage, State: c.State, Reason: c.Reason,
				Replaced: r.ApprovedBy != "" && c.ApprovedBy != r.ApprovedBy}) {
				errs += c.N
			}
		}
		// A run has at most one child per stage and node: the nodes
		// without one are the pending ones.
		byState["PENDING"] = max(st.Size()-children, 0)
		if procedureLong(st) {
			// Children are steps and attempts: the stored failed nodes
			// are the errors, and the nodes without a child are not known
			// from the counts.
			errs = st.FailedN()
			delete(byState, "PENDING")
		}
		progress := Progress(st)
		out.Progress.Add(progress)
		state := st.State
		if r.State == store.RunPaused && state == store.StageRunning {
			// It creates nothing while its run is paused: say so.
			state = store.StagePaused
		}
		out.Stages = append(out.Stages, wire.Stage{
			Name: st.Name, Kind: st.Kind, Args: st.Args, Target: wire.Target(st.Target), Nodes: st.Nodes, NodeCount: st.Size(),
			MaxConcurrency: st.MaxConcurrency, MaxErrors: st.MaxErrors, OnFailure: st.OnFailure,
			DependsOn: st.DependsOn, TimeoutS: st.TimeoutS, State: state, Progress: progress, Counts: byState, Errors: errs,
			Steps: StepSpecs(st.Steps), Rollback: StepSpecs(st.Rollback), Failed: st.Failed, Skipped: st.Skipped,
			Canary: st.Canary, Promoted: st.Promoted, SoakS: st.SoakS, Unavailable: st.Unavailable,
			UnavailableTimeoutS: st.UnavailableTimeoutS, IncludeFailed: st.IncludeFailed,
			Follow: st.Follow, Joined: st.Joined,
			ForgivenBy: st.ForgivenBy, PromotedBy: st.PromotedBy, Lock: WireLock(st.Lock), KindLocks: WireKindLocks(st), Reuse: reusedNodes(st),
			AutoPromoteAfterS: st.AutoPromoteAfterS, AbortOn: st.AbortOn, CoreSteps: CoreSteps(st),
		})
		for _, n := range st.Failed {
			w := st.Why[n]
			summary.Failed = append(summary.Failed, wire.StageNode{Stage: st.Name, NodeID: n, Reason: w.Reason, Output: w.Output,
				ActionID: w.ActionID})
		}
		for _, n := range st.Skipped {
			summary.Skipped = append(summary.Skipped, wire.StageNode{Stage: st.Name, NodeID: n, Reason: SkipReason(r, i, n)})
		}
	}
	if len(summary.Failed) > 0 || len(summary.Skipped) > 0 {
		out.Summary = summary
	}
	return out
}

// Progress is where stage st's nodes stand, in nodes, as its run's last
// advance stored it. A DONE stage stored before the counts were kept
// counts its nodes neither failed nor skipped done.
func Progress(st *store.RunStage) wire.NodeProgress {
	p := wire.NodeProgress{Done: st.Done, Failed: st.FailedN(), Skipped: st.SkippedN(), InFlight: st.InFlight,
		RolledBack: st.RolledBack, Total: st.Size()}
	if st.State == store.StageDone && p.Done == 0 && p.InFlight == 0 {
		p.Done = max(p.Total-p.Failed-p.Skipped-p.RolledBack, 0)
	}
	p.Waiting = max(p.Total-p.Finished()-p.InFlight, 0)
	return p
}

// RunProgress sums the progress of r's stages (Progress).
func RunProgress(r *store.Run) wire.NodeProgress {
	var p wire.NodeProgress
	for i := range r.Stages {
		p.Add(Progress(&r.Stages[i]))
	}
	return p
}

// ProgressText says p in words, the counts above zero: "nodes: 3 done, 1
// failed, 2 waiting, of 6".
func ProgressText(p wire.NodeProgress) string {
	var parts []string
	for _, c := range p.Counts() {
		parts = append(parts, fmt.Sprintf("%d %s", c.N, c.What))
	}
	return fmt.Sprintf("nodes: %s, of %d", strings.Join(parts, ", "), p.Total)
}

// progressData is p as an event's data.
func progressData(p wire.NodeProgress) map[string]any {
	return map[string]any{"done": p.Done, "failed": p.Failed, "skipped": p.Skipped, "in_flight": p.InFlight,
		"waiting": p.Waiting, "rolled_back": p.RolledBack, "total": p.Total}
}

// StepSpecs shows stored steps as the API does.
func StepSpecs(steps []store.RunStep) []wire.StepSpec {
	var out []wire.StepSpec
	for _, sp := range steps {
		out = append(out, wire.StepSpec{Name: sp.Name, Kind: sp.Kind, Args: sp.Args, TimeoutS: sp.TimeoutS,
			Retry: (*wire.Retry)(sp.Retry), When: sp.When, SoakS: sp.SoakS})
	}
	return out
}

// Grid is a run's per-node grid: a cell per stage and node, with the
// child's state once it has one. It needs the full run, not a brief one.
func Grid(r *store.Run, children []store.Record) []wire.RunChild {
	return GridOf(r, children, nil)
}

// InFlightStates are the states of a child in flight: pushed or about to be,
// not yet finished (a child waiting for its approval is not).
var InFlightStates = []action.State{action.PendingSchedule, action.New, action.Running}

// Nodes lists every node of a run's stages, sorted, once each: the order
// in which GET /api/v1/runs/{id}/nodes and the run's web page page them.
func Nodes(r *store.Run) []string {
	var out []string
	for i := range r.Stages {
		out = append(out, r.Stages[i].Nodes...)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// NodePage cuts the page of at most limit nodes after marker ("": the
// first), and returns the marker of the next page ("" on the last). ok is
// false when marker names no node of the list.
func NodePage(nodes []string, marker string, limit int) (page []string, next string, ok bool) {
	from := 0
	if marker != "" {
		i, found := slices.BinarySearch(nodes, marker)
		if !found {
			return nil, "", false
		}
		from = i + 1
	}
	to := min(from+limit, len(nodes))
	page = nodes[from:to]
	if to < len(nodes) && len(page) > 0 {
		next = page[len(page)-1]
	}
	return page, next, true
}

// GridOf is Grid with only the cells for which keep (when not nil) holds:
// children need only be the children of those cells.
func GridOf(r *store.Run, children []store.Record, keep func(stage, node string) bool) []wire.RunChild {
	byCell := map[string]*store.Record{}
	steps := map[string][]wire.RunStepChild{}
	for i := range children {
		c := &children[i]
		k := c.Stage + "\x00" + c.NodeID
		byCell[k] = c
		steps[k] = append(steps[k], wire.RunStepChild{Step: c.Step, Attempt: max(c.Attempt, 1), ActionID: c.ID,
			State: c.State, Reason: c.StateReason, Args: c.Args, Outputs: c.Outputs})
	}
	var out []wire.RunChild
	for i := range r.Stages {
		st := &r.Stages[i]
		conc := st.MaxConcurrency.Ceil(len(st.Nodes))
		for j, n := range st.Nodes {
			if keep != nil && !keep(st.Name, n) {
				continue
			}
			cell := wire.RunChild{Stage: st.Name, NodeID: n, Wave: Wave(j, conc)}
			if c := byCell[st.Name+"\x00"+n]; c != nil {
				cell.ActionID, cell.State, cell.Wave = c.ID, c.State, c.Wave
			}
			if procedureLong(st) {
				cell.Steps = steps[st.Name+"\x00"+n]
			}
			out = append(out, cell)
		}
	}
	return out
}

// Tally is what the store's counters tell of stage st of run r without
// reading a child: counts are the run's (Reader.RunChildCounts), started
// the stage's nodes with a child (Reader.RunStartedNodes). Pending and
// Errors are as Count makes them; Done is exact for a one-step stage, and
// for a stage with steps counts the started nodes neither failed nor with
// a child in flight (a node between two steps of a paused run counts
// done).
func Tally(r *store.Run, st *store.RunStage, counts []store.ChildCount, started int) StageCounts {
	c := StageCounts{ByState: map[action.State]int{}, Errors: len(st.Failed)}
	for _, n := range counts {
		if n.RunID == r.ID && n.Stage == st.Name {
			c.ByState[n.State] += n.N
		}
	}
	decided, failedAtTurn := 0, 0 // unavailable at their turn: no child
	for _, u := range st.Unreachable {
		switch u.As {
		case UnavailableFail:
			decided++
			failedAtTurn++
		case UnavailableSkip:
			decided++
		}
	}
	c.Pending = max(len(st.Nodes)-started-decided, 0)
	for _, s := range InFlightStates {
		c.Unfinished += c.ByState[s]
	}
	if procedureLong(st) {
		c.Done = max(started-c.Unfinished-(c.Errors-failedAtTurn), 0)
	} else {
		c.Done = c.ByState[action.Done]
	}
	return c
}

// reusedNodes lists, by node, the steps a retry from the failed step takes
// as done on each node of st, and the first step the node runs.
func reusedNodes(st *store.RunStage) []wire.ReusedNode {
	if len(st.Reuse) == 0 {
		return nil
	}
	var out []wire.ReusedNode
	for _, n := range slices.Sorted(maps.Keys(st.Reuse)) {
		rn := wire.ReusedNode{NodeID: n}
		reused := map[string]bool{}
		for _, s := range st.Reuse[n] {
			rn.Steps = append(rn.Steps, s.Step)
			reused[s.Step] = true
		}
		for _, sp := range st.Procedure() {
			if !reused[sp.Name] {
				rn.From = sp.Name
				break
			}
		}
		out = append(out, rn)
	}
	return out
}

// CoreSteps are the results of stage st's gates and calls, node by node in
// the stage's order, each step in the procedure's.
func CoreSteps(st *store.RunStage) []wire.CoreStep {
	if len(st.Core) == 0 {
		return nil
	}
	var out []wire.CoreStep
	order := map[string]int{}
	for i, sp := range append(slices.Clone(st.Steps), st.Rollback...) {
		order[sp.Name] = i
	}
	for _, n := range st.Nodes {
		list := slices.Clone(st.Core[n])
		slices.SortFunc(list, func(a, b store.CoreStep) int { return order[a.Step] - order[b.Step] })
		for _, cs := range list {
			out = append(out, wire.CoreStep{Node: n, Step: cs.Step, Attempt: cs.Attempt, State: cs.State, Value: cs.Value,
				Reason: cs.Reason, Checks: cs.Checks, At: cs.At, Finished: cs.Finished})
		}
	}
	return out
}
