package tracing

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"fmt"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/musterhq/muster/shared/action"
	"github.com/musterhq/muster/shared/version"
)

// Tracer records spans. A nil *Tracer records nothing: every method may be
// called on it, so callers need no "is tracing on" test.
type Tracer struct {
	tp      *sdktrace.TracerProvider
	tr      trace.Tracer
	sampler sdktrace.Sampler
}

// New builds a Tracer that exports to cfg.Endpoint in batches; nil when
// tracing is off. It starts the SDK's batch exporter; Shutdown ends it.
func New(cfg Config) (*Tracer, error) {
	if !cfg.Enabled() {
		return nil, nil
	}
	if errs := cfg.Validate(); len(errs) > 0 {
		return nil, errs
	}
	opts := []otlptracehttp.Option{otlptracehttp.WithEndpointURL(strings.TrimRight(cfg.Endpoint, "/") + "/v1/traces")}
	if cfg.HeadersFile != "" {
		h, err := LoadHeaders(cfg.HeadersFile)
		if err != nil {
			return nil, err
		}
		opts = append(opts, otlptracehttp.WithHeaders(h))
	}
	exp, err := otlptracehttp.New(context.Background(), opts...)
	if err != nil {
		return nil, fmt.Errorf("tracing: %w", err)
	}
	name := cfg.ServiceName
	if name == "" {
		name = DefaultConfig().ServiceName
	}
	res := resource.NewWithAttributes(semconv.SchemaURL, semconv.ServiceName(name), semconv.ServiceVersion(version.Version))
	return newTracer(cfg.SampleRatio, res, sdktrace.WithBatcher(exp, sdktrace.WithBatchTimeout(time.Second)))
}

// newTracer builds a Tracer on a span processor (tests give an in-memory one).
func newTracer(ratio float64, res *resource.Resource, opts ...sdktrace.TracerProviderOption) (*Tracer, error) {
	// The sampler looks at the trace id alone: every span of a trace,
	// whenever and wherever it is recorded, gets the same answer.
	sampler := sdktrace.TraceIDRatioBased(ratio)
	tp := sdktrace.NewTracerProvider(append(opts, sdktrace.WithResource(res),
		sdktrace.WithSampler(sampler), sdktrace.WithIDGenerator(ids{}))...)
	return &Tracer{tp: tp, tr: tp.Tracer("github.com/musterhq/muster/core"), sampler: sampler}, nil
}

// Shutdown sends what is buffered and stops the exporter.
func (t *Tracer) Shutdown(ctx context.Context) error {
	if t == nil {
		return nil
	}
	return t.tp.Shutdown(ctx)
}

// ForceFlush sends what is buffered.
func (t *Tracer) ForceFlush(ctx context.Context) error {
	if t == nil {
		return nil
	}
	return t.tp.ForceFlush(ctx)
}

// Ids of traces and of spans that stand for something long-lived, derived
// from what they stand for (docs/architecture.md, "Traces").

// RunTraceID is the trace of a run.
func RunTraceID(runID string) trace.TraceID { return trace.TraceID(derive16("run", runID)) }

// ActionTraceID is the trace of an action of no run.
func ActionTraceID(actionID string) trace.TraceID {
	return trace.TraceID(derive16("action", actionID))
}

// RunSpanID is the root span of a run.
func RunSpanID(runID string) trace.SpanID { return trace.SpanID(derive8("run", runID)) }

// ActionSpanID is an action's span: a step attempt in a run, the root of
// an action of its own.
func ActionSpanID(actionID string) trace.SpanID { return trace.SpanID(derive8("action", actionID)) }

// AgentRunSpanID is the span of an action's run on its agent: the parent
// the kind's command gets in $TRACEPARENT.
func AgentRunSpanID(actionID string) trace.SpanID {
	return trace.SpanID(derive8("agent-run", actionID))
}

// ApprovalSpanID is the wait for the approval of an action or a run.
func ApprovalSpanID(id string) trace.SpanID { return trace.SpanID(derive8("approval", id)) }

func derive16(what, id string) [16]byte {
	s := sha256.Sum256([]byte("muster/" + what + "/" + id))
	var out [16]byte
	copy(out[:], s[:])
	if out == ([16]byte{}) {
		out[15] = 1
	}
	return out
}

func derive8(what, id string) [8]byte {
	s := sha256.Sum256([]byte("muster/span/" + what + "/" + id))
	var out [8]byte
	copy(out[:], s[:])
	if out == ([8]byte{}) {
		out[7] = 1
	}
	return out
}

// Subject is what a span belongs to: an action (of a run or not) or a run.
type Subject struct {
	RunID    string
	ActionID string
}

// TraceID is the trace of s: its run's, else its action's.
func (s Subject) TraceID() trace.TraceID {
	if s.RunID != "" {
		return RunTraceID(s.RunID)
	}
	return ActionTraceID(s.ActionID)
}

