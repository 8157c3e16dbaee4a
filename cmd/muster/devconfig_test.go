package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/musterhq/muster/core"
	"github.com/musterhq/muster/core/discovery"
)

func devConfigSetup(t *testing.T) (core.Config, *discovery.ClusterSpec) {
	t.Helper()
	spec := &discovery.ClusterSpec{ID: "dev", Budget: discovery.BudgetSpec{MaxUnavailable: "1"},
		Nodes: []discovery.NodeSpec{{ID: "node-1", Addr: "127.0.0.1:7421"}}}
	base := core.DefaultConfig()
	base.DataDir = t.TempDir()
	base.Clusters = []discovery.ClusterSpec{*spec}
	base.Kinds = devKindRules()
	base.NotifyAllowLoopback = true
	return base, spec
}

// The example dev.yaml is valid as written, keeps the nodes of cluster dev
// and a second start leaves an edited file alone.
func TestDevConfigExampleLoadsAndIsKept(t *testing.T) {
	t.Parallel()
	base, spec := devConfigSetup(t)
	dir := t.TempDir()
	path, err := writeDevConfig(dir)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := loadDevConfig(path, base, spec)
	if err != nil {
		t.Fatalf("the example dev.yaml is refused: %v", err)
	}
	// dev with its nodes, and prod-db (configs/policy.yaml's) with none.
	if len(cfg.Clusters) != 2 || cfg.Clusters[0].ID != "dev" || len(cfg.Clusters[0].Nodes) != 1 || cfg.Clusters[0].Budget.MaxUnavailable != "1" ||
		cfg.Clusters[1].ID != "prod-db" || len(cfg.Clusters[1].Nodes) != 0 {
		t.Fatalf("clusters from the example: %+v", cfg.Clusters)
	}
	if len(cfg.Kinds) != len(base.Kinds) {
		t.Fatalf("kinds: got %d rules, want the dev ones (%d)", len(cfg.Kinds), len(base.Kinds))
	}
	if err := os.WriteFile(path, []byte("notify: []\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := writeDevConfig(dir); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(path); string(b) != "notify: []\n" {
		t.Fatalf("a second start rewrote dev.yaml: %q", b)
	}
}

// Sections other than clusters, approval, kinds and notify, and what the
// core's validation refuses, are refused with the file and the key named.
func TestDevConfigRefusesOtherKeysAndBadValues(t *testing.T) {
	t.Parallel()
	base, spec := devConfigSetup(t)
	for _, tc := range []struct{ text, want string }{
		{"data_dir: /tmp/x\n", "data_dir"},
		{"clusters:\n  - id: dev\n    windows:\n      - {cron: \"0 2 * * *\", duration: 10s}\n", "clusters[0].windows[0].duration"},
		{"notify:\n  - name: x\n    url: ftp://127.0.0.1/\n    events: [run.finished]\n", "notify[0]"},
		{"clusters: [\n", "dev.yaml"},
	} {
		path := filepath.Join(t.TempDir(), devConfigFile)
		if err := os.WriteFile(path, []byte(tc.text), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := loadDevConfig(path, base, spec)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "dev.yaml") {
			t.Errorf("%q: got %v, want an error naming dev.yaml and %s", tc.text, err, tc.want)
		}
	}
}

// loadDevConfig never panics and, when it accepts a file, returns a
// configuration the core accepts with cluster dev in it.
func FuzzLoadDevConfig(f *testing.F) {
	f.Add(devConfigExample)
	f.Add("clusters:\n  - id: other\n")
	f.Add("kinds: []\napproval: {}\n")
	f.Add("notify: 3\n")
	f.Fuzz(func(t *testing.T, text string) {
		base, spec := devConfigSetup(t)
		path := filepath.Join(t.TempDir(), devConfigFile)
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		cfg, err := loadDevConfig(path, base, spec)
		if err != nil {
			return
		}
		if err := cfg.Validate(); err != nil {
			t.Fatalf("accepted a configuration the core refuses: %v", err)
		}
		found := false
		for _, c := range cfg.Clusters {
			found = found || (c.ID == "dev" && len(c.Nodes) > 0)
		}
		if !found {
			t.Fatalf("cluster dev lost its nodes: %+v", cfg.Clusters)
		}
	})
}

// The notification example of dev.yaml works when uncommented as it says:
// it names the secret muster dev wrote (private to its owner), and the core
// accepts the destination.
func TestDevConfigNotifyExampleWorksUncommented(t *testing.T) {
	t.Parallel()
	base, spec := devConfigSetup(t)
	dir := t.TempDir()
	path, err := writeDevConfig(dir)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	secret := filepath.Join(dir, devWebhookSecret)
	if !strings.Contains(text, "muster webhook listen --addr 127.0.0.1:9000 --secret-file "+secret) {
		t.Fatalf("dev.yaml does not say how to start the receiver:\n%s", text)
	}
	var lines []string
	after := false // the lines after notify: [] are the example
	for _, l := range strings.Split(text, "\n") {
		switch {
		case l == "notify: []":
			lines, after = append(lines, "notify:"), true
		case after && strings.HasPrefix(l, "#  "):
			lines = append(lines, strings.TrimPrefix(l, "#"))
		default:
			lines = append(lines, l)
		}
	}
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := loadDevConfig(path, base, spec)
	if err != nil {
		t.Fatalf("the uncommented notification example is refused: %v", err)
	}
	if len(cfg.Notify) != 1 || cfg.Notify[0].SecretFile != secret || cfg.Notify[0].URL != "http://127.0.0.1:9000/hook" {
		t.Fatalf("notify: %+v", cfg.Notify)
	}
	if fi, err := os.Stat(secret); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("the secret: %v %v", fi, err)
	}
}

