package e2e

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/musterhq/muster/shared/client"
	"github.com/musterhq/muster/shared/limit"
	"github.com/musterhq/muster/shared/testwait"
	"github.com/musterhq/muster/shared/wire"
)

// canaryMetric is an endpoint Prometheus scrapes: the error ratio of
// every node, which the test sets.
type canaryMetric struct {
	mu     sync.Mutex
	ratios map[string]string
	addr   string
}

func serveCanaryMetric(t *testing.T, nodes int, ratio string) *canaryMetric {
	t.Helper()
	m := &canaryMetric{ratios: map[string]string{}}
	for i := 1; i <= nodes; i++ {
		m.ratios[fmt.Sprintf("node-%d", i)] = ratio
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		m.mu.Lock()
		defer m.mu.Unlock()
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		fmt.Fprintln(w, "# TYPE canary_error_ratio gauge")
		for n, v := range m.ratios {
			fmt.Fprintf(w, "canary_error_ratio{node=%q} %s\n", n, v)
		}
	}), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	m.addr = l.Addr().String()
	return m
}

func (m *canaryMetric) set(node, ratio string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.ratios[node] = ratio
}

// startPrometheus runs Debian's prometheus (make test-deps installs it),
// scraping target every 500 ms, and returns its URL once a query of
// metric has a sample.
func startPrometheus(t *testing.T, target, metric string) string {
	t.Helper()
	bin, err := exec.LookPath("prometheus")
	if err != nil {
		t.Fatal("prometheus is needed (Debian's prometheus package: make test-deps installs it)")
	}
	dir := t.TempDir()
	cfg := fmt.Sprintf(`global: {scrape_interval: 500ms, evaluation_interval: 1s}
scrape_configs:
  - job_name: canary
    static_configs: [{targets: [%q]}]
`, target)
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	var base string
	for attempt := 0; ; attempt++ {
		port := freePort(t)
		logf, err := os.Create(filepath.Join(dir, fmt.Sprintf("prometheus-%d.log", attempt)))
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(bin, "--config.file="+filepath.Join(dir, "prometheus.yml"),
			"--storage.tsdb.path="+filepath.Join(dir, fmt.Sprintf("data-%d", attempt)),
			fmt.Sprintf("--web.listen-address=127.0.0.1:%d", port))
		cmd.Stdout, cmd.Stderr = logf, logf
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan struct{})
		go func() { _ = cmd.Wait(); logf.Close(); close(exited) }()
		t.Cleanup(func() { _ = cmd.Process.Kill(); <-exited })
		base = fmt.Sprintf("http://127.0.0.1:%d", port)
		ready := false
		testwait.Within(t, 30*time.Second, "prometheus ready", func() bool {
			select {
			case <-exited:
				return true // its port was taken: try another
			default:
			}
			resp, err := http.Get(base + "/-/ready")
			if err != nil {
				return false
			}
			resp.Body.Close()
			ready = resp.StatusCode == http.StatusOK
			return ready
		})
		if ready {
			break
		}
		if attempt == 4 {
			t.Fatal("prometheus would not start")
		}
	}
	testwait.Within(t, 30*time.Second, "prometheus scraped "+metric, func() bool {
		resp, err := http.Get(base + "/api/v1/query?" + url.Values{"query": {metric}}.Encode())
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		var a struct {
			Data struct {
				Result []json.RawMessage `json:"result"`
			} `json:"data"`
		}
		return json.NewDecoder(resp.Body).Decode(&a) == nil && len(a.Data.Result) > 0
	})
	return base
}

// gatedCanaryRun is the procedure fleet's upgrade with a Prometheus gate
// per node, canary 1, promoted by itself after autoPromote seconds of the
// gate holding, aborted when it fails.
func gatedCanaryRun(prom string, autoPromote int) *wire.CreateRunRequest {
	c, e := limit.MustParse("1"), limit.MustParse("0")
	return &wire.CreateRunRequest{ClusterID: "e2e", Stages: []wire.StageSpec{{
		Name: "upgrade", Target: wire.Target{All: true}, MaxConcurrency: &c, MaxErrors: &e,
		Canary: 1, AutoPromoteAfterS: autoPromote, AbortOn: []string{"healthy"},
		Steps: []wire.StepSpec{
			{Name: "upgrade", Kind: "example.com/upgrade"},
			{Name: "healthy", Gate: &wire.Gate{Prometheus: &wire.PrometheusGate{URL: prom,
				Query: `canary_error_ratio{node="{{ .node.id }}"}`, Expect: "< 0.01"}},
				Retry: &wire.Retry{Attempts: 3, DelayS: 1}},
		},
		Rollback: []wire.StepSpec{{Name: "downgrade", Kind: "example.com/downgrade"}},
	}}}
}

