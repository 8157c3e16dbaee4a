package notify

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/musterhq/muster/core/store"
)

type metrics struct {
	results *prometheus.CounterVec
}

// newMetrics registers the delivery counters and a collector that reads
// the backlog and the age of the oldest pending delivery from the store.
func newMetrics(w *Worker, reg prometheus.Registerer) *metrics {
	m := &metrics{results: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "muster_notify_deliveries_total",
		Help: "Delivery tries by destination and result (ok, retry, failed).",
	}, []string{"destination", "result"})}
	if reg != nil {
		reg.MustRegister(m.results, &backlog{w: w})
	}
	return m
}

func (m *metrics) result(dest string, r Result) {
	res := "ok"
	switch {
	case r.OK():
	case r.Status == 0:
		res = "no_answer"
	default:
		res = "failed"
	}
	m.results.WithLabelValues(dest, res).Inc()
}

var (
	backlogDesc = prometheus.NewDesc("muster_notify_backlog", "Pending deliveries by destination.", []string{"destination"}, nil)
	// oldestDesc is the age of the oldest pending delivery, kept because
	// docs/notifications.md names it; oldestTSDesc is the same as a
	// timestamp, as Prometheus's conventions want (alerts use it).
	oldestDesc = prometheus.NewDesc("muster_notify_oldest_pending_seconds",
		"Age of the oldest pending delivery by destination (0: none); prefer muster_notify_oldest_pending_timestamp_seconds.", []string{"destination"}, nil)
	oldestTSDesc = prometheus.NewDesc("muster_notify_oldest_pending_timestamp_seconds",
		"When the oldest pending delivery's event was enqueued, by destination (Unix seconds; absent when none is pending).", []string{"destination"}, nil)
	deadDesc = prometheus.NewDesc("muster_notify_dead_deliveries",
		"Deliveries given up (dead) and still kept, by destination.", []string{"destination"}, nil)
)

type backlog struct{ w *Worker }

func (b *backlog) Describe(ch chan<- *prometheus.Desc) {
	ch <- backlogDesc
	ch <- oldestDesc
	ch <- oldestTSDesc
	ch <- deadDesc
}

func (b *backlog) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	dests := b.w.Destinations()
	if len(dests) == 0 {
		return
	}
	var stats []store.DeliveryStat
	if err := b.w.st.Read(ctx, func(r store.Reader) error {
		var err error
		stats, err = r.DeliveryStats(ctx, Names(dests)...)
		return err
	}); err != nil {
		return
	}
	by := map[string]store.DeliveryStat{}
	for _, s := range stats {
		by[s.Destination] = s
	}
	for _, d := range dests {
		s := by[d.Name]
		age := 0.0
		if s.OldestPending != nil {
			age = time.Since(*s.OldestPending).Seconds()
		}
		ch <- prometheus.MustNewConstMetric(backlogDesc, prometheus.GaugeValue, float64(s.Backlog), d.Name)
		ch <- prometheus.MustNewConstMetric(oldestDesc, prometheus.GaugeValue, age, d.Name)
		if s.OldestPending != nil {
			ch <- prometheus.MustNewConstMetric(oldestTSDesc, prometheus.GaugeValue, float64(s.OldestPending.UnixNano())/1e9, d.Name)
		}
		ch <- prometheus.MustNewConstMetric(deadDesc, prometheus.GaugeValue, float64(s.Dead), d.Name)
	}
}
