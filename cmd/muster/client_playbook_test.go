package main

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/musterhq/muster/core/approval"
	"github.com/musterhq/muster/shared/client"
	"github.com/musterhq/muster/shared/wire"
)

const cliPlaybook = `name: pb
stages:
  - {name: one, kind: muster.io/debug.ping, target: {all: true}}
`

// Issue 17, item 8: the command line starts what the plan showed. plan
// prints the digest to start with; start without --digest or --version is a
// usage error; a start by the digest of a plan the playbook has moved past
// creates nothing; by the current plan's digest it creates the run.
func TestPlaybookStartPassesWhatThePlanShowed(t *testing.T) {
	t.Parallel()
	e := setupCLI(t, approval.Policy{})
	dir := t.TempDir()
	doc := filepath.Join(dir, "pb.yaml")
	apply := func(body string) {
		t.Helper()
		if err := os.WriteFile(doc, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, msg, code := e.run("op", "playbook", "apply", doc); code != 0 {
			t.Fatalf("apply: %d %s", code, msg)
		}
	}
	apply(cliPlaybook)
	out, msg, code := e.run("op", "playbook", "plan", "pb", "--cluster", "prod")
	m := regexp.MustCompile(`muster playbook start pb --cluster prod --digest ([0-9a-f]{64})`).FindStringSubmatch(out)
	if code != 0 || m == nil {
		t.Fatalf("plan: %d %s\n%s", code, msg, out)
	}
	if _, msg, code := e.run("op", "playbook", "start", "pb", "--cluster", "prod"); code != 2 || !strings.Contains(msg, "--digest") {
		t.Fatalf("start without a digest or version: %d %s", code, msg)
	}
	apply(cliPlaybook + "  - {name: two, kind: muster.io/debug.ping, target: {all: true}, depends_on: [one]}\n")
	if _, msg, code := e.run("op", "playbook", "start", "pb", "--cluster", "prod", "--digest", m[1]); code == 0 || !strings.Contains(msg, "the plan changed") {
		t.Fatalf("start by the digest of an older plan: %d %s", code, msg)
	}
	if _, msg, code := e.run("op", "playbook", "start", "pb", "--cluster", "prod", "--version", "1"); code == 0 || !strings.Contains(msg, "is at version 2 now") {
		t.Fatalf("start of a version no longer the newest: %d %s", code, msg)
	}
	out, _, _ = e.run("op", "playbook", "plan", "pb", "--cluster", "prod")
	m = regexp.MustCompile(`--digest ([0-9a-f]{64})`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("plan of version 2:\n%s", out)
	}
	out, msg, code = e.run("op", "playbook", "start", "pb", "--cluster", "prod", "--digest", m[1])
	if code != 0 || !strings.Contains(out, "Started playbook pb version 2") {
		t.Fatalf("start by the current digest: %d %s\n%s", code, msg, out)
	}
}

// The printed plan shows, per node, its steps then its rollback, the canary
// nodes and the pause after them, and what the budget holds back.
func TestPrintPlanShowsEachNodesRollbackAndTheCanaryPause(t *testing.T) {
	t.Parallel()
	p := &wire.Plan{Playbook: "up", Version: 1, ClusterID: "prod", Digest: "d1",
		Stages: []wire.Stage{{Name: "up", Nodes: []string{"n1", "n2"}, Canary: 1,
			Steps:    []wire.StepSpec{{Name: "upgrade", Kind: "example.com/node.upgrade"}},
			Rollback: []wire.StepSpec{{Name: "downgrade", Kind: "example.com/node.upgrade"}}}},
		Children: []wire.PlanChild{
			{Stage: "up", Wave: 1, NodeID: "n1", Step: "upgrade", Kind: "example.com/node.upgrade", Canary: true},
			{Stage: "up", Wave: 1, NodeID: "n1", Step: "downgrade", Kind: "example.com/node.upgrade", Rollback: true, Canary: true, CanaryPause: true},
			{Stage: "up", Wave: 2, NodeID: "n2", Step: "upgrade", Kind: "example.com/node.upgrade", Held: "budget: full"},
			{Stage: "up", Wave: 2, NodeID: "n2", Step: "downgrade", Kind: "example.com/node.upgrade", Rollback: true, Held: "budget: full",
				When: `{{ eq .steps.upgrade.state "DONE" }}`},
		}}
	var b strings.Builder
	if err := printPlan(&b, p, nil); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	var rows []string
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, " n1 ") || strings.Contains(l, " n2 ") {
			rows = append(rows, strings.Join(strings.Fields(l), " "))
		}
	}
	want := []string{
		"1 n1 upgrade example.com/node.upgrade - canary -",
		"1 n1 downgrade example.com/node.upgrade - rollback, if the node fails; canary; then the run pauses: an approver promotes it -",
		"2 n2 upgrade example.com/node.upgrade - - budget: full",
		`2 n2 downgrade example.com/node.upgrade - rollback, if the node fails; when {{ eq .steps.upgrade.state "DONE" }} budget: full`,
	}
	if strings.Join(rows, "\n") != strings.Join(want, "\n") {
		t.Fatalf("rows:\n%s\nwant:\n%s\n\n%s", strings.Join(rows, "\n"), strings.Join(want, "\n"), out)
	}
	if !strings.Contains(out, "Stage up: 1 step on 2 nodes, max_concurrency") {
		t.Errorf("the stage line does not count its steps and nodes:\n%s", out)
	}
	if !strings.Contains(out, "2 child actions, and 2 rollback steps made only on a node that fails") {
		t.Fatalf("summary line:\n%s", out)
	}
}

