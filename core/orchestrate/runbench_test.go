package orchestrate_test

// The benchmarks of runs and approvals under the running scheduler: the
// orchestrator and the core API as muster core wires them (one set of
// action rules shared by the API, the orchestrator and the run engine), the
// scheduler started with its default interval (10 s), over real agents and
// a real SQLite store; people act through the API on a real listener.
// Nothing here shortens the interval: what they measure is what a core with
// the default settings does.

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/musterhq/muster/core/actions"
	"github.com/musterhq/muster/core/api"
	"github.com/musterhq/muster/core/approval"
	"github.com/musterhq/muster/core/auth"
	"github.com/musterhq/muster/core/ops"
	"github.com/musterhq/muster/core/orchestrate"
	"github.com/musterhq/muster/core/runs"
	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/action"
	"github.com/musterhq/muster/shared/client"
	"github.com/musterhq/muster/shared/gossip"
	"github.com/musterhq/muster/shared/limit"
	"github.com/musterhq/muster/shared/live"
	"github.com/musterhq/muster/shared/testwait"
	"github.com/musterhq/muster/shared/wire"
)

// coreAPI is the orchestrator and the core API as core/core.go wires them
// with the default settings (approval required, by another person, for
// every kind; one set of action rules for the API, the orchestrator and the
// run engine's children), over the fleet's store: the API on a real
// listener, nudging the orchestrator, whose scheduler runs with the
// default interval. alice is an operator, bob an approver.
type coreAPI struct {
	f          *benchFleet
	cfg        orchestrate.Config
	alice, bob *client.Core
}

func newCoreAPI(b *testing.B, n int) *coreAPI {
	b.Helper()
	cfg := coreConfig()
	return startCoreAPI(b, newBenchFleet(b, n, cfg), cfg)
}

// coreConfig is the orchestrator's configuration as core/core.go builds it
// from the default settings.
func coreConfig() orchestrate.Config {
	cfg := orchestrate.DefaultConfig()
	policy := live.New(approval.DefaultPolicy())
	rules := &actions.Rules{Policy: policy, ScheduleTTL: cfg.ScheduleTTL}
	engine := runs.NewEngine(policy, rules, nil)
	cfg.Rules, cfg.Runs = rules, engine
	return cfg
}

// newGossipCoreAPI is newCoreAPI with gossip on: the core's member of a
// gossip pool on loopback passes every agent's "changed" note to the
// orchestrator's NudgeNode, as core/gossip.go does, and the n agents (in
// this process) join that pool. Nodes stay the store's static ones.
func newGossipCoreAPI(b *testing.B, n int) *coreAPI {
	b.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	b.Cleanup(cancel)
	var o atomic.Pointer[orchestrate.Orchestrator]
	svc, err := gossip.New(gossip.Config{
		Name: "core@bench", BindAddr: "127.0.0.1:0", Insecure: true,
		Meta: gossip.Meta{Role: gossip.RoleCore, API: "127.0.0.1:1"},
		Handler: func(ev gossip.Event) {
			if p := o.Load(); p != nil && ev.Kind == gossip.KindChanged {
				p.NudgeNode(ev.Meta.Cluster, ev.Meta.Node)
			}
		},
	})
	if err != nil {
		b.Fatal(err)
	}
	if err := svc.Start(ctx); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(svc.Stop)
	if n > (fdLimit()-fdReserve)/(fdsPerAgent+3) {
		b.Fatalf("%d agents with gossip do not fit in this process's %d descriptors", n, fdLimit())
	}
	agents, err := startAgents(ctx, 1, n, b.TempDir(), svc.Addr())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		if err := agents.stop(); err != nil {
			b.Error(err)
		}
	})
	seen := 0
	defer func() {
		if b.Failed() {
			b.Logf("the core's gossip pool had %d of the %d agents", seen, n)
		}
	}()
	testwait.Within(b, 2*time.Minute, "every agent in the core's gossip pool", func() bool {
		seen = 0
		for _, m := range svc.Members() {
			if m.Meta.Role == gossip.RoleAgent {
				seen++
			}
		}
		return seen >= n
	})
	cfg := coreConfig()
	f := newFleetOver(b, agents, cfg)
	o.Store(f.o)
	return startCoreAPI(b, f, cfg)
}

