package agent

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/musterhq/muster/shared/gossip"
	"github.com/musterhq/muster/shared/startstop"
	"github.com/musterhq/muster/shared/testgoroutine"
	"github.com/musterhq/muster/shared/testwait"
)

// countingTeller counts the notes told.
type countingTeller struct{ told atomic.Int64 }

func (c *countingTeller) Tell(role string, n gossip.Note) int {
	if role == gossip.RoleCore && n.Changed != nil {
		c.told.Add(1)
	}
	return 1
}

// TestNotifierFollowsStartStop: newNotifier starts nothing; Stop of a
// notifier never started returns at once and ends it for good; one without
// a gossip service does not start; a started one tells a change made before
// Start, and leaves no goroutine once stopped. Not parallel: it looks at
// every goroutine.
func TestNotifierFollowsStartStop(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	never := newNotifier("c", "n", time.Millisecond, log)
	testgoroutine.None(t, "muster/agent.(*notifier)")
	testgoroutine.Returns(t, 5*time.Second, "Stop before Start", never.Stop)
	never.to = &countingTeller{}
	if err := never.Start(context.Background()); !errors.Is(err, startstop.ErrStopped) {
		t.Fatalf("Start after Stop = %v, want ErrStopped", err)
	}

	if err := newNotifier("c", "n", time.Millisecond, log).Start(context.Background()); !errors.Is(err, errNoTeller) {
		t.Fatalf("Start without a gossip service = %v, want errNoTeller", err)
	}

	n := newNotifier("c", "n", time.Millisecond, log)
	to := &countingTeller{}
	n.to = to
	n.Changed() // before Start: told once it runs
	if err := n.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, "the change told", func() bool { return to.told.Load() == 1 })
	n.Stop()
	testgoroutine.None(t, "muster/agent.(*notifier)")
	n.Stop() // idempotent
}
