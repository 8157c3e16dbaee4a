package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/musterhq/muster/shared/action"
	"github.com/musterhq/muster/shared/client"
	"github.com/musterhq/muster/shared/limit"
	"github.com/musterhq/muster/shared/testwait"
	"github.com/musterhq/muster/shared/wire"
)

// procFleet is n agents with the kinds example.com/drain, upgrade, verify
// and undrain, one script that logs "start ID NODE STEP NANOS" and "end ID
// NODE STEP NANOS". A step fails on a node while the file fail-STEP-NODE in
// dir holds a count above zero, counting it down: the log and the counts
// are the proof of what ran where, when and how often.
type procFleet struct {
	*fleet
	dir, log string
}

var procSteps = []string{"drain", "upgrade", "verify", "undrain"}

// procKinds are the kinds of the fleet: the steps and a rollback.
var procKinds = append(slices.Clone(procSteps), "downgrade")

func newProcFleet(t *testing.T, n int) *procFleet {
	t.Helper()
	return newProcFleetWith(t, n, fleetOptions{})
}

// newProcFleetWith is newProcFleet with more of the fleet's options (its
// nodes, kinds and directory are the procedure fleet's).
func newProcFleetWith(t *testing.T, n int, opts fleetOptions) *procFleet {
	t.Helper()
	dir := t.TempDir()
	log := filepath.Join(dir, "steps.log")
	script := filepath.Join(dir, "step.sh")
	body := fmt.Sprintf(`#!/bin/sh
step=$1
echo "start $MUSTER_ACTION_ID $MUSTER_NODE_ID $step $(date +%%s%%N)" >> %[1]q
sleep 0.1
echo "end $MUSTER_ACTION_ID $MUSTER_NODE_ID $step $(date +%%s%%N)" >> %[1]q
if [ "$step" = upgrade ]; then printf '{"previous":"1.0-%%s"}' "$MUSTER_NODE_ID" > "$MUSTER_OUTPUTS"; fi
f=%[2]q/fail-$step-$MUSTER_NODE_ID
if [ -f "$f" ]; then
  n=$(cat "$f")
  if [ "$n" -gt 0 ]; then echo $((n-1)) > "$f"; echo "failing on purpose"; exit 3; fi
fi
`, log, dir)
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	var kinds strings.Builder
	kinds.WriteString("actions:\n  external:\n")
	for _, s := range procKinds {
		fmt.Fprintf(&kinds, "    - kind: example.com/%s\n      run: [%q, %q]\n", s, script, s)
	}
	opts.nodes, opts.actionsYAML, opts.dir = n, kinds.String(), filepath.Join(dir, "fleet")
	f := newFleetWith(t, opts)
	return &procFleet{fleet: f, dir: dir, log: log}
}

// failTimes makes step fail n times on node.
func (f *procFleet) failTimes(t *testing.T, step, node string, n int) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(f.dir, "fail-"+step+"-"+node), []byte(strconv.Itoa(n)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
}

// stepRunLog is one run of a step's command, from the agents' own log.
type stepRunLog struct {
	id, node, step string
	start, end     int64
}

func (f *procFleet) executions(t *testing.T) []stepRunLog {
	t.Helper()
	byID := map[string]*stepRunLog{}
	var order []string
	for _, l := range lines(f.log) {
		fs := strings.Fields(l)
		if len(fs) != 5 {
			continue
		}
		ns, _ := strconv.ParseInt(fs[4], 10, 64)
		e := byID[fs[1]]
		switch fs[0] {
		case "start":
			if e != nil {
				t.Fatalf("action %s started twice", fs[1])
			}
			byID[fs[1]] = &stepRunLog{id: fs[1], node: fs[2], step: fs[3], start: ns}
			order = append(order, fs[1])
		case "end":
			if e != nil {
				e.end = ns
			}
		}
	}
	out := make([]stepRunLog, 0, len(order))
	for _, id := range order {
		out = append(out, *byID[id])
	}
	return out
}

