package runner

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/musterhq/muster/agent/handlers"
	"github.com/musterhq/muster/agent/queue"
	"github.com/musterhq/muster/shared/action"
	"github.com/musterhq/muster/shared/testwait"
)

// countingQueue counts the commits of RUNNING steps that changed the output.
type countingQueue struct {
	*queue.Queue
	outputs atomic.Int32
	last    atomic.Value // string
}

func (c *countingQueue) SaveStep(ctx context.Context, id, actor string, s queue.Step) (*action.Action, error) {
	if s.State == action.Running {
		if prev, _ := c.last.Load().(string); prev != s.Output {
			c.outputs.Add(1)
			c.last.Store(s.Output)
		}
	}
	return c.Queue.SaveStep(ctx, id, actor, s)
}

// A RUNNING action's output reaches its record as it grows, committed at
// most once per OutputEvery, and each such commit calls OnOutput.
func TestRunningOutputIsCommittedAsItGrows(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	q, err := queue.Open(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	stop := filepath.Join(dir, "stop")
	// Prints a line every 10 ms until the test creates the stop file.
	reg, err := handlers.NewRegistry([]handlers.External{{Kind: "example.com/talk", Run: []string{"/bin/sh", "-c",
		`i=0; while [ ! -e "` + stop + `" ]; do i=$((i+1)); echo "line $i"; sleep 0.01; done; echo end`}}}, handlers.Env{NodeID: "n1"})
	if err != nil {
		t.Fatal(err)
	}
	cq := &countingQueue{Queue: q}
	var notes atomic.Int32
	r := New(Config{Queue: cq, Handlers: reg, Actor: "n1", Idle: 20 * time.Millisecond,
		OutputEvery: 300 * time.Millisecond, OnOutput: func() { notes.Add(1) }})
	r.TestSignals.Init(t)
	t.Cleanup(func() { r.Stop(); q.Close() })
	id := enqueue(t, q, "example.com/talk", `{}`, 0)
	if err := r.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	var seen []string
	testwait.For(t, "three growing outputs while RUNNING", func() bool {
		a, err := q.Get(context.Background(), id)
		if err != nil || a.State != action.Running || !strings.Contains(a.Output, "line ") {
			return false
		}
		if len(seen) == 0 || seen[len(seen)-1] != a.Output {
			seen = append(seen, a.Output)
		}
		return len(seen) >= 3
	})
	elapsed := time.Since(start)
	if err := os.WriteFile(stop, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	a := waitState(t, q, r, id, action.Done)
	if !strings.HasSuffix(a.Output, "end\n") {
		t.Fatalf("final output %q", a.Output)
	}
	// About 100 lines a second: once per 300 ms at most, plus the first.
	if n, most := cq.outputs.Load(), int32(elapsed/(300*time.Millisecond))+2; n > most+1 {
		t.Fatalf("%d output commits in %s; at most %d expected", n, elapsed, most)
	}
	if notes.Load() < 2 {
		t.Fatalf("OnOutput called %d times", notes.Load())
	}
}
