package runs

import (
	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/wire"
)

// View shows a run as the API and the web UI do: its stages with counts
// per state, and, with grid, the per-node grid (a cell per stage and node,
// with the child's state once it has one).
func View(r *store.Run, children []store.Record, grid bool) wire.Run {
	out := wire.Run{
		ID: r.ID, ClusterID: r.ClusterID, State: r.State, StateReason: r.StateReason, Requester: r.Requester,
		ApprovedBy: r.ApprovedBy, Playbook: r.Playbook, PlaybookVersion: r.PlaybookVersion, Digest: r.Digest,
		CreatedTS: r.CreatedTS, UpdatedTS: r.UpdatedTS, FinishedTS: r.FinishedTS, Stages: []wire.Stage{},
	}
	kids := make([]Child, len(children))
	byCell := map[string]*store.Record{}
	for i := range children {
		c := &children[i]
		kids[i] = ChildOf(c, r.ApprovedBy)
		byCell[c.Stage+"\x00"+c.NodeID] = c
	}
	for i := range r.Stages {
		st := &r.Stages[i]
		c := Count(st, kids)
		counts := map[string]int{"PENDING": c.Pending}
		for s, n := range c.ByState {
			counts[string(s)] = n
		}
		out.Stages = append(out.Stages, wire.Stage{
			Name: st.Name, Kind: st.Kind, Args: st.Args, Target: wire.Target(st.Target), Nodes: st.Nodes,
			MaxConcurrency: st.MaxConcurrency, MaxErrors: st.MaxErrors, OnFailure: st.OnFailure,
			DependsOn: st.DependsOn, TimeoutS: st.TimeoutS, State: st.State, Counts: counts, Errors: c.Errors,
		})
		if !grid {
			continue
		}
		conc := st.MaxConcurrency.Ceil(len(st.Nodes))
		for j, n := range st.Nodes {
			cell := wire.RunChild{Stage: st.Name, NodeID: n, Wave: Wave(j, conc)}
			if c := byCell[st.Name+"\x00"+n]; c != nil {
				cell.ActionID, cell.State, cell.Wave = c.ID, c.State, c.Wave
			}
			out.Children = append(out.Children, cell)
		}
	}
	return out
}
