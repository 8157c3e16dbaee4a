package orchestrate

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/musterhq/muster/core/store"
)

// metrics are the orchestrator's Prometheus series.
type metrics struct {
	// fullSyncs and duration count the full syncs; their metric names
	// still say "pass", the full sync's old name, so that dashboards keep
	// working.
	fullSyncs *prometheus.CounterVec
	duration  prometheus.Histogram
	nodeSyncs *prometheus.CounterVec
	pushes    *prometheus.CounterVec
	changes   prometheus.Counter
	expired   prometheus.Counter
	// nudgedSyncs counts syncs of nudged nodes (SyncNodes) by result.
	nudgedSyncs *prometheus.CounterVec
	// latePushes: pushes of syncs whose lease was lost before they could
	// record them (harmless: an agent never runs an id twice).
	latePushes prometheus.Counter
	// runAdvances counts the runs advanced (each a read of the run and its
	// children).
	runAdvances prometheus.Counter
}

func newMetrics(reg prometheus.Registerer, st store.Store) (*metrics, error) {
	m := &metrics{
		fullSyncs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "muster_core_orchestrate_passes_total",
			Help: "Full syncs of a cluster by result: idle (wrote nothing), wrote, or error.",
		}, []string{"result"}),
		duration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "muster_core_orchestrate_pass_duration_seconds",
			Help:    "Duration of one full sync of a cluster.",
			Buckets: prometheus.ExponentialBuckets(0.005, 2, 12),
		}),
		nodeSyncs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "muster_core_orchestrate_node_syncs_total",
			Help: "Node syncs by resulting node status.",
		}, []string{"status"}),
		pushes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "muster_core_orchestrate_pushes_total",
			Help: "Actions pushed to agents, by the agent's HTTP status (error: no answer).",
		}, []string{"status"}),
		changes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "muster_core_orchestrate_changes_total",
			Help: "Records, nodes and clusters written by syncs.",
		}),
		expired: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "muster_core_orchestrate_approvals_expired_total",
			Help: "Actions cancelled because their approval expired.",
		}),
		nudgedSyncs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "muster_core_orchestrate_nudged_syncs_total",
			Help: "Syncs of single nodes (an agent's changed note, an approval, a new action) by result: idle, wrote, or error.",
		}, []string{"result"}),
		runAdvances: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "muster_core_orchestrate_run_advances_total",
			Help: "Runs advanced: each reads the run and its children; a commit advances only the runs whose children it changed.",
		}),
		latePushes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "muster_core_orchestrate_late_pushes_total",
			Help: "Actions pushed by a sync whose cluster lease was lost before the sync could record them.",
		}),
	}
	if reg == nil {
		return m, nil
	}
	rows := prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "muster_core_store_rows_written_total",
		Help: "Rows inserted, updated or deleted in the core store since it opened.",
	}, func() float64 { return float64(st.RowsWritten()) })
	for _, c := range []prometheus.Collector{m.fullSyncs, m.duration, m.nodeSyncs, m.pushes, m.changes, m.expired,
		m.nudgedSyncs, m.latePushes, m.runAdvances, rows} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// observeFullSync counts one full sync.
func (m *metrics) observeFullSync(d time.Duration, rep Report, err error) {
	m.duration.Observe(d.Seconds())
	switch {
	case err != nil:
		m.fullSyncs.WithLabelValues("error").Inc()
	case rep.Changes > 0:
		m.fullSyncs.WithLabelValues("wrote").Inc()
	default:
		m.fullSyncs.WithLabelValues("idle").Inc()
	}
	m.changes.Add(float64(rep.Changes))
	m.nodeSyncs.WithLabelValues(store.NodeUp).Add(float64(rep.Nodes - rep.Down))
	m.nodeSyncs.WithLabelValues(store.NodeDown).Add(float64(rep.Down))
}

// observeNodeSync counts one SyncNodes call.
func (m *metrics) observeNodeSync(rep Report, err error) {
	switch {
	case err != nil:
		m.nudgedSyncs.WithLabelValues("error").Inc()
	case rep.Changes > 0:
		m.nudgedSyncs.WithLabelValues("wrote").Inc()
	default:
		m.nudgedSyncs.WithLabelValues("idle").Inc()
	}
	m.changes.Add(float64(rep.Changes))
	m.nodeSyncs.WithLabelValues(store.NodeUp).Add(float64(rep.Nodes - rep.Down))
	m.nodeSyncs.WithLabelValues(store.NodeDown).Add(float64(rep.Down))
}
