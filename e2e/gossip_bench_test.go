package e2e

import (
	"fmt"
	"testing"
	"time"

	"github.com/musterhq/muster/shared/testwait"
)

// BenchmarkGossipKillToDown starts a core and five agents (real processes)
// that find each other through gossip, SIGKILLs one agent and reports the
// time until the core lists its node DOWN: with memberlist's LAN defaults
// and with the timing the README recommends for a local network. Passes run
// every 10 minutes, so the figure is gossip's alone. The timer runs through
// setup too, so that one slow iteration is enough (ns/op is not the figure;
// s_kill_to_down is).
func BenchmarkGossipKillToDown(b *testing.B) {
	for _, tc := range []struct{ name, timing string }{
		{"lan", ""},
		{"local", gossipTiming},
	} {
		b.Run(tc.name, func(b *testing.B) {
			var total time.Duration
			for i := 0; i < b.N; i++ {
				p := newPool(b, tc.timing, 10*time.Minute)
				for j := 1; j <= 5; j++ {
					p.agent(fmt.Sprintf("node-%d", j), "", tc.timing)
				}
				testwait.Within(b, 30*time.Second, "five nodes UP", func() bool {
					up := 0
					for _, n := range p.nodes() {
						if n.Status == "UP" {
							up++
						}
					}
					return up == 5
				})
				killed := time.Now()
				p.agents["node-3"].kill()
				testwait.Within(b, 2*time.Minute, "node-3 DOWN", func() bool {
					s, _ := p.status("node-3")
					return s == "DOWN"
				})
				total += time.Since(killed)
			}
			b.ReportMetric(total.Seconds()/float64(b.N), "s_kill_to_down")
		})
	}
}
