package e2e

import (
	"fmt"
	"os"
	"path/filepath"
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

// stepFleet starts n agents with the external kind example.com/step: it
// logs "start ID NODE NANOS", works for a while, logs "end ID NODE NANOS",
// and fails on the nodes listed in the file named by failOn (one per line).
// The log is the proof of what ran where and when.
type stepFleet struct {
	*fleet
	stepLog string
	failOn  string
}

func newStepFleet(t *testing.T, n int, work string, coreExtra string) *stepFleet {
	t.Helper()
	return newStepFleetWith(t, work, fleetOptions{nodes: n, coreExtra: coreExtra})
}

// newStepFleetWith is newStepFleet with more of the fleet's options (its
// actions and directory are the step kind's).
func newStepFleetWith(t *testing.T, work string, o fleetOptions) *stepFleet {
	t.Helper()
	dir := t.TempDir()
	log := filepath.Join(dir, "steps.log")
	failOn := filepath.Join(dir, "fail-on")
	script := filepath.Join(dir, "step.sh")
	body := fmt.Sprintf(`#!/bin/sh
echo "start $MUSTER_ACTION_ID $MUSTER_NODE_ID $(date +%%s%%N)" >> %[1]q
sleep %[2]s
echo "end $MUSTER_ACTION_ID $MUSTER_NODE_ID $(date +%%s%%N)" >> %[1]q
if grep -qx "$MUSTER_NODE_ID" %[3]q 2>/dev/null; then echo "failing on purpose"; exit 3; fi
`, log, work, failOn)
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	kind := o.stepKind
	if kind == "" {
		kind = "example.com/step"
	}
	kinds := fmt.Sprintf("actions:\n  external:\n    - kind: %s\n      run: [%q]\n", kind, script)
	o.actionsYAML, o.dir = kinds, filepath.Join(dir, "fleet")
	f := newFleetWith(t, o)
	return &stepFleet{fleet: f, stepLog: log, failOn: failOn}
}

// span is one execution of the step kind, from the agent's own log.
type span struct {
	id, node   string
	start, end int64
}

// spans reads the step log: every execution, and the check that none
// started twice.
func (f *stepFleet) spans(t *testing.T) []span {
	t.Helper()
	byID := map[string]*span{}
	var order []string
	for _, l := range lines(f.stepLog) {
		fs := strings.Fields(l)
		if len(fs) != 4 {
			continue
		}
		ns, _ := strconv.ParseInt(fs[3], 10, 64)
		s := byID[fs[1]]
		switch fs[0] {
		case "start":
			if s != nil {
				t.Fatalf("action %s started twice", fs[1])
			}
			byID[fs[1]] = &span{id: fs[1], node: fs[2], start: ns}
			order = append(order, fs[1])
		case "end":
			if s != nil {
				s.end = ns
			}
		}
	}
	out := make([]span, 0, len(order))
	for _, id := range order {
		out = append(out, *byID[id])
	}
	return out
}

// maxOverlap is the largest number of executions running at one instant.
func maxOverlap(spans []span) int {
	type edge struct {
		at    int64
		delta int
	}
	var edges []edge
	for _, s := range spans {
		end := s.end
		if end == 0 {
			end = 1<<63 - 1
		}
		edges = append(edges, edge{s.start, 1}, edge{end, -1})
	}
	sort.Slice(edges, func(i, j int) bool {
		if edges[i].at != edges[j].at {
			return edges[i].at < edges[j].at
		}
		return edges[i].delta < edges[j].delta // an end before a start at the same instant
	})
	cur, best := 0, 0
	for _, e := range edges {
		cur += e.delta
		best = max(best, cur)
	}
	return best
}

func (f *stepFleet) waitRun(t *testing.T, id string, within time.Duration, want ...string) *wire.Run {
	t.Helper()
	var r *wire.Run
	testwait.Within(t, within, fmt.Sprintf("run %s in %v", id, want), func() bool {
		var err error
		r, err = f.admin.Run(ctxT(t), id)
		if err != nil {
			return false
		}
		for _, w := range want {
			if r.State == w {
				return true
			}
		}
		return false
	})
	return r
}

func stepRun(conc, errs, onFailure string) *wire.CreateRunRequest {
	c, e := limit.MustParse(conc), limit.MustParse(errs)
	return &wire.CreateRunRequest{ClusterID: "e2e", Stages: []wire.StageSpec{{
		Name: "roll", Kind: "example.com/step", Target: wire.Target{All: true},
		MaxConcurrency: &c, MaxErrors: &e, OnFailure: onFailure,
	}}}
}

func (f *stepFleet) startRun(t *testing.T, req *wire.CreateRunRequest) *wire.Run {
	t.Helper()
	r, err := f.alice.CreateRun(ctxT(t), req)
	if err != nil {
		t.Fatal(err)
	}
	if r.State != "PENDING_APPROVE" {
		t.Fatalf("run created %s, want PENDING_APPROVE", r.State)
	}
	if _, err := f.bob.RunVerb(ctxT(t), r.ID, "approve", ""); err != nil {
		t.Fatal(err)
	}
	return r
}

func TestRunRollsOneNodeAtATimeAndEveryNodeOnce(t *testing.T) {
	t.Parallel()
	f := newStepFleet(t, 5, "0.3", "")
	r := f.startRun(t, stepRun("1", "0", ""))
	done := f.waitRun(t, r.ID, 60*time.Second, "DONE", "FAILED", "CANCELLED")
	if done.State != "DONE" {
		t.Fatalf("run ended %s (%s)", done.State, done.StateReason)
	}
	spans := f.spans(t)
	perNode := map[string]int{}
	for _, s := range spans {
		perNode[s.node]++
	}
	if len(spans) != 5 || len(perNode) != 5 {
		t.Fatalf("%d executions over %d nodes, want each of the 5 nodes once: %v", len(spans), len(perNode), perNode)
	}
	if n := maxOverlap(spans); n != 1 {
		t.Fatalf("%d nodes ran the step at once with max_concurrency 1", n)
	}
	if c := done.Stages[0].Counts; c["DONE"] != 5 {
		t.Fatalf("stage counts %v, want 5 DONE", c)
	}
}

func TestRunStopsAtMaxErrorsOrPausesAndResumes(t *testing.T) {
	t.Parallel()
	t.Run("abort", func(t *testing.T) {
		t.Parallel()
		f := newStepFleet(t, 4, "0", "")
		if err := os.WriteFile(f.failOn, []byte("node-2\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		r := f.startRun(t, stepRun("1", "0", ""))
		end := f.waitRun(t, r.ID, 60*time.Second, "FAILED", "DONE")
		if end.State != "FAILED" || !strings.Contains(end.StateReason, "max_errors") {
			t.Fatalf("run ended %s (%s), want FAILED on max_errors", end.State, end.StateReason)
		}
		// Nodes run in sorted order, one at a time: node-1, then node-2
		// fails, and nothing starts after it.
		spans := f.spans(t)
		if len(spans) != 2 || spans[1].node != "node-2" {
			t.Fatalf("executions %+v, want node-1 then node-2 and nothing after the failure", spans)
		}
	})
	t.Run("pause", func(t *testing.T) {
		t.Parallel()
		f := newStepFleet(t, 4, "0", "")
		if err := os.WriteFile(f.failOn, []byte("node-2\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		r := f.startRun(t, stepRun("1", "0", "pause"))
		paused := f.waitRun(t, r.ID, 60*time.Second, "PAUSED", "FAILED", "DONE")
		if paused.State != "PAUSED" {
			t.Fatalf("run is %s (%s), want PAUSED", paused.State, paused.StateReason)
		}
		if n := len(f.spans(t)); n != 2 {
			t.Fatalf("%d executions while paused, want 2", n)
		}
		if _, err := f.admin.RunVerb(ctxT(t), r.ID, "resume", "a known failure"); err != nil {
			t.Fatal(err)
		}
		end := f.waitRun(t, r.ID, 60*time.Second, "DONE", "PARTIAL", "FAILED")
		// The forgiven failure still shows: PARTIAL, naming node-2.
		if end.State != "PARTIAL" || end.Summary == nil || len(end.Summary.Failed) != 1 || end.Summary.Failed[0].NodeID != "node-2" {
			t.Fatalf("resumed run ended %s (%s) summary %+v, want PARTIAL naming node-2", end.State, end.StateReason, end.Summary)
		}
		if n := len(f.spans(t)); n != 4 {
			t.Fatalf("%d executions, want each of the 4 nodes once", n)
		}
	})
}

func TestRunSurvivesACoreSIGKILL(t *testing.T) {
	t.Parallel()
	f := newStepFleet(t, 4, "0.5", "")
	r := f.startRun(t, stepRun("1", "0", ""))
	// Kill the core once the second node has started, mid-run.
	testwait.Within(t, 30*time.Second, "the second node to start", func() bool { return len(f.spans(t)) >= 2 })
	f.core.kill()
	f.core.restart()
	end := f.waitRun(t, r.ID, 90*time.Second, "DONE", "FAILED", "CANCELLED")
	if end.State != "DONE" {
		t.Fatalf("run ended %s (%s) after a core SIGKILL", end.State, end.StateReason)
	}
	spans := f.spans(t)
	perNode := map[string]int{}
	for _, s := range spans {
		perNode[s.node]++
	}
	if len(spans) != 4 || len(perNode) != 4 {
		t.Fatalf("executions per node %v, want each of the 4 nodes exactly once", perNode)
	}
	if n := maxOverlap(spans); n != 1 {
		t.Fatalf("%d nodes ran at once across the restart", n)
	}
}

// TestRunSurvivesAReplicaFailover: three core replicas on PostgreSQL; the
// replica holding the cluster's lease is SIGKILLed mid-run; another takes
// the lease and the run finishes, each node's step run exactly once and
// never two at once.
func TestRunSurvivesAReplicaFailover(t *testing.T) {
	t.Parallel()
	f := newStepFleetWith(t, "0.5", fleetOptions{nodes: 4, replicas: 3})
	r := f.startRun(t, stepRun("1", "0", ""))
	testwait.Within(t, 30*time.Second, "the second node to start", func() bool { return len(f.spans(t)) >= 2 })
	holder := f.holder()
	if holder < 0 {
		t.Fatal("no replica holds the cluster")
	}
	f.use((holder + 1) % len(f.cores))
	f.cores[holder].kill()
	// Within the lease TTL (2 s) and a lease round, with room for a loaded machine.
	testwait.Within(t, 2*time.Second+2*time.Second/3+2*time.Second, "another replica holding the cluster", func() bool {
		h := f.holder()
		return h >= 0 && h != holder
	})
	end := f.waitRun(t, r.ID, 90*time.Second, "DONE", "FAILED", "CANCELLED")
	if end.State != "DONE" {
		t.Fatalf("run ended %s (%s) after its replica's SIGKILL", end.State, end.StateReason)
	}
	spans := f.spans(t)
	perNode := map[string]int{}
	for _, s := range spans {
		perNode[s.node]++
	}
	if len(spans) != 4 || len(perNode) != 4 {
		t.Fatalf("executions per node %v, want each of the 4 nodes exactly once", perNode)
	}
	if n := maxOverlap(spans); n != 1 {
		t.Fatalf("%d nodes ran at once across the failover", n)
	}
}

// Issue 17, hardening: a run's child cancelled on its node, not by the
// core, says so in what the core shows: its state_reason is "cancelled on
// the node", and the run does not pass it off as done.
func TestARunChildCancelledOnTheNodeSaysSo(t *testing.T) {
	t.Parallel()
	f := newStepFleet(t, 1, "30", "")
	r := f.startRun(t, stepRun("1", "0", ""))
	var child string
	testwait.Within(t, 20*time.Second, "the child running on node-1", func() bool {
		got, err := f.alice.Run(ctxT(t), r.ID)
		if err != nil || len(got.Children) != 1 || got.Children[0].State != action.Running {
			return false
		}
		child = got.Children[0].ActionID
		return true
	})
	if _, err := f.agentC["node-1"].Cancel(ctxT(t), child); err != nil {
		t.Fatal(err)
	}
	a := f.waitCore(child, 20*time.Second, action.Cancelled)
	if !strings.HasPrefix(a.StateReason, "cancelled on the node") {
		t.Fatalf("the child's state_reason is %q, want it to say it was cancelled on the node", a.StateReason)
	}
	if end := f.waitRun(t, r.ID, 30*time.Second, "DONE", "FAILED", "CANCELLED"); end.State == "DONE" {
		t.Fatalf("the run ended DONE (%s) with its only child cancelled", end.StateReason)
	}
}

// A running run whose next node is drained (stage unavailable: wait) says
// so in its own state_reason, through the API; once the node is undrained
// the run goes on, and its reason no longer says it waits.
func TestARunWaitingForADrainedNodeSaysSo(t *testing.T) {
	t.Parallel()
	f := newStepFleet(t, 2, "0.1", "")
	if _, err := f.alice.DrainNode(ctxT(t), "e2e", "node-2", "disk swap"); err != nil {
		t.Fatal(err)
	}
	req := stepRun("1", "0", "")
	req.Stages[0].Unavailable = "wait"
	run := f.startRun(t, req)
	want := "waiting: node node-2 is drained"
	testwait.Within(t, 30*time.Second, "the run says it waits for node-2", func() bool {
		r, err := f.admin.Run(ctxT(t), run.ID)
		return err == nil && r.State == "RUNNING" && strings.HasSuffix(r.StateReason, "; "+want)
	})
	if _, err := f.alice.UndrainNode(ctxT(t), "e2e", "node-2"); err != nil {
		t.Fatal(err)
	}
	if r := f.waitRun(t, run.ID, 60*time.Second, "DONE", "FAILED", "CANCELLED", "PARTIAL"); r.State != "DONE" || strings.Contains(r.StateReason, "waiting") {
		t.Fatalf("after the undrain: %s (%s)", r.State, r.StateReason)
	}
}

// Issue 31, item 7: an operator on the node sees which run a queued action
// belongs to: the agent's record, listed on its socket, carries the run
// id, stage, wave and attempt the core's record has.
func TestARunChildSaysItsRunOnTheAgentsSocket(t *testing.T) {
	t.Parallel()
	f := newStepFleet(t, 1, "30", "")
	r := f.startRun(t, stepRun("1", "0", ""))
	var child *action.Action
	testwait.Within(t, 20*time.Second, "the child running on node-1", func() bool {
		got, err := f.alice.Run(ctxT(t), r.ID)
		if err != nil || len(got.Children) != 1 || got.Children[0].State != action.Running {
			return false
		}
		child, err = f.alice.Action(ctxT(t), got.Children[0].ActionID)
		return err == nil
	})
	if child.RunID != r.ID || child.Stage != "roll" || child.Wave < 1 || child.Attempt != 1 {
		t.Fatalf("the core's record of the child: run %q stage %q wave %d attempt %d", child.RunID, child.Stage, child.Wave, child.Attempt)
	}
	sock := client.NewAgent("http://agent", socketClient(t, filepath.Join(f.dirs["node-1"], "data", "agent.sock")))
	page, err := sock.Changes(ctxT(t), -1, 0, false)
	if err != nil || len(page.Actions) != 1 {
		t.Fatalf("the agent's actions: %+v %v", page, err)
	}
	a := page.Actions[0]
	if a.ID != child.ID || a.RunID != child.RunID || a.Stage != child.Stage || a.Step != child.Step ||
		a.Wave != child.Wave || a.Attempt != child.Attempt {
		t.Fatalf("the agent's record: id %s run %q stage %q step %q wave %d attempt %d; the core's: id %s run %q stage %q step %q wave %d attempt %d",
			a.ID, a.RunID, a.Stage, a.Step, a.Wave, a.Attempt, child.ID, child.RunID, child.Stage, child.Step, child.Wave, child.Attempt)
	}
}
