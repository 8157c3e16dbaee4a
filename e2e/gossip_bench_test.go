package e2e

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/musterhq/muster/shared/action"
	"github.com/musterhq/muster/shared/testwait"
)

// BenchmarkGossipKillToDown starts a core and five agents (real processes)
// that find each other through gossip, SIGKILLs one agent and reports the
// time until the core lists its node DOWN: with memberlist's LAN defaults
// and with the timing docs/gossip.md recommends for a local network. Passes run
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

// BenchmarkFinishedToVisible measures reactive progress (docs/architecture.md,
// "Node syncs and reactive progress"): a core and five agents (real processes)
// in a gossip pool, passes every 10 s. Each sample is a 1 s sleep action on one
// node; the figure is the time from its end on the agent (the agent's
// finished_ts) to the core's API showing it DONE, polled every 5 ms. Without
// the agents' notes it would be up to the interval.
func BenchmarkFinishedToVisible(b *testing.B) {
	const samples = 20
	var lat []time.Duration
	for i := 0; i < b.N; i++ {
		p := newPool(b, gossipTiming, 10*time.Second)
		for j := 1; j <= 5; j++ {
			p.agent(fmt.Sprintf("node-%d", j), "", gossipTiming)
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
		for s := 0; s < samples; s++ {
			a := p.create(fmt.Sprintf("node-%d", s%5+1), "muster.io/debug.sleep", `{"seconds":1}`)
			var seen time.Time
			var rec *action.Action
			deadline := time.Now().Add(30 * time.Second)
			for {
				got, err := p.admin.Action(ctxT(b), a.ID)
				if err == nil && got.State == action.Done {
					seen, rec = time.Now(), got
					break
				}
				if time.Now().After(deadline) {
					b.Fatalf("action %s not DONE in the core after 30 s", a.ID)
				}
				time.Sleep(5 * time.Millisecond)
			}
			if rec.FinishedTS == nil {
				b.Fatalf("DONE without finished_ts: %+v", rec)
			}
			lat = append(lat, seen.Sub(*rec.FinishedTS))
		}
	}
	slices.Sort(lat)
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	b.ReportMetric(ms(percentile(lat, 50)), "finished_to_visible_p50_ms")
	b.ReportMetric(ms(percentile(lat, 99)), "finished_to_visible_p99_ms")
}
