package testgoroutine

import (
	"testing"
	"time"
)

type part struct{ stop, ended chan struct{} }

// start starts run: the new goroutine names start as its creator at once.
func (p *part) start() { go p.run() }

func (p *part) run() {
	defer close(p.ended)
	<-p.stop
}

// TestRunningSeesAGoroutineUntilItEnds: a goroutine in a function is seen
// while it runs and not once it has ended; Returns catches a call that
// blocks.
func TestRunningSeesAGoroutineUntilItEnds(t *testing.T) {
	const fn = "testgoroutine.(*part)"
	if Running(fn) {
		t.Fatal("seen before it started")
	}
	p := &part{stop: make(chan struct{}), ended: make(chan struct{})}
	ended := p.ended
	p.start()
	if !Running(fn) {
		t.Fatal("not seen while it runs")
	}
	rec := &recorder{}
	Returns(rec, 50*time.Millisecond, "a blocked call", func() { <-ended })
	if !rec.failed {
		t.Fatal("Returns accepted a call that blocks")
	}
	close(p.stop)
	<-ended
	if Running(fn) {
		t.Fatal("seen after it ended")
	}
}

type recorder struct{ failed bool }

func (r *recorder) Helper()               {}
func (r *recorder) Errorf(string, ...any) { r.failed = true }
