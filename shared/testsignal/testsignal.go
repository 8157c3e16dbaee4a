// Package testsignal lets a test wait for a long-running part to reach a
// point (the runner finished a step, the orchestrator committed a pass)
// instead of polling its database. The model is river's testsignal.
//
// A Signal's zero value is what production runs: Send does nothing. A test
// calls Init on the signals it wants (the part exposes them in a
// TestSignals struct) before starting the part, then Wait for each value.
package testsignal

import (
	"sync"
	"time"

	"github.com/musterhq/muster/shared/testwait"
)

// size is how many values a signal holds before Send reports a test that
// does not read them.
const size = 1000

// TB is the part of testing.TB a signal needs.
type TB interface {
	Helper()
	Errorf(format string, args ...any)
	Fatalf(format string, args ...any)
}

// Signal carries values of type T from the part to its test.
type Signal[T any] struct {
	mu sync.Mutex
	ch chan T
	tb TB
}

// Init readies the signal for a test. Call it before the part starts.
func (s *Signal[T]) Init(tb TB) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ch = make(chan T, size)
	s.tb = tb
}

// Send hands v to the test, never blocking. Without Init it does nothing.
func (s *Signal[T]) Send(v T) {
	s.mu.Lock()
	ch, tb := s.ch, s.tb
	s.mu.Unlock()
	if ch == nil {
		return
	}
	select {
	case ch <- v:
	default:
		tb.Errorf("test signal full: the test does not read its %d values", size)
	}
}

// Wait returns the next value sent, failing the test after testwait.Timeout.
func (s *Signal[T]) Wait() T {
	s.tb.Helper()
	select {
	case v := <-s.channel():
		return v
	case <-time.After(testwait.Timeout):
		s.tb.Fatalf("timed out after %s waiting on a test signal", testwait.Timeout)
	}
	var zero T
	return zero
}

// WaitFor returns the first value sent for which match is true, dropping the
// ones before it, failing the test after testwait.Timeout.
func (s *Signal[T]) WaitFor(what string, match func(T) bool) T {
	s.tb.Helper()
	deadline := time.After(testwait.Timeout)
	for {
		select {
		case v := <-s.channel():
			if match(v) {
				return v
			}
		case <-deadline:
			s.tb.Fatalf("timed out after %s waiting on a test signal for %s", testwait.Timeout, what)
			var zero T
			return zero
		}
	}
}

// RequireEmpty fails the test when a value was sent and not read.
func (s *Signal[T]) RequireEmpty() {
	s.tb.Helper()
	select {
	case v := <-s.channel():
		s.tb.Errorf("test signal should be empty, got %v", v)
	default:
	}
}

func (s *Signal[T]) channel() chan T {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ch == nil {
		panic("testsignal: Wait on a signal without Init")
	}
	return s.ch
}
