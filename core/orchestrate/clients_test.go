package orchestrate

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/musterhq/muster/shared/testwait"
)

// TestAgentTransportKeepsAtMostIdleConnections: with agent_idle_conns set,
// the plain client keeps that many connections to agents between syncs, in
// all; without, one per node.
func TestAgentTransportKeepsAtMostIdleConnections(t *testing.T) {
	t.Parallel()
	const nodes = 6
	for _, tc := range []struct{ idle, want int }{{0, nodes}, {2, 2}} {
		t.Run(fmt.Sprintf("idle=%d", tc.idle), func(t *testing.T) {
			t.Parallel()
			var open atomic.Int64
			var urls []string
			for range nodes {
				srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
					w.WriteHeader(http.StatusNoContent)
				}))
				srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
					switch s {
					case http.StateNew:
						open.Add(1)
					case http.StateClosed, http.StateHijacked:
						open.Add(-1)
					}
				}
				srv.Start()
				t.Cleanup(srv.Close)
				urls = append(urls, srv.URL)
			}
			hc := &http.Client{Transport: agentTransport(10*time.Second, tc.idle)}
			t.Cleanup(hc.CloseIdleConnections)
			for _, u := range urls { // one sync of every node, one after another
				resp, err := hc.Get(u)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
			}
			testwait.Within(t, 5*time.Second, fmt.Sprintf("%d connections open to the agents", tc.want), func() bool {
				return open.Load() == int64(tc.want)
			})
		})
	}
}
