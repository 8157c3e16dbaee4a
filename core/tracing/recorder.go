package tracing

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/action"
	"github.com/musterhq/muster/shared/startstop"
)

// Attribute keys of muster's own (no semantic convention names them).
const (
	AttrCluster = attribute.Key("muster.cluster.id")
	AttrNode    = attribute.Key("muster.node.id")
	AttrKind    = attribute.Key("muster.action.kind")
	AttrState   = attribute.Key("muster.action.state")
	AttrStage   = attribute.Key("muster.run.stage")
	AttrWave    = attribute.Key("muster.run.wave")
	AttrAttempt = attribute.Key("muster.run.attempt")
	AttrRunID   = attribute.Key("muster.run.id")
)

// Recorder records the spans of things that end, as the event log tells of
// their end: a run (its root span), an action (a step attempt, or the root
// of an action of its own, with its run on the agent below it), an approval
// wait. It follows the event log from the newest event at Start; events
// older than that are not traced (docs/operations.md, "Tracing").
type Recorder struct {
	t    *Tracer
	st   store.Store
	log  *slog.Logger
	poll time.Duration

	startstop.Base
	done doneSet
}

// NewRecorder builds a recorder of t's spans from st's events; poll is how
// often it looks for new events (default 1s). It starts nothing.
func NewRecorder(t *Tracer, st store.Store, log *slog.Logger, poll time.Duration) *Recorder {
	if poll <= 0 {
		poll = time.Second
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Recorder{t: t, st: st, log: log.With("component", "tracing"), poll: poll, done: newDoneSet(4096)}
}

var _ startstop.Service = (*Recorder)(nil)

// Start begins following the event log after its newest event.
func (r *Recorder) Start(ctx context.Context) error {
	var since int64
	if r.t == nil {
		return nil
	}
	if err := r.st.Read(ctx, func(rd store.Reader) error {
		var err error
		since, err = rd.LatestSeq(ctx)
		return err
	}); err != nil {
		return err
	}
	ctx, done, err := r.StartInit(ctx)
	if err != nil {
		return err
	}
	go func() {
		defer done()
		tick := time.NewTicker(r.poll)
		defer tick.Stop()
		for {
			next, err := store.EachEvent(ctx, r.st, since, 500, func(e *store.Event) error { return r.Event(ctx, e) })
			since = next
			if err != nil && !errors.Is(err, context.Canceled) {
				r.log.Warn("reading events", "err", err)
			}
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	return nil
}

// Stop ends the loop, then sends what is buffered.
func (r *Recorder) Stop() {
	r.Base.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := r.t.ForceFlush(ctx); err != nil {
		r.log.Warn("flushing spans", "err", err)
	}
}

// Event records the spans e ends. Errors reading the store are logged and
// skipped: a trace is no audit record.
func (r *Recorder) Event(ctx context.Context, e *store.Event) error {
	if r.t == nil {
		return nil
	}
	switch e.Type {
	case store.EventActionApproved, store.EventActionRejected, store.EventActionExpired:
		a, err := r.action(ctx, e.ActionID)
		if err != nil {
			return nil
		}
		r.t.Record(subjectOf(a), approvalSpan(ActionSpanID(a.ID), a.CreatedTS, e))
	case store.EventRunApproved, store.EventRunRejected, store.EventRunExpired:
		run, err := r.run(ctx, e.RunID)
		if err != nil {
			return nil
		}
		r.t.Record(Subject{RunID: run.ID}, approvalSpan(RunSpanID(run.ID), run.CreatedTS, e))
	}
	switch {
	case strings.HasPrefix(e.Type, "action.") && e.ActionID != "":
		a, err := r.action(ctx, e.ActionID)
		if err != nil || !a.State.Final() || !r.done.add("a"+a.ID) {
			return nil
		}
		r.recordAction(a)
	case strings.HasPrefix(e.Type, "run.") && e.RunID != "":
		run, err := r.run(ctx, e.RunID)
		if err != nil || !store.RunFinal(run.State) || !r.done.add("r"+run.ID) {
			return nil
		}
		r.recordRun(run)
	}
	return nil
}

func (r *Recorder) action(ctx context.Context, id string) (*store.Record, error) {
	var a *store.Record
	err := r.st.Read(ctx, func(rd store.Reader) error {
		var err error
		a, err = rd.Action(ctx, id)
		return err
	})
	return a, err
}

func (r *Recorder) run(ctx context.Context, id string) (*store.Run, error) {
	var run *store.Run
	err := r.st.Read(ctx, func(rd store.Reader) error {
		var err error
		run, err = rd.Run(ctx, id)
		return err
	})
	return run, err
}

func subjectOf(a *store.Record) Subject { return Subject{RunID: a.RunID, ActionID: a.ID} }

// approvalSpan is the wait from start to the approval, rejection or expiry
// event e, under parent.
func approvalSpan(parent trace.SpanID, start time.Time, e *store.Event) Span {
	sp := Span{Name: "approval wait", Parent: parent, Start: start, End: e.TS,
		Attrs: []attribute.KeyValue{attribute.String("muster.approval.outcome", strings.TrimPrefix(strings.TrimPrefix(e.Type, "action."), "run."))}}
	if e.Type != store.EventActionApproved && e.Type != store.EventRunApproved {
		sp.Error = e.Type
	}
	return sp
}

// recordAction records a's span (a step attempt under its run's root, or
// the root of an action of its own) and its run on the agent below it.
func (r *Recorder) recordAction(a *store.Record) {
	s := subjectOf(a)
	end := a.UpdatedTS
	if a.FinishedTS != nil {
		end = *a.FinishedTS
	}
	attrs := []attribute.KeyValue{AttrCluster.String(a.ClusterID), AttrNode.String(a.NodeID),
		AttrKind.String(a.Kind), AttrState.String(string(a.State)),
		semconv.CICDPipelineTaskRunID(a.ID), taskResult(a.State)}
	name := "action " + a.Kind
	var parent trace.SpanID
	if a.RunID != "" {
		task := a.Stage
		if a.Step != "" {
			task += "/" + a.Step
		}
		name = "step " + task
		parent = RunSpanID(a.RunID)
		attrs = append(attrs, semconv.CICDPipelineTaskName(task), semconv.CICDPipelineRunID(a.RunID),
			AttrRunID.String(a.RunID), AttrStage.String(a.Stage), AttrWave.Int(a.Wave), AttrAttempt.Int(a.Attempt))
	}
	sp := Span{Name: name, ID: ActionSpanID(a.ID), Parent: parent, Start: a.CreatedTS, End: end, Attrs: attrs}
	if a.State != action.Done {
		sp.Error = string(a.State) + ": " + a.StateReason
	}
	r.t.Record(s, sp)
	if a.StartedTS != nil {
		run := Span{Name: "agent run " + a.Kind, ID: AgentRunSpanID(a.ID), Parent: ActionSpanID(a.ID),
			Kind: trace.SpanKindConsumer, Start: *a.StartedTS, End: end,
			Attrs: []attribute.KeyValue{AttrNode.String(a.NodeID), AttrKind.String(a.Kind)}}
		if a.State != action.Done {
			run.Error = sp.Error
		}
		r.t.Record(s, run)
	}
}

// recordRun records a run's root span.
func (r *Recorder) recordRun(run *store.Run) {
	end := run.UpdatedTS
	if run.FinishedTS != nil {
		end = *run.FinishedTS
	}
	result := semconv.CICDPipelineResultSuccess
	switch run.State {
	case store.RunFailed, store.RunPartial:
		result = semconv.CICDPipelineResultFailure
	case store.RunCancelled:
		result = semconv.CICDPipelineResultCancellation
	}
	sp := Span{Name: "run " + run.Playbook, ID: RunSpanID(run.ID), Start: run.CreatedTS, End: end,
		Attrs: []attribute.KeyValue{semconv.CICDPipelineName(run.Playbook), semconv.CICDPipelineRunID(run.ID),
			result, AttrCluster.String(run.ClusterID), attribute.String("muster.run.state", run.State)}}
	if run.State != store.RunDone {
		sp.Error = run.State + ": " + run.StateReason
	}
	r.t.Record(Subject{RunID: run.ID}, sp)
}

func taskResult(s action.State) attribute.KeyValue {
	switch s {
	case action.Done:
		return semconv.CICDPipelineTaskRunResultSuccess
	case action.Failed:
		return semconv.CICDPipelineTaskRunResultFailure
	case action.Cancelled:
		return semconv.CICDPipelineTaskRunResultCancellation
	}
	return semconv.CICDPipelineTaskRunResultError
}

// doneSet remembers the last n things recorded, so an action or run that
// more events follow after its end is recorded once.
type doneSet struct {
	n     int
	seen  map[string]bool
	order []string
}

func newDoneSet(n int) doneSet { return doneSet{n: n, seen: map[string]bool{}} }

// add reports whether k was new.
func (d *doneSet) add(k string) bool {
	if d.seen[k] {
		return false
	}
	d.seen[k] = true
	d.order = append(d.order, k)
	if len(d.order) > d.n {
		delete(d.seen, d.order[0])
		d.order = d.order[1:]
	}
	return true
}
