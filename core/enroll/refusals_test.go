package enroll

import (
	"fmt"
	"testing"
	"time"
)

// TestLimiterLetsOneRefusalAMinutePerKeyWithTheCountHeldBack: per key, the
// first refusal passes, the others of the minute are held back, and the
// first after the minute passes counting them; keys do not share a minute.
func TestLimiterLetsOneRefusalAMinutePerKeyWithTheCountHeldBack(t *testing.T) {
	t.Parallel()
	l := newLimiter(time.Minute, 16)
	t0 := time.Unix(1_700_000_000, 0)
	if pass, n := l.allow("token:a", t0); !pass || n != 1 {
		t.Fatalf("first refusal: %v %d, want it to pass counting 1", pass, n)
	}
	for i := range 99 {
		if pass, _ := l.allow("token:a", t0.Add(time.Duration(i)*500*time.Millisecond)); pass {
			t.Fatalf("refusal %d within the minute passed", i+2)
		}
	}
	if pass, n := l.allow("token:b", t0.Add(time.Second)); !pass || n != 1 {
		t.Fatalf("another key: %v %d, want it to pass counting 1", pass, n)
	}
	if pass, n := l.allow("token:a", t0.Add(time.Minute)); !pass || n != 100 {
		t.Fatalf("a minute later: %v %d, want it to pass counting 100", pass, n)
	}
	if pass, _ := l.allow("token:a", t0.Add(time.Minute+time.Second)); pass {
		t.Fatal("the minute starts again at the refusal that passed")
	}
}

// TestLimiterIsBoundedEvictingTheOldest: a caller rotating keys never
// grows the limiter past its bound; the oldest key goes first.
func TestLimiterIsBoundedEvictingTheOldest(t *testing.T) {
	t.Parallel()
	const bound = 64
	l := newLimiter(time.Minute, bound)
	t0 := time.Unix(1_700_000_000, 0)
	l.allow("first", t0)
	for i := range 100_000 {
		if pass, _ := l.allow(fmt.Sprintf("serial:%x", i), t0.Add(time.Millisecond)); !pass {
			t.Fatalf("a new key %d was held back", i)
		}
		if n := l.size(); n > bound {
			t.Fatalf("%d keys remembered, bound %d", n, bound)
		}
	}
	if n := l.size(); n != bound {
		t.Fatalf("%d keys remembered, want the bound %d", n, bound)
	}
	// The oldest was evicted: its next refusal passes at once.
	if pass, n := l.allow("first", t0.Add(2*time.Millisecond)); !pass || n != 1 {
		t.Fatalf("an evicted key: %v %d, want it to pass counting 1", pass, n)
	}
	// The newest is still remembered.
	if pass, _ := l.allow(fmt.Sprintf("serial:%x", 99_999), t0.Add(2*time.Millisecond)); pass {
		t.Fatal("the newest key was evicted")
	}
}
