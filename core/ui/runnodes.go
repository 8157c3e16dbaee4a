package ui

import (
	"encoding/json"
	"slices"
	"strings"

	"github.com/musterhq/muster/core/ops"
	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/action"
	"github.com/musterhq/muster/shared/wire"
)

// A run's page, node by node: a page of the run's nodes, and per node and
// stage its wave, its canary mark and, in a stage with steps, each step in
// order with its attempts (docs/architecture.md, "Runs and playbooks").

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
	failed := slices.Contains(st.Failed, ch.NodeID) || st.Unreachable[ch.NodeID].As == ops.RunUnavailableFail
	for i := range st.Steps {
		if k := latest[st.Steps[i].Name]; k != nil && ops.RunChildFailed(k, approvedBy) &&
			max(k.Attempt, 1) >= st.Steps[i].Attempts() {
			failed = true
		}
	}
	switch {
	case failed:
		c.Ended = "FAILED"
	case slices.Contains(st.Skipped, ch.NodeID) || st.Unreachable[ch.NodeID].As == ops.RunUnavailableSkip:
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
			if k := latest[specs[i].Name]; k != nil && ops.RunChildFailed(k, approvedBy) &&
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

// stageIndex is the index of the stage named name in r.
func stageIndex(r *store.Run, name string) int {
	for i := range r.Stages {
		if r.Stages[i].Name == name {
			return i
		}
	}
	return 0
}

// shownArgs is args as a step shows them: nothing for none or {}.
func shownArgs(raw json.RawMessage) json.RawMessage {
	if t := strings.TrimSpace(string(raw)); t == "" || t == "{}" || t == "null" {
		return nil
	}
	return raw
}
