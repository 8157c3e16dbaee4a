package apiserver

import (
	"crypto/tls"
	"fmt"
	"log"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/musterhq/muster/shared/config"
	"github.com/musterhq/muster/shared/tlsutil"
)

// ReadHeaderTimeout bounds the time to send a request's headers.
const ReadHeaderTimeout = 10 * time.Second

// NewServer returns the HTTP server of an API with the limits of s:
// ReadTimeout (headers and body: a body sent a byte at a time is cut),
// WriteTimeout (long-lived answers such as an event stream set their own
// deadline per write), IdleTimeout for keep-alive connections, and
// MaxHeaderBytes. errorLog receives the server's own errors (refused TLS
// handshakes among them).
func NewServer(h http.Handler, s config.Server, errorLog *log.Logger) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: min(ReadHeaderTimeout, s.ReadTimeout),
		ReadTimeout:       s.ReadTimeout,
		WriteTimeout:      s.WriteTimeout,
		IdleTimeout:       s.IdleTimeout,
		MaxHeaderBytes:    s.MaxHeaderBytes,
		ErrorLog:          errorLog,
	}
}

// LimitListener returns a listener that holds at most n connections open at
// once: Accept waits while n are open. A client that opens connections and
// sends nothing loses each after the server's header timeout, so the cap
// does not lock others out for long. The connections it returns give the
// accepted one with NetConn, as tls.Conn does.
func LimitListener(l net.Listener, n int) net.Listener {
	return &limitListener{Listener: l, sem: make(chan struct{}, n), done: make(chan struct{})}
}

type limitListener struct {
	net.Listener
	sem       chan struct{}
	closeOnce sync.Once
	done      chan struct{}
}

func (l *limitListener) Accept() (net.Conn, error) {
	select {
	case l.sem <- struct{}{}:
	case <-l.done:
		return nil, net.ErrClosed
	}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.sem
		return nil, err
	}
	return &limitConn{Conn: c, release: func() { <-l.sem }}, nil
}

func (l *limitListener) Close() error {
	err := l.Listener.Close()
	l.closeOnce.Do(func() { close(l.done) })
	return err
}

type limitConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}

// NetConn returns the accepted connection.
func (c *limitConn) NetConn() net.Conn { return c.Conn }

// Listen opens the TCP listener of an API on c.Addr, holding at most
// c.MaxConnections connections, serving TLS when c.TLS has a certificate
// (with c.TLS.ClientCAFile, clients must present a certificate of that CA;
// opts tune the TLS configuration). Errors name the configuration key under
// prefix ("api.addr", "api.tls.cert_file", ...).
func Listen(prefix string, c config.API, opts ...tlsutil.ListenOption) (net.Listener, error) {
	tc, err := tlsutil.ListenConfig(prefix, c.TLS.CertFile, c.TLS.KeyFile, c.TLS.ClientCAFile, opts...)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", c.Addr)
	if err != nil {
		return nil, fmt.Errorf("%s.addr: %w", prefix, err)
	}
	// The cap counts connections before their handshake: one that never
	// completes it is closed by the server's timeouts.
	ln = LimitListener(ln, c.MaxConnections)
	if tc == nil {
		return ln, nil
	}
	return tls.NewListener(ln, tc), nil
}