// startCoreAPI starts the fleet's scheduler and serves the core API over
// its store, nudging its orchestrator.
func startCoreAPI(b *testing.B, f *benchFleet, cfg orchestrate.Config) *coreAPI {
	b.Helper()
	policy := cfg.Rules.Policy
	rules, engine := cfg.Rules, cfg.Runs.(*runs.Engine)
	ctx, cancel := context.WithCancel(context.Background())
	b.Cleanup(cancel)
	if err := f.o.Start(ctx); err != nil {
		b.Fatal(err)
	}
	op := ops.New(ops.Config{Store: f.st, Policy: policy, Rules: rules, Runs: engine, Nudge: f.o})
	srv := api.New(api.Config{Policy: policy, Ops: op}, f.st, f.o, nil)
	hs := httptest.NewServer(srv.Handler())
	b.Cleanup(func() { srv.Close(); hs.Close() })
	c := &coreAPI{f: f, cfg: cfg}
	hc := &http.Client{Timeout: 30 * time.Second}
	for _, u := range []struct {
		c          **client.Core
		name, role string
	}{{&c.alice, "alice", "operator"}, {&c.bob, "bob", "approver"}} {
		secret, err := auth.CreateToken(ctx, f.st, u.name, []string{u.role}, "bench", "")
		if err != nil {
			b.Fatal(err)
		}
		*u.c = client.NewCore(hs.URL, secret, hc)
	}
	return c
}

// BenchmarkRunWaves measures the wall time of a run of muster.io/debug.sleep
// {"seconds":1} over 1,000 real agents with max_concurrency 10%: ten waves of
// 100 children, whose ideal is 10 × 1 s. The run is created by one person and
// approved by another through the core API (whose approval nudges the
// orchestrator), and the clock runs from the approval request to the run's DONE
// in the store, while the scheduler runs with its default interval. The
// children's own started_ts and finished_ts (the agents' clocks, pulled into
// the core) split the time into the agents' work (each wave from its first
// start to its last finish) and the gaps between waves (a wave's last finish to
// the next wave's first start: what orchestration adds per wave). "gossip=off"
// is the core without gossip, where progress comes at the next full sync;
// "gossip=on" has every agent in a gossip pool with the core, telling it of its
// changes (reactive progress, docs/architecture.md, "Node syncs and reactive
// progress").
func BenchmarkRunWaves(b *testing.B) { withAndWithoutGossip(b, runWaves) }

// withAndWithoutGossip runs one case of a run benchmark over 1,000 nodes
// without gossip, and one over 100 nodes with gossip, whose figures' keys
// end with "_gossip_100" (1,000 agents with gossip do not fit this machine).
func withAndWithoutGossip(b *testing.B, run func(b *testing.B, c *coreAPI, suffix string)) {
	for _, tc := range []struct {
		gossip bool
		n      int
		suffix string
	}{{false, 1000, ""}, {true, 100, "_gossip_100"}} {
		b.Run(fmt.Sprintf("gossip=%t/nodes=%d", tc.gossip, tc.n), func(b *testing.B) {
			var c *coreAPI
			if tc.gossip {
				c = newGossipCoreAPI(b, tc.n)
			} else {
				c = newCoreAPI(b, tc.n)
			}
			run(b, c, tc.suffix)
		})
	}
}

