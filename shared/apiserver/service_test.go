package apiserver

import (
	"context"
	"errors"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/musterhq/muster/shared/testwait"
)

func TestServiceShutdownReportsARequestStillInFlight(t *testing.T) {
	t.Parallel()
	entered, release := make(chan struct{}), make(chan struct{})
	defer close(release)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(entered)
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := NewService(srv, ln)
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	go func() { _, _ = http.Get("http://" + ln.Addr().String()) }()
	<-entered
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if err := s.Shutdown(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Shutdown = %v, want the deadline", err)
	}
	if _, err := net.DialTimeout("tcp", ln.Addr().String(), time.Second); err == nil {
		t.Fatal("still accepting after Shutdown")
	}
}

func TestServiceStopsWhenItsContextEnds(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := NewService(&http.Server{Handler: http.NotFoundHandler()}, ln)
	ctx, cancel := context.WithCancel(context.Background())
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	cancel()
	testwait.For(t, "the listener to close", func() bool {
		c, err := net.DialTimeout("tcp", ln.Addr().String(), time.Second)
		if err == nil {
			c.Close()
		}
		return err != nil
	})
	s.Stop()
	select {
	case err := <-s.Failed():
		t.Fatalf("a listener failed: %v", err)
	default:
	}
}
