package api

import (
	"bufio"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/musterhq/muster/shared/apiserver"
	"github.com/musterhq/muster/shared/client"
	"github.com/musterhq/muster/shared/config"
	"github.com/musterhq/muster/shared/testwait"
	"github.com/musterhq/muster/shared/wire"
)

// serveLimited serves the API of e again, with the server the core runs
// (apiserver.NewServer) and the given write timeout, and returns its URL.
func serveLimited(t *testing.T, e *env, write time.Duration) string {
	t.Helper()
	ts := httptest.NewUnstartedServer(nil)
	ts.Config = apiserver.NewServer(e.srv.Handler(), config.Server{
		ReadTimeout: write, WriteTimeout: write, IdleTimeout: time.Minute, MaxHeaderBytes: 64 << 10, MaxConnections: 16,
	}, nil)
	ts.Start()
	t.Cleanup(ts.Close)
	return ts.URL
}

// Item 5 of the attack review: the server has read and write timeouts now,
// and an event stream lives on past them: it sets a deadline per write,
// sends a heartbeat comment while nothing happens, and still delivers the
// events that follow.
func TestEventStreamOutlivesTheWriteTimeoutWithHeartbeats(t *testing.T) {
	t.Parallel()
	const timeout = 300 * time.Millisecond
	e := setup(t, func(c *Config) { c.StreamKeepAlive = 50 * time.Millisecond; c.StreamWriteTimeout = timeout })
	url := serveLimited(t, e, timeout)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url+"/api/v1/events/stream", nil)
	req.Header.Set("Authorization", "Bearer "+e.secrets["viewer"])
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	lines := bufio.NewScanner(resp.Body)
	start, beats := time.Now(), 0
	for time.Since(start) < 4*timeout {
		if !lines.Scan() {
			t.Fatalf("the stream ended after %s and %d heartbeats: %v", time.Since(start), beats, lines.Err())
		}
		if lines.Text() == ": keep-alive" {
			beats++
		}
	}
	if beats < 3 {
		t.Fatalf("%d heartbeats in %s", beats, time.Since(start))
	}
	a := e.create("op", wire.CreateActionRequest{})
	for lines.Scan() {
		if strings.HasPrefix(lines.Text(), "data: ") && strings.Contains(lines.Text(), a.ID) {
			return
		}
	}
	t.Fatalf("the event of %s never came: %v", a.ID, lines.Err())
}

// Item 5 of the attack review: beside the per-token cap, a global cap on
// event streams answers 503 with the envelope.
func TestEventStreamsHaveAGlobalCap(t *testing.T) {
	t.Parallel()
	e := setup(t, func(c *Config) { c.MaxStreams = 2 })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s1, err := e.client("viewer").Stream(ctx, -1, client.EventFilter{})
	if err != nil {
		t.Fatal(err)
	}
	s2, err := e.client("op").Stream(ctx, -1, client.EventFilter{})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	// A third stream, of a token with streams to spare: refused, not served.
	tctx, tcancel := context.WithTimeout(ctx, 10*time.Second)
	defer tcancel()
	_, err = e.client("admin").Stream(tctx, -1, client.EventFilter{})
	var ae *client.APIError
	if !errors.As(err, &ae) || ae.Status != http.StatusServiceUnavailable || ae.Detail.Code != wire.CodeUnavailable ||
		!strings.Contains(ae.Detail.Message, "event streams") {
		t.Fatalf("third stream: %v, want 503 with the envelope", err)
	}
	s1.Close()
	testwait.For(t, "a freed stream slot", func() bool {
		s, err := e.client("admin").Stream(ctx, -1, client.EventFilter{})
		if err != nil {
			return false
		}
		s.Close()
		return true
	})
}
