package agent

import (
	"math"
	"net/http"
	"slices"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/musterhq/muster/shared/action"
	"github.com/musterhq/muster/shared/testwait"
)

// TestMetricsParseAsPrometheusText: a real agent's /metrics, after an action
// ran, is read by Prometheus' own text parser, and holds every muster_agent_*
// family with its type, help and labels, and the Go runtime's and the
// process's metrics.
func TestMetricsParseAsPrometheusText(t *testing.T) {
	t.Parallel()
	ag, _, _, _ := startAgent(t, 10*time.Second)
	pingDone(t, ag)
	resp, err := (&http.Client{Timeout: testwait.Timeout}).Get("http://" + ag.Addr().String() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/metrics: %d", resp.StatusCode)
	}
	parser := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("/metrics is not valid text format: %v", err)
	}
	for _, want := range []struct {
		name, help string
		typ        dto.MetricType
		labels     []string
	}{
		{"muster_agent_queue_actions", "Actions in the agent's queue, by state.", dto.MetricType_GAUGE, []string{"state"}},
		{"muster_agent_actions_finished_total", "Actions that reached a final state, by kind and state.",
			dto.MetricType_COUNTER, []string{"kind", "state"}},
		{"muster_agent_step_duration_seconds", "Time a handler took for one step.", dto.MetricType_HISTOGRAM, []string{"kind"}},
		{"muster_agent_api_requests_total",
			"API requests by method (GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS or other), route template (or unmatched) and status code.",
			dto.MetricType_COUNTER, []string{"code", "method", "route"}},
	} {
		f := fams[want.name]
		if f == nil {
			t.Errorf("/metrics has no %s", want.name)
			continue
		}
		if f.GetType() != want.typ || f.GetHelp() != want.help || len(f.GetMetric()) == 0 {
			t.Errorf("%s: type %v, help %q, %d series", want.name, f.GetType(), f.GetHelp(), len(f.GetMetric()))
			continue
		}
		for _, m := range f.GetMetric() {
			var names []string
			for _, l := range m.GetLabel() {
				names = append(names, l.GetName())
			}
			if !slices.Equal(names, want.labels) {
				t.Errorf("%s has a series labelled %v, want %v", want.name, names, want.labels)
			}
		}
	}
	if got := sampleOf(fams["muster_agent_queue_actions"], "state", string(action.Done)); got == nil || got.GetGauge().GetValue() != 1 {
		t.Errorf("muster_agent_queue_actions{state=DONE}: %v", got)
	}
	if got := sampleOf(fams["muster_agent_actions_finished_total"], "state", string(action.Done)); got == nil ||
		got.GetCounter().GetValue() != 1 {
		t.Errorf("muster_agent_actions_finished_total{state=DONE}: %v", got)
	}
	h := sampleOf(fams["muster_agent_step_duration_seconds"], "kind", "muster.io/debug.ping").GetHistogram()
	// 100 µs to 26 s, each four times the last, and +Inf.
	if b := h.GetBucket(); h.GetSampleCount() != 1 || len(b) != 11 || b[0].GetUpperBound() != 0.0001 ||
		b[9].GetUpperBound() != 26.2144 || !math.IsInf(b[10].GetUpperBound(), 1) || b[10].GetCumulativeCount() != 1 {
		t.Errorf("muster_agent_step_duration_seconds{kind=ping}: %v", h)
	}
	for _, name := range []string{"go_goroutines", "go_memstats_alloc_bytes", "process_resident_memory_bytes",
		"process_cpu_seconds_total", "process_open_fds"} {
		if fams[name] == nil {
			t.Errorf("/metrics has no %s", name)
		}
	}
}

// sampleOf is f's series whose label name has value (nil when none has).
func sampleOf(f *dto.MetricFamily, name, value string) *dto.Metric {
	for _, m := range f.GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == name && l.GetValue() == value {
				return m
			}
		}
	}
	return nil
}
