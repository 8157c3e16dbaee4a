package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/musterhq/muster/core"
	"github.com/musterhq/muster/core/auth"
	"github.com/musterhq/muster/core/discovery"
	"github.com/musterhq/muster/shared/apiserver/apiservertest"
)

// muster diff and apply -f against a real API: the diff shows what apply
// would do and changes nothing; apply makes the freezes, marked with the
// file; a second apply changes nothing and says so; with one freeze
// changed, it changes exactly that one (the old one lifted, the new one
// made); a freeze made by hand is never touched; a bad file is one line.
func TestDiffAndApplyFreezes(t *testing.T) {
	t.Parallel()
	a := newCLIAPI(t, map[string]string{"ann": "approver"}, "prod", "stage")
	run := func(args ...string) (string, error) {
		t.Helper()
		return a.run(t, "ann", args...)
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "policy.yaml")
	at := func(d time.Duration) string {
		return time.Now().Add(d).UTC().Truncate(time.Second).Format(time.RFC3339)
	}
	xmas, night, demoFrom, demoTo := at(24*time.Hour), at(30*time.Hour), at(-time.Hour), at(2*time.Hour)
	write := func(reason string) {
		doc := fmt.Sprintf("freezes:\n  - {cluster: prod, from: %q, to: %q, reason: %s}\n  - {cluster: stage, from: %q, to: %q, reason: demo}\n",
			xmas, night, reason, demoFrom, demoTo)
		if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("year-end")
	if _, err := run("freeze", "create", "prod", "--for", "1h", "--reason", "by hand"); err != nil {
		t.Fatal(err)
	}
	out, err := run("diff", "-f", path)
	if err != nil || strings.Count(out, "+ freeze ") != 2 || !strings.Contains(out, "+ freeze prod from "+xmas+" until "+night+": year-end") {
		t.Fatalf("diff:\n%s%v", out, err)
	}
	if out, _ := run("diff", "-f", path); strings.Count(out, "+ freeze ") != 2 {
		t.Fatalf("diff changed something:\n%s", out)
	}
	out, err = run("apply", "-f", path)
	if err != nil || !strings.Contains(out, "Applied 2 change(s) from policy.yaml") {
		t.Fatalf("apply:\n%s%v", out, err)
	}
	listed, _ := run("freeze", "list", "--cluster", "prod")
	if !strings.Contains(listed, "file:policy.yaml") || !strings.Contains(listed, "by hand") {
		t.Errorf("freeze list after apply:\n%s", listed)
	}
	for _, cmd := range []string{"apply", "diff"} {
		if out, err := run(cmd, "-f", path); err != nil || !strings.Contains(out, "No changes: the store holds what policy.yaml declares.") {
			t.Errorf("%s again:\n%s%v", cmd, out, err)
		}
	}
	write("year-end freeze")
	// Lifting the old freeze may let held work go: a reason is required.
	if _, err := run("apply", "-f", path); err == nil || !strings.Contains(err.Error(), "--reason") || strings.Contains(err.Error(), "\n") {
		t.Fatalf("apply lifting a freeze without --reason: %v, want a one-line error asking for one", err)
	}
	out, err = run("apply", "-f", path, "--reason", "the freeze is renamed")
	if err != nil || strings.Count(out, "\n") != 3 || !strings.Contains(out, "+ freeze prod from "+xmas+" until "+night+": year-end freeze") ||
		!strings.Contains(out, ": year-end (lifted: no longer in the file)") {
		t.Fatalf("apply with one freeze changed:\n%s%v", out, err)
	}
	if out, _ := run("apply", "-f", path); !strings.Contains(out, "No changes") {
		t.Errorf("apply after the change, again:\n%s", out)
	}
	if listed, _ := run("freeze", "list", "--cluster", "prod"); !strings.Contains(listed, "by hand") {
		t.Errorf("apply touched a freeze made by hand:\n%s", listed)
	}
	for name, doc := range map[string]string{
		"unknown kind": "colors: []\n", "window without a name": "windows:\n  - {cluster: prod, cron: \"0 2 * * *\", duration: 4h}\n",
		"bad window": "windows:\n  - {name: w, cluster: prod, cron: \"tea time\", duration: 4h}\n", "bad time": "freezes:\n  - {cluster: prod, from: soon, to: later, reason: x}\n",
		"no reason": fmt.Sprintf("freezes:\n  - {cluster: prod, from: %q, to: %q}\n", xmas, night),
		"two docs":  "freezes: []\n---\nfreezes: []\n",
	} {
		bad := filepath.Join(dir, "bad.yaml")
		if err := os.WriteFile(bad, []byte(doc), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := run("apply", "-f", bad); err == nil || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: %v, want one line and a non-zero exit", name, err)
		}
	}
}

func FuzzDecodePolicy(f *testing.F) {
	for _, s := range []string{"freezes:\n  - {cluster: prod, from: \"2026-12-24T00:00:00Z\", to: \"2026-12-27T00:00:00Z\", reason: x}\n",
		"freezes: []\n", "windows: []\n", "freezes:\n  - &a {cluster: prod}\n  - *a\n", "freezes: [1]\n", "---\n---\n", "", "{",
		"windows:\n  - {name: nightly, cluster: prod, cron: \"0 2 * * *\", duration: 4h, timezone: Europe/Berlin}\n",
		"budgets:\n  - {cluster: prod, max_unavailable: 10%}\n", "budgets:\n  - {max_unavailable: 1}\n",
		"approval_rules:\n  - {name: db, cluster: prod, levels: [{teams: [db], min: 2}]}\n", "approval_rules:\n  - {kind: x}\n",
		"teams:\n  - {name: db, members: [dana], groups: [db-oncall]}\ngrants:\n  - {team: db, role: approver, clusters: prod}\n",
		"grants:\n  - {team: db, person: dana, role: viewer}\n", "teams:\n  - {members: [x]}\n",
		"freezes:\n  - {cluster: prod, from: \"2026-12-27T00:00:00Z\", to: \"2026-12-24T00:00:00Z\", reason: x}\n",
		"playbooks:\n  - {name: nap, document: {name: nap, stages: [{name: s, kind: k, target: {nodes: [a]}}]}}\n",
		"playbooks:\n  - name: nap\n    document: |\n      name: nap\n      stages: []\n", "playbooks:\n  - {name: nap, file: nap.yaml}\n",
		"playbooks:\n  - {name: nap}\n", "playbooks:\n  - {name: nap, document: 7}\n", "playbooks:\n  - {document: {name: x}}\n",
		"schedules:\n  - {name: s, cluster: prod, playbook: nap, version: 2, cron: \"0 2 * * *\", params: {a: b}, concurrency: allow, catch_up: 0s}\n",
		"schedules:\n  - {name: s, cluster: prod, playbook: nap, version: latest, cron: \"0 2 * * *\", timezone: Europe/Berlin}\n",
		"schedules:\n  - {name: s, cluster: prod, playbook: nap, version: -1}\n", "schedules:\n  - {cluster: prod}\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		d, err := decodePolicy(doc, nil)
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("an error of more than one line: %q", err)
			}
			return
		}
		for _, w := range d.Freezes {
			if w.Cluster == "" || !w.To.After(w.From) || strings.TrimSpace(w.Reason) == "" {
				t.Fatalf("accepted %+v", w)
			}
		}
		for _, w := range d.Windows {
			if w.Name == "" {
				t.Fatalf("accepted a window without a name: %+v", w)
			}
		}
		for _, b := range d.Budgets {
			if b.Cluster == "" {
				t.Fatalf("accepted a budget without a cluster: %+v", b)
			}
		}
		for _, r := range d.ApprovalRules {
			if r.Name == "" {
				t.Fatalf("accepted a rule without a name: %+v", r)
			}
		}
		for _, tm := range d.Teams {
			if tm.Name == "" {
				t.Fatalf("accepted a team without a name: %+v", tm)
			}
		}
		for _, g := range d.Grants {
			if (g.Team == "") == (g.Person == "") || g.Role == "" {
				t.Fatalf("accepted a grant %+v", g)
			}
		}
		for _, p := range d.Playbooks {
			if p.Name == "" {
				t.Fatalf("accepted a playbook without a name: %+v", p)
			}
		}
		for _, sc := range d.Schedules {
			if sc.Name == "" || sc.Cluster == "" || sc.Playbook == "" || sc.Version < 0 {
				t.Fatalf("accepted a schedule %+v", sc)
			}
		}
	})
}

