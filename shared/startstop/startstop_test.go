package startstop

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/musterhq/muster/shared/testwait"
)

func TestFuncRunsUntilStop(t *testing.T) {
	t.Parallel()
	running := make(chan struct{})
	var ended bool
	f := NewFunc(func(ctx context.Context) {
		close(running)
		<-ctx.Done()
		if !errors.Is(context.Cause(ctx), ErrStopping) {
			t.Errorf("cause %v, want ErrStopping", context.Cause(ctx))
		}
		ended = true
	})
	if err := f.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	<-running
	f.Stop()
	if !ended {
		t.Fatal("Stop returned before the function did")
	}
	f.Stop() // idempotent
}

func TestFuncHonoursTheStartContext(t *testing.T) {
	t.Parallel()
	ended := make(chan struct{})
	f := NewFunc(func(ctx context.Context) { <-ctx.Done(); close(ended) })
	ctx, cancel := context.WithCancel(context.Background())
	if err := f.Start(ctx); err != nil {
		t.Fatal(err)
	}
	cancel()
	<-ended
	f.Stop()
}

func TestStartsOnceAndStopsUnstarted(t *testing.T) {
	t.Parallel()
	NewFunc(func(context.Context) {}).Stop() // never started: returns at once
	f := NewFunc(func(ctx context.Context) { <-ctx.Done() })
	if err := f.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := f.Start(context.Background()); !errors.Is(err, ErrStarted) {
		t.Fatalf("second Start: %v", err)
	}
	f.Stop()
	if err := f.Start(context.Background()); !errors.Is(err, ErrStopped) {
		t.Fatalf("Start after Stop: %v", err)
	}
	g := NewFunc(func(ctx context.Context) { <-ctx.Done() })
	g.Stop()
	if err := g.Start(context.Background()); !errors.Is(err, ErrStopped) {
		t.Fatalf("Start after a Stop before any Start: %v", err)
	}
}

// recorder notes the order in which parts stop.
type recorder struct {
	mu    sync.Mutex
	order []string
}

func (r *recorder) note(s string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.order = append(r.order, s)
}

// shutdowner is a Shutdowner whose Shutdown fails with err.
type shutdowner struct {
	*Func
	err error
	rec *recorder
}

func (s shutdowner) Shutdown(context.Context) error {
	s.Stop()
	s.rec.note("api")
	return s.err
}

func TestGroupStopsInReverseUnderOneDeadlineAndReportsEveryError(t *testing.T) {
	t.Parallel()
	rec := &recorder{}
	release := make(chan struct{})
	defer close(release)
	part := func(name string, stuck bool) *Func {
		return NewFunc(func(ctx context.Context) {
			<-ctx.Done()
			if stuck {
				<-release // a part that will not stop in time
			}
			rec.note(name)
		})
	}
	var g Group
	ctx := context.Background()
	apiErr := errors.New("requests still in flight")
	for _, p := range []struct {
		name string
		s    Service
	}{
		{"runner", part("runner", false)},
		{"retention", part("retention", true)},
		{"api", shutdowner{Func: part("api-loop", false), err: apiErr, rec: rec}},
		{"gossip", part("gossip", false)},
	} {
		if err := g.Start(ctx, p.name, p.s); err != nil {
			t.Fatal(err)
		}
	}
	shutCtx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := g.Shutdown(shutCtx)
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("Shutdown took %s past its deadline", d)
	}
	if !errors.Is(err, apiErr) || !errors.Is(err, ErrDeadline) {
		t.Fatalf("Shutdown = %v, want the api's error and the retention's deadline", err)
	}
	for _, want := range []string{"stop api: requests still in flight", "stop retention: " + ErrDeadline.Error()} {
		if !contains(err.Error(), want) {
			t.Errorf("%q does not report %q", err, want)
		}
	}
	testwait.For(t, "the runner to stop after the stuck retention", func() bool {
		rec.mu.Lock()
		defer rec.mu.Unlock()
		return slices.Contains(rec.order, "runner")
	})
	rec.mu.Lock()
	got := slices.Clone(rec.order)
	rec.mu.Unlock()
	if want := []string{"gossip", "api-loop", "api", "runner"}; !slices.Equal(got, want) {
		t.Fatalf("stopped in order %q, want %q", got, want)
	}
	if err := g.Shutdown(ctx); err != nil {
		t.Fatalf("second Shutdown: %v", err)
	}
}

func TestGroupStartReportsTheFailingPart(t *testing.T) {
	t.Parallel()
	var g Group
	f := NewFunc(func(ctx context.Context) { <-ctx.Done() })
	if err := g.Start(context.Background(), "runner", f); err != nil {
		t.Fatal(err)
	}
	if err := g.Start(context.Background(), "again", f); !errors.Is(err, ErrStarted) || !contains(err.Error(), "start again") {
		t.Fatalf("Start of a started part: %v", err)
	}
	if err := g.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }
