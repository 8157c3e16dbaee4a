package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/musterhq/muster/shared/limit"
	"github.com/musterhq/muster/shared/testwait"
	"github.com/musterhq/muster/shared/wire"
)

// otlpSpan is one line the receiver writes (e2e/otlpreceiver).
type otlpSpan struct {
	TraceID      string            `json:"trace_id"`
	SpanID       string            `json:"span_id"`
	ParentSpanID string            `json:"parent_span_id"`
	Name         string            `json:"name"`
	StartNanos   uint64            `json:"start_unix_nano"`
	EndNanos     uint64            `json:"end_unix_nano"`
	Status       int32             `json:"status_code"`
	Attributes   map[string]string `json:"attributes"`
	Service      string            `json:"service"`
}

// otlpReceiver builds and starts the OTLP/HTTP receiver program and returns
// its address and the file it writes spans to.
func otlpReceiver(t *testing.T) (addr, spans string) {
	t.Helper()
	dir := t.TempDir()
	bin := filepath.Join(dir, "otlpreceiver")
	if out, err := exec.Command("go", "build", "-o", bin, "./otlpreceiver").CombinedOutput(); err != nil {
		t.Fatalf("build the receiver: %v\n%s", err, out)
	}
	spans, addrFile := filepath.Join(dir, "spans.jsonl"), filepath.Join(dir, "addr")
	cmd := exec.Command(bin, "-out", spans, "-addr-file", addrFile)
	logf, err := os.Create(filepath.Join(dir, "receiver.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait(); logf.Close() })
	testwait.Within(t, 10*time.Second, "the receiver's address", func() bool {
		b, err := os.ReadFile(addrFile)
		addr = string(b)
		return err == nil && addr != ""
	})
	return addr, spans
}

func readSpans(t *testing.T, path string) []otlpSpan {
	t.Helper()
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []otlpSpan
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var s otlpSpan
		if err := json.Unmarshal(sc.Bytes(), &s); err != nil {
			t.Fatalf("span line %q: %v", sc.Text(), err)
		}
		out = append(out, s)
	}
	return out
}

// TestTracesOfARunReachAnOTLPReceiver is issue 38's end-to-end test: a
// core with tracing on sends a procedure's trace to a real OTLP/HTTP
// receiver process (built on the official OTLP protobuf packages). The
// trace has one root, the run's; a span per node step attempt (a step that
// failed once and was retried has two), each under the root; the agent's
// run of each under its step attempt; pushes under their step attempt. The
// kind's command saw, in $TRACEPARENT, its trace and the span of its run on
// the agent.
func TestTracesOfARunReachAnOTLPReceiver(t *testing.T) {
	t.Parallel()
	addr, spansPath := otlpReceiver(t)
	dir := t.TempDir()
	envLog := filepath.Join(dir, "env.log")
	script := filepath.Join(dir, "step.sh")
	// Each run logs its action, step and $TRACEPARENT; the first run of
	// "verify" on node-1 fails (the retry is a second attempt).
	body := fmt.Sprintf(`#!/bin/sh
echo "$MUSTER_ACTION_ID $MUSTER_NODE_ID $1 ${TRACEPARENT:-none}" >> %[1]q
if [ "$1" = verify ] && [ "$MUSTER_NODE_ID" = node-1 ] && [ ! -f %[2]q ]; then touch %[2]q; exit 3; fi
`, envLog, filepath.Join(dir, "failed-once"))
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	var kinds strings.Builder
	kinds.WriteString("actions:\n  external:\n")
	for _, s := range []string{"upgrade", "verify"} {
		fmt.Fprintf(&kinds, "    - kind: example.com/%s\n      run: [%q, %q]\n", s, script, s)
	}
	f := newFleetWith(t, fleetOptions{nodes: 2, actionsYAML: kinds.String(),
		coreExtra: "tracing:\n  endpoint: http://" + addr + "\n  service_name: muster-e2e\n"})
	one, zero := limit.MustParse("1"), limit.MustParse("0")
	req := &wire.CreateRunRequest{ClusterID: "e2e", Stages: []wire.StageSpec{{
		Name: "roll", Target: wire.Target{All: true}, MaxConcurrency: &one, MaxErrors: &zero,
		Steps: []wire.StepSpec{{Name: "upgrade", Kind: "example.com/upgrade"},
			{Name: "verify", Kind: "example.com/verify", Retry: &wire.Retry{Attempts: 2}}},
	}}}
	run, err := f.alice.CreateRun(ctxT(t), req)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.bob.RunVerb(ctxT(t), run.ID, "approve", ""); err != nil {
		t.Fatal(err)
	}
	if end := (&stepFleet{fleet: f}).waitRun(t, run.ID, 90*time.Second, "DONE", "FAILED", "CANCELLED", "PAUSED"); end.State != "DONE" {
		t.Fatalf("run ended %s (%s)", end.State, end.StateReason)
	}
	children := (&procFleet{fleet: f}).children(t, run.ID)
	if len(children) != 5 { // 2 nodes × 2 steps, and verify's retry on node-1
		t.Fatalf("%d children, want 5", len(children))
	}

	// The root is recorded when the run ends; the receiver has it within
	// a batch or two.
	var spans []otlpSpan
	var root otlpSpan
	testwait.Within(t, 30*time.Second, "the run's root span at the receiver", func() bool {
		spans = readSpans(t, spansPath)
		for _, s := range spans {
			if s.Attributes["cicd.pipeline.run.id"] == run.ID && s.ParentSpanID == "" {
				root = s
				return true
			}
		}
		return false
	})
	var roots, steps, agentRuns, pushes, approvals []otlpSpan
	bySpan := map[string]otlpSpan{}
	for _, s := range spans {
		if s.TraceID != root.TraceID {
			continue
		}
		bySpan[s.SpanID] = s
		switch {
		case s.ParentSpanID == "":
			roots = append(roots, s)
		case strings.HasPrefix(s.Name, "step "):
			steps = append(steps, s)
		case strings.HasPrefix(s.Name, "agent run "):
			agentRuns = append(agentRuns, s)
		case s.Name == "push":
			pushes = append(pushes, s)
		case s.Name == "approval wait":
			approvals = append(approvals, s)
		}
	}
	if len(roots) != 1 || root.Service != "muster-e2e" || root.Attributes["cicd.pipeline.result"] != "success" {
		t.Fatalf("roots of the run's trace: %+v", roots)
	}
	if len(approvals) != 1 || approvals[0].ParentSpanID != root.SpanID {
		t.Errorf("approval waits: %+v, want one under the root", approvals)
	}
	stepOf := map[string]otlpSpan{} // by action id
	for _, s := range steps {
		if s.ParentSpanID != root.SpanID {
			t.Errorf("step span %s has parent %s, want the root %s", s.Name, s.ParentSpanID, root.SpanID)
		}
		if s.StartNanos < root.StartNanos || s.EndNanos > root.EndNanos {
			t.Errorf("step span %s runs outside its root", s.Name)
		}
		stepOf[s.Attributes["cicd.pipeline.task.run.id"]] = s
	}
	if len(steps) != len(children) {
		t.Errorf("%d step attempt spans, want %d (one per child)", len(steps), len(children))
	}
	for _, c := range children {
		s, ok := stepOf[c.ID]
		if !ok {
			t.Errorf("no span for %s's step %s attempt %d on %s", c.ID, c.Step, c.Attempt, c.NodeID)
			continue
		}
		if s.Attributes["muster.node.id"] != c.NodeID || s.Attributes["muster.run.attempt"] != fmt.Sprint(c.Attempt) ||
			s.Attributes["cicd.pipeline.task.name"] != c.Stage+"/"+c.Step {
			t.Errorf("span of %s: %v, want node %s attempt %d step %s", c.ID, s.Attributes, c.NodeID, c.Attempt, c.Step)
		}
		if want := map[string]string{"DONE": "success", "FAILED": "failure"}[string(c.State)]; s.Attributes["cicd.pipeline.task.run.result"] != want {
			t.Errorf("span of %s (%s): result %q, want %q", c.ID, c.State, s.Attributes["cicd.pipeline.task.run.result"], want)
		}
	}
	runOf := map[string]otlpSpan{} // agent runs by parent
	for _, s := range agentRuns {
		runOf[s.ParentSpanID] = s
	}
	for id, s := range stepOf {
		if _, ok := runOf[s.SpanID]; !ok {
			t.Errorf("no agent run span under the step attempt of %s", id)
		}
	}
	if len(pushes) < len(children) {
		t.Errorf("%d push spans, want at least %d", len(pushes), len(children))
	}
	for _, p := range pushes {
		if parent, ok := bySpan[p.ParentSpanID]; !ok || !strings.HasPrefix(parent.Name, "step ") {
			t.Errorf("push span under %q, want a step attempt", parent.Name)
		}
	}

	// What the kind's command saw: its trace, and its run on the agent as
	// the parent, sampled.
	seen := 0
	for _, l := range lines(envLog) {
		fs := strings.Fields(l)
		if len(fs) != 4 {
			continue
		}
		seen++
		s, ok := stepOf[fs[0]]
		if !ok {
			t.Errorf("the command of %s ran, but its step has no span", fs[0])
			continue
		}
		want := "00-" + root.TraceID + "-" + runOf[s.SpanID].SpanID + "-01"
		if fs[3] != want {
			t.Errorf("TRACEPARENT of %s = %s, want %s", fs[0], fs[3], want)
		}
	}
	if seen != len(children) {
		t.Errorf("%d command runs logged, want %d", seen, len(children))
	}
}
