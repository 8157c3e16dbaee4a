package e2e

import (
	"context"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/musterhq/muster/shared/testwait"
)

// floodCount counts the connections of an idleFlood: those opened, and
// those among them that a slot reopened after the server closed its last.
type floodCount struct{ dials, reopened atomic.Int64 }

// idleFlood floods addr with idle connections: each of slots goroutines
// opens a connection from the local address from(slot), sends nothing,
// and reopens it as soon as the server closes it; connections open at one
// per every in all. It returns once every slot has opened one and 500
// were reopened (within a minute); the flood goes on until the test ends.
func idleFlood(t *testing.T, addr string, slots int, every time.Duration, from func(slot int) net.IP) *floodCount {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	pace := time.NewTicker(every)
	var wg sync.WaitGroup
	t.Cleanup(func() {
		cancel()
		wg.Wait()
		pace.Stop()
	})
	n := &floodCount{}
	for slot := range slots {
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: from(slot)}}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-ctx.Done():
					return
				case <-pace.C:
				}
				c, err := d.DialContext(ctx, "tcp", addr)
				if err != nil {
					continue
				}
				n.dials.Add(1)
				if i > 0 {
					n.reopened.Add(1)
				}
				go func() { <-ctx.Done(); c.Close() }()
				_, _ = c.Read(make([]byte, 1)) // until the server closes it
				c.Close()
			}
		}()
	}
	testwait.Within(t, time.Minute, fmt.Sprintf("%d idle connections opened and 500 reopened", slots), func() bool {
		return n.dials.Load() >= int64(slots) && n.reopened.Load() >= 500
	})
	return n
}
