package main

import (
	"context"
	"errors"
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
	go func() { done <- actionLogs(context.Background(), c, a.ID, &buf, true, 10*time.Millisecond) }()
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
