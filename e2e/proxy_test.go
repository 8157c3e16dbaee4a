package e2e

import (
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"sync"
	"syscall"
	"testing"
	"time"
)

// faultMode is what a faultProxy does to the bytes it carries.
type faultMode int

const (
	// pass forwards everything at once.
	pass faultMode = iota
	// delay forwards every chunk after 75 ± 50 ms, in order.
	delay
	// blackhole reads and discards everything in both directions; new
	// connections are accepted and go nowhere, so callers time out.
	blackhole
	// drop closes every connection (FIN) and every new one at once.
	drop
	// reset closes every connection and every new one with a TCP RST.
	reset
)

func (m faultMode) String() string {
	return [...]string{"pass", "delay", "blackhole", "drop", "reset"}[m]
}

// faultProxy is a TCP proxy in front of one agent, owned by a test, that
// injects network faults between the core and that agent (in the spirit of
// etcd's pkg/proxy). Build it with newFaultProxy; the test's cleanup closes it.
type faultProxy struct {
	target string
	l      net.Listener
	wg     sync.WaitGroup // the accept loop and every connection's pumps

	mu    sync.Mutex
	mode  faultMode
	rnd   *rand.Rand
	conns map[*proxyConn]struct{}
	done  bool
}

// proxyConn is one client connection and its connection to the target.
type proxyConn struct {
	client net.Conn

	mu     sync.Mutex
	server net.Conn // nil until dialled
	closed bool
}

// close closes both sides, with an RST when rst is set.
func (c *proxyConn) close(rst bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return
	}
	c.closed = true
	for _, nc := range []net.Conn{c.client, c.server} {
		if nc == nil {
			continue
		}
		if tc, ok := nc.(*net.TCPConn); ok && rst {
			_ = tc.SetLinger(0)
		}
		_ = nc.Close()
	}
}

// attach records the connection to the target; it reports false (and
// closes server) when the connection was cut meanwhile.
func (c *proxyConn) attach(server net.Conn) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		_ = server.Close()
		return false
	}
	c.server = server
	return true
}

// newFaultProxy listens on a free loopback port and forwards to target.
func newFaultProxy(t testing.TB, target string, seed uint64) *faultProxy {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &faultProxy{target: target, l: l, rnd: rand.New(rand.NewPCG(seed, 0x70c5)), conns: map[*proxyConn]struct{}{}}
	p.wg.Add(1)
	go func() { defer p.wg.Done(); p.accept() }()
	t.Cleanup(p.Close)
	return p
}

// Addr is the address to give the core instead of the agent's.
func (p *faultProxy) Addr() string { return p.l.Addr().String() }

// Mode returns the current mode.
func (p *faultProxy) Mode() faultMode {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.mode
}

// Set switches the mode. drop and reset also cut every live connection.
func (p *faultProxy) Set(m faultMode) {
	p.mu.Lock()
	p.mode = m
	var cut []*proxyConn
	if m == drop || m == reset {
		for c := range p.conns {
			cut = append(cut, c)
		}
	}
	p.mu.Unlock()
	for _, c := range cut {
		c.close(m == reset)
	}
}

// Close stops accepting, cuts every connection and waits for its goroutines.
func (p *faultProxy) Close() {
	p.mu.Lock()
	p.done = true
	var cut []*proxyConn
	for c := range p.conns {
		cut = append(cut, c)
	}
	p.mu.Unlock()
	_ = p.l.Close()
	for _, c := range cut {
		c.close(false)
	}
	p.wg.Wait()
}

func (p *faultProxy) accept() {
	for {
		nc, err := p.l.Accept()
		if err != nil {
			return // closed
		}
		c := &proxyConn{client: nc}
		p.mu.Lock()
		mode, done := p.mode, p.done
		if !done && mode != drop && mode != reset {
			p.conns[c] = struct{}{}
		}
		p.mu.Unlock()
		if done || mode == drop || mode == reset {
			c.close(mode == reset)
			continue
		}
		p.wg.Add(1)
		go func() { defer p.wg.Done(); p.serve(c) }()
	}
}

// serve dials the target and pumps both directions until either side ends.
func (p *faultProxy) serve(c *proxyConn) {
	defer func() {
		p.mu.Lock()
		delete(p.conns, c)
		p.mu.Unlock()
	}()
	server, err := net.DialTimeout("tcp", p.target, 2*time.Second)
	if err != nil {
		c.close(false) // the agent is down: the caller sees the connection end
		return
	}
	if !c.attach(server) {
		return
	}
	p.mu.Lock()
	cut := p.done || p.mode == drop || p.mode == reset
	rst := p.mode == reset
	p.mu.Unlock()
	if cut {
		c.close(rst)
		return
	}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); p.pump(c, c.client, server) }()
	go func() { defer wg.Done(); p.pump(c, server, c.client) }()
	wg.Wait()
	c.close(false)
}

// chunk is bytes read from one side, due to be written to the other.
type chunk struct {
	b   []byte
	due time.Time
}

// pump copies src to dst through the current mode. A reader goroutine reads
// and stamps each chunk with its due time; this goroutine writes chunks in
// order once due. When src ends, what was read is still delivered (a request
// delayed in the network may arrive after its sender gave up), then dst's
// write side is closed.
func (p *faultProxy) pump(c *proxyConn, src, dst net.Conn) {
	queue := make(chan chunk, 64)
	go func() {
		defer close(queue)
		var last time.Time
		buf := make([]byte, 32<<10)
		for {
			n, err := src.Read(buf)
			if n > 0 {
				p.mu.Lock()
				mode := p.mode
				jitter := time.Duration(p.rnd.Int64N(int64(100*time.Millisecond) + 1))
				p.mu.Unlock()
				due := time.Now()
				switch mode {
				case blackhole:
					continue
				case delay:
					due = due.Add(25*time.Millisecond + jitter)
				}
				if due.Before(last) {
					due = last // keep the stream in order
				}
				last = due
				queue <- chunk{b: append([]byte(nil), buf[:n]...), due: due}
			}
			if err != nil {
				return
			}
		}
	}()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for ch := range queue {
		if wait := time.Until(ch.due); wait > 0 {
			timer.Reset(wait)
			<-timer.C
		}
		if _, err := dst.Write(ch.b); err != nil {
			c.close(false)
			for range queue { // let the reader end
			}
			return
		}
	}
	if tc, ok := dst.(*net.TCPConn); ok {
		if err := tc.CloseWrite(); err != nil && !errors.Is(err, net.ErrClosed) {
			c.close(false)
		}
	} else {
		c.close(false)
	}
}

// The proxy does what each mode says, on a real TCP echo server.
func TestFaultProxyModes(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); _, _ = io.Copy(c, c) }()
		}
	}()
	p := newFaultProxy(t, l.Addr().String(), 1)
	// roundTrip sends a line and reads it back within 500 ms.
	roundTrip := func(c net.Conn) (time.Duration, error) {
		t0 := time.Now()
		_ = c.SetDeadline(t0.Add(500 * time.Millisecond))
		if _, err := c.Write([]byte("ping\n")); err != nil {
			return 0, err
		}
		buf := make([]byte, 5)
		_, err := io.ReadFull(c, buf)
		return time.Since(t0), err
	}
	// try dials a new connection and makes one round trip.
	try := func() error {
		c, err := net.Dial("tcp", p.Addr())
		if err != nil {
			return err
		}
		defer c.Close()
		_, err = roundTrip(c)
		return err
	}
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := roundTrip(c); err != nil {
		t.Fatalf("pass: %v", err)
	}
	p.Set(delay)
	if took, err := roundTrip(c); err != nil || took < 50*time.Millisecond {
		t.Fatalf("delay: %s %v, want at least 2×25 ms", took, err)
	}
	p.Set(blackhole)
	var ne net.Error
	if _, err := roundTrip(c); !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("blackhole: %v, want a timeout", err)
	}
	p.Set(drop)
	if _, err := roundTrip(c); !errors.Is(err, io.EOF) && !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("drop of a live connection: %v, want EOF", err)
	}
	if err := try(); err == nil {
		t.Fatal("drop: a new connection carried data")
	}
	p.Set(reset)
	if err := try(); !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("reset: %v, want ECONNRESET", err)
	}
	p.Set(pass)
	if err := try(); err != nil {
		t.Fatalf("pass after the faults: %v", err)
	}
}
