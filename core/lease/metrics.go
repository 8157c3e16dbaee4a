package lease

import "github.com/prometheus/client_golang/prometheus"

type metrics struct {
	changes     *prometheus.CounterVec
	roundErrors prometheus.Counter
}

func newMetrics(reg prometheus.Registerer, m *Manager) (*metrics, error) {
	mt := &metrics{
		changes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "muster_core_lease_changes_total",
			Help: "Cluster leases this replica acquired, gave up (released) or lost because it could not renew them (expired).",
		}, []string{"change"}),
		roundErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "muster_core_lease_round_errors_total",
			Help: "Lease coordination rounds that failed (the database did not answer).",
		}),
	}
	for _, c := range []string{"acquired", "released", "expired"} {
		mt.changes.WithLabelValues(c)
	}
	if reg == nil {
		return mt, nil
	}
	held := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "muster_core_leases_held",
		Help: "Cluster leases this replica holds.",
	}, func() float64 { return float64(len(m.Held())) })
	for _, c := range []prometheus.Collector{mt.changes, mt.roundErrors, held} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return mt, nil
}
