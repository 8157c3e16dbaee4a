// Package testwait is how tests wait for a condition: poll it with a deadline,
// never sleep a fixed time and hope. Every test in the module waits through
// it, so they share one deadline and one polling rhythm.
//
// It imports no testing package: TB is the part of testing.TB it needs, so
// the production packages that carry test signals (shared/testsignal) do not
// link the testing package.
package testwait

import "time"

// Timeout is how long For waits. It is generous on purpose: a deadline only
// matters when a test is failing, and a loaded machine running everything
// under the race detector is slow.
const Timeout = 20 * time.Second

// TB is the part of testing.TB that waiting needs.
type TB interface {
	Helper()
	Fatalf(format string, args ...any)
}

// First and longest pause between two polls: polls start fast, so a
// condition that is nearly true costs little, and back off, so a long wait
// does not spin.
const (
	firstPause = time.Millisecond
	maxPause   = 25 * time.Millisecond
)

// For polls cond until it returns true, and fails the test with what after
// Timeout.
func For(t TB, what string, cond func() bool) {
	t.Helper()
	Within(t, Timeout, what, cond)
}

// Within is For with its own deadline, for the tests that measure one (a
// failure detector's timing) or wait for something known to take long.
func Within(t TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	pause := firstPause
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", within, what)
		}
		time.Sleep(pause)
		pause = min(2*pause, maxPause)
	}
}

// Value polls get until its second result is true and returns its first,
// failing the test with what after Timeout.
func Value[T any](t TB, what string, get func() (T, bool)) T {
	t.Helper()
	var v T
	For(t, what, func() bool {
		var ok bool
		v, ok = get()
		return ok
	})
	return v
}
