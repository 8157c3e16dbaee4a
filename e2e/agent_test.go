package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/musterhq/muster/shared/action"
	"github.com/musterhq/muster/shared/client"
	"github.com/musterhq/muster/shared/testwait"
	"github.com/musterhq/muster/shared/wire"
)

func push(t *testing.T, a *client.Agent, kind, args string) *action.Action {
	t.Helper()
	rec, status, err := a.Push(ctxT(t), &wire.PushRequest{ID: action.NewID(), Kind: kind, Args: json.RawMessage(args)})
	if err != nil || status != 201 {
		t.Fatalf("push %s: status %d, %v", kind, status, err)
	}
	return rec
}

func waitAgentState(t *testing.T, a *client.Agent, id string, within time.Duration, want ...action.State) *action.Action {
	t.Helper()
	var got *action.Action
	testwait.Within(t, within, fmt.Sprintf("action %s in %v", id, want), func() bool {
		rec, err := a.Get(ctxT(t), id)
		if err != nil {
			return false
		}
		got = rec
		for _, w := range want {
			if rec.State == w {
				return true
			}
		}
		return false
	})
	return got
}

// appendScript writes a script that appends its action id to log, then waits secs.
func appendScript(t *testing.T, log string, secs string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "append.sh")
	body := fmt.Sprintf("#!/bin/sh\necho \"$MUSTER_ACTION_ID\" >> %q\nsleep %s\n", log, secs)
	if err := os.WriteFile(p, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// Guarantee 1: an action the API answered 201 for survives SIGKILL.
func TestAcceptedActionsSurviveSIGKILL(t *testing.T) {
	t.Parallel()
	p, ag, _ := agentProc(t, "g1", "")
	// Block the runner so that nothing finishes, then push from several
	// clients and kill the agent while they push.
	push(t, ag, "muster.io/debug.sleep", `{"seconds":3600}`)
	var mu sync.Mutex
	var accepted []string
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				id := action.NewID()
				_, status, err := ag.Push(ctxT(t), &wire.PushRequest{ID: id, Kind: "muster.io/debug.ping"})
				if err != nil {
					return // the agent is gone
				}
				if status == 201 {
					mu.Lock()
					accepted = append(accepted, id)
					mu.Unlock()
				}
			}
		}()
	}
	testwait.Within(t, 20*time.Second, "some accepted pushes", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(accepted) >= 50
	})
	p.kill()
	close(stop)
	wg.Wait()

	p.restart()
	for _, id := range accepted {
		if _, err := ag.Get(ctxT(t), id); err != nil {
			t.Fatalf("action %s was answered 201 but is gone after SIGKILL: %v", id, err)
		}
	}
	t.Logf("%d accepted actions all survived SIGKILL", len(accepted))
}

// Guarantees 2 and 5: at most one action RUNNING across restarts; a sleep
// interrupted by SIGKILL resumes from its progress and ends at its original
// deadline.
func TestSleepResumesAfterSIGKILLAtItsOriginalDeadline(t *testing.T) {
	t.Parallel()
	p, ag, _ := agentProc(t, "g5", "")
	first := push(t, ag, "muster.io/debug.sleep", `{"seconds":3}`)
	second := push(t, ag, "muster.io/debug.sleep", `{"seconds":0.2}`)
	var deadline time.Time
	testwait.Within(t, 20*time.Second, "the sleep's deadline in its progress", func() bool {
		rec, err := ag.Get(ctxT(t), first.ID)
		if err != nil || rec.State != action.Running {
			return false
		}
		var pr struct{ Deadline time.Time }
		return json.Unmarshal(rec.Progress, &pr) == nil && !pr.Deadline.IsZero() && func() bool { deadline = pr.Deadline; return true }()
	})
	p.kill()
	p.restart()

	info, err := ag.Info(ctxT(t))
	if err != nil || info.Queue[action.Running] > 1 {
		t.Fatalf("after restart: %+v %v", info, err)
	}
	done := waitAgentState(t, ag, first.ID, 30*time.Second, action.Done)
	if done.FinishedTS.Before(deadline) {
		t.Fatalf("finished %s before its deadline %s", done.FinishedTS, deadline)
	}
	if late := done.FinishedTS.Sub(deadline); late > 2*time.Second {
		t.Fatalf("finished %s after its original deadline: the wait restarted", late)
	}
	next := waitAgentState(t, ag, second.ID, 30*time.Second, action.Done)
	if next.StartedTS.Before(*done.FinishedTS) {
		t.Fatalf("second action started %s, before the first finished %s", next.StartedTS, done.FinishedTS)
	}
	if len(done.History) != 3 {
		t.Fatalf("history %+v: want queued, started, finished once each", done.History)
	}
}

