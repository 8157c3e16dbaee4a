package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/musterhq/muster/core/approval"
	"github.com/musterhq/muster/core/runs"
	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/action"
	"github.com/musterhq/muster/shared/testwait"
	"github.com/musterhq/muster/shared/wire"
)

// TestRunLinesShowTheStepOfEachNodeInFlight: run watch shows one line per
// stage and, under it, each node in flight with its current step and
// attempt (n of the step's attempts); nodes done or not started have none.
func TestRunLinesShowTheStepOfEachNodeInFlight(t *testing.T) {
	t.Parallel()
	r := &wire.Run{ID: "0123456789abcdef", State: "RUNNING", Stages: []wire.Stage{{Name: "upgrade", State: "RUNNING",
		Nodes: []string{"db-1", "db-2", "db-3"}, NodeCount: 3,
		Steps:  []wire.StepSpec{{Name: "drain"}, {Name: "verify", Retry: &wire.Retry{Attempts: 5}}},
		Counts: map[string]int{"DONE": 3, "RUNNING": 2}}},
		Children: []wire.RunChild{
			{Stage: "upgrade", NodeID: "db-1", Wave: 1, ActionID: "aaaaaaaa-1", State: action.Done,
				Steps: []wire.RunStepChild{{Step: "drain", Attempt: 1, State: action.Done}, {Step: "verify", Attempt: 1, State: action.Done}}},
			{Stage: "upgrade", NodeID: "db-2", Wave: 2, ActionID: "bbbbbbbb-2", State: action.Running,
				Steps: []wire.RunStepChild{{Step: "drain", Attempt: 1, State: action.Done},
					{Step: "verify", Attempt: 1, State: action.Failed}, {Step: "verify", Attempt: 2, State: action.Running}}},
			{Stage: "upgrade", NodeID: "db-3", Wave: 3, ActionID: "cccccccc-3", State: action.Running,
				Steps: []wire.RunStepChild{{Step: "drain", Attempt: 1, State: action.Running}}},
		}}
	lines := runLines(r)
	if len(lines) != 4 || !strings.HasPrefix(lines[0], "upgrade ") || lines[3] != "run 01234567: RUNNING" {
		t.Fatalf("lines %q: want the stage, two nodes in flight, the run", lines)
	}
	for i, want := range []string{"db-2 RUNNING wave 2 step verify attempt 2/5 bbbbbbbb", "db-3 RUNNING wave 3 step drain attempt 1/1 cccccccc"} {
		if got := strings.Join(strings.Fields(lines[i+1]), " "); got != want {
			t.Errorf("line %d: %q, want %q", i+1, got, want)
		}
	}
}

// storePausedRun stores a RUNNING-stage run of cluster prod asked by op,
// PAUSED with reason, and returns its id.
func (e *cliEnv) storePausedRun(reason string) string {
	e.t.Helper()
	return e.storePausedRunWith(reason, func(*store.RunStage) {})
}

// storePausedRunWith is storePausedRun with its stage changed by change.
func (e *cliEnv) storePausedRunWith(reason string, change func(*store.RunStage)) string {
	e.t.Helper()
	ctx := context.Background()
	now := time.Now().UTC()
	id := action.NewID()
	stages := []store.RunStage{{Name: "restart", Kind: "muster.io/debug.ping", Args: json.RawMessage(`{}`),
		Nodes: []string{"db-1", "db-2"}, OnFailure: "pause", State: store.StageRunning, Canary: 1}}
	change(&stages[0])
	if err := e.st.Update(ctx, func(tx store.Tx) error {
		return tx.InsertRun(ctx, &store.Run{ID: id, ClusterID: "prod", State: store.RunPaused, StateReason: reason,
			Requester: "op", ApprovedBy: "appr", Digest: "d", CreatedTS: now, UpdatedTS: now,
			Stages: stages})
	}); err != nil {
		e.t.Fatal(err)
	}
	return id
}