// TestCanaryPromotesItselfOnAPrometheusGate is scenario 1, healthy: the
// gate holds for auto_promote_after_s, the canary promotes itself (by the
// rule, with the gate's value) and the run rolls on to DONE; no person
// acts after the approval.
func TestCanaryPromotesItselfOnAPrometheusGate(t *testing.T) {
	t.Parallel()
	metric := serveCanaryMetric(t, 3, "0.001")
	prom := startPrometheus(t, metric.addr, "canary_error_ratio")
	f := newProcFleetWith(t, 3, fleetOptions{coreExtra: "core_steps:\n  allow_loopback: true\n"})
	r := f.start(t, gatedCanaryRun(prom, 2))
	end := f.waitRun(t, r.ID, 90*time.Second, "DONE", "FAILED", "PARTIAL", "CANCELLED", "ABORTED")
	if end.State != "DONE" {
		t.Fatalf("run %s (%s), want DONE", end.State, end.StateReason)
	}
	st := end.Stages[0]
	if !st.Promoted || !strings.HasPrefix(st.PromotedBy, "promoted by the rule auto_promote_after_s") ||
		!strings.Contains(st.PromotedBy, "healthy on node-1") || !strings.Contains(st.PromotedBy, "0.001") {
		t.Fatalf("promoted %v by %q, want by the rule with the gate's value", st.Promoted, st.PromotedBy)
	}
	gates := 0
	for _, cs := range st.CoreSteps {
		if cs.Step == "healthy" && cs.State == "DONE" && strings.Contains(cs.Value, "0.001") && cs.At != nil {
			gates++
		}
	}
	if gates != 3 {
		t.Fatalf("core steps %+v, want healthy DONE with its value on the 3 nodes", st.CoreSteps)
	}
	for _, e := range f.executions(t) {
		if e.step == "downgrade" {
			t.Fatalf("downgrade ran on %s", e.node)
		}
	}
	if n := len(f.executions(t)); n != 3 {
		t.Fatalf("%d executions, want the 3 upgrades", n)
	}
}

// TestABreachedGateAbortsTheCanaryWithNoPerson is scenario 1, breached:
// while the canary waits for its promote the metric breaks; the abort_on
// gate aborts the run, the canary node rolls back, and the run ends
// ABORTED, with no person involved.
func TestABreachedGateAbortsTheCanaryWithNoPerson(t *testing.T) {
	t.Parallel()
	metric := serveCanaryMetric(t, 3, "0.001")
	prom := startPrometheus(t, metric.addr, "canary_error_ratio")
	f := newProcFleetWith(t, 3, fleetOptions{coreExtra: "core_steps:\n  allow_loopback: true\n"})
	r := f.start(t, gatedCanaryRun(prom, 600))
	paused := f.waitRun(t, r.ID, 60*time.Second, "PAUSED", "DONE", "FAILED", "PARTIAL", "CANCELLED", "ABORTED")
	if paused.State != "PAUSED" || !strings.HasPrefix(paused.StateReason, "canary") {
		t.Fatalf("run %s (%s), want PAUSED for its promote", paused.State, paused.StateReason)
	}
	metric.set("node-1", "0.5")
	end := f.waitRun(t, r.ID, 60*time.Second, "ABORTED", "DONE", "FAILED", "PARTIAL", "CANCELLED")
	if end.State != "ABORTED" || !strings.HasPrefix(end.StateReason, "aborted by rule: gate healthy failed on node node-1") ||
		!strings.Contains(end.StateReason, "0.5 is not < 0.01") {
		t.Fatalf("run %s (%s), want ABORTED by the rule with the value seen", end.State, end.StateReason)
	}
	var ran []string
	for _, e := range f.executions(t) {
		ran = append(ran, e.step+"@"+e.node)
	}
	if strings.Join(ran, " ") != "upgrade@node-1 downgrade@node-1" {
		t.Fatalf("executions %v, want node-1's upgrade then its downgrade", ran)
	}
	evs, err := f.admin.Events(ctxT(t), 0, 500, client.EventFilter{RunID: r.ID, Types: []string{"run.aborted"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(evs.Events) != 1 || evs.Events[0].Actor != "rule" {
		t.Fatalf("run.aborted events %+v, want one, by the rule", evs.Events)
	}
}
