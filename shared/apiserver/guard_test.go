package apiserver

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/musterhq/muster/shared/testwait"
)

// guarded serves a handler behind a Guard; /hold blocks until the test
// ends.
func guarded(t *testing.T, cfg GuardConfig) (addr string, g *Guard) {
	t.Helper()
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	g = NewGuard(inner, cfg)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/hold" {
			w.WriteHeader(http.StatusOK)
			_ = http.NewResponseController(w).Flush()
			<-release
		}
	}), ReadHeaderTimeout: time.Minute}
	g.Attach(srv)
	go func() { _ = srv.Serve(g) }()
	t.Cleanup(func() { close(release); srv.Close() })
	return inner.Addr().String(), g
}

// waitIdle waits until g counts n connections idle between requests. A
// client reads its answer before the server marks the connection idle, so
// a test that wants the guard to see it idle waits for that.
func waitIdle(t *testing.T, g *Guard, n int) {
	t.Helper()
	testwait.For(t, fmt.Sprintf("%d connections idle between requests", n), func() bool {
		g.mu.Lock()
		defer g.mu.Unlock()
		idle := 0
		for c := range g.open {
			if c.state == stateIdle {
				idle++
			}
		}
		return idle == n
	})
}

func dialFrom(t *testing.T, ip, addr string) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 5 * time.Second}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// closedByServer reports whether the server closed c within a deadline.
func closedByServer(c net.Conn, within time.Duration) bool {
	_ = c.SetReadDeadline(time.Now().Add(within))
	_, err := c.Read(make([]byte, 1))
	var ne net.Error
	return err != nil && !(errors.As(err, &ne) && ne.Timeout())
}

func get(t *testing.T, c net.Conn, path string) *bufio.Reader {
	t.Helper()
	fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: x\r\n\r\n", path)
	br := bufio.NewReader(c)
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	if path != "/hold" {
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	return br
}

// Issue 17, item 4: beyond the cap of one address, its oldest connection
// that never sent a request is closed to make room, and a connection
// serving a request is not; other addresses are not touched.
func TestGuardClosesIdleConnectionsFirstPerClient(t *testing.T) {
	t.Parallel()
	addr, _ := guarded(t, GuardConfig{Max: 100, PerClient: 3})
	busy := dialFrom(t, "127.0.0.2", addr)
	get(t, busy, "/hold")
	idle1 := dialFrom(t, "127.0.0.2", addr)
	other := dialFrom(t, "127.0.0.3", addr)
	idle2 := dialFrom(t, "127.0.0.2", addr)
	// A fourth from 127.0.0.2: the oldest idle one goes, not the busy one.
	fresh := dialFrom(t, "127.0.0.2", addr)
	if !closedByServer(idle1, 10*time.Second) {
		t.Fatal("the oldest idle connection of a full address was not closed")
	}
	get(t, fresh, "/")
	for name, c := range map[string]net.Conn{"busy": busy, "another address's": other, "newer idle": idle2} {
		if closedByServer(c, 100*time.Millisecond) { // a bounded look for something that must not happen
			t.Fatalf("the %s connection was closed", name)
		}
	}
}

// Issue 17, item 4: at the cap over all addresses, a new connection makes
// room by closing the oldest that never sent a request, then one idle
// between requests; connections serving requests stay.
func TestGuardClosesIdleConnectionsFirstWhenFull(t *testing.T) {
	t.Parallel()
	addr, g := guarded(t, GuardConfig{Max: 3})
	busy := dialFrom(t, "127.0.0.1", addr)
	get(t, busy, "/hold")
	kept := dialFrom(t, "127.0.0.1", addr)
	get(t, kept, "/") // idle between requests now
	waitIdle(t, g, 1)
	silent := dialFrom(t, "127.0.0.1", addr)
	c4 := dialFrom(t, "127.0.0.1", addr)
	if !closedByServer(silent, 10*time.Second) {
		t.Fatal("the connection that never sent a request was not closed first")
	}
	get(t, c4, "/")
	waitIdle(t, g, 2)
	// c4 and kept are both idle between requests now: the older goes.
	c5 := dialFrom(t, "127.0.0.1", addr)
	if !closedByServer(kept, 10*time.Second) {
		t.Fatal("the oldest keep-alive connection was not closed next")
	}
	get(t, c5, "/")
	if closedByServer(busy, 100*time.Millisecond) { // a bounded look for something that must not happen
		t.Fatal("a connection serving a request was closed")
	}
}
