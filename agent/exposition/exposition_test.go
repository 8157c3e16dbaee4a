package exposition

import (
	"bytes"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// parse reads text as Prometheus' own text parser does.
func parse(t *testing.T, text []byte) map[string]*dto.MetricFamily {
	t.Helper()
	p := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := p.TextToMetricFamilies(bytes.NewReader(text))
	if err != nil {
		t.Fatalf("not valid text format: %v\n%s", err, text)
	}
	return fams
}

func write(r *Registry) []byte {
	var b bytes.Buffer
	r.WritePrometheus(&b)
	return b.Bytes()
}

// TestWritesEachFamilyWithItsHelpAndType: counters, a gauge written at
// scrape and a histogram with le buckets come out under their own HELP and
// TYPE, then the Go runtime's and the process's metrics, and Prometheus'
// parser reads the whole.
func TestWritesEachFamilyWithItsHelpAndType(t *testing.T) {
	t.Parallel()
	r := NewRegistry()
	r.Family("t_requests_total", Counter, "Requests.").Counter("code", "200").Add(3)
	r.Family("t_depth", Gauge, "Depth, read at scrape.").Gauges(func(gauge func(v uint64, labels ...string)) {
		gauge(7, "state", "NEW")
	})
	h := r.Family("t_step_seconds", Histogram, "Steps.").
		Histogram([]float64{0.1, 1}, "kind", "a")
	h.Update(0.05)
	h.Update(0.5)
	h.Update(5)

	fams := parse(t, write(r))
	for _, want := range []struct {
		name, help string
		typ        dto.MetricType
	}{
		{"t_requests_total", "Requests.", dto.MetricType_COUNTER},
		{"t_depth", "Depth, read at scrape.", dto.MetricType_GAUGE},
		{"t_step_seconds", "Steps.", dto.MetricType_HISTOGRAM},
	} {
		f := fams[want.name]
		if f == nil || f.GetHelp() != want.help || f.GetType() != want.typ || len(f.GetMetric()) != 1 {
			t.Errorf("%s: %v", want.name, f)
		}
	}
	if v := fams["t_requests_total"].GetMetric()[0].GetCounter().GetValue(); v != 3 {
		t.Errorf("t_requests_total = %v, want 3", v)
	}
	if v := fams["t_depth"].GetMetric()[0].GetGauge().GetValue(); v != 7 {
		t.Errorf("t_depth = %v, want 7", v)
	}
	hist := fams["t_step_seconds"].GetMetric()[0].GetHistogram()
	b := hist.GetBucket()
	if hist.GetSampleCount() != 3 || hist.GetSampleSum() != 5.55 || len(b) != 3 ||
		b[0].GetUpperBound() != 0.1 || b[0].GetCumulativeCount() != 1 ||
		b[1].GetUpperBound() != 1 || b[1].GetCumulativeCount() != 2 ||
		!math.IsInf(b[2].GetUpperBound(), 1) || b[2].GetCumulativeCount() != 3 {
		t.Errorf("t_step_seconds: %v", hist)
	}
	for _, name := range []string{"go_goroutines", "go_memstats_heap_inuse_bytes", "go_gc_duration_seconds",
		"process_resident_memory_bytes", "process_cpu_seconds_total", "process_start_time_seconds", "process_open_fds"} {
		if fams[name] == nil {
			t.Errorf("no %s", name)
		}
	}
}

// TestLabelValuesAreEscaped: label values with a backslash, a double quote,
// a line feed and bytes that are not UTF-8 keep the output valid, and the
// parser reads the text back (the bytes as U+FFFD).
func TestLabelValuesAreEscaped(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, value, want string }{
		{"plain", "muster.io/debug.ping", "muster.io/debug.ping"},
		{"quote", `say "hi"`, `say "hi"`},
		{"backslash", `C:\dir\`, `C:\dir\`},
		{"line feed", "a\nb", "a\nb"},
		{"closing brace", `x"} 1` + "\nfake 2", `x"} 1` + "\nfake 2"},
		{"not UTF-8", "a\xffb", "a\uFFFDb"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := NewRegistry()
			r.Family("t_total", Counter, "T.").Counter("kind", tc.value, "state", "DONE").Inc()
			text := write(r)
			fams := parse(t, text)
			if fams["fake"] != nil {
				t.Fatalf("a label value made a series:\n%s", text)
			}
			m := fams["t_total"].GetMetric()
			if len(m) != 1 || len(m[0].GetLabel()) != 2 || m[0].GetLabel()[0].GetValue() != tc.want ||
				m[0].GetLabel()[1].GetValue() != "DONE" {
				t.Fatalf("read back %v, want kind=%q", m, tc.want)
			}
		})
	}
}

// TestFamiliesWithoutSeriesAreLeftOut: a family nothing counted yet has no
// HELP or TYPE line, as the Prometheus client library does.
func TestFamiliesWithoutSeriesAreLeftOut(t *testing.T) {
	t.Parallel()
	r := NewRegistry()
	r.Family("t_unused_total", Counter, "Unused.")
	if text := write(r); bytes.Contains(text, []byte("t_unused_total")) {
		t.Fatalf("an empty family is written:\n%s", text)
	}
}

// TestRegistriesKeepApart: two agents in one process have a registry each;
// what one counts is not in the other's output, and both may have a family
// of the same name.
func TestRegistriesKeepApart(t *testing.T) {
	t.Parallel()
	a, b := NewRegistry(), NewRegistry()
	a.Family("t_total", Counter, "T.").Counter("node", "a").Inc()
	b.Family("t_total", Counter, "T.").Counter("node", "b").Add(2)
	ta, tb := string(write(a)), string(write(b))
	if !strings.Contains(ta, `t_total{node="a"} 1`) || strings.Contains(ta, `node="b"`) {
		t.Errorf("first registry:\n%s", ta)
	}
	if !strings.Contains(tb, `t_total{node="b"} 2`) || strings.Contains(tb, `node="a"`) {
		t.Errorf("second registry:\n%s", tb)
	}
}

// TestAFamilyNamedTwicePanics: two families of one name would write two
// HELP lines, which the text format refuses.
func TestAFamilyNamedTwicePanics(t *testing.T) {
	t.Parallel()
	r := NewRegistry()
	r.Family("t_total", Counter, "T.")
	defer func() {
		if recover() == nil {
			t.Fatal("no panic")
		}
	}()
	r.Family("t_total", Gauge, "Again.")
}

// TestNilRegistryCountsUnseen: a part given no registry (a test's API
// server) still gets a set to count in.
func TestNilRegistryCountsUnseen(t *testing.T) {
	t.Parallel()
	var r *Registry
	c := r.Family("t_total", Counter, "T.").Counter("code", "200")
	c.Inc()
	if c.Get() != 1 {
		t.Fatalf("count %d", c.Get())
	}
}

// TestServeHTTPAnswersTextFormat: a scrape gets the text format's content
// type and the families.
func TestServeHTTPAnswersTextFormat(t *testing.T) {
	t.Parallel()
	r := NewRegistry()
	r.Family("t_total", Counter, "T.").Counter().Inc()
	rec := httptest.NewRecorder()
	r.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if ct := rec.Header().Get("Content-Type"); ct != "text/plain; version=0.0.4; charset=utf-8" {
		t.Errorf("content type %q", ct)
	}
	if fams := parse(t, rec.Body.Bytes()); fams["t_total"].GetMetric()[0].GetCounter().GetValue() != 1 {
		t.Errorf("t_total: %v", fams["t_total"])
	}
}

// TestSeriesNamesLabelsInOrder: Series writes the pairs in the order given.
func TestSeriesNamesLabelsInOrder(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		labels []string
		want   string
	}{
		{"no labels", nil, "m"},
		{"one", []string{"state", "NEW"}, `m{state="NEW"}`},
		{"two", []string{"kind", "k", "state", "DONE"}, `m{kind="k",state="DONE"}`},
		{"escaped", []string{"kind", "a\\\"\n"}, `m{kind="a\\\"\n"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := Series("m", tc.labels...); got != tc.want {
				t.Fatalf("got %s, want %s", got, tc.want)
			}
		})
	}
}

// FuzzLabelValueReadsBack: whatever a label value holds, the output parses
// and the value reads back (its bytes that are not UTF-8 as U+FFFD).
func FuzzLabelValueReadsBack(f *testing.F) {
	for _, s := range []string{"", "muster.io/debug.ping", `"`, `\`, "\n", `\n`, `"} 1`, "a\xffb", "é", "{", ","} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, value string) {
		r := NewRegistry()
		r.Family("t_total", Counter, "T.").Counter("kind", value).Inc()
		m := parse(t, write(r))["t_total"].GetMetric()
		if len(m) != 1 || m[0].GetLabel()[0].GetValue() != strings.ToValidUTF8(value, "\uFFFD") {
			t.Fatalf("value %q read back as %v", value, m)
		}
	})
}
