package orchestrate

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/musterhq/muster/core/actions"
	"github.com/musterhq/muster/core/approval"
	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/action"
	"github.com/musterhq/muster/shared/live"
	"github.com/musterhq/muster/shared/testwait"
)

// start starts the orchestrator with its test signals ready.
func (h *harness) start() {
	h.t.Helper()
	h.o.TestSignals.Init(h.t)
	if err := h.o.Start(context.Background()); err != nil {
		h.t.Fatal(err)
	}
}

func TestStartFullSyncsAtOnceAndNudgeIsPrompt(t *testing.T) {
	t.Parallel()
	h := setup(t, Config{Interval: time.Hour}, "n1")
	h.start()
	h.o.TestSignals.FullSynced.Wait() // the first full sync, at once
	if n := h.node("n1"); n.Status != store.NodeUp {
		t.Fatalf("after the first full sync the node is %s", n.Status)
	}
	id := h.create("n1", nil)
	h.o.Nudge(cluster)
	if p := h.o.TestSignals.FullSynced.Wait(); p.Report.Pushed != 1 {
		t.Fatalf("the nudged full sync pushed %d", p.Report.Pushed)
	}
	wantState(t, h.record(id), action.New)
	h.o.Nudge("no-such-cluster") // harmless
	h.o.Stop()
	h.o.TestSignals.FullSynced.RequireEmpty()
}

func TestNudgesWhileAFullSyncRunsMakeOneMoreFullSync(t *testing.T) {
	t.Parallel()
	h := setup(t, Config{Interval: time.Hour, Debounce: time.Millisecond}, "n1")
	var infos atomic.Int32
	release := make(chan struct{})
	entered := make(chan struct{}, 10)
	h.agents["n1"].set(func(f *fakeAgent) {
		f.infoHook = func(context.Context) {
			if infos.Add(1) == 1 {
				entered <- struct{}{}
				<-release
			}
		}
	})
	h.start()
	<-entered // the first full sync is running, stuck in GET info
	for range 20 {
		h.o.Nudge(cluster)
	}
	close(release)
	h.o.TestSignals.FullSynced.Wait() // the first full sync
	h.o.TestSignals.FullSynced.Wait() // one full sync for the 20 nudges
	// One more nudge makes exactly one more full sync: had the 20 nudges made more
	// than one, the count would pass 3.
	h.o.Nudge(cluster)
	h.o.TestSignals.FullSynced.Wait()
	h.o.Stop()
	if n := infos.Load(); n != 3 {
		t.Fatalf("%d full syncs, want 3", n)
	}
	h.o.TestSignals.FullSynced.RequireEmpty()
}

func TestNeverTwoFullSyncsOfOneClusterAtOnce(t *testing.T) {
	t.Parallel()
	h := setup(t, Config{Interval: 10 * time.Millisecond, Workers: 4, Debounce: time.Millisecond}, "n1")
	var inflight, most, total atomic.Int32
	ctx, cancel := context.WithCancel(context.Background())
	h.agents["n1"].set(func(f *fakeAgent) {
		f.infoHook = func(context.Context) {
			n := inflight.Add(1)
			// Once the test ends its direct full syncs, a cancelled full sync may leave
			// its request behind: only overlaps before that count.
			for ctx.Err() == nil {
				m := most.Load()
				if n <= m || most.CompareAndSwap(m, n) {
					break
				}
			}
			time.Sleep(2 * time.Millisecond) // a slow agent widens the window for overlap
			inflight.Add(-1)
			total.Add(1)
		}
	})
	// Without test signals: the full syncs here are too many to read.
	if err := h.o.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { // nudges from the API
		defer wg.Done()
		for ctx.Err() == nil {
			h.o.Nudge(cluster)
			time.Sleep(time.Millisecond)
		}
	}()
	go func() { // and direct full syncs
		defer wg.Done()
		for ctx.Err() == nil {
			_, _ = h.o.FullSync(ctx, cluster)
		}
	}()
	testwait.For(t, "30 full syncs", func() bool { return total.Load() >= 30 })
	cancel()
	wg.Wait()
	if m := most.Load(); m != 1 {
		t.Fatalf("%d full syncs of one cluster ran at once", m)
	}
}

