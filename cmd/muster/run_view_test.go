package main

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/musterhq/muster/shared/wire"
)

// screen is a small terminal: enough of VT100 to replay what liveView
// writes (text, \r, \n, cursor up, erase line, erase below).
type screen struct {
	lines []string
	row   int
}

func (s *screen) Write(p []byte) (int, error) {
	in := string(p)
	for len(in) > 0 {
		switch {
		case strings.HasPrefix(in, "\x1b["):
			end := strings.IndexAny(in[2:], "ABCDHJK")
			if end < 0 {
				panic("unfinished escape " + strconv.Quote(in))
			}
			arg, cmd := in[2:2+end], in[2+end]
			in = in[3+end:]
			switch cmd {
			case 'A':
				n, _ := strconv.Atoi(arg)
				s.row = max(0, s.row-max(n, 1))
			case 'K':
				s.set("")
			case 'J':
				if s.row < len(s.lines) {
					s.lines = s.lines[:s.row]
				}
			default:
				panic("unexpected escape " + string(cmd))
			}
		case in[0] == '\r':
			in = in[1:]
		case in[0] == '\n':
			s.row++
			in = in[1:]
		default:
			end := strings.IndexAny(in, "\x1b\r\n")
			if end < 0 {
				end = len(in)
			}
			s.set(s.get() + in[:end])
			in = in[end:]
		}
	}
	return len(p), nil
}

func (s *screen) get() string {
	if s.row < len(s.lines) {
		return s.lines[s.row]
	}
	return ""
}

func (s *screen) set(l string) {
	for len(s.lines) <= s.row {
		s.lines = append(s.lines, "")
	}
	s.lines[s.row] = l
}

func TestLiveViewRedrawsInPlace(t *testing.T) {
	t.Parallel()
	var s screen
	v := &liveView{w: &s}
	for _, lines := range [][]string{
		{"build [....] 0/2", "  db-1 RUNNING", "run 1234: RUNNING"},
		{"build [##..] 1/2", "  db-1 DONE", "  db-2 RUNNING", "run 1234: RUNNING"},
		{"build [####] 2/2", "run 1234: DONE"}, // fewer lines: the rest is cleared
	} {
		if err := v.show(lines); err != nil {
			t.Fatal(err)
		}
		if strings.Join(s.lines, "\n") != strings.Join(lines, "\n") {
			t.Fatalf("screen:\n%s\nwant:\n%s", strings.Join(s.lines, "\n"), strings.Join(lines, "\n"))
		}
	}
}

func TestPlainViewPrintsChangedLines(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	v := &plainView{w: &b, now: func() time.Time { return time.Date(2026, 1, 1, 10, 0, 0, 0, time.Local) }}
	v.show([]string{"build 0/2", "run: RUNNING"})
	v.show([]string{"build 1/2", "run: RUNNING"})
	want := "10:00:00  build 0/2\n10:00:00  run: RUNNING\n10:00:00  build 1/2\n"
	if b.String() != want || strings.Contains(b.String(), "\x1b") {
		t.Fatalf("printed %q, want %q", b.String(), want)
	}
}

// On a small terminal, lines are cut to its width and their number to its
// height, so that a redraw always lands on what it drew.
func TestLiveViewFitsTheTerminal(t *testing.T) {
	t.Parallel()
	var s screen
	v := &liveView{w: &s, width: 12, height: 4}
	long := []string{"a stage line that is long", "  db-1 RUNNING", "  db-2 RUNNING", "  db-3 RUNNING", "run: RUNNING"}
	for range 3 {
		if err := v.show(long); err != nil {
			t.Fatal(err)
		}
	}
	want := []string{"a stage li…", "  db-1 RUN…", "… 3 more l…"}
	if strings.Join(s.lines, "\n") != strings.Join(want, "\n") {
		t.Fatalf("screen %q, want %q", s.lines, want)
	}
}

// TestStageLineOfAProcedureCountsEveryStep: a stage with steps has more
// children than nodes; its bar stays within its width and counts them all
// (it once asked strings.Repeat for a negative count and panicked).
func TestStageLineCountsNodesNotAttempts(t *testing.T) {
	t.Parallel()
	// One node failed five attempts of a step; another waits.
	st := &wire.Stage{Name: "upgrade", Nodes: []string{"n2", "n3"}, NodeCount: 2, State: "PAUSED",
		Steps:    []wire.StepSpec{{Name: "drain"}, {Name: "upgrade"}},
		Counts:   map[string]int{"DONE": 3, "FAILED": 5},
		Progress: wire.NodeProgress{Failed: 1, Waiting: 1, Total: 2}}
	got := stageLine(st)
	if !strings.Contains(got, "[##########..........] 1/2") || !strings.Contains(got, "failed 1  waiting 1") ||
		strings.Contains(got, "5") {
		t.Fatalf("stageLine = %q, want 1 of 2 nodes: one failed, one waiting", got)
	}
}