// runWaves is one BenchmarkRunWaves case over c; its figures' keys end
// with suffix.
func runWaves(b *testing.B, c *coreAPI, suffix string) {
	const (
		waves = 10
		sleep = time.Second
	)
	mc := limit.MustParse("10%")
	spec := wire.StageSpec{
		Name: "main", Kind: "muster.io/debug.sleep", Args: json.RawMessage(fmt.Sprintf(`{"seconds":%d}`, int(sleep.Seconds()))),
		Target: wire.Target{All: true}, MaxConcurrency: &mc,
	}
	var wall, agents, gap, first time.Duration
	var turn []time.Duration
	var ratios []float64
	ideal := time.Duration(waves) * sleep
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		elapsed, kids, t0 := timeRun(b, c, spec)
		work, gaps, lead, err := waveTimes(kids, waves, t0)
		if err != nil {
			b.Fatal(err)
		}
		ratios = append(ratios, elapsed.Seconds()/ideal.Seconds())
		wall += elapsed
		agents += work
		gap += gaps / (waves - 1)
		first += lead
		turn = append(turn, turnovers(kids, len(kids)/waves, 1)...)
	}
	b.StopTimer()
	per := func(d time.Duration) float64 { return d.Seconds() / float64(b.N) }
	b.ReportMetric(per(wall), "run_waves_wall_s"+suffix)
	b.ReportMetric(ideal.Seconds(), "run_waves_ideal_s"+suffix)
	med, spread := medianSpread(ratios)
	b.ReportMetric(med, "run_waves_ratio"+suffix)
	b.ReportMetric(spread, "run_waves_ratio_spread"+suffix)
	b.ReportMetric(per(agents), "run_waves_agent_s"+suffix)
	b.ReportMetric(per(gap)*1000, "run_waves_gap_ms"+suffix)
	b.ReportMetric((per(wall)-ideal.Seconds())*1000/waves, "run_waves_overhead_ms"+suffix)
	b.ReportMetric(per(first)*1000, "run_waves_first_start_ms"+suffix)
	b.ReportMetric(c.cfg.Interval.Seconds(), "run_waves_interval_s"+suffix)
	slices.Sort(turn)
	b.ReportMetric(ms(percentile(turn, 50)), "run_waves_turnover_p50_ms"+suffix)
	b.ReportMetric(ms(percentile(turn, 99)), "run_waves_turnover_p99_ms"+suffix)
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// timeRun creates a run of the one stage spec over the whole fleet as
// alice, approves it as bob through the core API and waits for its end in
// the store: elapsed runs from the approval request (t0) to the run's DONE.
// It returns the run's children. The benchmark's timer runs only from the
// approval to the end.
func timeRun(b *testing.B, c *coreAPI, spec wire.StageSpec) (elapsed time.Duration, kids []store.Record, t0 time.Time) {
	b.Helper()
	b.StopTimer()
	ctx := context.Background()
	f := c.f
	run, err := c.alice.CreateRun(ctx, &wire.CreateRunRequest{ClusterID: benchCluster, Stages: []wire.StageSpec{spec}})
	if err != nil {
		b.Fatal(err)
	}
	if run.State != store.RunPendingApprove {
		b.Fatalf("run created %s, want %s", run.State, store.RunPendingApprove)
	}
	b.StartTimer()
	t0 = time.Now()
	if _, err := c.bob.RunVerb(ctx, run.ID, "approve", ""); err != nil {
		b.Fatal(err)
	}
	var state string
	testwait.Within(b, 6*time.Minute, "run "+run.ID+" to finish", func() bool {
		// Brief: the whole row (its node lists, its gates' results) read
		// every 25 ms would cost the core's CPU what it measures.
		err := f.st.Read(ctx, func(r store.Reader) error {
			list, err := r.ListRuns(ctx, store.RunQuery{ClusterID: benchCluster, Brief: true, Limit: 1})
			if err == nil && (len(list) == 0 || list[0].ID != run.ID) {
				err = fmt.Errorf("run %s is not the cluster's newest", run.ID)
			}
			if err == nil {
				state = list[0].State
			}
			return err
		})
		if err != nil {
			b.Fatal(err)
		}
		return store.RunFinal(state)
	})
	elapsed = time.Since(t0)
	b.StopTimer()
	if state != store.RunDone {
		b.Fatalf("run %s ended %s, want %s", run.ID, state, store.RunDone)
	}
	if err := f.st.Read(ctx, func(r store.Reader) error {
		var err error
		kids, err = r.RunChildren(ctx, run.ID)
		return err
	}); err != nil {
		b.Fatal(err)
	}
	for _, k := range kids {
		if k.State != action.Done || k.StartedTS == nil || k.FinishedTS == nil {
			b.Fatalf("child %s on %s is %s (started %v, finished %v), want DONE with both times",
				k.ID, k.NodeID, k.State, k.StartedTS, k.FinishedTS)
		}
	}
	return elapsed, kids, t0
}