// TestPrintPlanEndsWithTheWholeStartLine: the start line a plan ends with
// repeats its --param flags, quoted for the shell, so that pasting it
// starts exactly that plan (it once said "and the same --param flags").
func TestPrintPlanEndsWithTheWholeStartLine(t *testing.T) {
	t.Parallel()
	p := &wire.Plan{Playbook: "up", Version: 1, ClusterID: "prod", Digest: "d1"}
	var b strings.Builder
	if err := printPlan(&b, p, map[string]string{"version": "2.0", "service": "it's web"}); err != nil {
		t.Fatal(err)
	}
	want := `To start exactly this plan: muster playbook start up --cluster prod --digest d1 --param 'service=it'\''s web' --param version=2.0` + "\n"
	if !strings.HasSuffix(b.String(), want) {
		t.Fatalf("plan ends\n%s\nwant it to end with\n%s", b.String(), want)
	}
}

// Issue 35, item 6: plan takes --not-before and --limit, and the digest it
// prints is the one the run started with the same flags is approved under;
// another limit plans another digest, and a start by the digest of one
// limit under another is refused, creating nothing.
func TestPlaybookPlanLimitAndNotBeforeDigestIsTheApprovedRuns(t *testing.T) {
	t.Parallel()
	e := setupCLI(t, approval.DefaultPolicy())
	e.addNode("db-2")
	e.addNode("web-1")
	doc := filepath.Join(t.TempDir(), "pb.yaml")
	if err := os.WriteFile(doc, []byte(cliPlaybook), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, msg, code := e.run("op", "playbook", "apply", doc); code != 0 {
		t.Fatalf("apply: %d %s", code, msg)
	}
	at := time.Now().Add(2 * time.Hour).UTC().Truncate(time.Second).Format(time.RFC3339)
	digestOf := func(args ...string) string {
		t.Helper()
		out, msg, code := e.run("op", append([]string{"playbook", "plan", "pb", "--cluster", "prod"}, args...)...)
		m := regexp.MustCompile(`(?m)^Digest ([0-9a-f]{64})$`).FindStringSubmatch(out)
		if code != 0 || m == nil {
			t.Fatalf("plan %v: %d %s\n%s", args, code, msg, out)
		}
		return m[1]
	}
	all := digestOf()
	dbs := digestOf("--limit", "db-*", "--not-before", at)
	dbsNow := digestOf("--limit", "db-*")
	web := digestOf("--limit", "web-1", "--not-before", at)
	if len(map[string]bool{all: true, dbs: true, dbsNow: true, web: true}) != 4 {
		t.Fatalf("limit and not-before must change the digest: all %s, db-* later %s, db-* now %s, web-1 later %s", all, dbs, dbsNow, web)
	}
	if again := digestOf("--limit", "db-2,db-1", "--not-before", at); again != dbs {
		t.Fatalf("the same nodes and time plan the same digest: %s, then %s", dbs, again)
	}
	out, _, _ := e.run("op", "playbook", "plan", "pb", "--cluster", "prod", "--limit", "db-*", "--not-before", at)
	if want := "--not-before " + at + " --limit 'db-*'"; !strings.Contains(out, want) || !strings.Contains(out, "Limited to db-*") {
		t.Fatalf("the plan's start line should repeat %q:\n%s", want, out)
	}
	if _, msg, code := e.run("op", "playbook", "plan", "pb", "--cluster", "prod", "--limit", "db-1,nosuch-*"); code != 1 ||
		!strings.Contains(msg, "no node of the cluster matches nosuch-*") {
		t.Fatalf("a limit naming no node: %d %s", code, msg)
	}

	// A digest approved for the db nodes does not start on web-1, nor at
	// another time.
	for _, args := range [][]string{{"--limit", "web-1", "--not-before", at}, {"--limit", "db-*"}} {
		if _, msg, code := e.run("op", append([]string{"playbook", "start", "pb", "--cluster", "prod", "--digest", dbs}, args...)...); code == 0 ||
			!strings.Contains(msg, "the plan changed") {
			t.Fatalf("start %v by the digest planned for db-* later: %d %s", args, code, msg)
		}
	}
	out, msg, code := e.run("op", "playbook", "start", "pb", "--cluster", "prod", "--limit", "db-*", "--not-before", at, "--digest", dbs, "-o", "json")
	if code != 0 {
		t.Fatalf("start: %d %s", code, msg)
	}
	r := decode[wire.Run](t, out)
	if r.Digest != dbs || r.NotBefore == nil || r.NotBefore.Format(time.RFC3339) != at || !slices.Equal(r.Stages[0].Nodes, []string{"db-1", "db-2"}) {
		t.Fatalf("the run is not the plan: digest %s (plan %s), not before %v, nodes %v", r.Digest, dbs, r.NotBefore, r.Stages[0].Nodes)
	}
	if runs := decode[wire.RunList](t, func() string { o, _, _ := e.run("op", "run", "list", "-o", "json"); return o }()); len(runs.Runs) != 1 {
		t.Fatalf("refused starts created runs: %+v", runs.Runs)
	}
	appr := client.NewCore(e.url, e.secrets["appr"], nil)
	if got, err := appr.ApproveRun(context.Background(), r.ID, dbs); err != nil || got.State == "PENDING_APPROVE" {
		t.Fatalf("approve under the plan's digest: %v %+v", err, got)
	}
}

// TestPlanSaysACanaryThatPromotesItselfDoesSo: the plan of a canary stage
// with auto_promote_after_s says the run goes on by itself once its gates
// hold, not that it waits for an approver.
func TestPlanSaysACanaryThatPromotesItselfDoesSo(t *testing.T) {
	t.Parallel()
	st := wire.Stage{Name: "replicas", Canary: 1, AutoPromoteAfterS: 15}
	var b strings.Builder
	printProcedure(&b, &st)
	want := "canary: the run pauses after 1 node; it promotes itself once its gates have held 15s (an approver may promote it sooner)"
	if !strings.Contains(b.String(), want) {
		t.Errorf("procedure %q lacks %q", b.String(), want)
	}
	if got := canaryPauseText([]wire.Stage{st}, "replicas"); !strings.Contains(got, "promotes itself once its gates have held 15s") {
		t.Errorf("the canary node's note %q does not say it promotes itself", got)
	}
}
