package main

import (
	"context"
	"errors"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/musterhq/muster/core/approval"
	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/action"
	"github.com/musterhq/muster/shared/client"
	"github.com/musterhq/muster/shared/testwait"
)

// setOutput stores out as the action's output, as a sync that pulled a
// RUNNING action's growing output would.
func (e *cliEnv) setOutput(id, out string) {
	e.t.Helper()
	ctx := context.Background()
	if err := e.st.Update(ctx, func(tx store.Tx) error {
		rec, err := tx.Action(ctx, id)
		if err != nil {
			return err
		}
		rec.Output = out
		return tx.UpdateAction(ctx, rec)
	}); err != nil {
		e.t.Fatal(err)
	}
}

func TestCLIActionLogsFollowsARunningAction(t *testing.T) {
	t.Parallel()
	e := setupCLI(t, approval.Policy{Default: approval.None, TTL: time.Hour})
	out, _, _ := e.run("op", "action", "create", "--cluster", "prod", "--node", "db-1", "--kind", "muster.io/debug.ping", "-o", "json")
	a := decode[action.Action](t, out)
	e.advance(a.ID, action.Running, "")
	e.setOutput(a.ID, "step 1\n")

	got, _, code := e.run("op", "action", "logs", a.ID[:8])
	if code != 0 || got != "step 1\n" {
		t.Fatalf("logs: exit %d %q", code, got)
	}

	c := client.NewCore(e.url, e.secrets["op"], nil)
	var buf lockedBuffer
	done := make(chan error, 1)
	go func() {
		done <- actionLogs(context.Background(), c, a.ID, &buf, &lockedBuffer{}, true, 10*time.Millisecond)
	}()
	testwait.For(t, "the first line", func() bool { return buf.String() == "step 1\n" })
	e.setOutput(a.ID, "step 1\nstep 2 \x1b[2J\n")
	testwait.For(t, "the second line, escaped", func() bool { return buf.String() == "step 1\nstep 2 \\x1b[2J\n" })
	e.setOutput(a.ID, "step 1\nstep 2 \x1b[2J\nfailed\n")
	e.advance(a.ID, action.Failed, "exit 1")
	select {
	case err := <-done:
		if !errors.Is(err, errActionNotDone) || !strings.HasSuffix(buf.String(), "failed\n") {
			t.Fatalf("logs -f ended with %v, printed %q", err, buf.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("logs -f did not end with the action")
	}
}

func TestNewOutputOfATail(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ prev, out, want string }{
		{"", "a\n", "a\n"},
		{"a\n", "a\nb\n", "b\n"},
		{"a\nb\n", "b\nc\n", "c\n"}, // the tail dropped a's line
		{"x\n", "y\n", "[…]\ny\n"},
		{"a\n", "a\n", ""},
	} {
		if got := newOutput(c.prev, c.out); got != c.want {
			t.Errorf("newOutput(%q, %q) = %q, want %q", c.prev, c.out, got, c.want)
		}
	}
}

// Issue 35, item 6: logs -f of an action that has not started says, on
// standard error, what it waits for, again each time that changes, and
// nothing on the output; once it runs, its output follows.
func TestActionLogsFollowSaysWhatAnActionThatHasNotStartedWaitsFor(t *testing.T) {
	t.Parallel()
	e := setupCLI(t, approval.DefaultPolicy())
	out, _, _ := e.run("op", "action", "create", "--cluster", "prod", "--node", "db-1", "--kind", "muster.io/debug.ping", "-o", "json")
	a := decode[action.Action](t, out)
	out, _, _ = e.run("op", "action", "create", "--cluster", "prod", "--node", "db-1", "--kind", "muster.io/debug.sleep", "-o", "json")
	ahead := decode[action.Action](t, out)

	c := client.NewCore(e.url, e.secrets["op"], nil)
	var stdout, stderr lockedBuffer
	done := make(chan error, 1)
	go func() { done <- actionLogs(context.Background(), c, a.ID, &stdout, &stderr, true, 10*time.Millisecond) }()
	short := shortID(a.ID)
	testwait.For(t, "the wait for approval", func() bool {
		return strings.Contains(stderr.String(), "waiting: action "+short+" is PENDING_APPROVE: it waits for an approver (muster action approve "+short+")")
	})
	if _, msg, code := e.run("appr", "action", "approve", a.ID); code != 0 {
		t.Fatal(msg)
	}
	testwait.For(t, "the wait for the core", func() bool {
		return strings.Contains(stderr.String(), "waiting: action "+short+" is PENDING_SCHEDULE: the core has not sent it to node db-1 yet")
	})
	e.advance(ahead.ID, action.PendingSchedule, "")
	e.advance(ahead.ID, action.Running, "")
	e.advance(a.ID, action.New, "")
	testwait.For(t, "the queue", func() bool {
		return strings.Contains(stderr.String(), "waiting: action "+short+" is NEW: queued on node db-1 behind "+shortID(ahead.ID)+
			" (muster.io/debug.sleep, RUNNING)")
	})
	if stdout.String() != "" {
		t.Fatalf("the wait went to the output: %q", stdout.String())
	}
	e.advance(a.ID, action.Running, "")
	e.setOutput(a.ID, "pong\n")
	e.advance(a.ID, action.Done, "")
	select {
	case err := <-done:
		if err != nil || stdout.String() != "pong\n" || strings.Count(stderr.String(), "\n") != 3 {
			t.Fatalf("logs -f ended with %v, printed %q, said %q", err, stdout.String(), stderr.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("logs -f did not end with the action")
	}
}

// Issue 35, item 6: action show places a run's child: its run, stage,
// step, attempt and wave.
func TestActionShowSaysTheRunStepAndAttemptOfAChild(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	a := action.Action{ID: "0f3c8a52-aaaa", ClusterID: "prod", NodeID: "db-1", Kind: "k/upgrade", State: action.Running,
		RunID: "7d1e0b9c-bbbb", Stage: "upgrade", Step: "drain", Attempt: 2, Wave: 3}
	if err := printAction(&b, &a); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`(?m)^Run\s+7d1e0b9c-bbbb$`, `(?m)^Stage\s+upgrade$`, `(?m)^Step\s+drain$`, `(?m)^Attempt\s+2$`, `(?m)^Wave\s+3$`} {
		if !regexp.MustCompile(want).MatchString(b.String()) {
			t.Errorf("action show lacks %s:\n%s", want, b.String())
		}
	}
}
