package monitoring

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

const dir = "../../configs/monitoring"

// promtool is the path of Debian's promtool (package prometheus), which
// `make test-deps` installs.
func promtool(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("promtool")
	if err != nil {
		t.Fatal("promtool is needed (Debian's prometheus package: make test-deps installs it)")
	}
	return p
}

// The shipped rules are valid, and their unit tests pass.
func TestShippedAlertRulesPassPromtool(t *testing.T) {
	t.Parallel()
	bin := promtool(t)
	for _, args := range [][]string{
		{"check", "rules", "muster-alerts.yml"},
		{"test", "rules", "muster-alerts.test.yml"},
	} {
		cmd := exec.Command(bin, args...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(out), "SUCCESS") {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

type rulesFile struct {
	Groups []struct {
		Rules []struct {
			Alert string `yaml:"alert"`
			Expr  string `yaml:"expr"`
		} `yaml:"rules"`
	} `yaml:"groups"`
}

type rulesTests struct {
	RuleFiles []string `yaml:"rule_files"`
	Tests     []struct {
		Name  string `yaml:"name"`
		Cases []struct {
			Alert     string `yaml:"alertname"`
			ExpAlerts []any  `yaml:"exp_alerts"`
		} `yaml:"alert_rule_test"`
	} `yaml:"tests"`
}

func readYAML(t *testing.T, name string, v any) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
}

// Every alert has a unit test in which it fires and one in which it stays
// quiet; the alerts are all there.
func TestEveryAlertHasAUnitTestThatFiresIt(t *testing.T) {
	t.Parallel()
	var rules rulesFile
	var tests rulesTests
	readYAML(t, "muster-alerts.yml", &rules)
	readYAML(t, "muster-alerts.test.yml", &tests)
	fires, quiet := map[string]bool{}, map[string]bool{}
	for _, tc := range tests.Tests {
		for _, c := range tc.Cases {
			if len(c.ExpAlerts) > 0 {
				fires[c.Alert] = true
			} else {
				quiet[c.Alert] = true
			}
		}
	}
	var alerts []string
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				continue
			}
			alerts = append(alerts, r.Alert)
			if !fires[r.Alert] || !quiet[r.Alert] {
				t.Errorf("alert %s: a unit test that fires it %v, one where it stays quiet %v", r.Alert, fires[r.Alert], quiet[r.Alert])
			}
		}
	}
	for _, want := range []string{"MusterNodeDown", "MusterClusterAlert", "MusterNotificationsDead", "MusterNotificationsBackingUp",
		"MusterLeaseFlapping", "MusterApprovalsWaiting", "MusterStoreWritesSlow"} {
		if !strings.Contains(strings.Join(alerts, " "), want) {
			t.Errorf("no alert %s", want)
		}
	}
}

var metricRE = regexp.MustCompile(`\bmuster_[a-z0-9_]+\b`)

// The dashboard is a Grafana dashboard (a uid, a title, panels with
// Prometheus targets), and each of its sections queries muster's metrics.
func TestDashboardPanelsQueryMustersMetrics(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile(filepath.Join(dir, "muster-dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		UID    string `json:"uid"`
		Title  string `json:"title"`
		Panels []struct {
			Title   string `json:"title"`
			Type    string `json:"type"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatal(err)
	}
	if d.UID == "" || d.Title == "" || len(d.Panels) == 0 {
		t.Fatalf("not a dashboard: uid %q title %q, %d panels", d.UID, d.Title, len(d.Panels))
	}
	var all strings.Builder
	for _, p := range d.Panels {
		if p.Type == "row" {
			continue
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			if !metricRE.MatchString(tg.Expr) || strings.Count(tg.Expr, "(") != strings.Count(tg.Expr, ")") {
				t.Errorf("panel %q: query %q", p.Title, tg.Expr)
			}
			all.WriteString(tg.Expr + "\n")
		}
	}
	// What the issue asks the dashboard to show.
	for what, metric := range map[string]string{
		"fleet state": "muster_core_nodes", "runs in flight": "muster_core_runs",
		"approval wait times": "muster_core_approval_oldest_waiting_timestamp_seconds",
		"sync rate":           "muster_core_orchestrate_node_syncs_total", "outbox lag": "muster_notify_oldest_pending_timestamp_seconds",
	} {
		if !strings.Contains(all.String(), metric) {
			t.Errorf("the dashboard does not show %s (%s)", what, metric)
		}
	}
}