// Guarantees 4 and 5: a non-idempotent external command interrupted by
// SIGKILL fails with reason "interrupted" and is never run again, not even
// when its id is pushed again, nor after its record is purged (410 Gone).
func TestExternalActionNeverRunsTwice(t *testing.T) {
	t.Parallel()
	log := filepath.Join(t.TempDir(), "runs.log")
	script := appendScript(t, log, "30")
	extra := fmt.Sprintf(`actions:
  retention: 1s
  retention_max: 2s
  purge_interval: 200ms
  external:
    - kind: example.com/append
      run: [%q]
`, script)
	p, ag, _ := agentProc(t, "g4", extra)
	rec := push(t, ag, "example.com/append", `{}`)
	testwait.Within(t, 20*time.Second, "the command to start", func() bool { return len(lines(log)) == 1 })
	p.kill()
	p.restart()

	failed := waitAgentState(t, ag, rec.ID, 20*time.Second, action.Failed)
	if failed.StateReason != action.ReasonInterrupted {
		t.Fatalf("reason %q, want %q", failed.StateReason, action.ReasonInterrupted)
	}
	// The same id pushed again: 200 with the record, not run again.
	again, status, err := ag.Push(ctxT(t), &wire.PushRequest{ID: rec.ID, Kind: "example.com/append", Args: json.RawMessage(`{}`)})
	if err != nil || status != 200 || again.State != action.Failed {
		t.Fatalf("repeat push: %d %v %+v", status, err, again)
	}
	// Acknowledge everything so retention purges it; then the id is gone for good.
	page, err := ag.Changes(ctxT(t), 0, 1000, false)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ag.Changes(ctxT(t), page.NextCursor, 1, true); err != nil {
		t.Fatal(err)
	}
	testwait.Within(t, 20*time.Second, "the record to be purged", func() bool {
		_, err := ag.Get(ctxT(t), rec.ID)
		return client.StatusOf(err) == 404
	})
	_, status, err = ag.Push(ctxT(t), &wire.PushRequest{ID: rec.ID, Kind: "example.com/append", Args: json.RawMessage(`{}`)})
	if status != 410 {
		t.Fatalf("push of a purged id: %d %v, want 410", status, err)
	}
	if n := len(lines(log)); n != 1 {
		t.Fatalf("the command ran %d times, want once", n)
	}
}

// Guarantee 5, idempotent kinds: the interrupted command is run again.
func TestIdempotentExternalActionRerunsAfterSIGKILL(t *testing.T) {
	t.Parallel()
	log := filepath.Join(t.TempDir(), "runs.log")
	script := appendScript(t, log, "1")
	extra := fmt.Sprintf("actions:\n  external:\n    - kind: example.com/append\n      run: [%q]\n      idempotent: true\n", script)
	p, ag, _ := agentProc(t, "g5i", extra)
	rec := push(t, ag, "example.com/append", `{}`)
	testwait.Within(t, 20*time.Second, "the command to start", func() bool { return len(lines(log)) == 1 })
	p.kill()
	p.restart()
	waitAgentState(t, ag, rec.ID, 30*time.Second, action.Done)
	if n := len(lines(log)); n != 2 {
		t.Fatalf("the command ran %d times, want twice (once interrupted, once again)", n)
	}
}

