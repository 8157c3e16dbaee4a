package orchestrate_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/action"
	"github.com/musterhq/muster/shared/limit"
	"github.com/musterhq/muster/shared/wire"
)

// BenchmarkProcedure measures a run of one stage whose every node goes
// through a procedure of three steps, each a muster.io/debug.sleep
// {"seconds":1}, node first, with max_concurrency 10%: ten waves of nodes
// in flight whose ideal is 10 × 3 s. As BenchmarkRunWaves, the run is
// created by one person and approved by another through the core API, and
// the clock runs from the approval request to the run's DONE in the store,
// while the scheduler runs with its default interval.
//
// Besides the wall time, it reports the step-to-next-step latency of every
// node: from the end of a step on its agent (finished_ts) to the start of
// its next step there (started_ts), p50 and p99, and the p50 of its parts:
// the core learning of the end (the time of the DONE in the child's
// history), the next child's creation, and its push and start on the agent.
// "gossip=off" is the core without gossip, where the end of a step comes at
// the next poll of the run's busy nodes (orchestrate.Config.RunPoll);
// "gossip=on" has every agent tell the core of its changes.
func BenchmarkProcedure(b *testing.B) { withAndWithoutGossip(b, procedure) }

// procedure is one BenchmarkProcedure case over c; its figures' keys end
// with suffix.
func procedure(b *testing.B, c *coreAPI, suffix string) {
	const (
		waves = 10
		steps = 3
		sleep = time.Second
	)
	mc := limit.MustParse("10%")
	args := json.RawMessage(fmt.Sprintf(`{"seconds":%d}`, int(sleep.Seconds())))
	spec := wire.StageSpec{Name: "main", Target: wire.Target{All: true}, MaxConcurrency: &mc}
	for i := 1; i <= steps; i++ {
		spec.Steps = append(spec.Steps, wire.StepSpec{Name: fmt.Sprintf("s%d", i), Kind: "muster.io/debug.sleep", Args: args})
	}
	var wall time.Duration
	var step, detect, create, start, turn []time.Duration
	var ratios []float64
	ideal := time.Duration(waves*steps) * sleep
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		elapsed, kids, _ := timeRun(b, c, spec)
		ratios = append(ratios, elapsed.Seconds()/ideal.Seconds())
		if len(kids) != steps*len(c.f.agents.nodes) {
			b.Fatalf("%d children, want %d", len(kids), steps*len(c.f.agents.nodes))
		}
		wall += elapsed
		lat, err := stepLatencies(c.f.st, kids)
		if err != nil {
			b.Fatal(err)
		}
		for _, l := range lat {
			step, detect = append(step, l.total), append(detect, l.detect)
			create, start = append(create, l.create), append(start, l.start)
		}
		turn = append(turn, turnovers(kids, len(kids)/steps/waves, steps)...)
	}
	b.StopTimer()
	wallS := wall.Seconds() / float64(b.N)
	b.ReportMetric(wallS, "procedure_wall_s"+suffix)
	b.ReportMetric(ideal.Seconds(), "procedure_ideal_s"+suffix)
	med, spread := medianSpread(ratios)
	b.ReportMetric(med, "procedure_ratio"+suffix)
	b.ReportMetric(spread, "procedure_ratio_spread"+suffix)
	b.ReportMetric((wallS-ideal.Seconds())*1000/waves, "procedure_overhead_ms"+suffix)
	for _, d := range [][]time.Duration{step, detect, create, start, turn} {
		slices.Sort(d)
	}
	b.ReportMetric(ms(percentile(step, 50)), "step_latency_p50_ms"+suffix)
	b.ReportMetric(ms(percentile(step, 99)), "step_latency_p99_ms"+suffix)
	b.ReportMetric(ms(percentile(detect, 50)), "step_latency_seen_p50_ms"+suffix)
	b.ReportMetric(ms(percentile(create, 50)), "step_latency_created_p50_ms"+suffix)
	b.ReportMetric(ms(percentile(start, 50)), "step_latency_started_p50_ms"+suffix)
	b.ReportMetric(ms(percentile(turn, 50)), "procedure_turnover_p50_ms"+suffix)
	b.ReportMetric(ms(percentile(turn, 99)), "procedure_turnover_p99_ms"+suffix)
}

// stepLatency is the time from the end of one step of a node on its agent
// to the start of the node's next step there (total), in three parts:
// until the core stored the end (detect), until the core created the next
// child (create), until the agent started it (start).
type stepLatency struct {
	total, detect, create, start time.Duration
}

// stepLatencies returns the latency of every step of every node but its
// first (kids: a finished run's children, one attempt a step).
func stepLatencies(st store.Store, kids []store.Record) ([]stepLatency, error) {
	ctx := context.Background()
	byNode := map[string][]store.Record{}
	for _, k := range kids {
		byNode[k.NodeID] = append(byNode[k.NodeID], k)
	}
	var out []stepLatency
	err := st.Read(ctx, func(r store.Reader) error {
		for _, ks := range byNode {
			slices.SortFunc(ks, func(a, b store.Record) int { return a.CreatedTS.Compare(b.CreatedTS) })
			for i := 1; i < len(ks); i++ {
				prev, next := &ks[i-1], &ks[i]
				hist, err := r.History(ctx, prev.ID)
				if err != nil {
					return err
				}
				var seen time.Time
				for _, t := range hist {
					if t.To == action.Done {
						seen = t.TS
					}
				}
				if seen.IsZero() {
					return fmt.Errorf("child %s: no DONE in its history", prev.ID)
				}
				out = append(out, stepLatency{
					total:  next.StartedTS.Sub(*prev.FinishedTS),
					detect: seen.Sub(*prev.FinishedTS),
					create: next.CreatedTS.Sub(seen),
					start:  next.StartedTS.Sub(next.CreatedTS),
				})
			}
		}
		return nil
	})
	return out, err
}
