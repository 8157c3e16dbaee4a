package e2e

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/musterhq/muster/shared/action"
)

// A clean history passes the chaos checker, and each broken invariant is
// reported with its own name: the checker fails when what it guards breaks.
func TestChaosCheckerCatchesEachViolation(t *testing.T) {
	t.Parallel()
	at := func(ns int64) time.Time { return time.Unix(0, ns).UTC() }
	// clean: on node-1, A ran and is DONE; B was interrupted by a kill at
	// 25; C was cancelled before it was pushed. On node-2, D was LOST when
	// the database was replaced at 50.
	clean := func() *chaosHistory {
		rec := func(id, node string, st action.State, reason string, created int64) *action.Action {
			return &action.Action{ID: id, NodeID: node, Kind: kindRun, Args: json.RawMessage(`{"ms":1,"seq":0}`),
				State: st, StateReason: reason, CreatedTS: at(created)}
		}
		wl := func(id, node string) chaosAction {
			return chaosAction{id: id, node: node, kind: kindRun, args: json.RawMessage(`{"ms":1,"seq":0}`), acked: true}
		}
		h := &chaosHistory{
			workload: []chaosAction{wl("A", "node-1"), wl("B", "node-1"), wl("C", "node-1"), wl("D", "node-2"), wl("E", "node-1")},
			core: map[string]*action.Action{
				"A": rec("A", "node-1", action.Done, "", 1),
				"B": rec("B", "node-1", action.Failed, action.ReasonInterrupted, 2),
				"E": rec("E", "node-1", action.Failed, action.ReasonInterrupted, 4),
				"C": rec("C", "node-1", action.Cancelled, action.ReasonCancelled, 3),
				"D": rec("D", "node-2", action.Lost, "", 40),
			},
			agents: map[string]map[string]*action.Action{
				"node-1": {"A": rec("A", "node-1", action.Done, "", 1), "B": rec("B", "node-1", action.Failed, action.ReasonInterrupted, 2),
					"E": rec("E", "node-1", action.Failed, action.ReasonInterrupted, 4)},
				"node-2": {},
			},
			logs: map[string][]string{
				"node-1": {"A start 10", "A end 20", "B start 30"},
				"node-2": {"D start 45"},
			},
			kills:    map[string][]time.Time{"node-1": {at(35), at(60)}, "node-2": {at(48)}},
			replaced: map[string][]time.Time{"node-2": {at(50)}},
		}
		h.workload[2].cancelled = true
		// E was interrupted after "launching", before its command wrote a line.
		started := at(55)
		h.core["E"].StartedTS, h.agents["node-1"]["E"].StartedTS = &started, &started
		return h
	}
	if v, counts := checkHistory(clean()); len(v) != 0 || counts["accepted"] != 5 || counts["executions"] != 3 {
		t.Fatalf("clean history: violations %q, counts %v", v, counts)
	}

	for _, tc := range []struct {
		name   string
		mutate func(h *chaosHistory)
		want   string
	}{
		{"an accepted action the core does not have", func(h *chaosHistory) { delete(h.core, "A") }, "LOST BY THE CORE"},
		{"an action not final in the core", func(h *chaosHistory) { h.core["A"].State = action.Running }, "NOT FINAL"},
		{"the core's state differs from the agent's", func(h *chaosHistory) { h.agents["node-1"]["B"].State = action.Done }, "CORE ≠ AGENT"},
		{"the core's args differ from the agent's", func(h *chaosHistory) { h.agents["node-1"]["A"].Args = json.RawMessage(`{}`) }, "CORE ≠ AGENT"},
		{"the core changed the content", func(h *chaosHistory) { h.core["A"].Kind = kindGated }, "CONTENT"},
		{"an action run twice", func(h *chaosHistory) { h.logs["node-1"] = append(h.logs["node-1"], "A start 40", "A end 41") }, "RAN TWICE"},
		{"two runs overlapping", func(h *chaosHistory) { h.logs["node-1"][1] = "A end 31" }, "OVERLAP"},
		{"a killed run overlapping the next", func(h *chaosHistory) {
			h.logs["node-1"] = append(h.logs["node-1"], "C start 33")
		}, "OVERLAP"},
		{"a run that never ended without a crash", func(h *chaosHistory) { h.kills["node-1"] = nil }, "NEVER ENDED"},
		{"an interrupted action without a crash", func(h *chaosHistory) {
			h.kills["node-1"] = []time.Time{at(25)}
			h.logs["node-1"] = append(h.logs["node-1"], "B end 40")
		}, "INTERRUPTED WITHOUT A CRASH"},
		{"an interrupted action without a run nor a crash after its start", func(h *chaosHistory) {
			h.kills["node-1"] = h.kills["node-1"][:1]
		}, "INTERRUPTED WITHOUT A CRASH"},
		{"a DONE action that never ran", func(h *chaosHistory) { h.logs["node-1"] = h.logs["node-1"][2:] }, "DONE WITHOUT ONE WHOLE RUN"},
		{"a LOST action on a database never replaced", func(h *chaosHistory) { h.replaced["node-2"] = nil }, "LOST:"},
		{"a CANCELLED action nobody cancelled", func(h *chaosHistory) { h.workload[2].cancelled = false }, "CANCELLED UNASKED"},
		{"a cancelled action the agent never had, that ran", func(h *chaosHistory) {
			h.logs["node-1"] = append(h.logs["node-1"], "C start 40", "C end 41")
		}, "RAN UNRECORDED"},
		{"an agent missing an action of its current database", func(h *chaosHistory) { delete(h.agents["node-1"], "A") }, "MISSING ON AGENT"},
		{"a run of an action nobody created", func(h *chaosHistory) { h.logs["node-1"] = append(h.logs["node-1"], "Z start 40", "Z end 41") }, "UNEXPECTED RUN"},
		{"an agent holding an action the core lacks", func(h *chaosHistory) { h.agents["node-2"]["Y"] = &action.Action{ID: "Y"} }, "UNEXPECTED ON AN AGENT"},
		{"a run on another node", func(h *chaosHistory) {
			h.logs["node-1"] = h.logs["node-1"][2:]
			h.logs["node-2"] = append([]string{"A start 10", "A end 20"}, h.logs["node-2"]...)
		}, "WRONG NODE"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := clean()
			tc.mutate(h)
			v, _ := checkHistory(h)
			if !strings.Contains(strings.Join(v, "\n"), tc.want) {
				t.Fatalf("violations %s, want one with %q", fmt.Sprintf("%q", v), tc.want)
			}
		})
	}
}