func procRun(conc string, retry *wire.Retry) *wire.CreateRunRequest {
	c, e := limit.MustParse(conc), limit.MustParse("0")
	var steps []wire.StepSpec
	for _, s := range procSteps {
		sp := wire.StepSpec{Name: s, Kind: "example.com/" + s}
		if s == "verify" {
			sp.Retry = retry
		}
		steps = append(steps, sp)
	}
	return &wire.CreateRunRequest{ClusterID: "e2e", Stages: []wire.StageSpec{{
		Name: "upgrade", Target: wire.Target{All: true}, MaxConcurrency: &c, MaxErrors: &e, Steps: steps,
	}}}
}

func (f *procFleet) start(t *testing.T, req *wire.CreateRunRequest) *wire.Run {
	t.Helper()
	r, err := f.alice.CreateRun(ctxT(t), req)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.bob.RunVerb(ctxT(t), r.ID, "approve", ""); err != nil {
		t.Fatal(err)
	}
	return r
}

func (f *procFleet) children(t *testing.T, runID string) []action.Action {
	t.Helper()
	l, err := f.admin.Actions(ctxT(t), client.ActionFilter{Run: runID, Limit: 500})
	if err != nil {
		t.Fatal(err)
	}
	return l.Actions
}

func (f *procFleet) waitRun(t *testing.T, id string, within time.Duration, want ...string) *wire.Run {
	t.Helper()
	return (&stepFleet{fleet: f.fleet}).waitRun(t, id, within, want...)
}

// TestProcedureGoesNodeFirst is the end-to-end test 1: five nodes,
// drain → upgrade → verify → undrain, max_concurrency 1.
func TestProcedureGoesNodeFirst(t *testing.T) {
	t.Parallel()
	f := newProcFleet(t, 5)
	r := f.start(t, procRun("1", nil))
	end := f.waitRun(t, r.ID, 90*time.Second, "DONE", "FAILED", "CANCELLED", "PAUSED")
	if end.State != "DONE" {
		t.Fatalf("run ended %s (%s)", end.State, end.StateReason)
	}
	ex := f.executions(t)
	if len(ex) != 20 {
		t.Fatalf("%d executions, want 5 nodes × 4 steps", len(ex))
	}
	// In log order: each node's four steps in order, and no node's drain
	// before the previous node's undrain ended.
	for i, e := range ex {
		if want := procSteps[i%4]; e.step != want {
			t.Fatalf("execution %d is %s on %s, want %s: %+v", i, e.step, e.node, want, ex)
		}
		if i%4 != 0 && e.node != ex[i-1].node {
			t.Fatalf("execution %d: %s on %s in the middle of %s's procedure", i, e.step, e.node, ex[i-1].node)
		}
		if i > 0 && (ex[i-1].end == 0 || e.start < ex[i-1].end) {
			t.Fatalf("%s on %s started before %s on %s ended", e.step, e.node, ex[i-1].step, ex[i-1].node)
		}
	}
	// Step to next step on one node: the end line of a step's command to
	// the start line of the next one's (the core's sync, the next child's
	// creation and push, the agent's start of the command).
	var gaps []time.Duration
	for i := 1; i < len(ex); i++ {
		if i%4 != 0 {
			gaps = append(gaps, time.Duration(ex[i].start-ex[i-1].end))
		}
	}
	slices.Sort(gaps)
	t.Logf("step to next step on a node: p50 %s, max %s over %d", gaps[len(gaps)/2].Round(time.Millisecond),
		gaps[len(gaps)-1].Round(time.Millisecond), len(gaps))
	seen := map[string]bool{}
	for _, e := range ex {
		k := e.node + "/" + e.step
		if seen[k] {
			t.Fatalf("%s ran twice", k)
		}
		seen[k] = true
	}
	// The core's children are the same 20 executions, each with its step
	// and attempt 1.
	kids := f.children(t, r.ID)
	if len(kids) != 20 {
		t.Fatalf("%d children, want 20", len(kids))
	}
	byID := map[string]action.Action{}
	for _, k := range kids {
		byID[k.ID] = k
	}
	for _, e := range ex {
		k, ok := byID[e.id]
		if !ok || k.Step != e.step || k.NodeID != e.node || k.Attempt != 1 || k.RunID != r.ID || k.Stage != "upgrade" {
			t.Fatalf("execution %+v: child %+v", e, k)
		}
	}
}

