// Package testgoroutine tells tests which goroutines of the process run
// code of a part: that its constructor started none, that its Stop left
// none behind (shared/startstop's rules).
//
// A test that asks must not run in parallel with tests that start the same
// kind of part: it sees every goroutine of the process.
package testgoroutine

import (
	"bytes"
	"runtime"
	"time"
)

// TB is the part of testing.TB the checks need.
type TB interface {
	Helper()
	Errorf(format string, args ...any)
}

// Running reports whether a goroutine other than the caller's runs, or was
// created by, a function whose qualified name contains fn (for example
// "muster/shared/gossip.(*Service)": its methods and the goroutines they
// start, which name their creator from the first instant).
func Running(fn string) bool { return Count(fn) > 0 }

// Count is how many goroutines other than the caller's run, or were
// created by, a function whose qualified name contains fn.
func Count(fn string) int {
	buf := make([]byte, 1<<16)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	stacks := bytes.Split(buf, []byte("\n\n"))
	n := 0
	for _, s := range stacks[1:] { // the first is the caller's own
		if bytes.Contains(s, []byte(fn)) {
			n++
		}
	}
	return n
}

// None fails the test when a goroutine runs code of fn and still does
// after a short grace: a goroutine that signalled its owner's Stop runs its
// last deferred calls a moment after Stop returned. One left running for
// the whole grace was left behind.
func None(t TB, fn string) {
	t.Helper()
	deadline := time.Now().Add(noneGrace)
	for Running(fn) {
		if time.Now().After(deadline) {
			t.Errorf("a goroutine runs %s %s after it should have ended", fn, noneGrace)
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// noneGrace is how long None waits for goroutines that are ending.
const noneGrace = 2 * time.Second

// Returns fails the test unless f returns within d: a Stop of a part that
// never started returns at once.
func Returns(t TB, d time.Duration, what string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	select {
	case <-done:
	case <-time.After(d):
		t.Errorf("%s did not return within %s", what, d)
	}
}
