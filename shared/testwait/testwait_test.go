package testwait

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"
)

// fakeTB records a Fatalf and stops the caller like testing does.
type fakeTB struct{ fatal string }

type stopped struct{}

func (f *fakeTB) Helper() {}
func (f *fakeTB) Fatalf(format string, args ...any) {
	f.fatal = fmt.Sprintf(format, args...)
	panic(stopped{})
}

func (f *fakeTB) run(fn func()) {
	defer func() {
		if r := recover(); r != nil && r != (stopped{}) {
			panic(r)
		}
	}()
	fn()
}

func TestForReturnsOnceTheConditionHolds(t *testing.T) {
	t.Parallel()
	var polls atomic.Int32
	For(t, "three polls", func() bool { return polls.Add(1) == 3 })
	if n := polls.Load(); n != 3 {
		t.Fatalf("%d polls", n)
	}
}

func TestWithinFailsAtTheDeadlineNamingWhat(t *testing.T) {
	t.Parallel()
	f := &fakeTB{}
	start := time.Now()
	f.run(func() { Within(f, 50*time.Millisecond, "the impossible", func() bool { return false }) })
	if f.fatal != "timed out after 50ms waiting for the impossible" {
		t.Fatalf("fatal %q", f.fatal)
	}
	if d := time.Since(start); d < 50*time.Millisecond {
		t.Fatalf("gave up after %s", d)
	}
}

func TestValueReturnsTheFirstGoodValue(t *testing.T) {
	t.Parallel()
	n := 0
	got := Value(t, "n to reach 4", func() (int, bool) { n++; return n * 10, n == 4 })
	if got != 40 {
		t.Fatalf("got %d", got)
	}
}
