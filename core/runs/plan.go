package runs

import (
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/action"
)

// Child is what the planner needs to know of a child action.
type Child struct {
	ID    string
	Stage string
	Node  string
	// Step is the child's step ("" in a stage without steps); Attempt
	// counts its tries from 1 (0, from a store older than steps, is 1).
	Step    string
	Attempt int
	State   action.State
	// Reason is the child's state reason (a run's own cancel is not an error).
	Reason string
	// Replaced: the agent ran other content under the child's id, so the
	// run's approval no longer covers it; once finished it is an error,
	// whatever its state.
	Replaced bool
	// Finished is when it finished (zero while it has not).
	Finished time.Time
	// Outputs is what its command passed on.
	Outputs json.RawMessage
}

// ChildOf is what the planner needs of a child record of a run approved by
// approvedBy ("" for a run that needed no approval).
func ChildOf(rec *store.Record, approvedBy string) Child {
	c := Child{ID: rec.ID, Stage: rec.Stage, Node: rec.NodeID, Step: rec.Step, Attempt: rec.Attempt,
		State: rec.State, Reason: rec.StateReason, Replaced: approvedBy != "" && rec.ApprovedBy != approvedBy,
		Outputs: rec.Outputs}
	if rec.FinishedTS != nil {
		c.Finished = *rec.FinishedTS
	}
	return c
}

func (c Child) attempt() int { return max(c.Attempt, 1) }

// New is a child the planner admits: one step of one stage on one node, in
// a wave, in an attempt (RetryOf names the failed attempt it repeats).
type New struct {
	Stage   string
	Node    string
	Wave    int
	Step    string
	Attempt int
	RetryOf string
	// Args are the step's args rendered for the node.
	Args json.RawMessage
	// render renders Args: the planner tries the args of every node it
	// could start and renders those of the children it creates alone.
	render func() (json.RawMessage, error)
	// starts: the child is its node's first in the stage.
	starts bool
}

// Step is what a run should do now, given its children: the children to
// create, the stages whose state changes, and the run's next state (the same
// state when it does not change).
type Step struct {
	Create []New
	// Stages holds the new state of every stage, in the run's order.
	Stages []string
	State  string
	Reason string
	// Failed and Skipped list, for every stage in the run's order, its
	// failed nodes and those skipped; Nodes counts its nodes done, in
	// flight and rolled back.
	Failed  [][]string
	Skipped [][]string
	Nodes   []NodeCounts
	// Why holds, by stage index and node, why each failed node failed
	// (its reason, and the child that failed it).
	Why []map[string]store.NodeFailure
	// Unreachable holds, by stage index, what the planner decided now of
	// nodes DOWN or drained at their turn: the engine records it.
	Unreachable map[int]map[string]store.Unreachable
}

// NodeCounts counts a stage's nodes done, in flight (neither failed nor
// skipped) and rolled back (store.RunStage keeps them).
type NodeCounts struct{ Done, InFlight, RolledBack int }

// nodeCounts is what st stores of its node counts.
func nodeCounts(st *store.RunStage) NodeCounts {
	return NodeCounts{Done: st.Done, InFlight: st.InFlight, RolledBack: st.RolledBack}
}

// Reasons of run state changes made by the planner.
const (
	ReasonDone    = "every stage is done"
	ReasonPartial = "every stage is done, with %d failed node(s) within max_errors and %d skipped"
	// ReasonPartialForgiven ends a run some of whose errors were forgiven
	// by a resume: it says so, and who forgave them and why.
	ReasonPartialForgiven = "every stage is done, with %d failed node(s) and %d skipped; errors past max_errors were forgiven (%s)"
	// ReasonDeadline ends a run past its deadline.
	ReasonDeadline = "deadline: the run's deadline passed before every node was done"
	// ReasonCanary pauses a run after its canary nodes; promote goes on.
	ReasonCanary = "canary: stage %s paused after its first nodes (%d done, %d failed); an approver promotes it"
	// ReasonCanaryAuto is ReasonCanary for a stage whose rule
	// auto_promote_after_s promotes it once its gates have held.
	ReasonCanaryAuto  = "canary: stage %s paused after its first nodes (%d done, %d failed); it promotes itself once its gates have held %ds, or an approver promotes it sooner"
	ReasonStageFailed = "stage %s: %d errors, more than max_errors %s"
)

