package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/musterhq/muster/shared/action"
	"github.com/musterhq/muster/shared/testwait"
)

// The disruption budget with real processes: a cluster with
// max_unavailable 1, a disruptive sleep kind, and two such actions on two
// nodes approved together. The agents' own records prove they never
// overlapped; while the first ran, the core held the second, said why, and
// showed the budget in use.
func TestBudgetKeepsTwoDisruptiveActionsApart(t *testing.T) {
	t.Parallel()
	f := newFleetWith(t, fleetOptions{nodes: 2,
		clusterYAML: "    budget:\n      max_unavailable: 1\n",
		coreExtra:   "kinds:\n  - {kind: muster.io/debug.sleep, disruptive: true}\n"})
	a := f.create("node-1", "muster.io/debug.sleep", `{"seconds":2}`)
	b := f.create("node-2", "muster.io/debug.sleep", `{"seconds":2}`)
	f.approve(a.ID)
	f.approve(b.ID)

	// While one runs, the other waits with its reason, and the cluster
	// shows 1 of 1 unavailable and one action held.
	testwait.Within(t, 10*time.Second, "one running and one held", func() bool {
		ra, err1 := f.admin.Action(ctxT(t), a.ID)
		rb, err2 := f.admin.Action(ctxT(t), b.ID)
		if err1 != nil || err2 != nil {
			return false
		}
		// The reason names the node that takes the room.
		held := func(r *action.Action, by string) bool {
			return r.State == action.PendingSchedule && strings.HasPrefix(r.StateReason, "held by the disruption budget: 1 of 1 unavailable ("+by+" ")
		}
		if !(ra.State == action.Running && held(rb, "node-1") || rb.State == action.Running && held(ra, "node-2")) {
			return false
		}
		cl, err := f.admin.Cluster(ctxT(t), "e2e")
		return err == nil && cl.Budget != nil && cl.Budget.Unavailable == 1 && cl.Budget.Max == 1 &&
			cl.Budget.Held == 1 && cl.Budget.MaxUnavailable == "1"
	})
	f.waitCore(a.ID, 20*time.Second, action.Done)
	f.waitCore(b.ID, 20*time.Second, action.Done)

	// The agents' records: one started only after the other finished.
	ga, err := f.agentC["node-1"].Get(ctxT(t), a.ID)
	if err != nil {
		t.Fatal(err)
	}
	gb, err := f.agentC["node-2"].Get(ctxT(t), b.ID)
	if err != nil {
		t.Fatal(err)
	}
	if ga.StartedTS == nil || ga.FinishedTS == nil || gb.StartedTS == nil || gb.FinishedTS == nil {
		t.Fatalf("records without times: %+v %+v", ga, gb)
	}
	first, second := ga, gb
	if gb.StartedTS.Before(*ga.StartedTS) {
		first, second = gb, ga
	}
	if second.StartedTS.Before(*first.FinishedTS) {
		t.Fatalf("disruptive actions overlapped: %s ran %s–%s on %s, %s started %s on %s",
			first.ID, first.StartedTS, first.FinishedTS, first.NodeID, second.ID, second.StartedTS, second.NodeID)
	}
	cl, err := f.admin.Cluster(ctxT(t), "e2e")
	if err != nil || cl.Budget == nil || cl.Budget.Unavailable != 0 || cl.Budget.Held != 0 {
		t.Fatalf("budget after both: %+v, %v", cl.Budget, err)
	}
	viewer, err := f.admin.CreateToken(ctxT(t), "carol", []string{"viewer"})
	if err != nil {
		t.Fatal(err)
	}
	out := muster(t, []string{"MUSTER_ADDR=http://" + f.core.Addr(), "MUSTER_TOKEN=" + viewer.Token}, "cluster", "show", "e2e")
	if !strings.Contains(out, "Budget:   0 of 1 unavailable (max_unavailable 1)") {
		t.Fatalf("cluster show:\n%s", out)
	}
}

// The budget holds for every disruptive action, whoever created it: a
// manual action and a run of the same disruptive kind (max_concurrency 2),
// approved together in a cluster with max_unavailable 1, never run on two
// nodes at once, and all of them run. The agents' execution log proves it.
func TestBudgetKeepsAManualActionAndARunApart(t *testing.T) {
	t.Parallel()
	f := newStepFleetWith(t, "0.5", fleetOptions{nodes: 3,
		clusterYAML: "    budget:\n      max_unavailable: 1\n",
		coreExtra:   "kinds:\n  - {kind: example.com/step, disruptive: true}\n"})
	manual := f.create("node-1", "example.com/step", `{}`)
	run, err := f.alice.CreateRun(ctxT(t), stepRun("2", "0", ""))
	if err != nil {
		t.Fatal(err)
	}
	f.approve(manual.ID)
	if _, err := f.bob.RunVerb(ctxT(t), run.ID, "approve", ""); err != nil {
		t.Fatal(err)
	}
	if r := f.waitRun(t, run.ID, 60*time.Second, "DONE", "FAILED", "CANCELLED"); r.State != "DONE" {
		t.Fatalf("run ended %s (%s)", r.State, r.StateReason)
	}
	f.waitCore(manual.ID, 30*time.Second, action.Done)
	spans := f.spans(t)
	if len(spans) != 4 {
		t.Fatalf("%d executions, want 4 (the manual action and one child per node)", len(spans))
	}
	if n := maxOverlap(spans); n != 1 {
		t.Fatalf("%d nodes ran the disruptive kind at once with max_unavailable 1", n)
	}
}

// Issue 17, item 5: a nested disruptive kind is held by the budget. The
// core's kinds rule is example.com/** and the run's stage kind
// example.com/os/reboot on three nodes at once (max_concurrency 3): with
// max_unavailable 1 the agents' execution log shows never two at once.
func TestBudgetHoldsANestedDisruptiveKind(t *testing.T) {
	t.Parallel()
	f := newStepFleetWith(t, "0.5", fleetOptions{nodes: 3, stepKind: "example.com/os/reboot",
		clusterYAML: "    budget:\n      max_unavailable: 1\n",
		coreExtra:   "kinds:\n  - {kind: \"example.com/**\", disruptive: true}\n"})
	req := stepRun("3", "0", "")
	req.Stages[0].Kind = "example.com/os/reboot"
	run := f.startRun(t, req)
	if r := f.waitRun(t, run.ID, 60*time.Second, "DONE", "FAILED", "CANCELLED"); r.State != "DONE" {
		t.Fatalf("run ended %s (%s)", r.State, r.StateReason)
	}
	spans := f.spans(t)
	if len(spans) != 3 {
		t.Fatalf("%d executions, want one per node", len(spans))
	}
	if n := maxOverlap(spans); n != 1 {
		t.Fatalf("%d nodes ran example.com/os/reboot at once with max_unavailable 1 and kinds example.com/**", n)
	}
}