// TestNodeStateShowsAFailedNodeAsFailed: a node whose upgrade failed ends
// with a DONE undrain and rollback; run show's Nodes table says FAILED.
func TestNodeStateShowsAFailedNodeAsFailed(t *testing.T) {
	t.Parallel()
	r := &wire.Run{Stages: []wire.Stage{{Name: "upgrade", Failed: []string{"node-3"}, Skipped: []string{"node-4"}}}}
	for node, want := range map[string]string{"node-2": "DONE", "node-3": "FAILED", "node-4": "SKIPPED"} {
		if got := nodeState(r, wire.RunChild{Stage: "upgrade", NodeID: node, State: "DONE"}); got != want {
			t.Errorf("%s: %s, want %s", node, got, want)
		}
	}
	if got := nodeState(r, wire.RunChild{Stage: "upgrade", NodeID: "node-5"}); got != "-" {
		t.Errorf("a node without a child: %s, want -", got)
	}
}

// TestRunProgressCountsNodes: run list's PROGRESS counts nodes finished:
// a paused run with two of its four nodes done is 2/4, whatever children
// its steps and retries made (it once printed 9/9).
func TestRunProgressCountsNodes(t *testing.T) {
	t.Parallel()
	r := &wire.Run{Stages: []wire.Stage{
		{Name: "upgrade", Nodes: []string{"n1", "n2", "n3", "n4"}, NodeCount: 4,
			Steps:    []wire.StepSpec{{Name: "drain"}, {Name: "upgrade"}, {Name: "verify"}, {Name: "undrain"}},
			Counts:   map[string]int{"DONE": 8, "FAILED": 1},
			Progress: wire.NodeProgress{Done: 2, Waiting: 2, Total: 4}},
	}}
	if done, total := progress(r); done != 2 || total != 4 {
		t.Fatalf("progress = %d/%d, want 2/4", done, total)
	}
	// From a core that sends no progress: nothing finished, every node.
	r.Stages[0].Progress = wire.NodeProgress{}
	if done, total := progress(r); done != 0 || total != 4 {
		t.Fatalf("progress = %d/%d, want 0/4", done, total)
	}
}

// TestApprovalAndShowOfAProcedureSayItsSteps: a stage of steps has no kind
// nor args of its own; what bob approves and run show say how many steps it
// has, never "null".
func TestApprovalAndShowOfAProcedureSayItsSteps(t *testing.T) {
	t.Parallel()
	r := &wire.Run{ID: "r1", ClusterID: "dev", Requester: "alice", State: "PENDING_APPROVE", Stages: []wire.Stage{{
		Name: "upgrade", Nodes: []string{"n2", "n3"}, NodeCount: 2, State: "PENDING",
		Args:  json.RawMessage("null"),
		Steps: []wire.StepSpec{{Name: "drain"}, {Name: "upgrade"}, {Name: "verify"}, {Name: "undrain"}}}}}
	var b strings.Builder
	printApproval(&b, r)
	if err := printRun(&b, r); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	if strings.Contains(out, "null") || !strings.Contains(out, "upgrade: 4 steps on n2,n3") ||
		!strings.Contains(out, "8 child actions") {
		t.Fatalf("printed\n%s\nwant the stage's 4 steps, 8 children and no null", out)
	}
}

func TestShowSaysWhyANodeWasSkipped(t *testing.T) {
	t.Parallel()
	r := &wire.Run{ID: "r1", ClusterID: "dev", State: "PARTIAL", Stages: []wire.Stage{{Name: "b", State: "DONE"}},
		Summary: &wire.RunSummary{Skipped: []wire.StageNode{{Stage: "b", NodeID: "n2", Reason: "failed stage a\x1b[2J"}}}}
	var b strings.Builder
	if err := printRun(&b, r); err != nil {
		t.Fatal(err)
	}
	if out := b.String(); !strings.Contains(out, "Skipped: b/n2 (failed stage a") || strings.Contains(out, "\x1b") {
		t.Fatalf("printed\n%s\nwant b/n2 skipped for failing stage a, escaped", out)
	}
}
