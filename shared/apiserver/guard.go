package apiserver

import (
	"context"
	"net"
	"net/http"
	"sync"
)

// GuardConfig bounds the connections a Guard holds open.
type GuardConfig struct {
	// Max caps the connections open at once, over every client.
	Max int
	// PerClient caps the connections open at once from one client address
	// (the peer's IP); zero means no cap of its own.
	PerClient int
	// ExemptLoopback lifts PerClient for loopback clients (`muster dev`,
	// where the browser, the CLI and the agents all come from 127.0.0.1).
	ExemptLoopback bool
	// ClientOf names the client a connection comes from, for PerClient;
	// nil: the peer's IP address. The agent's Unix socket names its
	// callers by uid.
	ClientOf func(net.Conn) string
}

// Guard is a listener that holds at most Max connections open, and at most
// PerClient from one address. Beyond a cap it makes room by closing an open
// connection that is doing nothing, oldest first: first one that has never
// completed a request (a client that connects and sends nothing, or sends
// its headers a byte at a time), then one idle between two requests. Only
// when every connection is serving a request does a new one wait (beyond
// Max) or get closed at once (beyond PerClient). So connections opened and
// left idle, however fast they come back, cannot keep out a client that
// sends a request.
//
// The guard learns what a connection does from the HTTP server: Attach it
// to the server that serves this listener.
type Guard struct {
	net.Listener
	cfg GuardConfig

	mu       sync.Mutex
	freed    *sync.Cond
	closed   bool
	seq      uint64
	open     map[*guardConn]struct{}
	byClient map[string]int
}

// NewGuard wraps l.
func NewGuard(l net.Listener, cfg GuardConfig) *Guard {
	g := &Guard{Listener: l, cfg: cfg, open: map[*guardConn]struct{}{}, byClient: map[string]int{}}
	g.freed = sync.NewCond(&g.mu)
	return g
}

// What a connection is doing, as the HTTP server tells it.
type connState int

const (
	// stateFresh: no request has reached a handler yet.
	stateFresh connState = iota
	// stateBusy: a request is being served.
	stateBusy
	// stateIdle: between two requests on a keep-alive connection.
	stateIdle
)

type guardConn struct {
	net.Conn
	g      *Guard
	client string
	// Under g.mu:
	seq     uint64
	state   connState
	counted bool // still counted against the caps
}

// NetConn returns the accepted connection.
func (c *guardConn) NetConn() net.Conn { return c.Conn }

func (c *guardConn) Close() error {
	err := c.Conn.Close()
	c.g.forget(c)
	return err
}

// Accept returns the next connection, making room for it as described on
// Guard.
func (g *Guard) Accept() (net.Conn, error) {
	for {
		c, err := g.Listener.Accept()
		if err != nil {
			return nil, err
		}
		client := g.clientOf(c)
		gc, victims, ok := g.admit(c, client)
		for _, v := range victims {
			_ = v.Conn.Close() // the server's read fails and it lets go of v
		}
		if !ok {
			_ = c.Close()
			if g.isClosed() {
				return nil, net.ErrClosed
			}
			continue
		}
		return gc, nil
	}
}

// admit counts c against the caps, choosing the connections to close to
// make room. ok is false when c must be refused.
func (g *Guard) admit(c net.Conn, client string) (gc *guardConn, victims []*guardConn, ok bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	capped := g.cfg.PerClient > 0 && !(g.cfg.ExemptLoopback && isLoopback(client))
	if capped && g.byClient[client] >= g.cfg.PerClient {
		v := g.victim(client)
		if v == nil {
			return nil, nil, false
		}
		g.uncount(v)
		victims = append(victims, v)
	}
	for len(g.open) >= g.cfg.Max && !g.closed {
		if v := g.victim(""); v != nil {
			g.uncount(v)
			victims = append(victims, v)
			continue
		}
		g.freed.Wait()
	}
	if g.closed {
		return nil, victims, false
	}
	g.seq++
	gc = &guardConn{Conn: c, g: g, client: client, seq: g.seq, state: stateFresh, counted: true}
	g.open[gc] = struct{}{}
	g.byClient[client]++
	return gc, victims, true
}

// victim returns the connection to close first, of client or (with "") of
// anyone: the oldest fresh one, else the oldest idle one, else nil.
func (g *Guard) victim(client string) *guardConn {
	var best *guardConn
	for c := range g.open {
		if c.state == stateBusy || client != "" && c.client != client {
			continue
		}
		if best == nil || c.state < best.state || c.state == best.state && c.seq < best.seq {
			best = c
		}
	}
	return best
}

// uncount removes c from the counts; g.mu is held.
func (g *Guard) uncount(c *guardConn) {
	if !c.counted {
		return
	}
	c.counted = false
	delete(g.open, c)
	if g.byClient[c.client]--; g.byClient[c.client] <= 0 {
		delete(g.byClient, c.client)
	}
	g.freed.Signal()
}

func (g *Guard) forget(c *guardConn) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.uncount(c)
}

func (g *Guard) set(c net.Conn, s connState) {
	gc := guardConnOf(c)
	if gc == nil || gc.g != g {
		return // not one of this guard's (a server may serve several)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	gc.state = s
}

func (g *Guard) isClosed() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.closed
}

// Close closes the listener; an Accept waiting for room returns.
func (g *Guard) Close() error {
	err := g.Listener.Close()
	g.mu.Lock()
	g.closed = true
	g.freed.Broadcast()
	g.mu.Unlock()
	return err
}

type guardConnKey struct{}

// Attach lets the guard follow what srv does with each connection: a
// request that reaches the handler makes its connection busy, the end of
// the answer makes it idle. Call it before srv serves the guard.
func (g *Guard) Attach(srv *http.Server) {
	next := srv.Handler
	prevState := srv.ConnState
	srv.ConnState = func(c net.Conn, s http.ConnState) {
		if s == http.StateIdle {
			g.set(c, stateIdle)
		}
		if prevState != nil {
			prevState(c, s)
		}
	}
	prevCtx := srv.ConnContext
	srv.ConnContext = func(ctx context.Context, c net.Conn) context.Context {
		if prevCtx != nil {
			ctx = prevCtx(ctx, c)
		}
		return context.WithValue(ctx, guardConnKey{}, c)
	}
	srv.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if c, ok := r.Context().Value(guardConnKey{}).(net.Conn); ok {
			g.set(c, stateBusy)
		}
		next.ServeHTTP(w, r)
	})
}

// guardConnOf finds the guard's connection under c (a TLS connection wraps
// it), or nil.
func guardConnOf(c net.Conn) *guardConn {
	for c != nil {
		switch x := c.(type) {
		case *guardConn:
			return x
		case interface{ NetConn() net.Conn }:
			c = x.NetConn()
		default:
			return nil
		}
	}
	return nil
}

// clientOf names the client of c: GuardConfig.ClientOf, or its peer's IP.
func (g *Guard) clientOf(c net.Conn) string {
	if g.cfg.ClientOf != nil {
		return g.cfg.ClientOf(c)
	}
	return addrClient(c.RemoteAddr())
}

// addrClient is the IP of a peer address, or the address itself.
func addrClient(a net.Addr) string {
	if ta, ok := a.(*net.TCPAddr); ok {
		return ta.IP.String()
	}
	host, _, err := net.SplitHostPort(a.String())
	if err != nil {
		return a.String()
	}
	return host
}

func isLoopback(ip string) bool {
	p := net.ParseIP(ip)
	return p != nil && p.IsLoopback()
}
