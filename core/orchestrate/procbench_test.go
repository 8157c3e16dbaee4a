package orchestrate_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/musterhq/muster/core/probe"
	"github.com/musterhq/muster/core/runs"
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
	spec := procedureSpec(steps, sleep)
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

// BenchmarkProcedureGate measures BenchmarkProcedure's procedure over
// 1,000 nodes without gossip with a gate on every node: after its first
// step, each node's procedure has a gate (core/gate) of its own, an HTTP
// GET whose URL names the node, which the core evaluates itself (core/runs'
// RunCore, beside the cluster's loop) against a real HTTP server on
// loopback (core_steps.allow_loopback, as `muster dev` sets it), then its
// two other steps. The gate answers at once, so the ideal is the
// procedure's: 10 waves × 3 s. Each iteration runs the procedure without
// the gate too, over the same fleet and back to back (in turn first and
// second), whose ratio is the reference: the same neighbours for both.
//
// Besides the ratios, it reports a node's way through its gate, p50 and
// p99: from its first step's end on its agent to its second step's start,
// and the p50 of its parts: until the core admitted the gate (its created
// in the run's row), until it was evaluated (its finished), until the next
// child's creation.
func BenchmarkProcedureGate(b *testing.B) {
	const (
		waves = 10
		steps = 3
		sleep = time.Second
	)
	var asked atomic.Int64
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked.Add(1)
		fmt.Fprintln(w, "ok")
	}))
	b.Cleanup(hs.Close)
	cfg := coreConfig()
	cfg.Runs.(*runs.Engine).SetProber(probe.New(probe.Config{AllowLoopback: true}))
	c := startCoreAPI(b, newBenchFleet(b, 1000, cfg), cfg)

	plain := procedureSpec(steps, sleep)
	gated := procedureSpec(steps, sleep)
	gate := wire.StepSpec{Name: "healthy", Gate: &wire.Gate{HTTP: &wire.HTTPGate{
		URL: hs.URL + "/health/{{ .node.id }}", ExpectStatus: http.StatusOK, BodyContains: "ok"}}}
	gated.Steps = slices.Insert(gated.Steps, 1, gate)

	nodes := len(c.f.agents.nodes)
	ideal := time.Duration(waves*steps) * sleep
	var wall time.Duration
	var ratios, plainRatios []float64
	var through, admit, eval, next, plainThrough []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for k := range 2 {
			if (i+k)%2 == 1 {
				elapsed, kids, _ := timeRun(b, c, plain)
				plainRatios = append(plainRatios, elapsed.Seconds()/ideal.Seconds())
				plainThrough = append(plainThrough, stepGaps(kids, "s1", "s2")...)
				continue
			}
			before := asked.Load()
			elapsed, kids, _ := timeRun(b, c, gated)
			if len(kids) != steps*nodes {
				b.Fatalf("%d children, want %d", len(kids), steps*nodes)
			}
			if got := asked.Load() - before; got != int64(nodes) {
				b.Fatalf("the gate server was asked %d times, want %d (once a node)", got, nodes)
			}
			ratios = append(ratios, elapsed.Seconds()/ideal.Seconds())
			wall += elapsed
			lat, err := gateLatencies(c.f.st, kids, "s1", gate.Name, "s2")
			if err != nil {
				b.Fatal(err)
			}
			for _, l := range lat {
				through, admit = append(through, l.total), append(admit, l.admit)
				eval, next = append(eval, l.eval), append(next, l.next)
			}
		}
	}
	b.StopTimer()
	wallS := wall.Seconds() / float64(b.N)
	b.ReportMetric(wallS, "procedure_gate_wall_s")
	b.ReportMetric(ideal.Seconds(), "procedure_gate_ideal_s")
	med, spread := medianSpread(ratios)
	b.ReportMetric(med, "procedure_gate_ratio")
	b.ReportMetric(spread, "procedure_gate_ratio_spread")
	med, spread = medianSpread(plainRatios)
	b.ReportMetric(med, "procedure_gate_plain_ratio")
	b.ReportMetric(spread, "procedure_gate_plain_ratio_spread")
	for _, d := range [][]time.Duration{through, admit, eval, next, plainThrough} {
		slices.Sort(d)
	}
	b.ReportMetric(ms(percentile(plainThrough, 50)), "procedure_gate_plain_latency_p50_ms")
	b.ReportMetric(ms(percentile(through, 50)), "procedure_gate_latency_p50_ms")
	b.ReportMetric(ms(percentile(through, 99)), "procedure_gate_latency_p99_ms")
	b.ReportMetric(ms(percentile(admit, 50)), "procedure_gate_admitted_p50_ms")
	b.ReportMetric(ms(percentile(eval, 50)), "procedure_gate_evaluated_p50_ms")
	b.ReportMetric(ms(percentile(next, 50)), "procedure_gate_next_created_p50_ms")
}