// TestRunWatchOfAPausedRunSaysWhyAndWhoMayGoOn: run watch of a PAUSED run
// does not wait silently: it shows the stage PAUSED, says why the run is
// paused and who may go on with it and how, and exits 3.
func TestRunWatchOfAPausedRunSaysWhyAndWhoMayGoOn(t *testing.T) {
	t.Parallel()
	e := setupCLI(t, approval.DefaultPolicy())
	for _, c := range []struct {
		name, reason, want string
	}{
		{"errors", fmt.Sprintf(runs.ReasonStageFailed, "restart", 1, "0"), "an approver other than op may resume it, forgiving them, with `muster run resume %s --reason WHY`"},
		{"canary", fmt.Sprintf(runs.ReasonCanary, "restart", 1, 0), "an approver other than op may promote it with `muster run promote %s --reason WHY`"},
		{"manual", runs.ReasonPaused + " by op", "an operator may resume it with `muster run resume %s`"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			id := e.storePausedRun(c.reason)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			var out lockedBuffer
			code, msg := e.runCtx(ctx, &out, "op", "run", "watch", id)
			if code != 3 || !strings.Contains(msg, "is PAUSED ("+c.reason+")") {
				t.Fatalf("exit %d %q, want 3 naming the pause", code, msg)
			}
			for _, want := range []string{"Run " + id + " is PAUSED (" + c.reason + ").", fmt.Sprintf(c.want, id),
				"--wait-resume", "PAUSED", "run " + id[:8] + ": PAUSED"} {
				if !strings.Contains(out.String(), want) {
					t.Errorf("watch printed %q, lacking %q", out.String(), want)
				}
			}
			if !strings.Contains(out.String(), "  PAUSED  ") {
				t.Errorf("the stage line does not show the stage PAUSED: %q", out.String())
			}
			// run show says the same, and the stage PAUSED in its table.
			show, msg, code := e.run("op", "run", "show", id)
			if code != 0 || !strings.Contains(show, fmt.Sprintf(c.want, id)) || strings.Contains(show, "--wait-resume") ||
				!strings.Contains(show, "restart  muster.io/debug.ping  PAUSED") {
				t.Errorf("run show: %d %q\n%s", code, msg, show)
			}
		})
	}
}

// TestRunWatchWaitResumeKeepsWatchingThroughAPause: with --wait-resume,
// watch of a PAUSED run stays until the run goes on and ends, then exits
// as its end says (0 for DONE).
func TestRunWatchWaitResumeKeepsWatchingThroughAPause(t *testing.T) {
	t.Parallel()
	e := setupCLI(t, approval.DefaultPolicy())
	id := e.storePausedRun(runs.ReasonPaused + " by op")
	out := watchThroughPause(t, e, id, "--wait-resume")
	if strings.Contains(out, "is PAUSED (") {
		t.Errorf("watch --wait-resume printed the pause's exit text: %q", out)
	}
}

// TestRunWatchKeepsWatchingACanaryThatPromotesItself: a canary whose
// auto_promote_after_s will promote it goes on without anyone, so watch
// says so (and who may promote it sooner) and keeps watching, without
// --wait-resume, until the run ends.
func TestRunWatchKeepsWatchingACanaryThatPromotesItself(t *testing.T) {
	t.Parallel()
	e := setupCLI(t, approval.DefaultPolicy())
	id := e.storePausedRunWith(fmt.Sprintf(runs.ReasonCanaryAuto, "restart", 1, 0, 15), func(st *store.RunStage) {
		st.AutoPromoteAfterS = 15
	})
	out := watchThroughPause(t, e, id)
	for _, want := range []string{"it promotes itself once its gates have held 15s",
		"an approver other than op may promote it sooner with `muster run promote " + id} {
		if !strings.Contains(out, want) {
			t.Errorf("watch printed %q, lacking %q", out, want)
		}
	}
	if strings.Count(out, "promotes itself once its gates have held 15s;") != 1 {
		t.Errorf("watch did not say once that the canary promotes itself: %q", out)
	}
}

// watchThroughPause runs run watch with args over the paused run id,
// checks it keeps watching while the run is paused, ends the run DONE and
// checks the watch then exits 0; it returns what the watch printed.
func watchThroughPause(t *testing.T, e *cliEnv, id string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out lockedBuffer
	done := make(chan int, 1)
	go func() {
		code, _ := e.runCtx(ctx, &out, "op", append(append([]string{"run", "watch"}, args...), id)...)
		done <- code
	}()
	testwait.Within(t, 20*time.Second, "watch showing the paused run", func() bool {
		return strings.Contains(out.String(), "run "+id[:8]+": PAUSED")
	})
	select {
	case code := <-done:
		t.Fatalf("watch %v ended (%d) while the run was paused: %q", args, code, out.String())
	default:
	}
	// The run goes on and ends DONE, with its events.
	bg := context.Background()
	if err := e.st.Update(bg, func(tx store.Tx) error {
		r, err := tx.Run(bg, id)
		if err != nil {
			return err
		}
		now := time.Now().UTC()
		r.State, r.StateReason, r.FinishedTS, r.Stages[0].State = store.RunDone, runs.ReasonDone, &now, store.StageDone
		if err := tx.UpdateRun(bg, r); err != nil {
			return err
		}
		return tx.AppendEvent(bg, &store.Event{Type: store.EventRunFinished, Actor: "core", ClusterID: "prod", RunID: id,
			Message: "run done"})
	}); err != nil {
		t.Fatal(err)
	}
	select {
	case code := <-done:
		if code != 0 || !strings.Contains(out.String(), "run "+id[:8]+": DONE") {
			t.Fatalf("watch ended %d with %q; want 0 after DONE", code, out.String())
		}
	case <-ctx.Done():
		t.Fatalf("watch %v did not end after the run did: %q", args, out.String())
	}
	return out.String()
}

