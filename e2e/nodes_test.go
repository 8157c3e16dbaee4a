package e2e

import (
	"testing"
	"time"

	"github.com/musterhq/muster/shared/action"
	"github.com/musterhq/muster/shared/testwait"
)

// No stuck work, with real processes: a drained node gets nothing new while
// passes go by and shows DRAINED; undrained, it runs what waited. A node
// forgotten for good ends its open actions (LOST, node forgotten) and
// leaves the node list.
func TestCoreDrainsAndForgetsNodes(t *testing.T) {
	t.Parallel()
	f := newFleet(t, 2, "approval:\n  default: none\n")
	n, err := f.alice.DrainNode(ctxT(t), "e2e", "node-1", true)
	if err != nil || n.Status != "DRAINED" {
		t.Fatalf("drain: %+v %v", n, err)
	}
	a := f.create("node-1", "example.com/append", `{}`)
	from := f.passes()
	testwait.Within(t, 15*time.Second, "three passes while node-1 is drained", func() bool {
		got, err := f.admin.Action(ctxT(t), a.ID)
		if err != nil || got.State != action.PendingSchedule {
			t.Fatalf("pushed to a drained node: %+v %v", got, err)
		}
		return f.passes() >= from+3
	})
	if s := f.nodeStatus("node-1"); s != "DRAINED" {
		t.Fatalf("node-1 shows %s", s)
	}
	if _, err := f.alice.DrainNode(ctxT(t), "e2e", "node-1", false); err != nil {
		t.Fatal(err)
	}
	f.waitCore(a.ID, 15*time.Second, action.Done)
	if n := f.executions()[a.ID]; n != 1 {
		t.Fatalf("ran %d times", n)
	}

	running := f.create("node-2", "muster.io/debug.sleep", `{"seconds":3600}`)
	f.waitCore(running.ID, 15*time.Second, action.Running)
	res, err := f.admin.ForgetNode(ctxT(t), "e2e", "node-2")
	if err != nil || res.ActionsEnded != 1 {
		t.Fatalf("forget: %+v %v", res, err)
	}
	got := f.waitCore(running.ID, 5*time.Second, action.Lost)
	if got.StateReason != "node forgotten" || !f.hasEvent("action.lost", running.ID) {
		t.Fatalf("forgotten node's action: %s %q", got.State, got.StateReason)
	}
	if s := f.nodeStatus("node-2"); s != "" {
		t.Fatalf("a forgotten node is still listed as %s", s)
	}
}
