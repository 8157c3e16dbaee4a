package queue

import (
	"context"
	"testing"

	"github.com/musterhq/muster/shared/action"
)

// Issue 31, item 7: a run's child keeps its place in its run (run id,
// stage, step, wave, attempt) in the agent's queue, read back by Get and
// Changes. The place is not content: the same id and content pushed with
// another place, or none (a core of an earlier release), is the same
// action, never a conflict, and the first record stands.
func TestARunChildKeepsItsPlaceWhichIsNotContent(t *testing.T) {
	t.Parallel()
	q, _, _ := setup(t)
	ctx := context.Background()
	a := newAction("muster.io/debug.sleep", `{"seconds":1}`)
	a.RunID, a.Stage, a.Step, a.Wave, a.Attempt = "run-1", "roll", "reboot", 3, 2
	enqueue(t, q, a)
	got, err := q.Get(ctx, a.ID)
	if err != nil {
		t.Fatal(err)
	}
	page, _, _, err := q.Changes(ctx, 0, 10)
	if err != nil || len(page) != 1 {
		t.Fatalf("changes: %v %v", page, err)
	}
	for name, r := range map[string]struct {
		run, stage, step string
		wave, attempt    int
	}{
		"get":     {got.RunID, got.Stage, got.Step, got.Wave, got.Attempt},
		"changes": {page[0].RunID, page[0].Stage, page[0].Step, page[0].Wave, page[0].Attempt},
	} {
		if r.run != "run-1" || r.stage != "roll" || r.step != "reboot" || r.wave != 3 || r.attempt != 2 {
			t.Errorf("%s: %+v, want run-1 roll reboot 3 2", name, r)
		}
	}
	for _, other := range []func(b *action.Action){
		func(b *action.Action) { b.RunID, b.Stage, b.Step, b.Wave, b.Attempt = "", "", "", 0, 0 },
		func(b *action.Action) { b.RunID, b.Wave, b.Attempt = "run-2", 4, 3 },
	} {
		b := *a
		other(&b)
		rec, created, err := q.Enqueue(ctx, &b, "test")
		if err != nil || created || rec.RunID != "run-1" || rec.Wave != 3 || rec.Attempt != 2 {
			t.Fatalf("the same content with another place: %+v created %v err %v; want the first record", rec, created, err)
		}
	}
}