// IsError reports whether a finished child counts against max_errors:
// FAILED (timeouts included), LOST, CANCELLED other than by its run, and
// any child whose content the agent replaced.
func IsError(c Child) bool {
	if c.Replaced && c.State.Final() {
		return true
	}
	switch c.State {
	case action.Failed, action.Lost:
		return true
	case action.Cancelled:
		return c.Reason != ReasonRunCancelled && c.Reason != ReasonRunEnded && c.Reason != ReasonRunAborted
	}
	return false
}

// StageCounts is a stage's progress.
type StageCounts struct {
	// ByState counts children by state.
	ByState map[action.State]int
	// Pending counts the nodes not started, Unfinished those in flight
	// (from their first step until their procedure ended), Errors the
	// failed nodes (one error a node, whatever its attempts), Done the
	// nodes whose every step is DONE.
	Pending    int
	Unfinished int
	Errors     int
	Done       int
	// InFlight counts the nodes in flight that have not failed.
	InFlight int
	// Skipped counts the nodes skipped: unavailable at their turn
	// (unavailable: skip), or failed in an earlier stage.
	Skipped int
	// RolledBack counts the nodes of an aborted stage whose rollback
	// ended.
	RolledBack int
}

// Node states of a stage's procedure.
const (
	nodePending    = iota // no child yet
	nodeBusy              // in flight: a child unfinished, or a next one to create
	nodeDone              // every step DONE or skipped by its when
	nodeFailed            // a step failed past its attempts; its always and rollback steps ended
	nodeStopped           // a child ended without error but not DONE (its run's cancel)
	nodeSkipped           // DOWN or drained at its turn, with unavailable: skip
	nodeRolledBack        // its run was aborted: its rollback steps ended
)

// nodeState is where a node stands in its stage's procedure, and the child
// to create for it now, if any. failed marks a node in flight that failed
// and runs its always and rollback steps: it counts as an error already.
type nodeState struct {
	status int
	next   *New
	failed bool
	// why says why it failed (or was skipped); by is the child whose
	// failure failed it ("" when none did: a when or args that would not
	// render, or the node was unavailable at its turn).
	why string
	by  string
}

// PlanEnv is what the planner knows besides a run and its children.
type PlanEnv struct {
	// Now decides which retries are due; zero waits for none.
	Now time.Time
	// Labels are the nodes' labels (.node.labels in templates).
	Labels map[string]map[string]string
	// Params are the run's parameters (.params in templates).
	Params map[string]any
	// Unavailable holds the nodes that are DOWN or drained now; nil when
	// not known (every node is then taken as available).
	Unavailable map[string]bool
	// Drained holds, among Unavailable, the nodes drained now.
	Drained map[string]bool
}

// retryDelay is the wait before attempt n+1 of a step whose attempt n
// failed: delay × backoff^(n-1), at most max_delay.
func retryDelay(r *store.Retry, n int) time.Duration {
	if r == nil || r.DelayS <= 0 {
		return 0
	}
	d := float64(r.DelayS)
	b := r.Backoff
	if b < 1 {
		b = 1
	}
	for i := 1; i < n; i++ {
		d *= b
		if r.MaxDelayS > 0 && d >= float64(r.MaxDelayS) {
			break
		}
	}
	if r.MaxDelayS > 0 && d > float64(r.MaxDelayS) {
		d = float64(r.MaxDelayS)
	}
	return time.Duration(d * float64(time.Second))
}

