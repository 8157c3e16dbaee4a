package runs

import (
	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/action"
)

// Child is what the planner needs to know of a child action.
type Child struct {
	Stage string
	Node  string
	State action.State
	// Reason is the child's state reason (a run's own cancel is not an error).
	Reason string
	// Replaced: the agent ran other content under the child's id, so the
	// run's approval no longer covers it; once finished it is an error,
	// whatever its state.
	Replaced bool
}

// ChildOf is what the planner needs of a child record of a run approved by
// approvedBy ("" for a run that needed no approval).
func ChildOf(rec *store.Record, approvedBy string) Child {
	return Child{Stage: rec.Stage, Node: rec.NodeID, State: rec.State, Reason: rec.StateReason,
		Replaced: approvedBy != "" && rec.ApprovedBy != approvedBy}
}

// New is a child the planner admits: one node of one stage, in a wave.
type New struct {
	Stage string
	Node  string
	Wave  int
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
}

// Reasons of run state changes made by the planner.
const (
	ReasonDone        = "every stage is done"
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
		return c.Reason != ReasonRunCancelled && c.Reason != ReasonRunEnded
	}
	return false
}

// StageCounts is a stage's progress.
type StageCounts struct {
	// ByState counts children by state; Pending counts nodes without one.
	ByState    map[action.State]int
	Pending    int
	Unfinished int
	Errors     int
}

// Count tallies the children of stage st.
func Count(st *store.RunStage, children []Child) StageCounts {
	c := StageCounts{ByState: map[action.State]int{}}
	have := map[string]bool{}
	for _, ch := range children {
		if ch.Stage != st.Name {
			continue
		}
		have[ch.Node] = true
		c.ByState[ch.State]++
		switch {
		case !ch.State.Final():
			c.Unfinished++
		case IsError(ch):
			c.Errors++
		}
	}
	for _, n := range st.Nodes {
		if !have[n] {
			c.Pending++
		}
	}
	return c
}

// Wave is the wave of the i-th node of a stage with concurrency c: nodes
// are taken in their sorted order, c at a time.
func Wave(i, c int) int {
	if c < 1 {
		c = 1
	}
	return i/c + 1
}

// Plan decides the next step of run r given its children. It is a pure
// function: the engine stores what it returns. A run that is not RUNNING
// creates nothing; stages still settle (a PAUSED run's stage may finish).
func Plan(r *store.Run, children []Child) Step {
	s := Step{State: r.State, Stages: make([]string, len(r.Stages))}
	byName := map[string]int{}
	for i, st := range r.Stages {
		byName[st.Name] = i
		s.Stages[i] = st.State
	}
	if store.RunFinal(r.State) || r.State == store.RunPendingApprove {
		return s
	}
	have := map[string]map[string]bool{}
	for _, ch := range children {
		if have[ch.Stage] == nil {
			have[ch.Stage] = map[string]bool{}
		}
		have[ch.Stage][ch.Node] = true
	}
	// Settle stages in order until nothing changes: a stage that finishes
	// may let a later one start in the same step. A stage over its
	// max_errors fails (on_failure: abort) or stays RUNNING and holds the
	// run PAUSED until a resume forgives those errors (on_failure: pause).
	overErrors := func(st *store.RunStage) (bool, int) {
		c := Count(st, children)
		n := c.Errors - st.Forgiven
		return n > st.MaxErrors.Floor(len(st.Nodes)), n
	}
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
			if over, _ := overErrors(st); over {
				if st.OnFailure != OnFailurePause {
					s.Stages[i], changed = store.StageFailed, true
				}
				continue
			}
			c := Count(st, children)
			if c.Pending == 0 && c.Unfinished == 0 {
				s.Stages[i], changed = store.StageDone, true
			}
		}
	}
	// The run's state follows its stages: a failed stage (abort) ends it
	// FAILED, whatever else holds; a stage over its errors with on_failure
	// pause holds it PAUSED.
	for i := range r.Stages {
		if s.Stages[i] == store.StageFailed {
			st := &r.Stages[i]
			_, n := overErrors(st)
			s.State, s.Reason = store.RunFailed, sprintf(ReasonStageFailed, st.Name, n, st.MaxErrors)
			return s
		}
	}
	for i := range r.Stages {
		st := &r.Stages[i]
		if s.Stages[i] != store.StageRunning || st.OnFailure != OnFailurePause {
			continue
		}
		if over, n := overErrors(st); over {
			if r.State == store.RunRunning {
				s.State, s.Reason = store.RunPaused, sprintf(ReasonStageFailed, st.Name, n, st.MaxErrors)
			}
			return s
		}
	}
	done := true
	for i := range r.Stages {
		if s.Stages[i] != store.StageDone {
			done = false
		}
	}
	if done {
		s.State, s.Reason = store.RunDone, ReasonDone
		return s
	}
	if r.State != store.RunRunning {
		return s
	}
	for i, st := range r.Stages {
		if s.Stages[i] != store.StageRunning {
			continue
		}
		c := Count(&st, children)
		conc := st.MaxConcurrency.Ceil(len(st.Nodes))
		room := conc - c.Unfinished
		for j, n := range st.Nodes {
			if room <= 0 {
				break
			}
			if have[st.Name][n] {
				continue
			}
			s.Create = append(s.Create, New{Stage: st.Name, Node: n, Wave: Wave(j, conc)})
			room--
		}
	}
	return s
}

// State reasons of children cancelled by their run: its cancel, or its end
// (FAILED) before they were sent. Neither counts against max_errors.
const (
	ReasonRunCancelled = "run cancelled"
	ReasonRunEnded     = "run failed before it was sent"
)
