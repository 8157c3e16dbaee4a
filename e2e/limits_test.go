package e2e

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Server limits short enough for a test (api.read_timeout, api.idle_timeout).
const (
	testReadTimeout = time.Second
	testIdleTimeout = 500 * time.Millisecond
)

var limitsYAML = fmt.Sprintf("  read_timeout: %s\n  write_timeout: 5s\n  idle_timeout: %s\n", testReadTimeout, testIdleTimeout)

// Item 5 of the attack review: every server closes a keep-alive connection
// left idle past api.idle_timeout, and cuts a request whose body comes a
// byte at a time once api.read_timeout has passed. The agent and the core
// are real processes with those limits configured.
func TestServersCloseIdleAndSlowConnections(t *testing.T) {
	t.Parallel()
	base := t.TempDir()

	adir := filepath.Join(base, "agent")
	acfg := fmt.Sprintf("node_id: n1\ncluster_id: e2e\ndata_dir: %s\napi:\n  addr: 127.0.0.1:%d\n  insecure: true\n%s",
		filepath.Join(adir, "data"), freePort(t), limitsYAML)
	cdir := filepath.Join(base, "core")
	ccfg := fmt.Sprintf("data_dir: %s\napi:\n  addr: 127.0.0.1:%d\n%s", filepath.Join(cdir, "data"), freePort(t), limitsYAML)
	for _, d := range []struct{ dir, cfg string }{{adir, acfg}, {cdir, ccfg}} {
		if err := os.MkdirAll(d.dir, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d.dir, "config.yaml"), []byte(d.cfg), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	ag := startIn(t, adir, "agent", nil, "agent", "--config", filepath.Join(adir, "config.yaml"))
	core := startIn(t, cdir, "core", nil, "core", "--config", filepath.Join(cdir, "config.yaml"))
	admin, err := os.ReadFile(filepath.Join(cdir, "data", "admin.token"))
	if err != nil {
		t.Fatal(err)
	}

	for _, c := range []struct {
		name, addr, health, post, auth string
	}{
		{"agent", ag.Addr(), "/api/v1/health", "/api/v1/actions", ""},
		{"core", core.Addr(), "/health", "/api/v1/actions", "Authorization: Bearer " + strings.TrimSpace(string(admin)) + "\r\n"},
	} {
		t.Run(c.name+" idle keep-alive", func(t *testing.T) {
			conn, err := net.Dial("tcp", c.addr)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: %s\r\n\r\n", c.health, c.addr)
			br := bufio.NewReader(conn)
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK || resp.Close {
				t.Fatalf("health: %d, close %v", resp.StatusCode, resp.Close)
			}
			idleSince := time.Now()
			_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
			_, err = br.ReadByte()
			var ne net.Error
			if err == nil || errors.As(err, &ne) && ne.Timeout() {
				t.Fatalf("an idle keep-alive connection: read %v after %s, want the server to close it", err, time.Since(idleSince))
			}
			if d := time.Since(idleSince); d < testIdleTimeout/2 {
				t.Fatalf("closed after %s, before idle_timeout %s", d, testIdleTimeout)
			}
		})
		t.Run(c.name+" slow body", func(t *testing.T) {
			conn, err := net.Dial("tcp", c.addr)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: %s\r\n%sContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{", c.post, c.addr, c.auth)
			start := time.Now()
			ended := make(chan error, 1)
			go func() {
				_ = conn.SetReadDeadline(time.Now().Add(20 * time.Second))
				_, err := io.Copy(io.Discard, conn) // an answer, then the close
				ended <- err
			}()
			// One byte every 100 ms (the attack sent one a second): each
			// arrives well within any per-read timeout, never the whole
			// body within read_timeout.
			tick := time.NewTicker(100 * time.Millisecond)
			defer tick.Stop()
			for {
				select {
				case err := <-ended:
					// An answer then a close, or a reset (the server closed
					// with our bytes unread): both cut the request. Our own
					// read deadline passing is not.
					var ne net.Error
					if d := time.Since(start); d < testReadTimeout/2 || errors.As(err, &ne) && ne.Timeout() {
						t.Fatalf("the connection ended after %s (%v), want a close after read_timeout %s", d, err, testReadTimeout)
					}
					return
				case <-tick.C:
					if time.Since(start) > 10*time.Second {
						t.Fatalf("a body sent a byte at a time is still read after %s (read_timeout %s)", time.Since(start), testReadTimeout)
					}
					_, _ = conn.Write([]byte(" "))
				}
			}
		})
	}
}