// evalNode places node in stage st's procedure given its children there
// (any order): its steps in order while none failed, then, once one failed,
// its steps with when "always" and the stage's rollback steps. A step whose
// when renders false is skipped; args are rendered for the child to create.
//
// A node in skip (that failed an earlier stage, named by its value) and
// not yet started here is skipped.
func evalNode(st *store.RunStage, ts *stepTemplates, node string, kids []Child, env PlanEnv, skip map[string]string) nodeState {
	if len(kids) == 0 {
		if stage, ok := skip[node]; ok {
			return nodeState{status: nodeSkipped, why: ReasonFailedStage + stage}
		}
		switch st.Unreachable[node].As {
		case UnavailableFail:
			return nodeState{status: nodeFailed, failed: true, why: ReasonNodeUnavailable}
		case UnavailableSkip:
			return nodeState{status: nodeSkipped}
		}
	}
	// An aborted stage (stopping) starts no node, waits for the children
	// in flight of the nodes it started, then takes each through its
	// when: always steps and its rollback, as a failed node's.
	stopping := st.Aborted
	if stopping {
		started := false
		for _, c := range kids {
			if !c.State.Final() {
				return nodeState{status: nodeBusy}
			}
			started = started || c.Reason != ReasonRunAborted
		}
		if !started {
			return nodeState{status: nodeStopped}
		}
	}
	latest := map[string]Child{}
	for _, c := range kids {
		if l, ok := latest[c.Step]; !ok || c.attempt() > l.attempt() {
			latest[c.Step] = c
		}
	}
	// A retry from the failed step takes the steps its node ended DONE
	// in the run retried as done here, with their outputs.
	for _, rs := range st.Reuse[node] {
		if _, ok := latest[rs.Step]; !ok {
			latest[rs.Step] = Child{ID: rs.ActionID, Stage: st.Name, Node: node, Step: rs.Step, Attempt: 1,
				State: action.Done, Outputs: rs.Outputs}
		}
	}
	procedure := st.Procedure()
	complete := true    // stopping: every step of the procedure ended DONE or skipped
	var ctx nodeContext // only for a stage whose steps hold templates
	if hasTemplates(st) {
		ctx = newNodeContext(env.Params, node, env.Labels[node], append(slices.Clone(procedure), st.Rollback...))
	}
	failed, why, by := false, "", ""
	fail := func(reason string) {
		if !failed {
			failed, why = true, reason
		}
	}
	// failOn fails the node on child c of step, past its attempts.
	failOn := func(step *store.RunStep, c Child) {
		if !failed {
			fail(fmt.Sprintf("step %s %s (attempt %d of %d)", displayStep(step.Name), c.State, c.attempt(), step.Attempts()))
			if c.ID == "" && c.Reason != "" {
				why += ": " + c.Reason // a gate or a call: the core's verdict
			}
			by = c.ID
		}
	}
	busy := func(next *New) nodeState {
		if next != nil && len(kids) == 0 {
			return nodeState{status: nodePending, next: next}
		}
		return nodeState{status: nodeBusy, next: next, failed: failed, why: why, by: by}
	}
	// child is the child to create for step: its args are tried now and
	// rendered once it is created (PlanWith).
	child := func(step *store.RunStep, n New) (*New, error) {
		if !strings.Contains(string(step.Args), "{{") {
			n.Args = step.Args
			return &n, nil
		}
		if err := ts.tryArgs(step, ctx); err != nil {
			return nil, err
		}
		sp, c := *step, ctx
		n.render = func() (json.RawMessage, error) { return ts.renderArgs(&sp, c) }
		return &n, nil
	}
	// skippedByWhen: a step without a child that its when skips.
	skippedByWhen := func(step *store.RunStep) bool {
		run, err := ts.evalWhen(step, ctx)
		if err == nil && !run {
			ctx.set(step.Name, StepSkipped, nil)
			return true
		}
		return false
	}
	walk := func(steps []store.RunStep, rollback bool) *nodeState {
		for i := range steps {
			step := &steps[i]
			if stopping && !failed && !rollback && step.When != WhenAlways {
				// What ran of it before the abort is known to later
				// templates (a rollback's args read the outputs).
				c, ok := latest[step.Name]
				switch {
				case !ok:
					complete = complete && skippedByWhen(step)
				case IsError(c):
					failOn(step, c)
					ctx.set(step.Name, string(c.State), c.Outputs)
				default:
					complete = complete && c.State == action.Done
					ctx.set(step.Name, string(c.State), c.Outputs)
				}
				continue
			}
			if failed && !rollback && step.When != WhenAlways {
				continue
			}
			run, err := ts.evalWhen(step, ctx)
			if err != nil {
				fail(err.Error())
				ctx.set(step.Name, string(action.Failed), nil)
				continue
			}
			if !run {
				ctx.set(step.Name, StepSkipped, nil)
				continue
			}
			c, ok := latest[step.Name]
			switch {
			case !ok:
				next, err := child(step, New{Stage: st.Name, Node: node, Step: step.Name, Attempt: 1})
				if err != nil {
					fail(err.Error())
					ctx.set(step.Name, string(action.Failed), nil)
					continue
				}
				ns := busy(next)
				return &ns
			case !c.State.Final():
				ns := busy(nil)
				return &ns
			case IsError(c):
				if c.attempt() < step.Attempts() {
					if !env.Now.IsZero() && env.Now.Before(c.Finished.Add(retryDelay(step.Retry, c.attempt()))) {
						ns := busy(nil) // waiting to try again
						return &ns
					}
					next, err := child(step, New{Stage: st.Name, Node: node, Step: step.Name, Attempt: c.attempt() + 1,
						RetryOf: c.ID})
					if err == nil {
						ns := busy(next)
						return &ns
					}
				}
				failOn(step, c)
				ctx.set(step.Name, string(c.State), c.Outputs)
			case c.State != action.Done:
				return &nodeState{status: nodeStopped}
			default:
				ctx.set(step.Name, string(action.Done), c.Outputs)
			}
		}
		return nil
	}
	if ns := walk(procedure, false); ns != nil {
		return *ns
	}
	if failed || stopping {
		if ns := walk(st.Rollback, true); ns != nil {
			return *ns
		}
		switch {
		case failed:
			return nodeState{status: nodeFailed, failed: true, why: why, by: by}
		case len(st.Rollback) > 0:
			return nodeState{status: nodeRolledBack}
		case complete:
			return nodeState{status: nodeDone}
		}
		return nodeState{status: nodeStopped}
	}
	if st.SoakS > 0 && !env.Now.IsZero() {
		// In flight until soak has passed since its last step ended.
		var last time.Time
		for _, c := range kids {
			if c.Finished.After(last) {
				last = c.Finished
			}
		}
		if env.Now.Before(last.Add(time.Duration(st.SoakS) * time.Second)) {
			return nodeState{status: nodeBusy}
		}
	}
	return nodeState{status: nodeDone}
}

