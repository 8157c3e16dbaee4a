// Command waitflood holds blocking reads of an agent's changes over its Unix
// socket, as one local user could: it opens N connections, sends each a GET
// /api/v1/actions?wait=30s, and prints, ten seconds later, how many are held
// (no answer yet: a wait of 30 s the agent holds), answered and closed by
// the agent, and keeps every
// connection open until its standard input closes. The end-to-end tests run
// it as another user.
package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: waitflood SOCKET N")
		os.Exit(2)
	}
	path := os.Args[1]
	n, err := strconv.Atoi(os.Args[2])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	var held, answered, closed, failed atomic.Int64
	var wg sync.WaitGroup
	conns := make([]net.Conn, 0, n)
	for range n {
		c, err := net.Dial("unix", path)
		if err != nil {
			failed.Add(1)
			continue
		}
		conns = append(conns, c)
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _ = io.WriteString(c, "GET /api/v1/actions?since=0&wait=30s HTTP/1.1\r\nHost: agent\r\n\r\n")
			// Well under the wait's 30 s, and long enough for a busy agent
			// to answer or close every connection over its caps: a
			// connection still silent then is a wait the agent holds.
			_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
			_, err := bufio.NewReader(c).ReadString('\n')
			var ne net.Error
			switch {
			case err == nil:
				answered.Add(1)
			case errors.As(err, &ne) && ne.Timeout():
				held.Add(1)
			default:
				closed.Add(1)
			}
		}()
	}
	wg.Wait()
	fmt.Printf("held %d answered %d closed %d unconnected %d\n", held.Load(), answered.Load(), closed.Load(), failed.Load())
	_, _ = io.Copy(io.Discard, os.Stdin)
	for _, c := range conns {
		c.Close()
	}
}