// stepGaps are the times, node by node, from the end of its step before
// on its agent to the start of its step after there (kids: a finished
// run's children, one attempt a step).
func stepGaps(kids []store.Record, before, after string) []time.Duration {
	ends, starts := map[string]time.Time{}, map[string]time.Time{}
	for _, k := range kids {
		switch k.Step {
		case before:
			ends[k.NodeID] = *k.FinishedTS
		case after:
			starts[k.NodeID] = *k.StartedTS
		}
	}
	var out []time.Duration
	for n, e := range ends {
		if s, ok := starts[n]; ok {
			out = append(out, s.Sub(e))
		}
	}
	return out
}

// procedureSpec is the stage of BenchmarkProcedure: over the whole fleet,
// at max_concurrency 10%, steps steps s1, s2, … each a
// muster.io/debug.sleep of sleep.
func procedureSpec(steps int, sleep time.Duration) wire.StageSpec {
	mc := limit.MustParse("10%")
	args := json.RawMessage(fmt.Sprintf(`{"seconds":%d}`, int(sleep.Seconds())))
	spec := wire.StageSpec{Name: "main", Target: wire.Target{All: true}, MaxConcurrency: &mc}
	for i := 1; i <= steps; i++ {
		spec.Steps = append(spec.Steps, wire.StepSpec{Name: fmt.Sprintf("s%d", i), Kind: "muster.io/debug.sleep", Args: args})
	}
	return spec
}

// gateLatency is a node's way through a gate between two of its steps:
// from the end of the step before on its agent to the start of the step
// after there (total), in three parts: until the core admitted the gate
// (admit), until it was evaluated and passed (eval), until the core
// created the child of the step after (next).
type gateLatency struct {
	total, admit, eval, next time.Duration
}

// gateLatencies returns the way through gate of every node of a finished
// run (kids: its children, one attempt a step), from its step before to
// its step after.
func gateLatencies(st store.Store, kids []store.Record, before, gate, after string) ([]gateLatency, error) {
	if len(kids) == 0 {
		return nil, fmt.Errorf("no children")
	}
	ctx := context.Background()
	var run *store.Run
	if err := st.Read(ctx, func(r store.Reader) error {
		var err error
		run, err = r.Run(ctx, kids[0].RunID)
		return err
	}); err != nil {
		return nil, err
	}
	type pair struct{ before, after *store.Record }
	byNode := map[string]*pair{}
	for i := range kids {
		k := &kids[i]
		p := byNode[k.NodeID]
		if p == nil {
			p = &pair{}
			byNode[k.NodeID] = p
		}
		switch k.Step {
		case before:
			p.before = k
		case after:
			p.after = k
		}
	}
	var out []gateLatency
	for node, p := range byNode {
		if p.before == nil || p.after == nil {
			return nil, fmt.Errorf("node %s: no child of step %s or %s", node, before, after)
		}
		var cs *store.CoreStep
		for si := range run.Stages {
			for j, c := range run.Stages[si].Core[node] {
				if c.Step == gate {
					cs = &run.Stages[si].Core[node][j]
				}
			}
		}
		if cs == nil || cs.State != string(action.Done) || cs.Finished == nil {
			return nil, fmt.Errorf("node %s: gate %s not DONE in the run's row: %+v", node, gate, cs)
		}
		out = append(out, gateLatency{
			total: p.after.StartedTS.Sub(*p.before.FinishedTS),
			admit: cs.Created.Sub(*p.before.FinishedTS),
			eval:  cs.Finished.Sub(cs.Created),
			next:  p.after.CreatedTS.Sub(*cs.Finished),
		})
	}
	return out, nil
}