// A kind rule's lock is written as a name (per cluster) or as a mapping
// with a scope; a bad name or scope is refused with its key named.
func TestAKindsLockIsReadAsANameOrAMapping(t *testing.T) {
	t.Parallel()
	base, spec := devConfigSetup(t)
	path := filepath.Join(t.TempDir(), devConfigFile)
	text := "kinds:\n  - {kind: \"example.com/db.*\", lock: db}\n  - {kind: example.com/lb.drain, lock: {name: lb, scope: global}}\n" +
		"  - {kind: \"example.com/**\", disruptive: true}\n"
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := loadDevConfig(path, base, spec)
	if err != nil {
		t.Fatal(err)
	}
	pol := cfg.BudgetPolicy()
	if l := pol.KindLock("example.com/db.migrate"); l == nil || l.Name != "db" || l.Scope != "cluster" {
		t.Errorf("lock of db.migrate: %+v, want db per cluster", l)
	}
	if l := pol.KindLock("example.com/lb.drain"); l == nil || l.Name != "lb" || l.Scope != "global" {
		t.Errorf("lock of lb.drain: %+v, want lb global", l)
	}
	// The first rule matching a kind still decides whether it is
	// disruptive; the first matching rule that names a lock, its lock.
	if l := pol.KindLock("example.com/os.reboot"); l != nil || !pol.Disruptive("example.com/os.reboot") ||
		pol.Disruptive("example.com/db.migrate") {
		t.Errorf("os.reboot takes %+v, want none; disruptive: os.reboot %v, db.migrate %v, want true, false",
			l, pol.Disruptive("example.com/os.reboot"), pol.Disruptive("example.com/db.migrate"))
	}
	for _, tc := range []struct{ text, want string }{
		{"kinds:\n  - {kind: a.b/c, lock: \"no spaces\"}\n", "kinds[0].lock.name"},
		{"kinds:\n  - {kind: a.b/c, lock: {name: db, scope: region}}\n", "kinds[0].lock.scope"},
		{"kinds:\n  - {kind: a.b/c, lock: {name: db, scop: global}}\n", "kinds[0].lock.scop"},
	} {
		if err := os.WriteFile(path, []byte(tc.text), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := loadDevConfig(path, base, spec); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: got %v, want an error naming %s", tc.text, err, tc.want)
		}
	}
}