// TestProcedureHoldsTheBudgetWholeNode is the end-to-end test 2:
// max_unavailable 1, a four-step procedure whose upgrade step alone is
// disruptive, max_concurrency 2 over three nodes, and a manual upgrade
// created on the third node once the run has started. A run's node is
// unavailable from the start of its drain to the end of its undrain, the
// manual action while it runs: the agents' log shows never two nodes
// unavailable at once, and everything ran.
func TestProcedureHoldsTheBudgetWholeNode(t *testing.T) {
	t.Parallel()
	f := newProcFleetWith(t, 3, fleetOptions{
		clusterYAML: "    budget:\n      max_unavailable: 1\n",
		coreExtra:   "kinds:\n  - {kind: example.com/upgrade, disruptive: true}\n"})
	r := f.start(t, procRun("2", nil))
	testwait.Within(t, 30*time.Second, "the run's first step started", func() bool {
		return len(f.executions(t)) > 0
	})
	manual := f.create("node-3", "example.com/upgrade", `{}`)
	f.approve(manual.ID)
	// The cluster's budget names a node in flight, between its steps too.
	testwait.Within(t, 30*time.Second, "the budget showing a node in flight", func() bool {
		cl, err := f.admin.Cluster(ctxT(t), "e2e")
		if err != nil || cl.Budget == nil {
			return false
		}
		for _, n := range cl.Budget.Nodes {
			if n.Reason == "in flight in a disruptive procedure" {
				return true
			}
		}
		return false
	})
	end := f.waitRun(t, r.ID, 90*time.Second, "DONE", "FAILED", "CANCELLED", "PAUSED")
	if end.State != "DONE" {
		t.Fatalf("run ended %s (%s)", end.State, end.StateReason)
	}
	f.waitCore(manual.ID, 60*time.Second, action.Done)
	ex := f.executions(t)
	if len(ex) != 13 {
		t.Fatalf("%d executions, want 3 nodes × 4 steps and the manual action: %+v", len(ex), ex)
	}
	// Unavailability spans, by node and owner: a run's node from its first
	// step's start to its last step's end, the manual action alone.
	type span struct {
		who, node  string
		start, end int64
	}
	byNode := map[string]*span{}
	var spans []span
	for _, e := range ex {
		if e.end == 0 {
			t.Fatalf("%s on %s has no end", e.step, e.node)
		}
		if e.id == manual.ID {
			spans = append(spans, span{who: "manual on " + e.node, node: e.node, start: e.start, end: e.end})
			continue
		}
		sp := byNode[e.node]
		if sp == nil {
			sp = &span{who: "run on " + e.node, node: e.node, start: e.start}
			byNode[e.node] = sp
		}
		sp.end = max(sp.end, e.end)
	}
	for _, sp := range byNode {
		spans = append(spans, *sp)
	}
	for i := range spans {
		for j := i + 1; j < len(spans); j++ {
			a, b := spans[i], spans[j]
			if a.node != b.node && a.start < b.end && b.start < a.end {
				t.Fatalf("two nodes unavailable at once with max_unavailable 1: %s [%d, %d] and %s [%d, %d]",
					a.who, a.start, a.end, b.who, b.start, b.end)
			}
		}
	}
}

// TestProcedureRetriesAStep is the end-to-end test 3: verify fails
// twice on one node, then passes.
func TestProcedureRetriesAStep(t *testing.T) {
	t.Parallel()
	f := newProcFleet(t, 2)
	f.failTimes(t, "verify", "node-2", 2)
	r := f.start(t, procRun("1", &wire.Retry{Attempts: 3, DelayS: 1}))
	end := f.waitRun(t, r.ID, 90*time.Second, "DONE", "FAILED", "CANCELLED", "PAUSED")
	if end.State != "DONE" {
		t.Fatalf("run ended %s (%s), want DONE", end.State, end.StateReason)
	}
	var verify []action.Action
	for _, k := range f.children(t, r.ID) {
		if k.NodeID == "node-2" && k.Step == "verify" {
			verify = append(verify, k)
		}
	}
	if len(verify) != 3 {
		t.Fatalf("%d verify children on node-2, want 3", len(verify))
	}
	sort.Slice(verify, func(i, j int) bool { return verify[i].Attempt < verify[j].Attempt })
	ids := map[string]bool{}
	for i, k := range verify {
		ids[k.ID] = true
		want := action.Failed
		if i == 2 {
			want = action.Done
		}
		if k.Attempt != i+1 || k.State != want || (i > 0 && k.RetryOf != verify[i-1].ID) {
			t.Fatalf("attempt %d: %+v, want attempt %d %s retrying the previous one", i+1, k, i+1, want)
		}
	}
	if len(ids) != 3 {
		t.Fatalf("attempts share ids: %v", ids)
	}
	n := 0
	for _, e := range f.executions(t) {
		if e.node == "node-2" && e.step == "verify" {
			n++
		}
	}
	if n != 3 {
		t.Fatalf("verify ran %d times on node-2, want 3", n)
	}
}