// ReasonNodeUnavailable is why a node DOWN or drained at its turn failed.
const ReasonNodeUnavailable = "node unavailable"

// Why a stage skipped a node: it failed an earlier stage of the run
// (ReasonFailedStage and that stage's name), or it was unavailable at its
// turn (unavailable: skip).
const (
	ReasonFailedStage     = "failed stage "
	ReasonSkipUnavailable = "unavailable at its turn"
)

func displayStep(name string) string {
	if name == "" {
		return "(the stage's one step)"
	}
	return name
}

// stageView is a stage's children by node and where each node stands.
type stageView struct {
	counts  StageCounts
	failed  []string                     // the failed nodes, in the stage's order
	why     map[string]store.NodeFailure // by failed node: why (and the child that failed it)
	skipped []string                     // the nodes skipped: unavailable, or failed before
	nodes   []nodeState                  // in the stage's node order
	// excluded counts the nodes skipped for failing an earlier stage:
	// they never had a turn.
	excluded int
}

// viewStage places every node of st; skip holds the nodes that failed an
// earlier stage (by the stage they failed), which st skips unless it
// includes them (nil: none).
func viewStage(st *store.RunStage, children []Child, env PlanEnv, skip map[string]string) stageView {
	v := stageView{counts: StageCounts{ByState: map[action.State]int{}}}
	byNode := map[string][]Child{}
	for _, ch := range children {
		if ch.Stage != st.Name {
			continue
		}
		byNode[ch.Node] = append(byNode[ch.Node], ch)
		v.counts.ByState[ch.State]++
	}
	for node, steps := range st.Core {
		for _, cs := range steps {
			byNode[node] = append(byNode[node], coreChild(st.Name, node, cs))
		}
	}
	v.nodes = make([]nodeState, len(st.Nodes))
	ts := newStepTemplates() // the stage's templates, parsed once for all its nodes
	for i, n := range st.Nodes {
		ns := evalNode(st, ts, n, byNode[n], env, skip)
		v.nodes[i] = ns
		switch ns.status {
		case nodePending:
			v.counts.Pending++
		case nodeBusy:
			v.counts.Unfinished++
			if !ns.failed {
				v.counts.InFlight++
			}
		case nodeDone:
			v.counts.Done++
		case nodeRolledBack:
			v.counts.RolledBack++
		case nodeSkipped:
			v.skipped = append(v.skipped, n)
			v.counts.Skipped++
			if strings.HasPrefix(ns.why, ReasonFailedStage) {
				v.excluded++
			}
		}
		if ns.failed {
			v.counts.Errors++
			v.failed = append(v.failed, n)
			if v.why == nil {
				v.why = map[string]store.NodeFailure{}
			}
			v.why[n] = store.NodeFailure{Reason: ns.why, ActionID: ns.by}
		}
	}
	return v
}

