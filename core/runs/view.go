package runs

import (
	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/wire"
)

// View shows a run as the API and the web UI do: its stages with their
// nodes and counts per state, from counts (the store's RunChildCounts of
// the run, or store.CountChildren of its children). A brief run
// (store.Run.Brief) shows each stage's first nodes and how many it has, so
// a list of runs costs the same whatever their size.
func View(r *store.Run, counts []store.ChildCount) wire.Run {
	out := wire.Run{
		ID: r.ID, ClusterID: r.ClusterID, State: r.State, StateReason: r.StateReason, Requester: r.Requester,
		ApprovedBy: r.ApprovedBy, Playbook: r.Playbook, PlaybookVersion: r.PlaybookVersion, Digest: r.Digest,
		CreatedTS: r.CreatedTS, UpdatedTS: r.UpdatedTS, FinishedTS: r.FinishedTS, Stages: []wire.Stage{},
	}
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
		out.Stages = append(out.Stages, wire.Stage{
			Name: st.Name, Kind: st.Kind, Args: st.Args, Target: wire.Target(st.Target), Nodes: st.Nodes, NodeCount: st.Size(),
			MaxConcurrency: st.MaxConcurrency, MaxErrors: st.MaxErrors, OnFailure: st.OnFailure,
			DependsOn: st.DependsOn, TimeoutS: st.TimeoutS, State: st.State, Counts: byState, Errors: errs,
		})
	}
	return out
}

// Grid is a run's per-node grid: a cell per stage and node, with the
// child's state once it has one. It needs the full run, not a brief one.
func Grid(r *store.Run, children []store.Record) []wire.RunChild {
	byCell := map[string]*store.Record{}
	for i := range children {
		c := &children[i]
		byCell[c.Stage+"\x00"+c.NodeID] = c
	}
	var out []wire.RunChild
	for i := range r.Stages {
		st := &r.Stages[i]
		conc := st.MaxConcurrency.Ceil(len(st.Nodes))
		for j, n := range st.Nodes {
			cell := wire.RunChild{Stage: st.Name, NodeID: n, Wave: Wave(j, conc)}
			if c := byCell[st.Name+"\x00"+n]; c != nil {
				cell.ActionID, cell.State, cell.Wave = c.ID, c.State, c.Wave
			}
			out = append(out, cell)
		}
	}
	return out
}