// TestRunAbortAndCancelRollback: run abort (an approver, with a reason)
// ends a paused canary ABORTED, and watch says it ended so and exits
// non-zero; run cancel --rollback does the same for an operator.
func TestRunAbortAndCancelRollback(t *testing.T) {
	t.Parallel()
	e := setupCLI(t, approval.DefaultPolicy())
	id := e.storePausedRun(fmt.Sprintf(runs.ReasonCanary, "restart", 1, 0))
	out, msg, code := e.run("appr", "run", "abort", id[:8], "--reason", "p99 doubled")
	if code != 0 || !strings.Contains(out, "Aborted run "+id+" (ABORTED).") {
		t.Fatalf("run abort: exit %d %q\n%s", code, msg, out)
	}
	_, msg, code = e.run("op", "run", "watch", id)
	if code == 0 || !strings.Contains(msg, "ended ABORTED (aborted by appr: p99 doubled)") {
		t.Fatalf("watch of an aborted run: exit %d %q", code, msg)
	}
	out, _, _ = e.run("op", "run", "list", "--state", "aborted", "-o", "name")
	if strings.TrimSpace(out) != id {
		t.Fatalf("run list --state aborted: %q", out)
	}
	other := e.storePausedRun(runs.ReasonPaused + " by op")
	out, msg, code = e.run("op", "run", "cancel", other, "--rollback")
	if code != 0 || !strings.Contains(out, "(ABORTED)") {
		t.Fatalf("run cancel --rollback: exit %d %q\n%s", code, msg, out)
	}
}

// TestShowAndWatchSayWhyANodeFailed: run show lists a failed node with its
// reason and the last lines of its output; run watch its last line; both
// escaped.
func TestShowAndWatchSayWhyANodeFailed(t *testing.T) {
	t.Parallel()
	r := &wire.Run{ID: "0123456789abcdef", State: "PAUSED", Stages: []wire.Stage{{Name: "upgrade", State: "RUNNING"}},
		Summary: &wire.RunSummary{Failed: []wire.StageNode{{Stage: "upgrade", NodeID: "db-3",
			Reason: "step upgrade FAILED (attempt 3 of 3): run exited with status 3",
			Output: "unpacking 2.0\nE: disk full on /var\x07"}}}}
	var b strings.Builder
	if err := printRun(&b, r); err != nil {
		t.Fatal(err)
	}
	show := b.String()
	for _, want := range []string{"Failed: upgrade/db-3 (step upgrade FAILED (attempt 3 of 3): run exited with status 3)",
		"    unpacking 2.0\n    E: disk full on /var\\x07\n"} {
		if !strings.Contains(show, want) {
			t.Errorf("run show lacks %q:\n%s", want, show)
		}
	}
	lines := strings.Join(runLines(r), "\n")
	if !strings.Contains(lines, "db-3                 FAILED step upgrade FAILED (attempt 3 of 3): run exited with status 3: E: disk full on /var\\x07") ||
		strings.Contains(show+lines, "\x07") {
		t.Fatalf("run watch lines:\n%s", lines)
	}
}

// TestRunRetryFromAndLocksAreShown: run retry --from takes "failed" only
// (one line, exit 2 otherwise, nothing asked of the core); run show says
// a run's lock, each stage's, and where a retried node starts, escaped.
func TestRunRetryFromAndLocksAreShown(t *testing.T) {
	t.Parallel()
	e := setupCLI(t, approval.DefaultPolicy())
	_, msg, code := e.run("op", "run", "retry", "0123456789abcdef", "--from", "verify")
	if code != 2 || !strings.Contains(msg, `--from is "failed" or absent`) || strings.Count(strings.TrimSpace(msg), "\n") > 0 {
		t.Fatalf("run retry --from verify: exit %d %q", code, msg)
	}
	r := &wire.Run{ID: "0123456789abcdef", State: "PENDING_APPROVE", Lock: &wire.Lock{Name: "db", Scope: wire.LockGlobal},
		Stages: []wire.Stage{{Name: "upgrade", State: "PENDING", Lock: &wire.Lock{Name: "lb\x1b[31m", Scope: wire.LockCluster},
			KindLocks: []wire.KindLock{{Name: "schema", Scope: wire.LockGlobal, Kinds: []string{"example.com/db.migrate", "x.y/\x1b[2J"}}},
			Reuse:     []wire.ReusedNode{{NodeID: "db-3", Steps: []string{"drain", "upgrade"}, From: "verify"}}}}}
	var b strings.Builder
	if err := printRun(&b, r); err != nil {
		t.Fatal(err)
	}
	show := b.String()
	for _, want := range []string{"db (global)", `lock: lb\x1b[31m (held while the stage runs)`,
		`lock: schema (global) (held while the stage runs: kinds example.com/db.migrate, x.y/\x1b[2J declare it)`,
		"upgrade: node db-3 starts at verify (reuses drain, upgrade)"} {
		if !strings.Contains(show, want) {
			t.Fatalf("run show lacks %q:\n%s", want, show)
		}
	}
	if strings.Contains(show, "\x1b") {
		t.Fatalf("run show prints a raw escape:\n%q", show)
	}
}
