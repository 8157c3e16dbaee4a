// Package exposition is the agent's /metrics: families of series kept by
// github.com/VictoriaMetrics/metrics, each written with its help and type,
// then the Go runtime's and the process's metrics, in the Prometheus text
// format. The agent does not link the Prometheus client library: with the
// protocol buffers it brings, it was about 2 MB of every node's resident
// memory (docs/performance.md, "Idle agent RSS"). The core keeps it.
//
// A Registry belongs to one agent, so that several agents in one process
// (muster dev, tests) keep apart; nothing here uses the library's global
// set.
package exposition

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"

	"github.com/VictoriaMetrics/metrics"
)

// Type is a family's type, as its TYPE line names it.
type Type string

// The types the agent's families have.
const (
	Counter   Type = "counter"
	Gauge     Type = "gauge"
	Histogram Type = "histogram"
)

// Registry holds an agent's families.
type Registry struct {
	mu       sync.Mutex
	families map[string]*family
}

type family struct {
	name, help string
	typ        Type
	set        *metrics.Set
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry {
	return &Registry{families: map[string]*family{}}
}

// Family adds the family name, of type typ, described by help, whose
// series are made by the returned Family's methods, each named after it. On
// a nil Registry the family counts, unseen. It panics when name is taken, as
// a second family of one name would make /metrics invalid.
func (r *Registry) Family(name string, typ Type, help string) *Family {
	f := &Family{name: name, set: metrics.NewSet()}
	if r == nil {
		return f
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.families[name]; ok {
		panic(fmt.Sprintf("exposition: family %s registered twice", name))
	}
	r.families[name] = &family{name: name, help: help, typ: typ, set: f.set}
	return f
}

// Family makes the series of one family, with the labels given as name,
// value pairs (Series).
type Family struct {
	name string
	set  *metrics.Set
}

// Counter returns the family's counter with these labels.
func (f *Family) Counter(labels ...string) *metrics.Counter {
	return f.set.GetOrCreateCounter(Series(f.name, labels...))
}

// Histogram returns the family's histogram with these labels and le
// buckets (the library's PrometheusHistogram).
func (f *Family) Histogram(buckets []float64, labels ...string) *metrics.PrometheusHistogram {
	return f.set.GetOrCreatePrometheusHistogramExt(Series(f.name, labels...), buckets)
}

// Gauges makes the family's gauges at each scrape: write calls gauge once
// per series, with its value and labels.
func (f *Family) Gauges(write func(gauge func(v uint64, labels ...string))) {
	f.set.RegisterMetricsWriter(func(w io.Writer) {
		write(func(v uint64, labels ...string) { metrics.WriteGaugeUint64(w, Series(f.name, labels...), v) })
	})
}

// WritePrometheus writes every family that has a series, in name order,
// then the Go runtime's (go_*) and the process's (process_*) metrics.
func (r *Registry) WritePrometheus(w io.Writer) {
	r.mu.Lock()
	fams := make([]*family, 0, len(r.families))
	for _, f := range r.families {
		fams = append(fams, f)
	}
	r.mu.Unlock()
	slices.SortFunc(fams, func(a, b *family) int { return strings.Compare(a.name, b.name) })
	var b bytes.Buffer
	for _, f := range fams {
		b.Reset()
		f.set.WritePrometheus(&b)
		if b.Len() == 0 {
			continue
		}
		fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s %s\n", f.name, helpEscaper.Replace(f.help), f.name, f.typ)
		_, _ = w.Write(b.Bytes())
	}
	metrics.WriteProcessMetrics(w)
	metrics.WriteFDMetrics(w)
}

// ServeHTTP answers a scrape.
func (r *Registry) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	r.WritePrometheus(w)
}

// Series is the name of a series of the family name with the labels given
// as name, value pairs, in that order: name{l1="v1",l2="v2"}. The values are
// escaped as the text format wants (backslash, double quote and line feed),
// so any text is safe in them.
func Series(name string, labels ...string) string {
	if len(labels)%2 != 0 {
		panic(fmt.Sprintf("exposition: series %s has an odd number of label names and values", name))
	}
	if len(labels) == 0 {
		return name
	}
	var b strings.Builder
	b.WriteString(name)
	for i := 0; i < len(labels); i += 2 {
		if i == 0 {
			b.WriteByte('{')
		} else {
			b.WriteByte(',')
		}
		b.WriteString(labels[i])
		b.WriteString(`="`)
		b.WriteString(valueEscaper.Replace(strings.ToValidUTF8(labels[i+1], "\uFFFD")))
		b.WriteByte('"')
	}
	b.WriteByte('}')
	return b.String()
}

var (
	valueEscaper = strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)
	helpEscaper  = strings.NewReplacer(`\`, `\\`, "\n", `\n`)
)
