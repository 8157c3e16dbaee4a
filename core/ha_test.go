package core

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/startstop"
	"github.com/musterhq/muster/shared/testgoroutine"
	"github.com/musterhq/muster/shared/testwait"
)

// fakeCoordination is an in-memory coordination of one replica: it grants
// every cluster, delivers published nudges back, and records releases.
type fakeCoordination struct {
	startstop.Base
	nudges chan string

	mu       sync.Mutex
	released bool
}

func (f *fakeCoordination) Start(ctx context.Context) error {
	_, done, err := f.StartInit(ctx)
	if err == nil {
		done()
	}
	return err
}

func (f *fakeCoordination) Coordinate(_ context.Context, _ store.Replica, _ time.Duration, _ func(store.LeaseView) []string) (map[string]int64, error) {
	return map[string]int64{"c1": 1}, nil
}

func (f *fakeCoordination) Release(context.Context, string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.released = true
	return nil
}

func (f *fakeCoordination) PublishNudge(_ context.Context, c string) error {
	f.nudges <- c
	return nil
}

func (f *fakeCoordination) Nudges() <-chan string { return f.nudges }

func (f *fakeCoordination) LeaseStatus(context.Context, time.Duration) ([]store.Replica, []store.Lease, error) {
	return nil, nil, nil
}

func (f *fakeCoordination) wasReleased() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.released
}

var _ coordination = (*fakeCoordination)(nil)

// TestReplicationFollowsStartStop: newReplication starts nothing; Stop of a
// replication never started returns at once and ends it for good; a started
// one relays nudges through the coordination to the local orchestrator and,
// on Stop, gives its leases up and leaves no goroutine. Not parallel: it
// looks at every goroutine.
func TestReplicationFollowsStartStop(t *testing.T) {
	cfg := DefaultConfig()
	for _, coord := range []*fakeCoordination{nil, {nudges: make(chan string, 4)}} {
		var c coordination
		if coord != nil {
			c = coord
		}
		never, err := newReplication(cfg, c, "127.0.0.1:1", nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		testgoroutine.None(t, "muster/core.(*replication)")
		testgoroutine.None(t, "muster/core/lease.")
		testgoroutine.Returns(t, 5*time.Second, "Stop before Start", never.Stop)
		if err := never.Start(context.Background()); !errors.Is(err, startstop.ErrStopped) {
			t.Fatalf("Start after Stop = %v, want ErrStopped", err)
		}
	}

	coord := &fakeCoordination{nudges: make(chan string, 4)}
	r, err := newReplication(cfg, coord, "127.0.0.1:1", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan string, 8)
	r.deliver(func(c string) { got <- c }, func(c, _ string) {})
	if err := r.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	// c1: the lease taken; c2 here at once, and back through the coordination.
	r.Nudge("c2")
	for _, want := range []string{"c1", "c2", "c2"} {
		select {
		case c := <-got:
			if c != want {
				t.Fatalf("nudge %q, want %q", c, want)
			}
		case <-time.After(testwait.Timeout):
			t.Fatalf("nudge %q not delivered", want)
		}
	}
	r.Stop()
	if !coord.wasReleased() {
		t.Fatal("Stop returned before the leases were given up")
	}
	testgoroutine.None(t, "muster/core.(*replication)")
	r.Stop() // idempotent
}
