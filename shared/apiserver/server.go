package apiserver

import (
	"crypto/tls"
	"fmt"
	"log"
	"net"
	"net/http"
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

// Listen opens the TCP listener of an API on c.Addr, serving TLS when c.TLS
// has a certificate (with c.TLS.ClientCAFile, clients must present a
// certificate of that CA; opts tune the TLS configuration). Its Guard holds
// at most c.MaxConnections connections open, and c.MaxConnectionsPerClient
// from one address, making room by closing the oldest connection that does
// nothing; the caps count connections before their handshake, so one that
// never completes it goes first. Attach the Guard to the server. Errors name
// the configuration key under prefix ("api.addr", "api.tls.cert_file", ...).
func Listen(prefix string, c config.API, opts ...tlsutil.ListenOption) (net.Listener, *Guard, error) {
	tc, err := tlsutil.ListenConfig(prefix, c.TLS.CertFile, c.TLS.KeyFile, c.TLS.ClientCAFile, opts...)
	if err != nil {
		return nil, nil, err
	}
	ln, err := net.Listen("tcp", c.Addr)
	if err != nil {
		return nil, nil, fmt.Errorf("%s.addr: %w", prefix, err)
	}
	guard := NewGuard(ln, GuardConfig{Max: c.MaxConnections, PerClient: c.MaxConnectionsPerClient})
	if tc == nil {
		return guard, guard, nil
	}
	return tls.NewListener(guard, tc), guard, nil
}
