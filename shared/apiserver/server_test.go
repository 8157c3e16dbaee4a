package apiserver

import (
	"net"
	"testing"
	"time"
)

// Item 5 of the attack review: a cap on open connections. Accept waits while
// the cap is reached, and goes on once one closes.
func TestLimitListenerCapsOpenConnections(t *testing.T) {
	t.Parallel()
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := LimitListener(inner, 2)
	defer ln.Close()
	accepted := make(chan net.Conn, 3)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted <- c
		}
	}()
	for range 3 {
		c, err := net.Dial("tcp", inner.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
	}
	var open []net.Conn
	for range 2 {
		select {
		case c := <-accepted:
			open = append(open, c)
		case <-time.After(10 * time.Second):
			t.Fatal("the first two connections were not accepted")
		}
	}
	if _, ok := open[0].(interface{ NetConn() net.Conn }).NetConn().(*net.TCPConn); !ok {
		t.Fatal("NetConn does not give the accepted connection")
	}
	select {
	case <-accepted:
		t.Fatal("a third connection was accepted beside two open ones")
	case <-time.After(200 * time.Millisecond): // a bounded look for something that must not happen
	}
	open[0].Close()
	select {
	case c := <-accepted:
		c.Close()
	case <-time.After(10 * time.Second):
		t.Fatal("the third connection was not accepted once one closed")
	}
	open[1].Close()
}
