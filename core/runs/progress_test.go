package runs_test

import (
	"strings"
	"testing"

	"github.com/musterhq/muster/core/runs"
	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/action"
	"github.com/musterhq/muster/shared/wire"
)

// TestProgressIsCountedInNodes: a node whose verify failed all of its five
// attempts is one failed node, and a run paused half done says two of its
// four nodes are done, not every child it made.
func TestProgressIsCountedInNodes(t *testing.T) {
	t.Parallel()
	env := setupEngine(t)
	req := upgradeRun("0", "pause")
	req.Stages[0].Steps[2].Retry = &wire.Retry{Attempts: 5}
	r := env.startReq(req)
	for range 40 {
		if r.State != store.RunRunning {
			break
		}
		k := env.open(r.ID)
		state := action.Done
		if k.NodeID == "n3" && k.Step == "verify" {
			state = action.Failed
		}
		env.finishWith(k.ID, state, "")
		r = env.advance(r.ID)
	}
	if r.State != store.RunPaused {
		t.Fatalf("run %s (%s), want PAUSED by n3's errors", r.State, r.StateReason)
	}
	v := runs.View(r, store.CountChildren(env.children(r.ID)))
	want := wire.NodeProgress{Done: 2, Failed: 1, Waiting: 1, Total: 4}
	if got := v.Stages[0].Progress; got != want {
		t.Fatalf("stage progress %+v, want %+v", got, want)
	}
	if v.Progress != want {
		t.Fatalf("run progress %+v, want %+v", v.Progress, want)
	}
	// So does the run.paused event, which notifications carry.
	var paused *store.Event
	for _, ev := range env.eventsSince(0) {
		if ev.Type == store.EventRunPaused {
			paused = &ev
		}
	}
	if paused == nil || !strings.Contains(paused.Message, "(nodes: 2 done, 1 failed, 1 waiting, of 4)") {
		t.Fatalf("run.paused event %+v, want the nodes counted", paused)
	}
	if n, _ := paused.Data["nodes"].(map[string]any); n == nil || n["failed"] != float64(1) {
		t.Fatalf("run.paused data %v, want the nodes counted", paused.Data)
	}
	// A brief run (a list's) says the same.
	brief := *r
	brief.Stages, brief.Brief = store.Brief(r.Stages), true
	if got := runs.View(&brief, nil).Progress; got != want {
		t.Fatalf("a list's progress %+v, want %+v", got, want)
	}
}

// TestProgressCountsNodesInFlightAndSkipped: a node between its steps is in
// flight, one that failed an earlier stage is skipped.
func TestProgressCountsNodesInFlightAndSkipped(t *testing.T) {
	t.Parallel()
	env := setupEngine(t)
	r := env.startReq(twoStages(false))
	k := env.open(r.ID)
	env.finishChild(k.ID, action.Failed) // n1 fails stage a
	r = env.advance(r.ID)
	v := runs.View(r, nil)
	if got, want := v.Stages[0].Progress, (wire.NodeProgress{Failed: 1, InFlight: 1, Waiting: 2, Total: 4}); got != want {
		t.Fatalf("stage a %+v, want %+v", got, want)
	}
	r = env.runThrough(r)
	v = runs.View(r, nil)
	if got, want := v.Stages[1].Progress, (wire.NodeProgress{Done: 3, Skipped: 1, Total: 4}); got != want {
		t.Fatalf("stage b %+v, want %+v", got, want)
	}
	if got, want := v.Progress, (wire.NodeProgress{Done: 6, Failed: 1, Skipped: 1, Total: 8}); got != want {
		t.Fatalf("run %+v, want %+v", got, want)
	}
}