// sampled reports whether the trace of s is kept.
func (t *Tracer) sampled(id trace.TraceID) bool {
	r := t.sampler.ShouldSample(sdktrace.SamplingParameters{TraceID: id})
	return r.Decision == sdktrace.RecordAndSample
}

// Traceparent is the W3C trace context pushed with action s.ActionID: its
// trace, the span of its run on the agent as the parent, and whether the
// trace is kept. "" when tracing is off.
func (t *Tracer) Traceparent(s Subject) string {
	if t == nil || s.ActionID == "" {
		return ""
	}
	id := s.TraceID()
	flags := "00"
	if t.sampled(id) {
		flags = "01"
	}
	return "00-" + id.String() + "-" + AgentRunSpanID(s.ActionID).String() + "-" + flags
}

// Span is one span to record, already over: its start and end are when the
// thing it stands for began and ended.
type Span struct {
	Name string
	// ID is the span's own id when it is derived (a parent other spans
	// name); zero: a new random one.
	ID trace.SpanID
	// Parent is the parent span's id in the subject's trace; zero: a root.
	Parent     trace.SpanID
	Kind       trace.SpanKind
	Start, End time.Time
	Attrs      []attribute.KeyValue
	// Error, when not empty, sets the span's status to Error with it.
	Error string
}

// Record records sp in the trace of s.
func (t *Tracer) Record(s Subject, sp Span) {
	if t == nil {
		return
	}
	ctx := context.Background()
	tid := s.TraceID()
	if sp.Parent.IsValid() {
		flags := trace.TraceFlags(0)
		if t.sampled(tid) {
			flags = trace.FlagsSampled
		}
		ctx = trace.ContextWithRemoteSpanContext(ctx, trace.NewSpanContext(trace.SpanContextConfig{
			TraceID: tid, SpanID: sp.Parent, TraceFlags: flags, Remote: true}))
	}
	ctx = context.WithValue(ctx, idsKey{}, wantIDs{trace: tid, span: sp.ID})
	end := sp.End
	if end.Before(sp.Start) {
		end = sp.Start
	}
	_, span := t.tr.Start(ctx, sp.Name, trace.WithTimestamp(sp.Start), trace.WithSpanKind(sp.Kind),
		trace.WithAttributes(sp.Attrs...))
	if sp.Error != "" {
		span.SetStatus(codes.Error, sp.Error)
	}
	span.End(trace.WithTimestamp(end))
}

// Push records the span of one push of a to its agent, from start to end;
// status is the agent's answer (0: none).
func (t *Tracer) Push(a *action.Action, start, end time.Time, status int, err error) {
	if t == nil {
		return
	}
	sp := Span{Name: "push", Parent: ActionSpanID(a.ID), Kind: trace.SpanKindClient, Start: start, End: end,
		Attrs: []attribute.KeyValue{AttrNode.String(a.NodeID), AttrCluster.String(a.ClusterID), AttrKind.String(a.Kind),
			semconv.HTTPResponseStatusCode(status)}}
	if err != nil {
		sp.Error = err.Error()
	}
	t.Record(Subject{RunID: a.RunID, ActionID: a.ID}, sp)
}

// Pull records the span of the pull, from start to end, that brought a's
// change (its state as the agent holds it) from node of cluster.
func (t *Tracer) Pull(a *action.Action, cluster, node string, start, end time.Time) {
	if t == nil {
		return
	}
	t.Record(Subject{RunID: a.RunID, ActionID: a.ID}, Span{Name: "pull", Parent: ActionSpanID(a.ID),
		Kind: trace.SpanKindClient, Start: start, End: end,
		Attrs: []attribute.KeyValue{AttrNode.String(node), AttrCluster.String(cluster), AttrState.String(string(a.State))}})
}

// ids makes the ids a Record asked for, random ones otherwise.
type ids struct{}

type idsKey struct{}

type wantIDs struct {
	trace trace.TraceID
	span  trace.SpanID
}

func (ids) NewIDs(ctx context.Context) (trace.TraceID, trace.SpanID) {
	w, _ := ctx.Value(idsKey{}).(wantIDs)
	tid := w.trace
	if !tid.IsValid() {
		_, _ = rand.Read(tid[:])
	}
	return tid, spanID(w.span)
}

func (ids) NewSpanID(ctx context.Context, _ trace.TraceID) trace.SpanID {
	w, _ := ctx.Value(idsKey{}).(wantIDs)
	return spanID(w.span)
}

func spanID(want trace.SpanID) trace.SpanID {
	if want.IsValid() {
		return want
	}
	var id trace.SpanID
	for !id.IsValid() {
		_, _ = rand.Read(id[:])
	}
	return id
}
