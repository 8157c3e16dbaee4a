package startstop

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
)

// ErrDeadline is the error of a part that did not stop before the deadline.
var ErrDeadline = errors.New("did not stop before the shutdown deadline")

// Group starts parts in order and stops them in reverse order.
type Group struct {
	mu    sync.Mutex
	parts []part
}

type part struct {
	name string
	s    Service
}

// Start starts s, named name in errors; once started, s is stopped by
// Shutdown. When s fails to start, Start returns its error and the caller
// shuts down what the group already started.
func (g *Group) Start(ctx context.Context, name string, s Service) error {
	if err := s.Start(ctx); err != nil {
		return fmt.Errorf("start %s: %w", name, err)
	}
	g.mu.Lock()
	g.parts = append(g.parts, part{name, s})
	g.mu.Unlock()
	return nil
}

// Shutdown stops every started part, the last started first, all before ctx
// ends. A Shutdowner gets ctx; another part gets until ctx ends to return
// from Stop, after which the group reports ErrDeadline for it and goes on.
// It returns every error, one per part, joined (nil when all stopped
// cleanly). A second Shutdown has nothing left to stop.
func (g *Group) Shutdown(ctx context.Context) error {
	g.mu.Lock()
	parts := slices.Clone(g.parts)
	g.parts = nil
	g.mu.Unlock()
	var errs []error
	for _, p := range slices.Backward(parts) {
		if err := stop(ctx, p.s); err != nil {
			errs = append(errs, fmt.Errorf("stop %s: %w", p.name, err))
		}
	}
	return errors.Join(errs...)
}

func stop(ctx context.Context, s Service) error {
	if sd, ok := s.(Shutdowner); ok {
		return sd.Shutdown(ctx)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.Stop()
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ErrDeadline
	}
}