// TestProcedureRollsBackTheFailedNodeOnly is the end-to-end test 4:
// upgrade fails on node 3 with on_failure pause.
func TestProcedureRollsBackTheFailedNodeOnly(t *testing.T) {
	t.Parallel()
	f := newProcFleet(t, 5)
	f.failTimes(t, "upgrade", "node-3", 1)
	req := procRun("1", nil)
	st := &req.Stages[0]
	st.OnFailure = "pause"
	st.Steps[3].When = "always"
	st.Rollback = []wire.StepSpec{{Name: "downgrade", Kind: "example.com/downgrade",
		Args: []byte(`{"version":"{{ .steps.upgrade.outputs.previous }}"}`)}}
	r := f.start(t, req)
	paused := f.waitRun(t, r.ID, 90*time.Second, "PAUSED", "DONE", "FAILED", "PARTIAL", "CANCELLED")
	if paused.State != "PAUSED" {
		t.Fatalf("run is %s (%s), want PAUSED", paused.State, paused.StateReason)
	}
	var got []string
	for _, e := range f.executions(t) {
		got = append(got, e.node+":"+e.step)
	}
	want := "node-1:drain node-1:upgrade node-1:verify node-1:undrain node-2:drain node-2:upgrade node-2:verify node-2:undrain " +
		"node-3:drain node-3:upgrade node-3:undrain node-3:downgrade"
	if strings.Join(got, " ") != want {
		t.Fatalf("executions\n%s\nwant\n%s", strings.Join(got, " "), want)
	}
	for _, k := range f.children(t, r.ID) {
		if k.Step == "downgrade" && (k.NodeID != "node-3" || string(k.Args) != `{"version":"1.0-node-3"}`) {
			t.Fatalf("rollback on %s with %s, want node-3 back to 1.0-node-3", k.NodeID, k.Args)
		}
		if k.Step == "upgrade" && k.NodeID == "node-3" && string(k.Outputs) != `{"previous":"1.0-node-3"}` {
			t.Fatalf("the failed upgrade's outputs %s", k.Outputs)
		}
	}
	// The requester may not resume past the errors; an approver may.
	if _, err := f.alice.RunVerb(ctxT(t), r.ID, "resume", ""); err == nil || !strings.Contains(err.Error(), "403") &&
		!strings.Contains(err.Error(), "approver") {
		t.Fatalf("the requester's resume: %v, want refused", err)
	}
	if _, err := f.bob.RunVerb(ctxT(t), r.ID, "resume", "node-3 is known bad"); err != nil {
		t.Fatal(err)
	}
	end := f.waitRun(t, r.ID, 90*time.Second, "DONE", "FAILED", "PARTIAL", "CANCELLED")
	if end.State != "PARTIAL" || end.Summary == nil || len(end.Summary.Failed) != 1 || end.Summary.Failed[0].NodeID != "node-3" {
		t.Fatalf("run ended %s (%s) summary %+v, want PARTIAL naming node-3", end.State, end.StateReason, end.Summary)
	}
	// run retry: a new run over node-3 only.
	again, err := f.alice.RunVerb(ctxT(t), r.ID, "retry", "")
	if err != nil {
		t.Fatal(err)
	}
	if again.RetryOf != r.ID || len(again.Stages) != 1 || strings.Join(again.Stages[0].Nodes, ",") != "node-3" {
		t.Fatalf("retry run %+v, want node-3 only", again)
	}
	if _, err := f.bob.RunVerb(ctxT(t), again.ID, "approve", ""); err != nil {
		t.Fatal(err)
	}
	if done := f.waitRun(t, again.ID, 90*time.Second, "DONE", "FAILED", "PARTIAL", "CANCELLED", "PAUSED"); done.State != "DONE" {
		t.Fatalf("retry run ended %s (%s)", done.State, done.StateReason)
	}
}

