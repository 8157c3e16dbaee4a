package tracing

import (
	"context"
	"testing"
	"time"

	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/core/store/sqlite"
	"github.com/musterhq/muster/shared/action"
)

// The recorder records an action's span and its run on the agent once,
// when it is final, with the record's times; an approval as a wait from
// creation to the decision; nothing for an action still open.
func TestRecorderRecordsWhatEndsOnce(t *testing.T) {
	t.Parallel()
	tr, exp := setup(t, 1)
	ctx := context.Background()
	st, err := sqlite.Open(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	rec := NewRecorder(tr, st, nil, 0)

	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	started, finished := t0.Add(time.Hour), t0.Add(time.Hour+time.Minute)
	run := action.NewID()
	done := store.Record{Action: action.Action{ID: action.NewID(), ClusterID: "prod", NodeID: "db-1", Kind: "example.com/x",
		Args: []byte("{}"), State: action.Done, CreatedTS: t0, UpdatedTS: finished, StartedTS: &started, FinishedTS: &finished,
		RunID: run, Stage: "roll", Step: "upgrade", Attempt: 2}}
	open := store.Record{Action: action.Action{ID: action.NewID(), ClusterID: "prod", NodeID: "db-2", Kind: "example.com/x",
		Args: []byte("{}"), State: action.Running, CreatedTS: t0, UpdatedTS: t0, StartedTS: &started}}
	if err := st.Update(ctx, func(tx store.Tx) error {
		for _, r := range []*store.Record{&done, &open} {
			if err := tx.InsertAction(ctx, r); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for _, e := range []store.Event{
		{Type: store.EventActionApproved, ActionID: done.ID, RunID: run, TS: t0.Add(30 * time.Minute)},
		{Type: store.EventActionStateChanged, ActionID: done.ID, RunID: run, TS: finished},
		{Type: store.EventActionStateChanged, ActionID: done.ID, RunID: run, TS: finished}, // again: recorded once
		{Type: store.EventActionStateChanged, ActionID: open.ID, TS: started},
	} {
		if err := rec.Event(ctx, &e); err != nil {
			t.Fatal(err)
		}
	}
	spans := exp.GetSpans()
	byName := map[string]tracetest.SpanStub{}
	for _, s := range spans {
		if _, dup := byName[s.Name]; dup {
			t.Errorf("span %q recorded twice", s.Name)
		}
		byName[s.Name] = s
	}
	if len(spans) != 3 {
		t.Fatalf("%d spans, want approval wait, step, agent run: %v", len(spans), byName)
	}
	step, agentRun, wait := byName["step roll/upgrade"], byName["agent run example.com/x"], byName["approval wait"]
	if step.SpanContext.SpanID() != ActionSpanID(done.ID) || step.Parent.SpanID() != RunSpanID(run) ||
		step.SpanContext.TraceID() != RunTraceID(run) || !step.StartTime.Equal(t0) || !step.EndTime.Equal(finished) {
		t.Errorf("step span: %+v", step)
	}
	if agentRun.SpanContext.SpanID() != AgentRunSpanID(done.ID) || agentRun.Parent.SpanID() != ActionSpanID(done.ID) ||
		!agentRun.StartTime.Equal(started) || !agentRun.EndTime.Equal(finished) {
		t.Errorf("agent run span: %+v", agentRun)
	}
	if wait.Parent.SpanID() != ActionSpanID(done.ID) || !wait.StartTime.Equal(t0) || !wait.EndTime.Equal(t0.Add(30*time.Minute)) {
		t.Errorf("approval wait span: %+v", wait)
	}
	attrs := map[string]string{}
	for _, kv := range step.Attributes {
		attrs[string(kv.Key)] = kv.Value.String()
	}
	for k, v := range map[string]string{"cicd.pipeline.task.name": "roll/upgrade", "cicd.pipeline.task.run.id": done.ID,
		"cicd.pipeline.task.run.result": "success", "muster.run.attempt": "2", "muster.node.id": "db-1"} {
		if attrs[k] != v {
			t.Errorf("step attribute %s = %q, want %q", k, attrs[k], v)
		}
	}
}