// The shipped example policy file is one muster apply takes on a core
// configured as muster dev configures it (its configuration, then the
// example dev.yaml): applied by an admin, it makes every kind it declares,
// and a second apply changes nothing.
func TestShippedPolicyFileAppliesOnDev(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	spec := devClusterSpec()
	for i := 1; i <= 3; i++ { // as muster dev --agents 3, the agents not started
		spec.Nodes = append(spec.Nodes, discovery.NodeSpec{ID: fmt.Sprintf("node-%d", i), Addr: fmt.Sprintf("127.0.0.1:%d", i)})
	}
	base := devCoreConfig(devOptions{coreAddr: "127.0.0.1:0", interval: time.Hour}, dir, spec)
	devFile, err := writeDevConfig(dir)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := loadDevConfig(devFile, base, &spec)
	if err != nil {
		t.Fatal(err)
	}
	c, err := core.New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	apiservertest.Run(t, c)
	secret, err := os.ReadFile(filepath.Join(cfg.DataDir, auth.AdminTokenFile))
	if err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) (string, error) {
		root := newRootCmd()
		root.SetArgs(append(args, "--addr", "http://"+c.Addr().String(), "--token", strings.TrimSpace(string(secret))))
		var out lockedBuffer
		root.SetOut(&out)
		root.SetErr(&lockedBuffer{})
		err := root.ExecuteContext(ctx)
		return out.String(), err
	}
	path := filepath.Join("..", "..", "configs", "policy.yaml")
	out, err := run("apply", "-f", path, "--reason", "first policy")
	// (Its freeze is made only until it ends: not asked for here.)
	for _, want := range []string{"+ window prod-db-nightly", "+ approval rule prod-db-two-teams", "+ budget prod-db",
		"+ team db", "+ grant team db approver", "+ playbook rolling-restart version 1", "+ schedule prod-db-weekly-restart"} {
		if err != nil || !strings.Contains(out, want) {
			t.Fatalf("apply of configs/policy.yaml lacks %q:\n%s%v", want, out, err)
		}
	}
	if out, err := run("apply", "-f", path); err != nil || out != "No changes: the store holds what policy.yaml declares.\n" {
		t.Fatalf("second apply of configs/policy.yaml:\n%s%v", out, err)
	}
}

