package notify

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/core/store/sqlite"
	"github.com/musterhq/muster/shared/testwait"
)

// benchSetup is a SQLite store in b's temp dir whose outbox sends every
// event to n destinations, each a local receiver calling got with the
// event's seq, and a started worker.
func benchSetup(b *testing.B, n int, got func(seq int64)) store.Store {
	return benchStore(b, n, got, true)
}

// benchStore is benchSetup, with the worker started only when deliver.
func benchStore(b *testing.B, n int, got func(seq int64), deliver bool) store.Store {
	b.Helper()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	var dests []Destination
	for i := range n {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			body, _ := io.ReadAll(r.Body)
			// Only the receiver whose arrivals are timed decodes the body:
			// a real receiver's work is on its own machine, not on the
			// core's CPUs.
			var p Payload
			if got != nil && i == 0 && json.Unmarshal(body, &p) == nil {
				got(p.Seq)
			}
			w.WriteHeader(http.StatusNoContent)
		}))
		b.Cleanup(srv.Close)
		dests = append(dests, Destination{Name: fmt.Sprintf("d%d", i), URL: srv.URL, Format: FormatJSON})
	}
	st.SetOutbox(Route(dests))
	if !deliver {
		return st
	}
	w, err := New(Config{Destinations: dests, AllowLoopback: true}, st, nil, nil)
	if err != nil {
		b.Fatal(err)
	}
	if err := w.Start(ctx); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(w.Stop)
	return st
}

func appendOne(ctx context.Context, st store.Store) (int64, error) {
	var seq int64
	err := st.Update(ctx, func(tx store.Tx) error {
		e := &store.Event{Type: store.EventRunPaused, Actor: store.ActorCore, ClusterID: "prod", Message: "run paused: 2 errors"}
		err := tx.AppendEvent(ctx, e)
		seq = e.Seq
		return err
	})
	return seq, err
}

// BenchmarkNotify measures, on SQLite with local receivers: event committed
// → delivered at 100 events/s (p50, p99), and the event write rate with
// one and with three destinations against none.
func BenchmarkNotify(b *testing.B) {
	ctx := context.Background()
	b.Run("latency", func(b *testing.B) {
		const events = 300
		var mu sync.Mutex
		arrived := map[int64]time.Time{}
		all := make(chan struct{}, 1)
		st := benchSetup(b, 1, func(seq int64) {
			mu.Lock()
			defer mu.Unlock()
			arrived[seq] = time.Now()
			if len(arrived) == events {
				all <- struct{}{}
			}
		})
		var lat []time.Duration
		b.ResetTimer()
		for range b.N {
			mu.Lock()
			clear(arrived)
			mu.Unlock()
			committed := map[int64]time.Time{}
			tick := time.NewTicker(10 * time.Millisecond) // 100 events/s
			for range events {
				<-tick.C
				seq, err := appendOne(ctx, st)
				if err != nil {
					b.Fatal(err)
				}
				committed[seq] = time.Now() // the commit is done by now
			}
			tick.Stop()
			select {
			case <-all:
			case <-time.After(30 * time.Second):
				b.Fatal("not every event was delivered in 30 s")
			}
			mu.Lock()
			for seq, t := range committed {
				lat = append(lat, max(0, arrived[seq].Sub(t)))
			}
			mu.Unlock()
		}
		b.StopTimer()
		slices.Sort(lat)
		b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "notify_latency_p50_ms")
		b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "notify_latency_p99_ms")
	})
	// The outbox's cost: the event write rate with one and with three
	// destinations against none, the worker delivering every event to
	// local receivers as it is written (the posts, their signing and the
	// receivers take the same two CPUs as the writes).
	b.Run("write_rate", func(b *testing.B) {
		r := writeRates(ctx, b, true)
		b.ReportMetric(r.none, "notify_event_writes_per_s_0")
		b.ReportMetric(r.ratio[1], "notify_write_ratio_1")
		b.ReportMetric(r.spread[1], "notify_write_ratio_spread_1")
		b.ReportMetric(r.ratio[3], "notify_write_ratio_3")
		b.ReportMetric(r.spread[3], "notify_write_ratio_spread_3")
	})
	// The same with the worker stopped: what the outbox costs the event
	// writes alone (its rows pile up, as while a receiver is away).
	b.Run("write_path", func(b *testing.B) {
		r := writeRates(ctx, b, false)
		b.ReportMetric(r.ratio[1], "notify_write_path_ratio_1")
		b.ReportMetric(r.spread[1], "notify_write_path_ratio_spread_1")
		b.ReportMetric(r.ratio[3], "notify_write_path_ratio_3")
		b.ReportMetric(r.spread[3], "notify_write_path_ratio_spread_3")
	})
}

// rates are writeRates' figures: the median rate without destinations
// over every round, and by number of destinations the median of the b.N
// runs' ratios and their spread (largest less smallest).
type rates struct {
	none   float64
	ratio  map[int]float64
	spread map[int]float64
}

func median(v []float64) float64 {
	v = slices.Clone(v)
	slices.Sort(v)
	return v[len(v)/2]
}

// writeRates measures the event write rate with 0, 1 and 3 destinations,
// the worker delivering or not: b.N runs of 7 rounds of half a second each,
// taking turns (so that the load of the machine falls on all three alike).
// A run's ratio for n destinations is its median rate with n over its
// median rate with none.
func writeRates(ctx context.Context, b *testing.B, deliver bool) rates {
	stores := map[int]store.Store{0: benchStore(b, 0, nil, deliver), 1: benchStore(b, 1, nil, deliver), 3: benchStore(b, 3, nil, deliver)}
	var all []float64
	runs := map[int][]float64{}
	for range b.N {
		rounds := map[int][]float64{}
		for range 7 {
			for _, n := range []int{0, 1, 3} {
				// Each round starts with every queue empty: the
				// deliveries of a round are made during it (and just
				// after), not during the next one's.
				if deliver {
					for _, st := range stores {
						drained(ctx, b, st)
					}
				}
				start, count := time.Now(), 0
				for time.Since(start) < 500*time.Millisecond {
					if _, err := appendOne(ctx, stores[n]); err != nil {
						b.Fatal(err)
					}
					count++
				}
				rounds[n] = append(rounds[n], float64(count)/time.Since(start).Seconds())
			}
		}
		none := median(rounds[0])
		all = append(all, rounds[0]...)
		for _, n := range []int{1, 3} {
			runs[n] = append(runs[n], median(rounds[n])/none)
		}
	}
	r := rates{none: median(all), ratio: map[int]float64{}, spread: map[int]float64{}}
	for _, n := range []int{1, 3} {
		r.ratio[n] = median(runs[n])
		r.spread[n] = slices.Max(runs[n]) - slices.Min(runs[n])
	}
	return r
}

// drained waits until no delivery of st is pending.
func drained(ctx context.Context, b *testing.B, st store.Store) {
	testwait.Within(b, time.Minute, "every delivery made", func() bool {
		pending := 0
		if err := st.Read(ctx, func(r store.Reader) error {
			stats, err := r.DeliveryStats(ctx)
			for _, s := range stats {
				pending += s.Backlog
			}
			return err
		}); err != nil {
			b.Fatal(err)
		}
		return pending == 0
	})
}