// Count tallies the children and nodes of stage st.
func Count(st *store.RunStage, children []Child) StageCounts {
	return viewStage(st, children, PlanEnv{}, nil).counts
}

// viewStages places the nodes of every stage of r: a node that failed a
// stage is skipped by the later stages that do not include it.
func viewStages(r *store.Run, children []Child, env PlanEnv) []stageView {
	views := make([]stageView, len(r.Stages))
	failedIn := map[string]string{}
	for i := range r.Stages {
		var skip map[string]string
		if !r.Stages[i].IncludeFailed {
			skip = maps.Clone(failedIn)
		}
		views[i] = viewStage(&r.Stages[i], children, env, skip)
		for _, n := range views[i].failed {
			if _, ok := failedIn[n]; !ok {
				failedIn[n] = r.Stages[i].Name
			}
		}
	}
	return views
}

// SkipReason says why stage i of r skipped node: it failed an earlier
// stage (ReasonFailedStage), or was unavailable at its turn.
func SkipReason(r *store.Run, i int, node string) string {
	if !r.Stages[i].IncludeFailed {
		for j := range i {
			if slices.Contains(r.Stages[j].Failed, node) {
				return ReasonFailedStage + r.Stages[j].Name
			}
		}
	}
	return ReasonSkipUnavailable
}

// Wave is the wave of the i-th node of a stage with concurrency c: nodes
// are taken in their sorted order, c at a time.
func Wave(i, c int) int {
	if c < 1 {
		c = 1
	}
	return i/c + 1
}

