package apiserver

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"

	"github.com/musterhq/muster/shared/startstop"
)

// Service serves an http.Server on its listeners as a startstop part. When
// its context ends it stops taking connections and lets requests in flight
// finish; Shutdown bounds that wait, then closes what is left.
type Service struct {
	startstop.Base
	srv    *http.Server
	lns    []net.Listener
	failed chan error
	wg     sync.WaitGroup
}

var _ startstop.Shutdowner = (*Service)(nil)

// NewService returns the part serving srv on lns; it serves nothing yet.
func NewService(srv *http.Server, lns ...net.Listener) *Service {
	return &Service{srv: srv, lns: lns, failed: make(chan error, len(lns))}
}

// Start serves every listener in its own goroutine.
func (s *Service) Start(ctx context.Context) error {
	ctx, done, err := s.StartInit(ctx)
	if err != nil {
		return err
	}
	for _, ln := range s.lns {
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			if err := s.srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
				s.failed <- fmt.Errorf("serve %s: %w", ln.Addr(), err)
			}
		}()
	}
	go func() {
		defer done()
		<-ctx.Done()
		// Graceful, unbounded here: Shutdown(ctx) bounds it.
		_ = s.srv.Shutdown(context.Background())
		s.wg.Wait()
	}()
	return nil
}

// Failed carries the error of a listener that stopped serving on its own.
func (s *Service) Failed() <-chan error { return s.failed }

// Shutdown stops the server, waiting until ctx ends for requests in flight;
// then it closes the connections left and returns ctx's error.
func (s *Service) Shutdown(ctx context.Context) error {
	err := s.srv.Shutdown(ctx)
	if err != nil {
		_ = s.srv.Close()
	}
	s.Stop()
	return err
}
