// Package monitor exports the fleet's state as Prometheus metrics, read from
// the store at each scrape, and times the store's writes
// (docs/operations.md, "Monitoring"). The alert rules and the dashboard of
// configs/monitoring/ are written against these names.
package monitor

import (
	"context"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/musterhq/muster/core/store"
)

// scrapeTimeout bounds the store reads of one scrape.
const scrapeTimeout = 2 * time.Second

// maxRunsRead bounds the unfinished runs one scrape reads.
const maxRunsRead = 1000

var (
	nodesDesc = prometheus.NewDesc("muster_core_nodes",
		"Nodes by cluster and status (UP, DOWN, UNKNOWN).", []string{"cluster", "status"}, nil)
	drainedDesc = prometheus.NewDesc("muster_core_nodes_drained",
		"Drained nodes by cluster.", []string{"cluster"}, nil)
	downSinceDesc = prometheus.NewDesc("muster_core_node_down_since_timestamp_seconds",
		"For each DOWN node: its last contact, or when it was last changed if it was never reached (Unix seconds).",
		[]string{"cluster", "node"}, nil)
	clusterAlertDesc = prometheus.NewDesc("muster_core_cluster_alert",
		"1 while the cluster is in ALERT (its disruption budget is overrun), else 0.", []string{"cluster"}, nil)
	runsDesc = prometheus.NewDesc("muster_core_runs",
		"Unfinished runs by cluster and state (PENDING_APPROVE, RUNNING, PAUSED).", []string{"cluster", "state"}, nil)
	approvalsDesc = prometheus.NewDesc("muster_core_approvals_waiting",
		"Actions and runs waiting for an approval, by cluster.", []string{"cluster"}, nil)
	oldestApprovalDesc = prometheus.NewDesc("muster_core_approval_oldest_waiting_timestamp_seconds",
		"When the oldest action or run still waiting for an approval was created, by cluster (Unix seconds; absent when none waits).",
		[]string{"cluster"}, nil)
	scrapeErrorsDesc = prometheus.NewDesc("muster_core_monitor_scrape_errors",
		"1 when the store could not be read for this scrape's fleet metrics, else 0.", nil, nil)
)

// fleet is the collector of the fleet's state.
type fleet struct {
	st  store.Store
	log *slog.Logger
}

// Register registers the fleet collector of st with reg.
func Register(reg prometheus.Registerer, st store.Store, log *slog.Logger) error {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return reg.Register(&fleet{st: st, log: log.With("component", "monitor")})
}

func (f *fleet) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{nodesDesc, drainedDesc, downSinceDesc, clusterAlertDesc, runsDesc,
		approvalsDesc, oldestApprovalDesc, scrapeErrorsDesc} {
		ch <- d
	}
}

// snapshot is what one scrape reads.
type snapshot struct {
	clusters  []store.Cluster
	nodes     []store.Node
	runs      []store.Run
	approvals []store.Record
}

func (f *fleet) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), scrapeTimeout)
	defer cancel()
	var s snapshot
	now := time.Now()
	err := f.st.Read(ctx, func(r store.Reader) error {
		var err error
		if s.clusters, err = r.Clusters(ctx); err != nil {
			return err
		}
		if s.nodes, err = r.Nodes(ctx, ""); err != nil {
			return err
		}
		if s.runs, err = r.ListRuns(ctx, store.RunQuery{States: []string{store.RunPendingApprove, store.RunRunning, store.RunPaused},
			Limit: maxRunsRead, Brief: true}); err != nil {
			return err
		}
		s.approvals, err = r.ApprovalsBefore(ctx, now.Add(time.Minute))
		return err
	})
	if err != nil {
		f.log.Warn("reading the fleet for /metrics", "err", err)
		ch <- prometheus.MustNewConstMetric(scrapeErrorsDesc, prometheus.GaugeValue, 1)
		return
	}
	ch <- prometheus.MustNewConstMetric(scrapeErrorsDesc, prometheus.GaugeValue, 0)
	statuses := []string{store.NodeUp, store.NodeDown, store.NodeUnknown}
	type key struct{ cluster, status string }
	counts := map[key]int{}
	drained := map[string]int{}
	for _, n := range s.nodes {
		counts[key{n.ClusterID, n.Status}]++
		if n.Drained {
			drained[n.ClusterID]++
		}
		if n.Status == store.NodeDown {
			since := n.UpdatedTS
			if n.LastContact != nil {
				since = *n.LastContact
			}
			ch <- prometheus.MustNewConstMetric(downSinceDesc, prometheus.GaugeValue, unix(since), n.ClusterID, n.ID)
		}
	}
	waiting := map[string]int{}
	oldest := map[string]time.Time{}
	wait := func(cluster string, since time.Time) {
		waiting[cluster]++
		if o, ok := oldest[cluster]; !ok || since.Before(o) {
			oldest[cluster] = since
		}
	}
	for _, a := range s.approvals {
		wait(a.ClusterID, a.CreatedTS)
	}
	runStates := []string{store.RunPendingApprove, store.RunRunning, store.RunPaused}
	runs := map[key]int{}
	for _, r := range s.runs {
		runs[key{r.ClusterID, r.State}]++
		if r.State == store.RunPendingApprove {
			wait(r.ClusterID, r.CreatedTS)
		}
	}
	for _, c := range s.clusters {
		for _, st := range statuses {
			ch <- prometheus.MustNewConstMetric(nodesDesc, prometheus.GaugeValue, float64(counts[key{c.ID, st}]), c.ID, st)
		}
		ch <- prometheus.MustNewConstMetric(drainedDesc, prometheus.GaugeValue, float64(drained[c.ID]), c.ID)
		alert := 0.0
		if c.Status == store.ClusterAlert {
			alert = 1
		}
		ch <- prometheus.MustNewConstMetric(clusterAlertDesc, prometheus.GaugeValue, alert, c.ID)
		for _, st := range runStates {
			ch <- prometheus.MustNewConstMetric(runsDesc, prometheus.GaugeValue, float64(runs[key{c.ID, st}]), c.ID, st)
		}
		ch <- prometheus.MustNewConstMetric(approvalsDesc, prometheus.GaugeValue, float64(waiting[c.ID]), c.ID)
		if o, ok := oldest[c.ID]; ok {
			ch <- prometheus.MustNewConstMetric(oldestApprovalDesc, prometheus.GaugeValue, unix(o), c.ID)
		}
	}
}

func unix(t time.Time) float64 { return float64(t.UnixNano()) / 1e9 }

// Timed is st with the duration of each write transaction (Update, retries
// of a conflict included) observed in muster_core_store_write_duration_seconds.
type Timed struct {
	store.Store
	writes *prometheus.HistogramVec
}

var _ store.Store = (*Timed)(nil)

// NewTimed wraps st; its histogram goes to reg.
func NewTimed(st store.Store, reg prometheus.Registerer) (*Timed, error) {
	h := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "muster_core_store_write_duration_seconds",
		Help: "Duration of the store's write transactions, by result (ok, error).",
		// 500 µs to about 16 s.
		Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16),
	}, []string{"result"})
	h.WithLabelValues("ok")
	h.WithLabelValues("error")
	if err := reg.Register(h); err != nil {
		return nil, err
	}
	return &Timed{Store: st, writes: h}, nil
}

// Update times st's Update.
func (t *Timed) Update(ctx context.Context, fn func(tx store.Tx) error) error {
	start := time.Now()
	err := t.Store.Update(ctx, fn)
	res := "ok"
	if err != nil {
		res = "error"
	}
	t.writes.WithLabelValues(res).Observe(time.Since(start).Seconds())
	return err
}