// TestProcedureCanaryWaitsForPromote is the end-to-end test 5:
// canary 1 pauses after the first node; the requester cannot promote; an
// approver does, and the rest completes.
func TestProcedureCanaryWaitsForPromote(t *testing.T) {
	t.Parallel()
	f := newProcFleet(t, 3)
	req := procRun("1", nil)
	req.Stages[0].Canary = 1
	r := f.start(t, req)
	paused := f.waitRun(t, r.ID, 60*time.Second, "PAUSED", "DONE", "FAILED", "PARTIAL", "CANCELLED")
	if paused.State != "PAUSED" || !strings.HasPrefix(paused.StateReason, "canary") {
		t.Fatalf("run %s (%s), want PAUSED on its canary", paused.State, paused.StateReason)
	}
	for _, e := range f.executions(t) {
		if e.node != "node-1" {
			t.Fatalf("%s ran on %s before the canary was promoted", e.step, e.node)
		}
	}
	if n := len(f.executions(t)); n != 4 {
		t.Fatalf("%d executions on the canary, want its 4 steps", n)
	}
	if _, err := f.alice.RunVerb(ctxT(t), r.ID, "promote", ""); err == nil {
		t.Fatal("the requester promoted her own run")
	}
	if _, err := f.bob.RunVerb(ctxT(t), r.ID, "promote", "the canary is healthy"); err != nil {
		t.Fatal(err)
	}
	end := f.waitRun(t, r.ID, 60*time.Second, "DONE", "FAILED", "PARTIAL", "CANCELLED", "PAUSED")
	if end.State != "DONE" || len(f.executions(t)) != 12 {
		t.Fatalf("run ended %s (%s) after %d executions, want DONE after 12", end.State, end.StateReason, len(f.executions(t)))
	}
}

// TestProcedureDoesNotWaitForADownNode is the end-to-end test 6: a
// DOWN node in the target is skipped (unavailable: skip) within seconds,
// or is an error at once (fail).
func TestProcedureDoesNotWaitForADownNode(t *testing.T) {
	t.Parallel()
	f := newProcFleet(t, 3)
	f.agents["node-2"].kill()
	testwait.Within(t, 30*time.Second, "node-2 DOWN", func() bool { return f.nodeStatus("node-2") == "DOWN" })
	for _, tc := range []struct{ unavailable, want string }{{"skip", "PARTIAL"}, {"fail", "FAILED"}} {
		req := procRun("1", nil)
		req.Stages[0].Unavailable = tc.unavailable
		start := time.Now()
		r := f.start(t, req)
		end := f.waitRun(t, r.ID, 60*time.Second, "DONE", "FAILED", "PARTIAL", "CANCELLED", "PAUSED")
		if end.State != tc.want {
			t.Fatalf("unavailable %s: run ended %s (%s), want %s", tc.unavailable, end.State, end.StateReason, tc.want)
		}
		list := end.Summary
		if tc.unavailable == "skip" && (list == nil || len(list.Skipped) != 1 || list.Skipped[0].NodeID != "node-2") {
			t.Fatalf("summary %+v, want node-2 skipped", list)
		}
		if tc.unavailable == "fail" && (list == nil || len(list.Failed) != 1 || list.Failed[0].NodeID != "node-2") {
			t.Fatalf("summary %+v, want node-2 failed", list)
		}
		t.Logf("unavailable %s: %s in %s", tc.unavailable, end.State, time.Since(start).Round(time.Millisecond))
	}
	for _, e := range f.executions(t) {
		if e.node == "node-2" {
			t.Fatalf("%s ran on the DOWN node", e.step)
		}
	}
}

