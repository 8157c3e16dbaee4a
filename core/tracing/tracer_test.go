package tracing

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/musterhq/muster/shared/action"
)

func setup(t *testing.T, ratio float64) (*Tracer, *tracetest.InMemoryExporter) {
	t.Helper()
	exp := tracetest.NewInMemoryExporter()
	tr, err := newTracer(ratio, resource.Empty(), sdktrace.WithSyncer(exp))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tr.Shutdown(t.Context()) })
	return tr, exp
}

// Spans recorded at different times for one run join one trace: the trace
// id and the parents' ids come from the run's and the action's ids, and
// each span keeps the start and end it was given (a parent recorded last,
// when its run ends, with its real times).
func TestSpansRecordedApartJoinTheRunsTrace(t *testing.T) {
	t.Parallel()
	tr, exp := setup(t, 1)
	run, act := action.NewID(), action.NewID()
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	s := Subject{RunID: run, ActionID: act}
	tr.Record(s, Span{Name: "push", Parent: ActionSpanID(act), Start: t0.Add(time.Minute), End: t0.Add(time.Minute + time.Second)})
	tr.Record(s, Span{Name: "step", ID: ActionSpanID(act), Parent: RunSpanID(run), Start: t0, End: t0.Add(2 * time.Hour)})
	tr.Record(Subject{RunID: run}, Span{Name: "run", ID: RunSpanID(run), Start: t0, End: t0.Add(3 * time.Hour)})
	got := exp.GetSpans()
	if len(got) != 3 {
		t.Fatalf("%d spans, want 3", len(got))
	}
	for _, sp := range got {
		if sp.SpanContext.TraceID() != RunTraceID(run) {
			t.Errorf("%s: trace %s, want the run's %s", sp.Name, sp.SpanContext.TraceID(), RunTraceID(run))
		}
	}
	push, step, root := got[0], got[1], got[2]
	if push.Parent.SpanID() != step.SpanContext.SpanID() || step.Parent.SpanID() != root.SpanContext.SpanID() || root.Parent.IsValid() {
		t.Errorf("parents: push→%s step %s→%s root %s→%v", push.Parent.SpanID(), step.SpanContext.SpanID(),
			step.Parent.SpanID(), root.SpanContext.SpanID(), root.Parent.SpanID())
	}
	if !step.StartTime.Equal(t0) || !step.EndTime.Equal(t0.Add(2*time.Hour)) || !root.EndTime.Equal(t0.Add(3*time.Hour)) {
		t.Errorf("times: step %v–%v, root %v–%v", step.StartTime, step.EndTime, root.StartTime, root.EndTime)
	}
	if push.SpanContext.SpanID() == step.SpanContext.SpanID() || !push.SpanContext.SpanID().IsValid() {
		t.Errorf("push span id %s: want a new random one", push.SpanContext.SpanID())
	}
	// An action of no run is a trace of its own.
	if (Subject{ActionID: act}).TraceID() == RunTraceID(run) || (Subject{ActionID: act}).TraceID() != ActionTraceID(act) {
		t.Error("an action of no run does not have a trace of its own")
	}
}

// The traceparent pushed with an action names its trace and its run on the
// agent, and is sampled as every span of that trace is.
func TestTraceparentNamesTheAgentRunAndTheSampling(t *testing.T) {
	t.Parallel()
	tr, exp := setup(t, 1)
	run, act := action.NewID(), action.NewID()
	tp := tr.Traceparent(Subject{RunID: run, ActionID: act})
	want := "00-" + RunTraceID(run).String() + "-" + AgentRunSpanID(act).String() + "-01"
	if tp != want || !action.ValidTraceparent(tp) {
		t.Fatalf("traceparent %q, want %q", tp, want)
	}
	var nilTracer *Tracer
	if nilTracer.Traceparent(Subject{ActionID: act}) != "" {
		t.Error("tracing off gives a traceparent")
	}
	nilTracer.Record(Subject{ActionID: act}, Span{Name: "x"}) // no panic

	none, noneExp := setup(t, 0)
	if tp := none.Traceparent(Subject{ActionID: act}); !strings.HasSuffix(tp, "-00") {
		t.Errorf("ratio 0: traceparent %q, want flags 00", tp)
	}
	none.Record(Subject{ActionID: act}, Span{Name: "x", Start: time.Now(), End: time.Now()})
	if n := len(noneExp.GetSpans()); n != 0 {
		t.Errorf("ratio 0 exported %d spans", n)
	}
	_ = exp
}

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	good := filepath.Join(dir, "headers")
	if err := os.WriteFile(good, []byte("# key\nAuthorization: Bearer abc\n\nx-tenant: fleet\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	open := filepath.Join(dir, "open")
	if err := os.WriteFile(open, []byte("a: b\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(dir, "bad")
	if err := os.WriteFile(bad, []byte("no colon here\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		cfg   Config
		field string
	}{
		{"off", DefaultConfig(), ""},
		{"on", Config{Endpoint: "http://127.0.0.1:4318", SampleRatio: 0.5, HeadersFile: good}, ""},
		{"ratio above 1", Config{SampleRatio: 1.5}, "tracing.sample_ratio"},
		{"not a URL", Config{Endpoint: "collector:4318", SampleRatio: 1}, "tracing.endpoint"},
		{"credentials in the URL", Config{Endpoint: "https://u:p@collector", SampleRatio: 1}, "tracing.endpoint"},
		{"headers over plain http", Config{Endpoint: "http://collector:4318", SampleRatio: 1, HeadersFile: good}, "tracing.endpoint"},
		{"headers over plain http on loopback", Config{Endpoint: "http://localhost:4318", SampleRatio: 1, HeadersFile: good}, ""},
		{"headers file readable by others", Config{HeadersFile: open, SampleRatio: 1}, "tracing.headers_file"},
		{"headers file not Name: value", Config{HeadersFile: bad, SampleRatio: 1}, "tracing.headers_file"},
	} {
		errs := tc.cfg.Validate()
		if tc.field == "" {
			if len(errs) > 0 {
				t.Errorf("%s: %v", tc.name, errs)
			}
			continue
		}
		if len(errs) != 1 || !strings.Contains(errs.Error(), tc.field) {
			t.Errorf("%s: %v, want one error on %s", tc.name, errs, tc.field)
		}
	}
	h, err := LoadHeaders(good)
	if err != nil || h["Authorization"] != "Bearer abc" || h["X-Tenant"] != "fleet" || len(h) != 2 {
		t.Errorf("headers %v %v", h, err)
	}
}

// FuzzParseHeaders checks that no headers file makes parsing panic, and
// that what it takes are HTTP header names and values.
func FuzzParseHeaders(f *testing.F) {
	for _, s := range []string{"Authorization: Bearer abc\n", "# c\n\nx-a: 1\nx-b:2", "no colon", ": v", "a b: c",
		"x: \x00", "x: a\r\nY: b", strings.Repeat("k: v\n", 100), "x-é: v", "x:\tv\t"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		h, err := ParseHeaders(text)
		if err != nil {
			return
		}
		if len(h) > maxHeaders {
			t.Fatalf("%d headers", len(h))
		}
		for k, v := range h {
			if !validHeaderName(k) || k == "" || strings.ContainsAny(v, "\r\n\x00") {
				t.Fatalf("took %q: %q", k, v)
			}
		}
	})
}