// PlanWith decides the next step of run r given its children and env. It is a pure function: the engine stores what
// it returns. A run that is not RUNNING creates nothing; stages still settle
// (a PAUSED run's stage may finish).
//
// Nodes go through their stage's procedure node first: a node's next step
// is created once its previous step ended DONE, and max_concurrency bounds
// the nodes in flight. A stage over its max_errors starts no new node; with
// on_failure abort it fails once no node of it is in flight, with pause it
// holds the run PAUSED until a resume forgives those errors.
func PlanWith(r *store.Run, children []Child, env PlanEnv) Step {
	s := Step{State: r.State, Stages: make([]string, len(r.Stages)), Failed: make([][]string, len(r.Stages)),
		Skipped: make([][]string, len(r.Stages)), Nodes: make([]NodeCounts, len(r.Stages)),
		Why: make([]map[string]store.NodeFailure, len(r.Stages))}
	byName := map[string]int{}
	for i, st := range r.Stages {
		byName[st.Name] = i
		s.Stages[i] = st.State
		s.Nodes[i] = nodeCounts(&st)
	}
	if store.RunFinal(r.State) || r.State == store.RunPendingApprove {
		return s
	}
	views := viewStages(r, children, env)
	for i := range r.Stages {
		s.Failed[i], s.Skipped[i], s.Why[i] = views[i].failed, views[i].skipped, views[i].why
		c := views[i].counts
		s.Nodes[i] = NodeCounts{Done: c.Done, InFlight: c.InFlight, RolledBack: c.RolledBack}
	}
	if Aborting(r) {
		return planAbort(r, views, s)
	}
	overErrors := func(i int) (bool, int) {
		st := &r.Stages[i]
		n := views[i].counts.Errors - st.Forgiven
		if st.OnFailure == OnFailureContinue {
			return false, n
		}
		return n > st.MaxErrors.Floor(len(st.Nodes)), n
	}
	// inFlight: nodes of stage i with steps still to go. A stage with
	// steps over its errors lets the procedure of its nodes in flight end
	// (their always and rollback steps included) before it fails or
	// pauses the run, so that no node is left half done.
	inFlight := func(i int) bool {
		return procedureLong(&r.Stages[i]) && views[i].counts.Unfinished > 0
	}
	// Settle stages in order until nothing changes: a stage that finishes
	// may let a later one start in the same step.
	for changed := true; changed; {
		changed = false
		for i := range r.Stages {
			st := &r.Stages[i]
			if s.Stages[i] == store.StageDone || s.Stages[i] == store.StageFailed {
				continue
			}
			if s.Stages[i] == store.StagePending {
				ready := true
				for _, d := range st.DependsOn {
					if s.Stages[byName[d]] != store.StageDone {
						ready = false
					}
				}
				if !ready || r.State != store.RunRunning {
					continue
				}
				s.Stages[i], changed = store.StageRunning, true
			}
			if over, _ := overErrors(i); over {
				if st.OnFailure != OnFailurePause && !inFlight(i) {
					s.Stages[i], changed = store.StageFailed, true
				}
				continue
			}
			c := views[i].counts
			if c.Pending == 0 && c.Unfinished == 0 {
				s.Stages[i], changed = store.StageDone, true
			}
		}
	}
	// The run's state follows its stages: a failed stage (abort) ends it
	// FAILED, whatever else holds; a stage over its errors with on_failure
	// pause holds it PAUSED once its nodes in flight are done.
	for i := range r.Stages {
		if s.Stages[i] == store.StageFailed {
			st := &r.Stages[i]
			_, n := overErrors(i)
			s.State, s.Reason = store.RunFailed, sprintf(ReasonStageFailed, st.Name, n, st.MaxErrors)
			return s
		}
	}
	for i := range r.Stages {
		st := &r.Stages[i]
		if s.Stages[i] != store.StageRunning || st.OnFailure != OnFailurePause {
			continue
		}
		if over, n := overErrors(i); over && !inFlight(i) {
			if r.State == store.RunRunning {
				s.State, s.Reason = store.RunPaused, sprintf(ReasonStageFailed, st.Name, n, st.MaxErrors)
			}
			return s
		}
	}
	done := true
	failed, skipped := 0, 0
	for i := range r.Stages {
		if s.Stages[i] != store.StageDone {
			done = false
		}
		failed += len(views[i].failed)
		skipped += len(views[i].skipped)
	}
	if done {
		s.State, s.Reason = store.RunDone, ReasonDone
		var forgiven []string
		for i := range r.Stages {
			forgiven = append(forgiven, r.Stages[i].ForgivenBy...)
		}
		switch {
		case len(forgiven) > 0:
			s.State, s.Reason = store.RunPartial, sprintf(ReasonPartialForgiven, failed, skipped, strings.Join(forgiven, "; "))
		case failed+skipped > 0:
			s.State, s.Reason = store.RunPartial, sprintf(ReasonPartial, failed, skipped)
		}
		return s
	}
	// Past its deadline, a run starts no new node, and fails once its nodes
	// in flight are done.
	late := r.DeadlineTS != nil && !env.Now.IsZero() && !env.Now.Before(*r.DeadlineTS)
	if late {
		busy := false
		for i := range r.Stages {
			busy = busy || (s.Stages[i] == store.StageRunning && views[i].counts.Unfinished > 0)
		}
		if !busy {
			s.State, s.Reason = store.RunFailed, ReasonDeadline
			return s
		}
	}
	// A canary holds the run PAUSED once its nodes are through, until an
	// approver promotes it.
	for i := range r.Stages {
		st := &r.Stages[i]
		if s.Stages[i] != store.StageRunning || st.Canary == 0 || st.Promoted {
			continue
		}
		c := views[i].counts
		if started := len(st.Nodes) - c.Pending - views[i].excluded; started >= st.Canary && c.Unfinished == 0 && c.Pending > 0 {
			if r.State == store.RunRunning {
				s.State, s.Reason = store.RunPaused, sprintf(ReasonCanary, st.Name, c.Done, c.Errors)
				if st.AutoPromoteAfterS > 0 {
					s.Reason = sprintf(ReasonCanaryAuto, st.Name, c.Done, c.Errors, st.AutoPromoteAfterS)
				}
			}
			return s
		}
	}
	if r.State != store.RunRunning {
		return s
	}
	for i := range r.Stages {
		st := &r.Stages[i]
		if s.Stages[i] != store.StageRunning {
			continue
		}
		conc := st.MaxConcurrency.Ceil(len(st.Nodes))
		// Nodes in flight go on first; then new nodes while there is room,
		// unless the stage is over its errors.
		for j, ns := range views[i].nodes {
			if ns.status == nodeBusy && ns.next != nil {
				n := *ns.next
				n.Wave = Wave(j, conc)
				s.Create = append(s.Create, n)
			}
		}
		if over, _ := overErrors(i); over || late {
			continue
		}
		room := conc - views[i].counts.Unfinished
		if st.Canary > 0 && !st.Promoted {
			room = min(room, st.Canary-(len(st.Nodes)-views[i].counts.Pending-views[i].excluded))
		}
		for j, ns := range views[i].nodes {
			if room <= 0 {
				break
			}
			if ns.status != nodePending {
				continue
			}
			if node := st.Nodes[j]; env.Unavailable[node] {
				// Its turn, and it is DOWN or drained.
				u, waiting := st.Unreachable[node], st.Unreachable[node].As == UnavailableWait
				switch {
				case st.Unavailable == UnavailableWait && !waiting:
					u = store.Unreachable{As: UnavailableWait, Since: env.Now}
				case st.Unavailable == UnavailableWait:
					timeout := time.Duration(cmp.Or(st.UnavailableTimeoutS, DefaultUnavailableTimeoutS)) * time.Second
					if env.Now.Sub(u.Since) < timeout {
						continue
					}
					u = store.Unreachable{As: UnavailableFail, Since: env.Now}
				case st.Unavailable == UnavailableSkip:
					u = store.Unreachable{As: UnavailableSkip, Since: env.Now}
				default:
					u = store.Unreachable{As: UnavailableFail, Since: env.Now}
				}
				if s.Unreachable == nil {
					s.Unreachable = map[int]map[string]store.Unreachable{}
				}
				if s.Unreachable[i] == nil {
					s.Unreachable[i] = map[string]store.Unreachable{}
				}
				s.Unreachable[i][node] = u
				continue
			}
			n := *ns.next
			n.Wave, n.starts = Wave(j, conc), true
			s.Create = append(s.Create, n)
			room--
		}
	}
	renderCreated(&s)
	// The nodes started now are in flight.
	for _, n := range s.Create {
		if n.starts {
			s.Nodes[byName[n.Stage]].InFlight++
		}
	}
	return s
}