// turnovers are the times a slot of a stage of concurrency conc stays
// empty: from the end of a node's last step (the steps-th child of its
// node) on its agent to the start of the first step of the node that takes
// its place. The k-th node to end frees the slot the (k+conc)-th node to
// start takes.
func turnovers(kids []store.Record, conc, steps int) []time.Duration {
	first := map[string]time.Time{}
	last := map[string]time.Time{}
	for _, k := range kids {
		if s, ok := first[k.NodeID]; !ok || k.StartedTS.Before(s) {
			first[k.NodeID] = *k.StartedTS
		}
		if e, ok := last[k.NodeID]; !ok || k.FinishedTS.After(e) {
			last[k.NodeID] = *k.FinishedTS
		}
	}
	var starts, ends []time.Time
	for n := range first {
		starts, ends = append(starts, first[n]), append(ends, last[n])
	}
	cmpTime := func(a, b time.Time) int { return a.Compare(b) }
	slices.SortFunc(starts, cmpTime)
	slices.SortFunc(ends, cmpTime)
	var out []time.Duration
	for k := 0; k+conc < len(starts); k++ {
		out = append(out, starts[k+conc].Sub(ends[k]))
	}
	return out
}

// waveTimes splits a finished run's children by wave: work is the sum over
// waves of first start to last finish, gaps the sum of the times from one
// wave's last finish to the next one's first start, and lead the time from
// t0 (the approval) to the first wave's first start.
func waveTimes(kids []store.Record, waves int, t0 time.Time) (work, gaps, lead time.Duration, err error) {
	type span struct{ start, end time.Time }
	spans := map[int]*span{}
	for _, k := range kids {
		if k.State != action.Done || k.StartedTS == nil || k.FinishedTS == nil {
			return 0, 0, 0, fmt.Errorf("child %s on %s is %s (started %v, finished %v), want DONE with both times",
				k.ID, k.NodeID, k.State, k.StartedTS, k.FinishedTS)
		}
		s, ok := spans[k.Wave]
		if !ok {
			s = &span{start: *k.StartedTS, end: *k.FinishedTS}
			spans[k.Wave] = s
		}
		if k.StartedTS.Before(s.start) {
			s.start = *k.StartedTS
		}
		if k.FinishedTS.After(s.end) {
			s.end = *k.FinishedTS
		}
	}
	order := make([]int, 0, len(spans))
	for w := range spans {
		order = append(order, w)
	}
	slices.Sort(order)
	if len(order) != waves {
		return 0, 0, 0, fmt.Errorf("%d children in %d waves, want %d waves", len(kids), len(order), waves)
	}
	for i, w := range order {
		work += spans[w].end.Sub(spans[w].start)
		if i > 0 {
			gaps += spans[w].start.Sub(spans[order[i-1]].end)
		}
	}
	return work, gaps, spans[order[0]].start.Sub(t0), nil
}

