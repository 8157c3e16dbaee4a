package testsignal

import (
	"fmt"
	"strings"
	"testing"
)

// fakeTB records what a signal reports.
type fakeTB struct{ errors []string }

func (f *fakeTB) Helper() {}
func (f *fakeTB) Errorf(format string, args ...any) {
	f.errors = append(f.errors, fmt.Sprintf(format, args...))
}
func (f *fakeTB) Fatalf(format string, args ...any) { f.Errorf(format, args...) }

func TestSendWithoutInitDoesNothing(t *testing.T) {
	t.Parallel()
	var s Signal[int]
	s.Send(1) // production: no test reads, nothing blocks or panics
}

func TestWaitReturnsValuesInOrder(t *testing.T) {
	t.Parallel()
	var s Signal[string]
	s.Init(t)
	go func() { s.Send("a"); s.Send("b") }()
	if got := s.Wait(); got != "a" {
		t.Fatalf("first %q", got)
	}
	if got := s.Wait(); got != "b" {
		t.Fatalf("second %q", got)
	}
	s.RequireEmpty()
}

func TestWaitForDropsTheValuesBefore(t *testing.T) {
	t.Parallel()
	var s Signal[int]
	s.Init(t)
	for i := range 5 {
		s.Send(i)
	}
	if got := s.WaitFor("3", func(v int) bool { return v == 3 }); got != 3 {
		t.Fatalf("got %d", got)
	}
	if got := s.Wait(); got != 4 {
		t.Fatalf("next %d", got)
	}
}

func TestRequireEmptyAndAFullSignalAreReported(t *testing.T) {
	t.Parallel()
	f := &fakeTB{}
	var s Signal[int]
	s.Init(f)
	s.Send(7)
	s.RequireEmpty()
	if len(f.errors) != 1 || !strings.Contains(f.errors[0], "got 7") {
		t.Fatalf("errors %q", f.errors)
	}
	for i := range size + 1 {
		s.Send(i)
	}
	if len(f.errors) != 2 || !strings.Contains(f.errors[1], "full") {
		t.Fatalf("errors %q", f.errors)
	}
}
