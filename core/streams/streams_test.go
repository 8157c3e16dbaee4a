package streams

import (
	"errors"
	"testing"
)

// Issue 17, item 2: a token has its own cap, all tokens one together, and a
// released slot is free again (once, however often release is called).
func TestLimiterCapsPerTokenAndInAll(t *testing.T) {
	t.Parallel()
	l := New(3, 2)
	var releases []func()
	for _, tok := range []string{"a", "a", "b"} {
		rel, err := l.Acquire(tok)
		if err != nil {
			t.Fatalf("acquire %s: %v", tok, err)
		}
		releases = append(releases, rel)
	}
	if _, err := l.Acquire("a"); !errors.Is(err, ErrTokenFull) {
		t.Fatalf("a third stream of a: %v, want ErrTokenFull", err)
	}
	if _, err := l.Acquire("c"); !errors.Is(err, ErrFull) {
		t.Fatalf("a fourth stream in all: %v, want ErrFull", err)
	}
	releases[0]()
	releases[0]()
	if all, a := l.Open("a"); all != 2 || a != 1 {
		t.Fatalf("after one release (called twice): %d open, %d of a; want 2 and 1", all, a)
	}
	if _, err := l.Acquire("c"); err != nil {
		t.Fatalf("a freed slot: %v", err)
	}
}
