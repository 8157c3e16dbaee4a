package orchestrate

import (
	"context"
	"testing"
	"time"

	"github.com/musterhq/muster/core/actions"
	"github.com/musterhq/muster/core/approval"
	"github.com/musterhq/muster/core/runs"
	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/action"
	"github.com/musterhq/muster/shared/live"
	"github.com/musterhq/muster/shared/testwait"
	"github.com/musterhq/muster/shared/wire"
)

// Issue 31, item 7: a run's child is pushed with its place in its run
// (run id, stage, wave, attempt) to an agent whose info lists those fields,
// and without them to one of an earlier release, which refuses a field it
// does not know: the child still reaches it, and the core keeps its place.
func TestAPushPlacesARunChildOnlyOnAnAgentThatTakesIt(t *testing.T) {
	t.Parallel()
	for name, fields := range map[string][]string{"takes them": wire.RunPlaceFields(), "an earlier release": nil} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			pol := live.New(approval.DefaultPolicy())
			engine := runs.NewEngine(pol, &actions.Rules{Policy: pol}, nil)
			h := setup(t, Config{Interval: time.Hour, RunPoll: 50 * time.Millisecond, Runs: engine}, "n1")
			ag := h.agents["n1"]
			ag.mu.Lock()
			ag.pushFields = fields
			ag.mu.Unlock()
			var run *store.Run
			h.update(func(ctx context.Context, tx store.Tx) error {
				var err error
				if run, err = engine.Create(ctx, tx, &wire.CreateRunRequest{ClusterID: cluster, Stages: []wire.StageSpec{{
					Name: "roll", Kind: "muster.io/debug.ping", Target: wire.Target{All: true}}}}, actions.Actor{Name: "alice"}); err != nil {
					return err
				}
				_, err = engine.Approve(ctx, tx, run.ID, "", actions.Actor{Name: "bob"})
				return err
			})
			h.start()
			a := testwait.Value(t, "the child on n1's agent", func() (action.Action, bool) {
				var kids []store.Record
				h.update(func(ctx context.Context, tx store.Tx) error {
					var err error
					kids, err = tx.RunChildren(ctx, run.ID)
					return err
				})
				if len(kids) != 1 {
					return action.Action{}, false
				}
				return ag.get(kids[0].ID)
			})
			want := action.Action{RunID: run.ID, Stage: "roll", Wave: 1, Attempt: 1}
			if fields == nil {
				want = action.Action{}
			}
			if a.RunID != want.RunID || a.Stage != want.Stage || a.Step != want.Step || a.Wave != want.Wave || a.Attempt != want.Attempt {
				t.Fatalf("the agent holds run %q stage %q step %q wave %d attempt %d, want %+v", a.RunID, a.Stage, a.Step, a.Wave, a.Attempt, want)
			}
			if r := h.record(a.ID); r.RunID != run.ID || r.Stage != "roll" || r.Attempt != 1 {
				t.Fatalf("the core's record lost its place: %+v", r.Action)
			}
		})
	}
}
