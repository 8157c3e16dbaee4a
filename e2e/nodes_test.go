package e2e

import (
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/musterhq/muster/shared/action"
	"github.com/musterhq/muster/shared/client"
	"github.com/musterhq/muster/shared/testwait"
)

// No stuck work, with real processes: a drained node gets nothing new while
// passes go by and shows DRAINED, with who drained it and why, and is
// counted drained, not up; undrained, it runs what waited. A node of the
// core's configuration cannot be forgotten (it would come back at the next
// start): the refusal is a 409 that says to remove it from the
// configuration, and its running action goes on.
func TestCoreDrainsAndForgetsNodes(t *testing.T) {
	t.Parallel()
	f := newFleet(t, 2, "approval:\n  default: none\n")
	n, err := f.alice.DrainNode(ctxT(t), "e2e", "node-1", "disk swap")
	if err != nil || n.Status != "DRAINED" || n.DrainedBy != "alice" || n.DrainReason != "disk swap" {
		t.Fatalf("drain: %+v %v", n, err)
	}
	if cl, err := f.admin.Cluster(ctxT(t), "e2e"); err != nil || cl.NodeCounts.Drained != 1 || cl.NodeCounts.Up > 1 {
		t.Fatalf("cluster counts with node-1 drained: %+v %v", cl, err)
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
	if _, err := f.alice.UndrainNode(ctxT(t), "e2e", "node-1"); err != nil {
		t.Fatal(err)
	}
	f.waitCore(a.ID, 15*time.Second, action.Done)
	if n := f.executions()[a.ID]; n != 1 {
		t.Fatalf("ran %d times", n)
	}

	running := f.create("node-2", "muster.io/debug.sleep", `{"seconds":3600}`)
	f.waitCore(running.ID, 15*time.Second, action.Running)
	_, err = f.admin.ForgetNode(ctxT(t), "e2e", "node-2")
	var apiErr *client.APIError
	if !errors.As(err, &apiErr) || apiErr.Status != http.StatusConflict || !strings.Contains(apiErr.Detail.Message, "core.yaml") {
		t.Fatalf("forget of a configured node: %v", err)
	}
	if got, err := f.admin.Action(ctxT(t), running.ID); err != nil || got.State != action.Running {
		t.Fatalf("the refused forget touched the node's action: %+v %v", got, err)
	}
	if s := f.nodeStatus("node-2"); s == "" {
		t.Fatal("the refused forget removed the node")
	}
}
