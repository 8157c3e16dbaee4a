package runner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/musterhq/muster/agent/handlers"
	"github.com/musterhq/muster/agent/queue"
	"github.com/musterhq/muster/shared/action"
	"github.com/musterhq/muster/shared/startstop"
)

func setup(t *testing.T, dir string) (*queue.Queue, *Runner) {
	t.Helper()
	q, err := queue.Open(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	reg, err := handlers.NewRegistry(nil, handlers.Env{NodeID: "n1"})
	if err != nil {
		t.Fatal(err)
	}
	r := New(Config{Queue: q, Handlers: reg, Actor: "n1", Idle: 20 * time.Millisecond})
	r.TestSignals.Init(t)
	t.Cleanup(func() { r.Stop(); q.Close() })
	return q, r
}

func enqueue(t *testing.T, q *queue.Queue, kind, args string, timeoutS int) string {
	t.Helper()
	a := &action.Action{ID: action.NewID(), Kind: kind, Args: json.RawMessage(args), Origin: action.OriginAgent, TimeoutS: timeoutS}
	if _, _, err := q.Enqueue(context.Background(), a, "test"); err != nil {
		t.Fatal(err)
	}
	return a.ID
}

// waitState waits for the runner to commit the action in want and returns
// the record.
func waitState(t *testing.T, q *queue.Queue, r *Runner, id string, want action.State) *action.Action {
	t.Helper()
	if want == action.Running {
		r.TestSignals.Claimed.WaitFor("claim of "+id, func(got string) bool { return got == id })
	} else {
		r.TestSignals.Committed.WaitFor(fmt.Sprintf("%s %s", id, want), func(c Committed) bool {
			return c.ID == id && c.State == want
		})
	}
	a, err := q.Get(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	if a.State != want {
		t.Fatalf("action %s: state %s after the runner committed %s", id, a.State, want)
	}
	return a
}

func TestRunsInCreationOrderOneAtATime(t *testing.T) {
	t.Parallel()
	q, r := setup(t, t.TempDir())
	var ids []string
	for i := 0; i < 5; i++ {
		ids = append(ids, enqueue(t, q, handlers.KindSleep, `{"seconds":0.05}`, 0))
	}
	if err := r.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	var prev *action.Action
	for _, id := range ids {
		a := waitState(t, q, r, id, action.Done)
		if prev != nil && a.StartedTS.Before(*prev.FinishedTS) {
			t.Fatalf("%s started at %s before %s finished at %s", a.ID, a.StartedTS, prev.ID, prev.FinishedTS)
		}
		prev = a
	}
}

func TestCancelRunningAction(t *testing.T) {
	t.Parallel()
	q, r := setup(t, t.TempDir())
	id := enqueue(t, q, handlers.KindSleep, `{"seconds":3600}`, 0)
	_ = r.Start(context.Background())
	waitState(t, q, r, id, action.Running)
	if _, running, err := q.Cancel(context.Background(), id, "api"); err != nil || !running {
		t.Fatalf("cancel: running=%v err=%v", running, err)
	}
	r.Cancel(id)
	a := waitState(t, q, r, id, action.Cancelled)
	if a.StateReason != action.ReasonCancelled {
		t.Fatalf("reason %q", a.StateReason)
	}
}

func TestCancelRequestedBeforeTheRunStarts(t *testing.T) {
	t.Parallel()
	q, r := setup(t, t.TempDir())
	id := enqueue(t, q, handlers.KindSleep, `{"seconds":3600}`, 0)
	// The request reaches the runner before it claims the action.
	r.Cancel(id)
	_ = r.Start(context.Background())
	waitState(t, q, r, id, action.Cancelled)
}

func TestTimeoutFailsTheAction(t *testing.T) {
	t.Parallel()
	q, r := setup(t, t.TempDir())
	id := enqueue(t, q, handlers.KindSleep, `{"seconds":3600}`, 1)
	_ = r.Start(context.Background())
	a := waitState(t, q, r, id, action.Failed)
	if a.StateReason != action.ReasonTimeout {
		t.Fatalf("reason %q, want timeout", a.StateReason)
	}
	if d := a.FinishedTS.Sub(*a.StartedTS); d < time.Second || d > 5*time.Second {
		t.Fatalf("timed out after %s, want about 1s", d)
	}
}

func TestStopLeavesRunningAndRestartResumesAtTheSameDeadline(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	q, r := setup(t, dir)
	id := enqueue(t, q, handlers.KindSleep, `{"seconds":1.5}`, 0)
	_ = r.Start(context.Background())
	// Stop once the deadline is committed in the progress.
	r.TestSignals.Committed.WaitFor("the deadline in progress", func(c Committed) bool {
		return c.ID == id && c.State == action.Running && len(c.Progress) > 2
	})
	r.Stop()
	a, _ := q.Get(context.Background(), id)
	if a.State != action.Running {
		t.Fatalf("after stop: %s", a.State)
	}
	var p struct{ Deadline time.Time }
	_ = json.Unmarshal(a.Progress, &p)
	q.Close()

	q2, r2 := setup(t, dir)
	_ = r2.Start(context.Background())
	done := waitState(t, q2, r2, id, action.Done)
	if done.FinishedTS.Before(p.Deadline) {
		t.Fatalf("finished at %s, before the original deadline %s", done.FinishedTS, p.Deadline)
	}
	if done.FinishedTS.Sub(p.Deadline) > 2*time.Second {
		t.Fatalf("finished %s after the original deadline: the wait restarted", done.FinishedTS.Sub(p.Deadline))
	}
}

func TestFailAndUnknownKind(t *testing.T) {
	t.Parallel()
	q, r := setup(t, t.TempDir())
	failed := enqueue(t, q, handlers.KindFail, `{"message":"boom"}`, 0)
	unknown := enqueue(t, q, "example.com/gone", `{}`, 0)
	_ = r.Start(context.Background())
	if a := waitState(t, q, r, failed, action.Failed); a.StateReason != "boom" {
		t.Fatalf("reason %q", a.StateReason)
	}
	if a := waitState(t, q, r, unknown, action.Failed); a.StateReason == "" {
		t.Fatal("unknown kind failed without a reason")
	}
}

func TestStopIsIdempotentAndWorksUnstarted(t *testing.T) {
	t.Parallel()
	_, r := setup(t, t.TempDir())
	r.Stop()
	r.Stop()
}

// TestStartHonoursItsContext: when the context Start was given ends, the
// runner stops between two steps as Stop makes it, and the action stays
// RUNNING to resume at the next start.
func TestStartHonoursItsContext(t *testing.T) {
	t.Parallel()
	q, r := setup(t, t.TempDir())
	id := enqueue(t, q, handlers.KindSleep, `{"seconds":3600}`, 0)
	ctx, cancel := context.WithCancel(context.Background())
	if err := r.Start(ctx); err != nil {
		t.Fatal(err)
	}
	r.TestSignals.Committed.WaitFor("the first step", func(c Committed) bool { return c.ID == id })
	cancel()
	r.Stop() // returns once the loop has ended
	a, err := q.Get(context.Background(), id)
	if err != nil || a.State != action.Running {
		t.Fatalf("after the context ended: %v, %v", a, err)
	}
	next := enqueue(t, q, handlers.KindPing, `{}`, 0)
	r.Wake()
	r.TestSignals.Committed.RequireEmpty()
	if a, _ := q.Get(context.Background(), next); a.State != action.New {
		t.Fatalf("a stopped runner moved %s to %s", next, a.State)
	}
}

func TestStartsOnce(t *testing.T) {
	t.Parallel()
	_, r := setup(t, t.TempDir())
	if err := r.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := r.Start(context.Background()); !errors.Is(err, startstop.ErrStarted) {
		t.Fatalf("second Start: %v", err)
	}
	r.Stop()
	if err := r.Start(context.Background()); !errors.Is(err, startstop.ErrStopped) {
		t.Fatalf("Start after Stop: %v", err)
	}
}

// Issue 30, item 7: a step that ended by itself keeps its own result when
// the runner sees it after a cancel or the deadline; only a stopped step
// takes their reason.
func TestFinishedStepIsJudgedByHowItEnded(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		res    handlers.Result
		cause  error
		state  action.State
		reason string
	}{
		{"done after the deadline", handlers.Result{Status: handlers.Done}, errTimeout, action.Done, ""},
		{"failed after the deadline", handlers.Result{Status: handlers.Failed, Message: "run exited with status 3"}, errTimeout, action.Failed, "run exited with status 3"},
		{"done after a cancel", handlers.Result{Status: handlers.Done}, errCancelled, action.Done, ""},
		{"stopped by the deadline", handlers.Result{Status: handlers.Stopped}, errTimeout, action.Failed, action.ReasonTimeout},
		{"stopped by a cancel", handlers.Result{Status: handlers.Stopped}, errCancelled, action.Cancelled, action.ReasonCancelled},
		{"running", handlers.Result{Status: handlers.Running}, errTimeout, action.Running, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			state, reason := finalState(tc.res, tc.cause)
			if state != tc.state || reason != tc.reason {
				t.Fatalf("got %s %q, want %s %q", state, reason, tc.state, tc.reason)
			}
		})
	}
}
