package e2e

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/musterhq/muster/shared/action"
	"github.com/musterhq/muster/shared/testwait"
)

// servedNames are the metric names of a /metrics page (histograms' _bucket,
// _sum and _count included, as served).
func servedNames(t *testing.T, url string) map[string]bool {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("%s: %d %v", url, resp.StatusCode, err)
	}
	out := map[string]bool{}
	for _, line := range strings.Split(string(b), "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, _, _ := strings.Cut(line, " ")
		name, _, _ = strings.Cut(name, "{")
		out[name] = true
	}
	return out
}

var monitoringMetricRE = regexp.MustCompile(`\b(?:muster|go|process)_[a-z0-9_]+\b`)

// TestMonitoringNamesOnlyServedMetrics is issue 38's check of the shipped
// monitoring: every metric the alert rules and the dashboard of
// configs/monitoring name is served by a running core or agent. The core
// runs on PostgreSQL (lease metrics), with a destination that fails (a
// pending delivery), a node DOWN, an action waiting for approval and one
// done on its agent, so that the series that exist only in those states
// are there.
func TestMonitoringNamesOnlyServedMetrics(t *testing.T) {
	t.Parallel()
	failing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusInternalServerError)
	}))
	t.Cleanup(failing.Close)
	dir := t.TempDir()
	secret := filepath.Join(dir, "hook.secret")
	if err := os.WriteFile(secret, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	f := newFleetWith(t, fleetOptions{nodes: 2, replicas: 1, coreExtra: fmt.Sprintf(
		"notify_allow_loopback: true\nnotify:\n  - {name: hook, url: %q, format: json, secret_file: %q}\n", failing.URL, secret)})

	done := f.create("node-1", "example.com/append", "{}")
	f.approve(done.ID)
	f.waitCore(done.ID, 60*time.Second, action.Done)
	f.create("node-1", "example.com/append", "{}") // waits for an approver
	f.agents["node-2"].kill()

	var names []string
	for _, file := range []string{"muster-alerts.yml", "muster-dashboard.json"} {
		b, err := os.ReadFile(filepath.Join("..", "configs", "monitoring", file))
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range monitoringMetricRE.FindAllString(string(b), -1) {
			if !slices.Contains(names, n) {
				names = append(names, n)
			}
		}
	}
	if len(names) < 10 {
		t.Fatalf("only %d metric names found in configs/monitoring: %v", len(names), names)
	}
	core, agent := "http://"+f.core.Addr()+"/metrics", "http://"+f.agents["node-1"].Addr()+"/metrics"
	var missing []string
	testwait.Within(missingTB{t, &missing}, 60*time.Second, "every metric of the rules and the dashboard served", func() bool {
		served := servedNames(t, core)
		for n := range servedNames(t, agent) {
			served[n] = true
		}
		missing = missing[:0]
		for _, n := range names {
			if !served[n] {
				missing = append(missing, n)
			}
		}
		return len(missing) == 0
	})
}

// missingTB says, when the wait fails, which names were still missing.
type missingTB struct {
	*testing.T
	missing *[]string
}

func (m missingTB) Fatalf(format string, args ...any) {
	m.T.Helper()
	m.T.Fatalf(format+"; named in configs/monitoring but served by neither the core nor the agent: %v", append(args, *m.missing)...)
}