// approveDuringPass measures approval → RUNNING over the n real agents of
// c while full syncs are under way (BenchmarkPass's "approve"): besides the
// scheduler (default interval, nudged by the API's approvals), a loop runs
// full syncs of the cluster back to back, so every approval lands during a
// full sync, at a random point of it. Each of the samples creates a
// muster.io/debug.ping on one node as one person and approves it as another
// through the core API, and takes the time from the approval request to the
// started_ts the agent records. The reference is the mean duration of a
// full sync measured by the loop in the same run: since full syncs of a cluster
// never overlap, an approval waits for the end of the full sync under way before
// the next one pushes it, unless its nudge syncs the node between batches.
func approveDuringPass(b *testing.B, c *coreAPI, n, samples int) {
	f := c.f
	ctx := context.Background()

	// The full syncs under way.
	var (
		fullSyncCount, fullSyncNanos atomic.Int64
		loopErr                      atomic.Value
		stop                         = make(chan struct{})
		looping                      sync.WaitGroup
	)
	looping.Add(1)
	go func() {
		defer looping.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			t := time.Now()
			if _, err := f.o.FullSync(ctx, benchCluster); err != nil {
				loopErr.Store(err)
				return
			}
			fullSyncNanos.Add(int64(time.Since(t)))
			fullSyncCount.Add(1)
		}
	}()
	b.Cleanup(func() { close(stop); looping.Wait() })
	testwait.Within(b, 2*time.Minute, "a full sync of the loop", func() bool { return fullSyncCount.Load() > 0 })
	meanPass := func() time.Duration { return time.Duration(fullSyncNanos.Load() / max(fullSyncCount.Load(), 1)) }

	hc := &http.Client{Timeout: 10 * time.Second}
	b.Cleanup(hc.CloseIdleConnections)
	var lat []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for s := 0; s < samples; s++ {
			b.StopTimer()
			// A prime stride spreads the samples over the fleet; a random
			// pause of up to a full sync places each approval at a random
			// point of the full sync under way.
			j := (s*7919 + i) % n
			node, ag := f.agents.nodes[j], client.NewAgent(f.agents.addrs[j], hc)
			rec, err := c.alice.CreateAction(ctx, &wire.CreateActionRequest{ClusterID: benchCluster, NodeID: node,
				Kind: "muster.io/debug.ping"})
			if err != nil {
				b.Fatal(err)
			}
			if rec.State != action.PendingApprove {
				b.Fatalf("created %s, want %s", rec.State, action.PendingApprove)
			}
			time.Sleep(time.Duration(rand.Int64N(int64(meanPass()) + 1)))
			b.StartTimer()
			t0 := time.Now()
			if _, err := c.bob.Approve(ctx, rec.ID); err != nil {
				b.Fatal(err)
			}
			var started time.Time
			testwait.Within(b, time.Minute, "the agent to start "+rec.ID, func() bool {
				if err, _ := loopErr.Load().(error); err != nil {
					b.Fatalf("full sync loop: %v", err)
				}
				got, err := ag.Get(ctx, rec.ID)
				if err != nil || got.StartedTS == nil {
					return false // not pushed yet
				}
				started = *got.StartedTS
				return true
			})
			lat = append(lat, started.Sub(t0))
		}
	}
	b.StopTimer()
	slices.Sort(lat)
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	p99 := percentile(lat, 99)
	b.ReportMetric(ms(percentile(lat, 50)), fmt.Sprintf("approve_busy_p50_ms_%d", n))
	b.ReportMetric(ms(p99), fmt.Sprintf("approve_busy_p99_ms_%d", n))
	b.ReportMetric(ms(meanPass()), fmt.Sprintf("approve_busy_pass_ms_%d", n))
	b.ReportMetric(float64(p99)/float64(meanPass()), fmt.Sprintf("approve_busy_p99_of_pass_%d", n))
	b.ReportMetric(float64(len(lat)), fmt.Sprintf("approve_busy_samples_%d", n))
}

// percentile returns the p-th percentile (0 < p ≤ 100) of sorted d, nearest rank.
func percentile(d []time.Duration, p float64) time.Duration {
	i := int(float64(len(d))*p/100+0.999999) - 1
	return d[min(max(i, 0), len(d)-1)]
}

// medianSpread returns the median of v and its spread (largest − smallest):
// a ratio goal is judged on the median of several runs (make bench runs
// these benchmarks three times: e2e/benchreport), never on one.
func medianSpread(v []float64) (median, spread float64) {
	v = slices.Clone(v)
	slices.Sort(v)
	return v[len(v)/2], v[len(v)-1] - v[0]
}