// SIGTERM: the agent commits the step in progress, exits 0, and the action
// resumes at the next start.
func TestSIGTERMExitsCleanlyAndResumes(t *testing.T) {
	t.Parallel()
	p, ag, _ := agentProc(t, "term", "")
	rec := push(t, ag, "muster.io/debug.sleep", `{"seconds":2}`)
	waitAgentState(t, ag, rec.ID, 20*time.Second, action.Running)
	if code := p.stop(); code != 0 {
		t.Fatalf("exit code %d after SIGTERM:\n%s", code, p.logs())
	}
	p.restart()
	done := waitAgentState(t, ag, rec.ID, 30*time.Second, action.Done)
	if len(done.History) != 3 {
		t.Fatalf("history %+v", done.History)
	}
}

// An invalid configuration prints one line per bad field and exits non-zero
// before anything starts.
func TestInvalidConfigurationRefusedBeforeStart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "agent.yaml")
	cfg := fmt.Sprintf("data_dir: %s\napi:\n  addr: 0.0.0.0:7999\nactions:\n  retention: -1s\n", filepath.Join(dir, "data"))
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(binary, "agent", "--config", path).CombinedOutput()
	ee, ok := err.(*exec.ExitError)
	if !ok || ee.ExitCode() != 2 {
		t.Fatalf("exit %v, want 2:\n%s", err, out)
	}
	for _, want := range []string{"node_id:", "cluster_id:", "api.addr:", "actions.retention:"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("output lacks a line for %s:\n%s", want, out)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "data")); !os.IsNotExist(err) {
		t.Fatalf("data_dir was created by a refused start")
	}
	// An unknown key is an error too.
	if err := os.WriteFile(path, []byte("node_id: a\ncluster_id: b\ndata_dir: x\nnot_a_key: 1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err = exec.Command(binary, "agent", "--config", path).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "not_a_key") {
		t.Fatalf("unknown key accepted: %v\n%s", err, out)
	}
}

// Issue 30, item 7: a command that exited before its deadline is judged by
// its exit status, even when the agent only sees the exit after the
// deadline. The agent is frozen (SIGSTOP) while a 1.4 s command runs under a
// 3 s timeout, and resumed once the command has exited and the deadline has
// passed: both are ready when it wakes, and the exit decides.
func TestFinishedCommandIsNotTimedOutByAFrozenAgent(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	started, exited := filepath.Join(dir, "started"), filepath.Join(dir, "exited")
	script := filepath.Join(dir, "quick.sh")
	body := fmt.Sprintf("#!/bin/sh\ntouch %q\nsleep 1.4\ntouch %q\nexit 0\n", started, exited)
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	extra := fmt.Sprintf("actions:\n  external:\n    - kind: example.com/quick\n      run: [%q]\n", script)
	p, ag, _ := agentProc(t, "frozen", extra)

	rec, status, err := ag.Push(ctxT(t), &wire.PushRequest{ID: action.NewID(), Kind: "example.com/quick", Args: json.RawMessage(`{}`), TimeoutS: 3})
	if err != nil || status != 201 {
		t.Fatalf("push: status %d, %v", status, err)
	}
	running := waitAgentState(t, ag, rec.ID, 20*time.Second, action.Running)
	testwait.For(t, "the command to start", func() bool { _, err := os.Stat(started); return err == nil })
	p.freeze()
	thawed := false
	defer func() {
		if !thawed {
			p.thaw()
		}
	}()
	testwait.For(t, "the command to exit", func() bool { _, err := os.Stat(exited); return err == nil })
	deadline := running.StartedTS.Add(3 * time.Second)
	testwait.For(t, "the action's deadline to pass", func() bool { return time.Now().After(deadline.Add(300 * time.Millisecond)) })
	p.thaw()
	thawed = true

	got := waitAgentState(t, ag, rec.ID, 20*time.Second, action.Done, action.Failed)
	if got.State != action.Done {
		t.Fatalf("the command exited 0 before its deadline, yet the action ended %s (%q)", got.State, got.StateReason)
	}
}