func TestStartAndStop(t *testing.T) {
	t.Parallel()
	h := setup(t, Config{}, "n1")
	h.o.Stop() // before Start: nothing to do
	o, err := New(Config{}, h.st, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := o.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := o.Start(context.Background()); !errors.Is(err, ErrStarted) {
		t.Fatalf("second Start: %v", err)
	}
	o.Stop()
	o.Stop()
	if err := o.Start(context.Background()); !errors.Is(err, ErrStopped) {
		t.Fatalf("Start after Stop: %v", err)
	}
}

func TestStopEndsARunningFullSync(t *testing.T) {
	t.Parallel()
	h := setup(t, Config{AgentTimeout: time.Hour}, "n1")
	entered := make(chan struct{}, 1)
	h.agents["n1"].set(func(f *fakeAgent) {
		f.infoHook = func(ctx context.Context) {
			entered <- struct{}{}
			<-ctx.Done() // an agent that never answers
		}
	})
	h.start()
	<-entered
	rows := h.st.RowsWritten()
	stopped := make(chan struct{})
	go func() { h.o.Stop(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(10 * time.Second):
		t.Fatal("Stop did not end a full sync stuck on an agent")
	}
	if h.st.RowsWritten() != rows {
		t.Fatal("a full sync cut short by Stop wrote")
	}
	if n := h.node("n1"); n.Status != store.NodeUnknown {
		t.Fatalf("a full sync cut short by Stop marked the node %s", n.Status)
	}
}

func TestExpireApprovals(t *testing.T) {
	t.Parallel()
	h := setup(t, Config{Rules: hourTTL()}, "n1")
	now := time.Now()
	old := h.create("n1", func(r *store.Record) { r.State, r.CreatedTS = action.PendingApprove, now.Add(-2*time.Hour) })
	young := h.create("n1", func(r *store.Record) { r.State, r.CreatedTS = action.PendingApprove, now.Add(-10*time.Minute) })
	oldScheduled := h.create("n1", func(r *store.Record) { r.CreatedTS = now.Add(-3 * time.Hour) })
	n, err := h.o.ExpireApprovals(context.Background())
	if err != nil || n != 1 {
		t.Fatalf("ExpireApprovals = %d, %v", n, err)
	}
	rec := h.record(old)
	wantState(t, rec, action.Cancelled)
	if rec.StateReason != actions.ReasonExpired || rec.FinishedTS == nil || len(rec.History) != 1 || rec.History[0].Actor != actions.ActorCore {
		t.Fatalf("expired record %+v", rec)
	}
	wantState(t, h.record(young), action.PendingApprove)
	wantState(t, h.record(oldScheduled), action.PendingSchedule)
	if ev := h.events(); !slices.Equal(ev, []string{"action.expired " + old + " by core"}) {
		t.Fatalf("events %v", ev)
	}
	rows := h.st.RowsWritten()
	if n, err := h.o.ExpireApprovals(context.Background()); err != nil || n != 0 || h.st.RowsWritten() != rows {
		t.Fatalf("second sweep: %d, %v, %d rows", n, err, h.st.RowsWritten()-rows)
	}
}

func TestTheSweepRunsWhileStarted(t *testing.T) {
	t.Parallel()
	h := setup(t, Config{Interval: time.Hour, Rules: hourTTL(), SweepEvery: 10 * time.Millisecond}, "n1")
	h.start()
	id := h.create("n1", func(r *store.Record) { r.State, r.CreatedTS = action.PendingApprove, time.Now().Add(-2*time.Hour) })
	h.o.TestSignals.Swept.WaitFor("a sweep that expires one", func(s Swept) bool { return s.Approvals == 1 })
	wantState(t, h.record(id), action.Cancelled)
}

// leases is a Leases whose one lease can be given and taken away.
type leases struct {
	held    atomic.Bool
	calls   atomic.Int32
	granted atomic.Int32
}

func (l *leases) PassContext(ctx context.Context, _ string) (context.Context, context.CancelFunc, bool) {
	l.calls.Add(1)
	if !l.held.Load() {
		return nil, nil, false
	}
	l.granted.Add(1)
	ctx, cancel := context.WithCancel(ctx)
	return ctx, cancel, true
}

// TestFullSyncsRunOnlyUnderTheLease: while another replica holds the cluster's
// lease, the scheduler makes no full sync; once this one holds it, it does.
func TestFullSyncsRunOnlyUnderTheLease(t *testing.T) {
	t.Parallel()
	l := &leases{}
	h := setup(t, Config{Interval: time.Hour, Debounce: time.Millisecond, Leases: l}, "n1")
	var infos atomic.Int32
	h.agents["n1"].set(func(f *fakeAgent) {
		f.infoHook = func(context.Context) { infos.Add(1) }
	})
	h.start()
	testwait.For(t, "the first full sync asked for the lease", func() bool { return l.calls.Load() >= 1 })
	h.o.Nudge(cluster)
	testwait.For(t, "the nudged full sync asked for the lease", func() bool { return l.calls.Load() >= 2 })
	l.held.Store(true)
	h.o.Nudge(cluster)
	testwait.For(t, "a full sync under the lease", func() bool { return infos.Load() >= 1 })
	h.o.Stop()
	if infos.Load() != 1 || l.granted.Load() != 1 {
		t.Fatalf("%d full syncs, %d granted by the lease; want 1 and 1", infos.Load(), l.granted.Load())
	}
}

// orchestrate.schedule_ttl: an approved action that never reached its agent
// (its node held DOWN here) ends CANCELLED "schedule timeout" with an event,
// by the running sweep; a younger one waits on.
func TestTheSweepCancelsActionsThatNeverReachTheirAgent(t *testing.T) {
	t.Parallel()
	h := setup(t, Config{Interval: time.Hour, ScheduleTTL: time.Hour, SweepEvery: 10 * time.Millisecond}, "n1")
	h.hold("n1", store.CauseFailed)
	now := time.Now()
	old := h.create("n1", func(r *store.Record) { r.ScheduledTS = action.TimePtr(now.Add(-2 * time.Hour)) })
	young := h.create("n1", func(r *store.Record) { r.ScheduledTS = action.TimePtr(now.Add(-10 * time.Minute)) })
	h.events()
	h.start()
	h.o.TestSignals.Swept.WaitFor("a sweep that cancels one", func(s Swept) bool { return s.Schedules == 1 })
	rec := h.record(old)
	if rec.StateReason != actions.ReasonScheduleTimeout || rec.FinishedTS == nil {
		t.Fatalf("record %s %q", rec.State, rec.StateReason)
	}
	if ev := h.events(); !slices.Contains(ev, "action.state_changed "+old+" by core") {
		t.Fatalf("events %v", ev)
	}
	wantState(t, h.record(young), action.PendingSchedule)
}

// hourTTL is the rules of an approval policy whose TTL is an hour.
func hourTTL() *actions.Rules {
	return &actions.Rules{Policy: live.New(approval.Policy{Default: approval.Required, TTL: time.Hour})}
}