// renderCreated renders the args of the children s creates. One that
// rendered when tried and fails now (its time budget) waits for the next
// step.
func renderCreated(s *Step) {
	created := s.Create[:0]
	for _, n := range s.Create {
		if n.render != nil {
			args, err := n.render()
			if err != nil {
				continue
			}
			n.Args, n.render = args, nil
		}
		created = append(created, n)
	}
	s.Create = created
}

// Aborting reports whether run r was aborted and its stages roll back.
func Aborting(r *store.Run) bool {
	return !store.RunFinal(r.State) && slices.ContainsFunc(r.Stages, func(st store.RunStage) bool { return st.Aborted })
}

// planAbort is the step of an aborted run r (Aborting): no stage starts,
// fails or pauses; each aborted stage takes its started nodes through
// their when: always and rollback steps, within its max_concurrency, and
// ends ABORTED once none has a step to go; then the run ends ABORTED.
func planAbort(r *store.Run, views []stageView, s Step) Step {
	busy := false
	for i := range r.Stages {
		st := &r.Stages[i]
		if !st.Aborted || s.Stages[i] != store.StageRunning {
			continue
		}
		v := &views[i]
		if v.counts.Unfinished == 0 {
			s.Stages[i] = store.StageAborted
			continue
		}
		busy = true
		if r.State != store.RunRunning {
			continue
		}
		conc := st.MaxConcurrency.Ceil(len(st.Nodes))
		room := conc
		for _, ns := range v.nodes {
			if ns.status == nodeBusy && ns.next == nil {
				room-- // a child in flight
			}
		}
		for j, ns := range v.nodes {
			if room <= 0 {
				break
			}
			if ns.status == nodeBusy && ns.next != nil {
				n := *ns.next
				n.Wave = Wave(j, conc)
				s.Create = append(s.Create, n)
				room--
			}
		}
	}
	if !busy {
		base, _, _ := strings.Cut(r.StateReason, waitingSep)
		s.State, s.Reason = store.RunAborted, base
	}
	renderCreated(&s)
	return s
}

// procedureLong reports whether the stage's nodes go through more than
// one child: steps, or a rollback.
func procedureLong(st *store.RunStage) bool { return len(st.Steps) > 0 || len(st.Rollback) > 0 }

// State reasons of children cancelled by their run: its cancel, its end
// (FAILED) or its abort before they were sent. None counts against
// max_errors.
const (
	ReasonRunCancelled = "run cancelled"
	ReasonRunEnded     = "run failed before it was sent"
	ReasonRunAborted   = "run aborted before it was sent"
)