// TestProcedureSurvivesCoreSIGKILLs is the end-to-end test 7: the
// core is SIGKILLed in the middle of a node's steps, and again between two
// attempts of a retried step; the run completes, no step of any node ran
// twice and no attempt was lost.
func TestProcedureSurvivesCoreSIGKILLs(t *testing.T) {
	t.Parallel()
	f := newProcFleet(t, 3)
	f.failTimes(t, "verify", "node-2", 2)
	r := f.start(t, procRun("1", &wire.Retry{Attempts: 3, DelayS: 2}))
	ranOn := func(node, step string) int {
		n := 0
		for _, e := range f.executions(t) {
			if e.node == node && e.step == step {
				n++
			}
		}
		return n
	}
	// In the middle of node-1's steps.
	testwait.Within(t, 30*time.Second, "node-1's upgrade", func() bool { return ranOn("node-1", "upgrade") > 0 })
	f.core.kill()
	f.core.restart()
	// Between node-2's first failed verify and its retry (2 s later).
	testwait.Within(t, 60*time.Second, "node-2's first verify", func() bool { return ranOn("node-2", "verify") == 1 })
	f.core.kill()
	f.core.restart()
	end := f.waitRun(t, r.ID, 120*time.Second, "DONE", "FAILED", "PARTIAL", "CANCELLED", "PAUSED")
	if end.State != "DONE" {
		t.Fatalf("run ended %s (%s) after two core SIGKILLs", end.State, end.StateReason)
	}
	for _, n := range []string{"node-1", "node-2", "node-3"} {
		for _, s := range procSteps {
			want := 1
			if n == "node-2" && s == "verify" {
				want = 3
			}
			if got := ranOn(n, s); got != want {
				t.Fatalf("%s ran %d times on %s, want %d", s, got, n, want)
			}
		}
	}
	attempts := map[int]bool{}
	for _, k := range f.children(t, r.ID) {
		if k.NodeID == "node-2" && k.Step == "verify" {
			attempts[k.Attempt] = true
		}
	}
	if len(attempts) != 3 || !attempts[1] || !attempts[2] || !attempts[3] {
		t.Fatalf("node-2's verify attempts %v, want 1, 2 and 3", attempts)
	}
}

// TestProcedureSkipsANodeThatFailedAnEarlierStage is issue 34's scenario
// 3: a two-stage run over three nodes with max_errors 1; the node whose
// stage-a drain failed is not upgraded by stage b, and the run says so.
func TestProcedureSkipsANodeThatFailedAnEarlierStage(t *testing.T) {
	t.Parallel()
	f := newProcFleet(t, 3)
	f.failTimes(t, "drain", "node-2", 1)
	c, e := limit.MustParse("1"), limit.MustParse("1")
	r := f.start(t, &wire.CreateRunRequest{ClusterID: "e2e", Stages: []wire.StageSpec{
		{Name: "a", Target: wire.Target{All: true}, MaxConcurrency: &c, MaxErrors: &e,
			Steps: []wire.StepSpec{{Name: "drain", Kind: "example.com/drain"}}},
		{Name: "b", Target: wire.Target{All: true}, MaxConcurrency: &c, MaxErrors: &e,
			Steps: []wire.StepSpec{{Name: "upgrade", Kind: "example.com/upgrade"}}},
	}})
	end := f.waitRun(t, r.ID, 90*time.Second, "DONE", "FAILED", "PARTIAL", "CANCELLED", "PAUSED")
	var got []string
	for _, e := range f.executions(t) {
		got = append(got, e.node+":"+e.step)
	}
	want := "node-1:drain node-2:drain node-3:drain node-1:upgrade node-3:upgrade"
	if strings.Join(got, " ") != want {
		t.Fatalf("executions\n%s\nwant\n%s", strings.Join(got, " "), want)
	}
	if end.State != "PARTIAL" || end.Summary == nil || len(end.Summary.Skipped) != 1 {
		t.Fatalf("run ended %s (%s) summary %+v, want PARTIAL with node-2 skipped", end.State, end.StateReason, end.Summary)
	}
	if s := end.Summary.Skipped[0]; s.Stage != "b" || s.NodeID != "node-2" || s.Reason != "failed stage a" {
		t.Fatalf("skipped %+v, want node-2 skipped by b for failing stage a", s)
	}
}
