// Package startstop is the one lifecycle of muster's long-running parts (the
// runner, retention, the API servers, the orchestrator, the discovery watch,
// gossip, the agent's notifier, the core's replication, the PostgreSQL
// store's listener): a constructor starts nothing, Start(ctx) starts the part's
// goroutines and returns, and they end when ctx ends or Stop is called. Stop
// is idempotent, blocks until every goroutine of the part has ended, and
// works on a part never started. A part starts once. The model is river's
// startstop (see docs/development.md).
//
// A Group starts parts in order and stops them in reverse order under one
// deadline, reporting every part that failed to stop in time or whose
// Shutdown failed: agent.Run and core.Run are built on it.
package startstop

import (
	"context"
	"errors"
	"sync"
)

// Service is a long-running part.
type Service interface {
	// Start starts the part and returns; the part runs until ctx ends or
	// Stop is called.
	Start(ctx context.Context) error
	// Stop ends the part and returns once it has ended. It is idempotent and
	// works on a part never started.
	Stop()
}

// Shutdowner is a Service that can be told how long it has to stop and can
// fail to stop cleanly (an HTTP server with requests in flight). A Group
// calls Shutdown instead of Stop.
type Shutdowner interface {
	Service
	Shutdown(ctx context.Context) error
}

// Errors of Start.
var (
	ErrStarted = errors.New("already started")
	ErrStopped = errors.New("stopped; a part starts once")
)

// ErrStopping is the cause of the context of a part that Stop ends.
var ErrStopping = errors.New("stopping")

// Base gives a part a safe Start and Stop. Embed it, and begin Start with
//
//	ctx, done, err := s.StartInit(ctx)
//	if err != nil {
//		return err
//	}
//	go func() { defer done(); s.loop(ctx) }()
//
// ctx ends when the parent does or Stop is called (cause ErrStopping); done
// must be called once the part's goroutines have ended. A Start that fails
// after StartInit calls done before returning.
type Base struct {
	mu      sync.Mutex
	state   int // 0 new, 1 started, 2 stopped
	cancel  context.CancelCauseFunc
	stopped chan struct{}
}

// StartInit marks the part started and returns its context and done.
func (b *Base) StartInit(ctx context.Context) (context.Context, func(), error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch b.state {
	case 1:
		return nil, nil, ErrStarted
	case 2:
		return nil, nil, ErrStopped
	}
	b.state = 1
	b.stopped = make(chan struct{})
	ctx, b.cancel = context.WithCancelCause(ctx)
	return ctx, sync.OnceFunc(func() { close(b.stopped) }), nil
}

// Stop cancels the part's context and waits for done.
func (b *Base) Stop() {
	b.mu.Lock()
	state, stopped := b.state, b.stopped
	b.state = 2
	if state == 1 {
		b.cancel(ErrStopping)
	}
	b.mu.Unlock()
	if stopped != nil {
		<-stopped
	}
}

// Func is a part that runs one function until its context ends: a loop
// such as the discovery watch or retention.
type Func struct {
	Base
	run func(ctx context.Context)
}

// NewFunc returns the part that runs run; run must return once its context
// ends.
func NewFunc(run func(ctx context.Context)) *Func { return &Func{run: run} }

// Start runs the function in its own goroutine.
func (f *Func) Start(ctx context.Context) error {
	ctx, done, err := f.StartInit(ctx)
	if err != nil {
		return err
	}
	go func() {
		defer done()
		f.run(ctx)
	}()
	return nil
}