// Playbooks and schedules through muster diff and apply -f: a playbook
// read from a file beside the policy file and one inline, a schedule of
// each; the diff shows them, apply makes them, a second apply changes
// nothing; a schedule changed is exactly one line; a playbook removed from
// the file is kept and the diff says so; a missing playbook file is one
// line and changes nothing.
func TestDiffAndApplyPlaybooksAndSchedules(t *testing.T) {
	t.Parallel()
	a := newCLIAPI(t, map[string]string{"adam": "admin"}, "prod")
	run := func(args ...string) (string, error) {
		t.Helper()
		return a.run(t, "adam", args...)
	}
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "playbooks"), 0o755); err != nil {
		t.Fatal(err)
	}
	nap := "name: nap\ndescription: a short nap\nstages:\n  - name: sleep\n    kind: muster.io/debug.sleep\n    args: {seconds: 1}\n    target: {labels: {role: db}}\n"
	if err := os.WriteFile(filepath.Join(dir, "playbooks", "nap.yaml"), []byte(nap), 0o600); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "policy.yaml")
	write := func(doc string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	const inline = `  - name: doze
    document:
      name: doze
      description: a longer nap
      stages:
        - name: sleep
          kind: muster.io/debug.sleep
          args: {seconds: 2}
          target: {labels: {role: db}}
`
	doc := func(cron string, withDoze bool) string {
		s := "playbooks:\n  - {name: nap, file: playbooks/nap.yaml}\n"
		if withDoze {
			s += inline
		}
		return s + "schedules:\n  - {name: nap-nightly, cluster: prod, playbook: nap, version: latest, cron: \"" + cron +
			"\", timezone: Europe/Berlin}\n"
	}
	write(doc("0 2 * * *", true))
	out, err := run("diff", "-f", path)
	if err != nil || !strings.Contains(out, "+ playbook nap version 1: a short nap\n") || !strings.Contains(out, "+ playbook doze version 1: a longer nap\n") ||
		!strings.Contains(out, `+ schedule nap-nightly: playbook nap latest on prod at "0 2 * * *" (Europe/Berlin) (waits for approval)`) {
		t.Fatalf("diff:\n%s%v", out, err)
	}
	out, err = run("apply", "-f", path)
	if err != nil || !strings.Contains(out, "Applied 3 change(s) from policy.yaml") {
		t.Fatalf("apply:\n%s%v", out, err)
	}
	if shown, _ := run("playbook", "show", "nap"); !strings.Contains(shown, "# nap version 1, applied by adam from file:policy.yaml at ") {
		t.Errorf("playbook show after apply:\n%s", shown)
	}
	if listed, _ := run("schedule", "show", "nap-nightly"); !strings.Contains(listed, "PENDING_APPROVE") || !strings.Contains(listed, "file:policy.yaml") {
		t.Errorf("schedule show after apply:\n%s", listed)
	}
	for _, cmd := range []string{"apply", "diff"} {
		if out, err := run(cmd, "-f", path); err != nil || out != "No changes: the store holds what policy.yaml declares.\n" {
			t.Errorf("%s again:\n%s%v", cmd, out, err)
		}
	}
	// One schedule changed, and the inline playbook removed: exactly that
	// schedule changes, and the playbook is kept.
	write(doc("0 3 * * *", false))
	out, err = run("diff", "-f", path)
	want := `~ schedule nap-nightly: playbook nap latest on prod at "0 2 * * *" (Europe/Berlin) -> playbook nap latest on prod at "0 3 * * *" (Europe/Berlin) (waits for approval again)
= playbook doze kept: no longer in the file, but its versions stay (runs and schedules refer to them); version 1 is the newest
`
	if err != nil || out != want {
		t.Fatalf("diff with one schedule changed:\n%s%v\nwant:\n%s", out, err, want)
	}
	if out, err := run("apply", "-f", path); err != nil || !strings.Contains(out, "Applied 1 change(s)") {
		t.Fatalf("apply with one schedule changed:\n%s%v", out, err)
	}
	if out, err := run("apply", "-f", path); err != nil || !strings.Contains(out, "= playbook doze kept") || !strings.Contains(out, "No changes") {
		t.Fatalf("apply again:\n%s%v", out, err)
	}
	if listed, _ := run("playbook", "show", "doze"); !strings.Contains(listed, "doze") {
		t.Errorf("the removed playbook is gone:\n%s", listed)
	}
	for name, bad := range map[string]string{
		"missing file":       "playbooks:\n  - {name: nap, file: playbooks/none.yaml}\n",
		"both":               "playbooks:\n  - {name: nap, file: playbooks/nap.yaml, document: {name: nap}}\n",
		"bad version":        "schedules:\n  - {name: s, cluster: prod, playbook: nap, version: newest, cron: \"0 2 * * *\"}\n",
		"schedule, no name":  "schedules:\n  - {cluster: prod, playbook: nap, cron: \"0 2 * * *\"}\n",
		"unknown field":      "schedules:\n  - {name: s, cluster: prod, playbook: nap, cron: \"0 2 * * *\", color: red}\n",
		"bad playbook":       "playbooks:\n  - {name: nap, document: \"stages: 1\"}\n",
		"misnamed playbook":  "playbooks:\n  - {name: other, file: playbooks/nap.yaml}\n",
		"schedule, bad cron": "schedules:\n  - {name: s, cluster: prod, playbook: nap, cron: \"tea time\"}\n",
	} {
		write(bad)
		if _, err := run("apply", "-f", path); err == nil || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: %v, want one line and a non-zero exit", name, err)
		}
	}
	write(doc("0 3 * * *", false))
	if out, _ := run("diff", "-f", path); !strings.Contains(out, "No changes") {
		t.Errorf("a refused apply changed something:\n%s", out)
	}
}
