package runs

import (
	"testing"

	"github.com/musterhq/muster/core/actions"
	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/action"
)

// TestWaitingNamesEveryHoldOfARunsNextNodes: children held by the budget or
// a drain, and nodes a stage waits for, are each said once; the waiting
// part replaces the last one and goes once nothing holds the run.
func TestWaitingNamesEveryHoldOfARunsNextNodes(t *testing.T) {
	r := &store.Run{ClusterID: "c1", Stages: []store.RunStage{{Name: "main", State: store.StageRunning,
		Unreachable: map[string]store.Unreachable{"n4": {As: UnavailableWait}, "n5": {As: UnavailableWait}, "n6": {As: UnavailableSkip}}}}}
	kids := []Child{
		{Stage: "main", Node: "n2", State: action.PendingSchedule, Reason: "held by the disruption budget: 2 of 2 unavailable"},
		{Stage: "main", Node: "n1", State: action.PendingSchedule, Reason: "held by the disruption budget: 2 of 2 unavailable"},
		{Stage: "main", Node: "n3", State: action.PendingSchedule, Reason: actions.ReasonDrained},
		{Stage: "main", Node: "n7", State: action.Running, Reason: actions.ReasonDrained},
	}
	env := PlanEnv{Unavailable: map[string]bool{"n3": true, "n4": true, "n5": true, "n6": true}, Drained: map[string]bool{"n3": true, "n5": true}}
	want := "nodes n1, n2 are held by the disruption budget of cluster c1: 2 of 2 unavailable; nodes n3, n5 are drained; node n4 is DOWN"
	if got := Waiting(r, kids, env); got != want {
		t.Fatalf("waiting: %q, want %q", got, want)
	}
	reason := WithWaiting("approved", want)
	if reason != "approved; waiting: "+want {
		t.Fatalf("with waiting: %q", reason)
	}
	if again := WithWaiting(reason, "node n4 is DOWN"); again != "approved; waiting: node n4 is DOWN" {
		t.Fatalf("replaced: %q", again)
	}
	if cleared := WithWaiting(reason, ""); cleared != "approved" {
		t.Fatalf("cleared: %q", cleared)
	}
	if got := Waiting(r, nil, PlanEnv{}); got != "" {
		t.Fatalf("nothing unavailable: %q", got)
	}
}

// TestWaitingSaysWhenTheWindowOpens: children held by the cluster's
// maintenance window (or a freeze, or their not_before) make the run say
// so, with the child's own reason naming when they may go.
func TestWaitingSaysWhenTheWindowOpens(t *testing.T) {
	r := &store.Run{ClusterID: "c1", Stages: []store.RunStage{{Name: "main", State: store.StageRunning}}}
	why := "outside the maintenance window; next opens 2026-12-01T02:00:00+01:00"
	kids := []Child{
		{Stage: "main", Node: "n1", State: action.Done},
		{Stage: "main", Node: "n2", State: action.PendingSchedule, Reason: why},
	}
	if got, want := Waiting(r, kids, PlanEnv{}), "node n2 held: "+why; got != want {
		t.Fatalf("waiting: %q, want %q", got, want)
	}
	kids[1].Reason = "frozen until 2026-12-27T00:00:00+01:00: holidays"
	if got, want := Waiting(r, kids, PlanEnv{}), "node n2 held: "+kids[1].Reason; got != want {
		t.Fatalf("waiting: %q, want %q", got, want)
	}
}
