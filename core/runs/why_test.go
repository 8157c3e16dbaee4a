package runs_test

import (
	"context"
	"strings"
	"testing"

	"github.com/musterhq/muster/core/runs"
	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/action"
)

// failWithOutput ends a child FAILED as its agent would, with a reason and
// the output its command printed.
func (env *engineEnv) failWithOutput(id, reason, output string) {
	env.t.Helper()
	env.update(func(ctx context.Context, tx store.Tx) error {
		rec, err := tx.Action(ctx, id)
		if err != nil {
			return err
		}
		rec.State, rec.FinishedTS, rec.PushedStoreID = action.Failed, action.TimePtr(env.now), "store-1"
		rec.StateReason, rec.Output = reason, output
		return tx.UpdateAction(ctx, rec)
	})
}

// TestAFailedNodeKeepsWhyItFailed: a node whose upgrade failed keeps its
// step, its attempt, the child's reason and the last lines of its output
// (bounded) as why it failed; the run's summary and its run.paused event
// say it.
func TestAFailedNodeKeepsWhyItFailed(t *testing.T) {
	t.Parallel()
	env := setupEngine(t)
	r := env.startReq(upgradeRun("0", "pause"))
	out := strings.Repeat("noise\n", 50) + "unpacking 2.0\n\nE: disk full on /var\n\x1b[31mgiving up\x1b[0m\n"
	for range 10 {
		if r.State != store.RunRunning {
			break
		}
		k := env.open(r.ID)
		if k.NodeID == "n1" && k.Step == "upgrade" {
			env.failWithOutput(k.ID, "run exited with status 3", out)
		} else {
			env.finishWith(k.ID, action.Done, "")
		}
		r = env.advance(r.ID)
	}
	if r.State != store.RunPaused {
		t.Fatalf("run %s (%s), want PAUSED", r.State, r.StateReason)
	}
	w := r.Stages[0].Why["n1"]
	if w.Reason != "step upgrade FAILED (attempt 1 of 1): run exited with status 3" ||
		w.Output != "noise\nnoise\nunpacking 2.0\nE: disk full on /var\ngiving up" || w.ActionID == "" {
		t.Fatalf("why n1 failed: %+v", w)
	}
	v := runs.View(r, nil)
	if v.Summary == nil || len(v.Summary.Failed) != 1 || v.Summary.Failed[0].Output != w.Output ||
		v.Summary.Failed[0].Reason != w.Reason {
		t.Fatalf("summary %+v", v.Summary)
	}
	var paused *store.Event
	for _, ev := range env.eventsSince(0) {
		if ev.Type == store.EventRunPaused {
			paused = &ev
		}
	}
	if paused == nil || !strings.Contains(paused.Message, "n1: step upgrade FAILED (attempt 1 of 1): run exited with status 3: giving up") {
		t.Fatalf("run.paused %+v, want n1's reason and its last line", paused)
	}
}

func TestLastLinesAreBounded(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("é", 2000)
	for name, tc := range map[string]struct{ in, want string }{
		"empty":        {"", ""},
		"blank lines":  {"\n\n  \n", ""},
		"crlf":         {"a\r\nb\r\n", "a\nb"},
		"last five":    {"1\n2\n3\n4\n5\n6\n7\n", "3\n4\n5\n6\n7"},
		"invalid utf8": {"ok\xff\n", "ok\uFFFD"},
		"colours":      {"\x1b[1;31merror\x1b[0m \x1b[2Kx\x07", "error x\x07"},
	} {
		if got := runs.LastLines(tc.in); got != tc.want {
			t.Errorf("%s: %q, want %q", name, got, tc.want)
		}
	}
	got := runs.LastLines("start\n" + long)
	if len(got) > runs.WhyBytes+len("…") || !strings.HasPrefix(got, "…é") || !strings.HasSuffix(got, "éé") {
		t.Fatalf("a long line: %d bytes, %q…", len(got), got[:10])
	}
}
