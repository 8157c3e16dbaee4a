package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/musterhq/muster/core/store/pglocal"
	"github.com/musterhq/muster/shared/action"
	"github.com/musterhq/muster/shared/client"
	"github.com/musterhq/muster/shared/wire"
)

// The chaos test: a real core and five real agents, each agent behind a
// faultProxy, a workload of external actions with and without approval and
// cancels, and random faults (SIGKILL of agents and of the core, partitions,
// delays, dropped and reset connections, an agent database replaced). After
// healing and a drain, checkChaos asserts muster's promise over the recorded
// history: an accepted action is never lost, never runs twice and never
// overlaps another on its node.
//
// CHAOS_SEED seeds every choice: unset, the fixed chaosSeed, so that `make
// test` replays the same choices every time; "random" for a random seed
// (always printed). CHAOS_DURATION (default 50s) is how long the faults and
// the workload run; CHAOS_REPLICAS, when set above zero, runs that many core
// replicas on PostgreSQL instead of one core on SQLite. With replicas,
// kill-core SIGKILLs one of them at random (the one the workload talks to
// among them), and two more faults join: freeze-core (SIGSTOP of a replica
// for a while, then SIGCONT: it wakes up believing it still holds its
// leases) and restart-store (SIGKILL of the replicas' PostgreSQL server,
// its own for this test, and a restart on the same data after a pause).
// TestChaos is the SQLite mode unless CHAOS_REPLICAS says otherwise;
// TestChaosReplicas is the PostgreSQL mode with three replicas for 60 s.
// `make chaos` (CHAOS_REPLICAS=3 for the PostgreSQL mode) and `make
// chaos-nightly` run TestChaos for long with a random seed.

const (
	// chaosSeed is the seed of the run in `make test`: its choices inject
	// every fault type within the default duration.
	chaosSeed    = 942538043685380317
	chaosNodes   = 5
	kindRun      = "example.com/chaos.run"   // no approval
	kindGated    = "example.com/chaos.gated" // approval required (a rule in the core's config)
	chaosCluster = "e2e"
)

// chaosScript appends "<id> start <ns>" when it begins and "<id> end <ns>"
// when it ends to <dir>/<node>.exec.log, sleeping in between for the "ms"
// of its args (read from the action record on stdin). A cancel's SIGTERM
// ends it too, with its end line: only SIGKILL (its agent died) leaves a run
// without one. TERM is ignored before either end line is written, so that a
// TERM sent to the process group cannot kill the date of an end line (it
// would leave "<id> end " with no time, then a second end line from the trap).
const chaosScript = `#!/bin/sh
log=%q/"$MUSTER_NODE_ID".exec.log
trap 'trap "" TERM; echo "$MUSTER_ACTION_ID end $(date +%%s%%N)" >> "$log"; exit 143' TERM
echo "$MUSTER_ACTION_ID start $(date +%%s%%N)" >> "$log"
ms=$(sed -n 's/.*"ms":\([0-9]*\).*/\1/p' | head -n 1)
ms=${ms:-0}
sleep "$((ms / 1000)).$(printf %%03d $((ms %% 1000)))"
trap "" TERM
echo "$MUSTER_ACTION_ID end $(date +%%s%%N)" >> "$log"
`

// chaosAction is what the workload did with one action.
type chaosAction struct {
	id, node, kind string
	args           json.RawMessage
	long           bool
	acked          bool // the core answered 201 (or 409 to a retry of an unanswered create)
	unsure         bool // a create got no answer and was never confirmed
	rejected       bool // a reject was sent (whatever its answer)
	cancelled      bool // a cancel was sent (whatever its answer)
}

// chaosRun is one run: the fleet, the proxies and the recorded history.
type chaosRun struct {
	t       *testing.T
	f       *fleet
	seed    uint64
	dir     string
	proxies map[string]*faultProxy
	pg      *pglocal.Server // the replicas' PostgreSQL (nil: one core on SQLite)

	mu       sync.Mutex
	actions  map[string]*chaosAction
	order    []string
	kills    map[string][]time.Time // node → when its agent was seen dead after SIGKILL
	replaced map[string][]time.Time // node → when its database was moved away
	faults   map[string]int
	timeline []string
	approve  []string // gated actions waiting for bob
}

func (r *chaosRun) rng(stream uint64) *rand.Rand {
	return rand.New(rand.NewPCG(r.seed, stream))
}

func (r *chaosRun) note(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.timeline = append(r.timeline, time.Now().Format("15:04:05.000")+" "+fmt.Sprintf(format, args...))
}

func (r *chaosRun) fault(kind, format string, args ...any) {
	r.mu.Lock()
	r.faults[kind]++
	r.mu.Unlock()
	r.note(kind+": "+format, args...)
}

// chaosReplicas reads CHAOS_REPLICAS: 0 (default) is one core on SQLite.
func chaosReplicas(t *testing.T) int {
	t.Helper()
	v := os.Getenv("CHAOS_REPLICAS")
	if v == "" {
		return 0
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 || n > 9 {
		t.Fatalf("CHAOS_REPLICAS=%q: want 0 to 9", v)
	}
	return n
}

// chaosSettings reads CHAOS_SEED and CHAOS_DURATION (default dur).
func chaosSettings(t *testing.T, dur time.Duration) (uint64, time.Duration) {
	t.Helper()
	seed := uint64(chaosSeed)
	switch v := os.Getenv("CHAOS_SEED"); v {
	case "":
	case "random":
		seed = rand.Uint64()
	default:
		s, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("CHAOS_SEED=%q: want an unsigned integer or random", v)
		}
		seed = s
	}
	if v := os.Getenv("CHAOS_DURATION"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			t.Fatalf("CHAOS_DURATION=%q: want a positive Go duration such as 10m", v)
		}
		dur = d
	}
	return seed, dur
}

func TestChaos(t *testing.T) {
	t.Parallel()
	seed, dur := chaosSettings(t, 50*time.Second)
	runChaos(t, seed, dur, chaosReplicas(t))
}

// TestChaosReplicas is the PostgreSQL mode in `make test`: three core
// replicas for 60 s with the fixed seed, whose choices freeze and kill
// replicas, restart PostgreSQL and kill agents, checked like TestChaos.
func TestChaosReplicas(t *testing.T) {
	t.Parallel()
	seed, dur := chaosSettings(t, 60*time.Second)
	runChaos(t, seed, dur, 3)
}

func runChaos(t *testing.T, seed uint64, dur time.Duration, replicas int) {
	t.Logf("chaos: CHAOS_SEED=%d CHAOS_DURATION=%s CHAOS_REPLICAS=%d", seed, dur, replicas)
	// Not t.TempDir: a failed run keeps every data directory and log.
	dir, err := os.MkdirTemp("", "muster-chaos-")
	if err != nil {
		t.Fatal(err)
	}
	r := &chaosRun{t: t, seed: seed, dir: dir, proxies: map[string]*faultProxy{},
		actions: map[string]*chaosAction{}, kills: map[string][]time.Time{},
		replaced: map[string][]time.Time{}, faults: map[string]int{}}
	t.Cleanup(func() {
		if t.Failed() {
			_ = os.WriteFile(filepath.Join(dir, "timeline.txt"), []byte(strings.Join(r.timeline, "\n")+"\n"), 0o644)
			t.Logf("chaos: FAILED with CHAOS_SEED=%d CHAOS_DURATION=%s; data directories, process logs, execution logs and timeline kept in %s",
				seed, dur, dir)
			return
		}
		os.RemoveAll(dir)
	})

	script := filepath.Join(dir, "chaos.sh")
	if err := os.WriteFile(script, []byte(fmt.Sprintf(chaosScript, dir)), 0o755); err != nil {
		t.Fatal(err)
	}
	dsn := ""
	if replicas > 0 {
		r.pg, dsn = chaosPostgres(t, dir)
	}
	kinds := fmt.Sprintf("actions:\n  external:\n    - kind: %s\n      run: [%q]\n    - kind: %s\n      run: [%q]\n",
		kindRun, script, kindGated, script)
	proxySeed := seed
	r.f = newFleetWith(t, fleetOptions{
		nodes:       chaosNodes,
		dir:         dir,
		actionsYAML: kinds,
		coreExtra: fmt.Sprintf("approval:\n  default: none\n  rules:\n    - {kind: %q, cluster: %q, approval: required}\n",
			kindGated, chaosCluster),
		replicas: replicas,
		dsn:      dsn,
		coreAddr: func(node, agentAddr string) string {
			proxySeed++
			p := newFaultProxy(t, agentAddr, proxySeed)
			r.proxies[node] = p
			return p.Addr()
		},
	})

	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(3)
	go func() { defer wg.Done(); r.create(ctx, dur) }()
	go func() { defer wg.Done(); r.decide(ctx) }()
	go func() { defer wg.Done(); r.cancel(ctx) }()
	r.inject(dur)
	stop()
	wg.Wait()

	r.heal()
	r.drain(90 * time.Second)
	r.check()
}

// chaosPostgres starts a PostgreSQL server of the test's own (restart-store
// must not disturb the other tests' server) with an empty database, and
// returns it and the database's DSN. On failure its log is copied to dir.
func chaosPostgres(t *testing.T, dir string) (*pglocal.Server, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// synchronous_commit on: a commit is written to the OS before the core
	// answers, so that it outlives a SIGKILL of the server, as on a real
	// one (the test server's default, off, loses the last commits of a
	// crash: accepted actions the checker would find lost). fsync stays
	// off: the OS itself does not crash here.
	srv, err := pglocal.Start(ctx, pglocal.Options{Settings: map[string]string{"synchronous_commit": "on"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			if b, err := os.ReadFile(filepath.Join(srv.Dir, "postgres.log")); err == nil {
				_ = os.WriteFile(filepath.Join(dir, "postgres.log"), b, 0o644)
			}
		}
		_ = srv.Stop()
	})
	if err := srv.CreateDatabase(ctx, "chaos", ""); err != nil {
		t.Fatal(err)
	}
	return srv, srv.DSN("chaos")
}

// nodeName is node-1 … node-N.
func nodeName(i int) string { return fmt.Sprintf("node-%d", i+1) }

// untilOK runs call until it gets an answer (any HTTP status but 503) or
// within has passed. Transport errors (the core is down or restarting) and
// 503 (the core's database is unavailable: nothing was changed) are retried.
func untilOK(within time.Duration, call func(ctx context.Context) error) error {
	deadline := time.Now().Add(within)
	backoff := 50 * time.Millisecond
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err := call(ctx)
		cancel()
		st := client.StatusOf(err)
		if err == nil || (st != 0 && st != http.StatusServiceUnavailable) || time.Now().After(deadline) {
			return err
		}
		time.Sleep(backoff) // pacing retries against a core that is down, not synchronisation
		backoff = min(2*backoff, time.Second)
	}
}

// sleepCtx waits d or until ctx ends; it returns false when ctx ended.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-tm.C:
		return true
	}
}

// create is the workload: about three actions a second on random nodes, a
// third of them gated by approval, a tenth of them long (cancel targets).
func (r *chaosRun) create(ctx context.Context, dur time.Duration) {
	rng := r.rng(1)
	var seedBytes [32]byte
	for i := range 8 {
		seedBytes[i] = byte(r.seed >> (8 * i))
	}
	ids := rand.NewChaCha8(seedBytes)
	for seq := 0; ; seq++ {
		if !sleepCtx(ctx, time.Duration(rng.Int64N(int64(600*time.Millisecond)))) {
			return
		}
		u, err := uuid.NewRandomFromReader(ids)
		if err != nil {
			r.t.Errorf("uuid: %v", err)
			return
		}
		a := &chaosAction{id: u.String(), node: nodeName(rng.IntN(chaosNodes)), kind: kindRun}
		if rng.IntN(3) == 0 {
			a.kind = kindGated
		}
		ms := 20 + rng.IntN(280)
		switch p := rng.IntN(10); {
		case p == 0:
			ms, a.long = 1500+rng.IntN(1500), true
		case p < 3:
			ms = 300 + rng.IntN(500)
		}
		a.args = json.RawMessage(fmt.Sprintf(`{"ms":%d,"seq":%d}`, ms, seq))
		r.mu.Lock()
		r.actions[a.id] = a
		r.order = append(r.order, a.id)
		r.mu.Unlock()

		unanswered := false
		err = untilOK(30*time.Second, func(ctx context.Context) error {
			_, err := r.f.alice.CreateAction(ctx, &wire.CreateActionRequest{ID: a.id, ClusterID: chaosCluster,
				NodeID: a.node, Kind: a.kind, Args: a.args})
			if client.StatusOf(err) == 0 && err != nil {
				unanswered = true
			}
			return err
		})
		r.mu.Lock()
		switch {
		case err == nil, unanswered && client.StatusOf(err) == 409:
			a.acked = true // 409 to a retry: the first, unanswered attempt was stored
		case client.StatusOf(err) == 0:
			a.unsure = true // resolved by the checker: the core has it or it has not
		default:
			r.t.Errorf("create %s: %v", a.id, err)
		}
		if a.acked && a.kind == kindGated {
			r.approve = append(r.approve, a.id)
		}
		r.mu.Unlock()
	}
}

// decide plays bob: every gated action is approved (nine in ten) or
// rejected after a short random wait.
func (r *chaosRun) decide(ctx context.Context) {
	rng := r.rng(2)
	for sleepCtx(ctx, time.Duration(rng.Int64N(int64(time.Second)))) {
		r.mu.Lock()
		todo := r.approve
		r.approve = nil
		r.mu.Unlock()
		for _, id := range todo {
			if ctx.Err() != nil {
				r.mu.Lock()
				r.approve = append(r.approve, id)
				r.mu.Unlock()
				continue
			}
			r.decideOne(id, rng.IntN(10) == 0)
		}
	}
}

func (r *chaosRun) decideOne(id string, reject bool) {
	if reject {
		r.mu.Lock()
		r.actions[id].rejected = true
		r.mu.Unlock()
	}
	err := untilOK(30*time.Second, func(ctx context.Context) error {
		var err error
		if reject {
			_, err = r.f.bob.Reject(ctx, id)
		} else {
			_, err = r.f.bob.Approve(ctx, id)
		}
		return err
	})
	// 409: no longer PENDING_APPROVE (cancelled meanwhile, or an earlier
	// attempt whose answer was lost went through).
	if err != nil && client.StatusOf(err) != 409 {
		r.t.Errorf("approve/reject %s: %v", id, err)
	}
}

// cancel plays alice changing her mind: now and then it cancels an action
// the core reports RUNNING, or a recent long one in whatever state it is.
func (r *chaosRun) cancel(ctx context.Context) {
	rng := r.rng(3)
	for sleepCtx(ctx, 500*time.Millisecond+time.Duration(rng.Int64N(int64(1500*time.Millisecond)))) {
		var id string
		if rng.IntN(10) < 7 {
			lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			list, err := r.f.alice.Actions(lctx, client.ActionFilter{Cluster: chaosCluster, States: []action.State{action.Running}, Limit: 50})
			cancel()
			if err == nil && len(list.Actions) > 0 {
				id = list.Actions[rng.IntN(len(list.Actions))].ID
			}
		}
		if id == "" {
			r.mu.Lock()
			var recent []string
			for i := len(r.order) - 1; i >= 0 && len(recent) < 20; i-- {
				if a := r.actions[r.order[i]]; a.long && a.acked {
					recent = append(recent, a.id)
				}
			}
			r.mu.Unlock()
			if len(recent) == 0 {
				continue
			}
			id = recent[rng.IntN(len(recent))]
		}
		r.mu.Lock()
		a := r.actions[id]
		if a != nil {
			a.cancelled = true
		}
		r.mu.Unlock()
		if a == nil {
			r.t.Errorf("the core reports RUNNING an action the workload never created: %s", id)
			continue
		}
		err := untilOK(10*time.Second, func(ctx context.Context) error { _, _, err := r.f.alice.Cancel(ctx, id); return err })
		if err != nil && client.StatusOf(err) != 409 && client.StatusOf(err) != 0 {
			r.t.Errorf("cancel %s: %v", id, err)
		}
	}
}

// inject runs on the test goroutine (it restarts processes, which may
// t.Fatal): a fault every 0.3–1.5 s until dur has passed. The first faults
// go through every type once, in random order; database replacements are
// spread over the run (one per 90 s, at least one).
func (r *chaosRun) inject(dur time.Duration) {
	t := r.t
	rng := r.rng(4)
	end := time.Now().Add(dur)
	heal := map[string]time.Time{}
	types := []string{"partition", "delay", "drop", "reset", "kill-agent", "kill-core"}
	weights := []int{5, 5, 3, 3, 5, 2}
	if r.pg != nil {
		types = append(types, "freeze-core", "restart-store")
		weights = append(weights, 2, 1)
	}
	frozen := map[int]time.Time{} // core replica → when it is thawed
	thaw := func(i int) {
		r.f.cores[i].thaw()
		delete(frozen, i)
		r.note("thawed %s", r.f.cores[i].name)
	}
	first := slices.Clone(types)
	rng.Shuffle(len(first), func(i, j int) { first[i], first[j] = first[j], first[i] })
	var replaceAt []time.Time
	for range max(1, int(dur/(90*time.Second))) {
		replaceAt = append(replaceAt, time.Now().Add(dur/10+time.Duration(rng.Int64N(int64(dur*7/10)))))
	}
	slices.SortFunc(replaceAt, func(a, b time.Time) int { return a.Compare(b) })
	pause := func(d time.Duration) { sleepCtx(context.Background(), d) }

	for time.Now().Before(end) {
		pause(300*time.Millisecond + time.Duration(rng.Int64N(int64(1200*time.Millisecond))))
		now := time.Now()
		for node, at := range heal {
			if !now.Before(at) {
				r.proxies[node].Set(pass)
				delete(heal, node)
				r.note("heal: %s", node)
			}
		}
		for i, at := range frozen {
			if !now.Before(at) {
				thaw(i)
			}
		}
		node := nodeName(rng.IntN(chaosNodes))
		if len(replaceAt) > 0 && !now.Before(replaceAt[0]) {
			replaceAt = replaceAt[1:]
			r.replaceDB(node, rng)
			continue
		}
		var typ string
		if len(first) > 0 {
			typ, first = first[0], first[1:]
		} else {
			n := rng.IntN(sumInts(weights))
			for i, w := range weights {
				if n < w {
					typ = types[i]
					break
				}
				n -= w
			}
		}
		lasting := 500*time.Millisecond + time.Duration(rng.Int64N(int64(3500*time.Millisecond)))
		switch typ {
		case "partition":
			r.proxies[node].Set(blackhole)
			heal[node] = now.Add(lasting)
			r.fault(typ, "%s for %s", node, lasting.Round(time.Millisecond))
		case "delay":
			r.proxies[node].Set(delay)
			heal[node] = now.Add(lasting)
			r.fault(typ, "%s for %s", node, lasting.Round(time.Millisecond))
		case "drop", "reset":
			mode := drop
			if typ == "reset" {
				mode = reset
			}
			r.proxies[node].Set(mode)
			heal[node] = now.Add(lasting / 4)
			r.fault(typ, "%s for %s", node, (lasting / 4).Round(time.Millisecond))
		case "kill-agent":
			r.killAgent(node)
			r.fault(typ, "%s", node)
			pause(time.Duration(rng.Int64N(int64(2 * time.Second))))
			r.f.agents[node].restart()
			r.note("restarted %s", node)
		case "kill-core":
			i := rng.IntN(len(r.f.cores))
			c := r.f.cores[i]
			c.kill()
			delete(frozen, i) // SIGKILL ends a frozen process too
			r.fault(typ, "%s", c.name)
			pause(time.Duration(rng.Int64N(int64(1500 * time.Millisecond))))
			c.restart()
			r.note("restarted %s", c.name)
		case "freeze-core":
			// Past the lease TTL (2 s) more often than not: another
			// replica takes the frozen one's clusters, and the frozen
			// one wakes up with its passes in flight.
			i := rng.IntN(len(r.f.cores))
			r.f.cores[i].freeze()
			frozen[i] = now.Add(lasting)
			r.fault(typ, "%s for %s", r.f.cores[i].name, lasting.Round(time.Millisecond))
		case "restart-store":
			if err := r.pg.Kill(); err != nil {
				t.Fatalf("kill PostgreSQL: %v", err)
			}
			down := time.Duration(rng.Int64N(int64(2 * time.Second)))
			r.fault(typ, "PostgreSQL down for %s", down.Round(time.Millisecond))
			pause(down)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			err := r.pg.Restart(ctx)
			cancel()
			if err != nil {
				t.Fatalf("restart PostgreSQL: %v", err)
			}
			r.note("PostgreSQL restarted")
		}
	}
	for i := range frozen {
		thaw(i)
	}
	t.Logf("chaos: faults injected for %s", dur)
}

func sumInts(xs []int) int {
	n := 0
	for _, x := range xs {
		n += x
	}
	return n
}

func (r *chaosRun) killAgent(node string) {
	r.f.agents[node].kill()
	r.mu.Lock()
	r.kills[node] = append(r.kills[node], time.Now())
	r.mu.Unlock()
}

// replaceDB kills an agent, moves its data directory away (kept for a
// post-mortem) and starts it on an empty one.
func (r *chaosRun) replaceDB(node string, rng *rand.Rand) {
	r.killAgent(node)
	data := filepath.Join(r.f.dirs[node], "data")
	r.mu.Lock()
	gen := len(r.replaced[node]) + 1
	r.replaced[node] = append(r.replaced[node], time.Now())
	r.mu.Unlock()
	if err := os.Rename(data, fmt.Sprintf("%s.replaced-%d", data, gen)); err != nil {
		r.t.Fatalf("replace the database of %s: %v", node, err)
	}
	r.fault("replace-db", "%s", node)
	sleepCtx(context.Background(), time.Duration(rng.Int64N(int64(time.Second))))
	r.f.agents[node].restart()
	r.note("restarted %s on an empty database", node)
}

// heal ends every network fault.
func (r *chaosRun) heal() {
	for _, p := range r.proxies {
		p.Set(pass)
	}
	r.note("healed every proxy")
}

// drain decides the gated actions still waiting, then waits until every
// action is final in the core and no agent holds a NEW or RUNNING one.
func (r *chaosRun) drain(within time.Duration) {
	t := r.t
	r.mu.Lock()
	todo := r.approve
	r.approve = nil
	r.mu.Unlock()
	for _, id := range todo {
		r.decideOne(id, false)
	}
	// Creates left unsure may have reached the core: decide those too.
	for _, a := range r.snapshot() {
		if a.unsure && a.kind == kindGated {
			if err := untilOK(10*time.Second, func(ctx context.Context) error { _, err := r.f.bob.Approve(ctx, a.id); return err }); err != nil &&
				client.StatusOf(err) != 404 && client.StatusOf(err) != 409 {
				t.Errorf("approve %s: %v", a.id, err)
			}
		}
	}
	open := []action.State{action.PendingApprove, action.PendingSchedule, action.New, action.Running}
	var left []action.Action
	deadline := time.Now().Add(within)
	for {
		list, err := r.f.admin.Actions(ctxT(t), client.ActionFilter{Cluster: chaosCluster, States: open, Limit: 500})
		busy := 0
		for _, ag := range r.f.agentC {
			info, ierr := ag.Info(ctxT(t))
			if ierr != nil {
				busy++
				continue
			}
			busy += info.Queue[action.New] + info.Queue[action.Running]
		}
		if err == nil && len(list.Actions) == 0 && busy == 0 {
			break
		}
		if err == nil {
			left = list.Actions
		}
		if time.Now().After(deadline) {
			for _, a := range left {
				t.Errorf("not final after the drain: %s on %s is %s (%s)", a.ID, a.NodeID, a.State, a.StateReason)
			}
			t.Fatalf("chaos: the drain did not end within %s (%d actions open in the core, %d on agents)", within, len(left), busy)
		}
		_ = r.f.admin.Orchestrate(ctxT(t), chaosCluster)
		sleepCtx(context.Background(), 250*time.Millisecond)
	}
	r.note("drained")
}

func (r *chaosRun) snapshot() []chaosAction {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]chaosAction, 0, len(r.order))
	for _, id := range r.order {
		out = append(out, *r.actions[id])
	}
	return out
}

// execution is one run of the chaos script on a node.
type execution struct {
	id         string
	node       string
	start, end int64 // ns; end 0 when the script did not write its end line
}

// parseExecutions reads the lines of a node's execution log: every start
// line opens an execution, every end line closes the open one of its id.
func parseExecutions(node string, log []string, bad func(string, ...any)) []*execution {
	var out []*execution
	open := map[string]*execution{}
	for _, l := range log {
		f := strings.Fields(l)
		if len(f) != 3 {
			bad("%s: malformed execution line %q", node, l)
			continue
		}
		ns, err := strconv.ParseInt(f[2], 10, 64)
		if err != nil {
			bad("%s: malformed execution line %q", node, l)
			continue
		}
		switch f[1] {
		case "start":
			e := &execution{id: f[0], node: node, start: ns}
			open[f[0]] = e
			out = append(out, e)
		case "end":
			e := open[f[0]]
			if e == nil {
				bad("%s: action %s ended without starting", node, f[0])
				continue
			}
			e.end = ns
			delete(open, f[0])
		default:
			bad("%s: malformed execution line %q", node, l)
		}
	}
	return out
}

// chaosHistory is everything the checker looks at: what the workload did,
// what the core and the agents hold at the end, what the commands wrote, and
// when agents were killed and databases replaced.
type chaosHistory struct {
	workload []chaosAction
	core     map[string]*action.Action            // id → the core's record
	agents   map[string]map[string]*action.Action // node → id → the agent's record
	logs     map[string][]string                  // node → lines of its execution log
	kills    map[string][]time.Time               // node → when its agent was seen dead after SIGKILL
	replaced map[string][]time.Time               // node → when its database was moved away
}

// check reads the core's records, every agent's records and the execution
// logs, runs checkHistory over them, and prints the counts and violations.
func (r *chaosRun) check() {
	t := r.t
	core := map[string]*action.Action{}
	marker := ""
	for {
		page, err := r.f.admin.Actions(ctxT(t), client.ActionFilter{Cluster: chaosCluster, Limit: 500, Sort: "created_ts:asc,id:asc", Marker: marker})
		if err != nil {
			t.Fatalf("list the core's actions: %v", err)
		}
		for i := range page.Actions {
			a := page.Actions[i]
			core[a.ID] = &a
		}
		if page.NextMarker == "" {
			break
		}
		marker = page.NextMarker
	}
	agents := map[string]map[string]*action.Action{}
	for node, ag := range r.f.agentC {
		agents[node] = map[string]*action.Action{}
		var since int64
		for {
			page, err := ag.Changes(ctxT(t), since, 500, false)
			if err != nil {
				t.Fatalf("list %s's actions: %v", node, err)
			}
			for i := range page.Actions {
				a := page.Actions[i]
				agents[node][a.ID] = &a
			}
			since = page.NextCursor
			if !page.More || len(page.Actions) == 0 {
				break
			}
		}
	}
	logs := map[string][]string{}
	for i := range chaosNodes {
		node := nodeName(i)
		logs[node] = lines(filepath.Join(r.dir, node+".exec.log"))
	}
	r.mu.Lock()
	h := chaosHistory{core: core, agents: agents, logs: logs, kills: r.kills, replaced: r.replaced}
	faults := fmt.Sprint(r.faults)
	r.mu.Unlock()
	h.workload = r.snapshot()

	violations, counts := checkHistory(&h)
	t.Logf("chaos: seed %d: %d actions created, %d accepted (done %d, failed %d, cancelled %d, lost %d; unanswered creates stored %d, not stored %d); %d executions; faults %s",
		r.seed, len(h.workload), counts["accepted"], counts["done"], counts["failed"], counts["cancelled"], counts["lost"],
		counts["create-unanswered-but-stored"], counts["create-unanswered-not-stored"], counts["executions"], faults)
	if len(violations) > 0 {
		_ = os.WriteFile(filepath.Join(r.dir, "violations.txt"), []byte(strings.Join(violations, "\n")+"\n"), 0o644)
		for _, v := range violations {
			t.Error(v)
		}
	}
}

// checkHistory asserts the chaos invariants over a history and returns every
// violation, and the counts of outcomes.
func checkHistory(h *chaosHistory) (violations []string, counts map[string]int) {
	bad := func(format string, args ...any) { violations = append(violations, fmt.Sprintf(format, args...)) }
	core, agents, kills, replaced := h.core, h.agents, h.kills, h.replaced
	execs := map[string][]*execution{} // action id → its executions, on any node
	byNode := map[string][]*execution{}
	for node, log := range h.logs {
		for _, e := range parseExecutions(node, log, bad) {
			execs[e.id] = append(execs[e.id], e)
			byNode[node] = append(byNode[node], e)
		}
	}
	counts = map[string]int{}
	workload := map[string]chaosAction{}
	for _, a := range h.workload {
		workload[a.id] = a
		c, inCore := core[a.id]
		switch {
		case a.acked && !inCore:
			bad("LOST BY THE CORE: %s (%s on %s) was accepted (201) but the core has no record of it", a.id, a.kind, a.node)
			continue
		case !inCore:
			counts["create-unanswered-not-stored"]++
			if len(execs[a.id]) > 0 {
				bad("UNEXPECTED: %s ran on %s but the core never stored its create", a.id, execs[a.id][0].node)
			}
			continue
		case a.unsure:
			counts["create-unanswered-but-stored"]++
		}
		counts["accepted"]++
		counts[strings.ToLower(string(c.State))]++

		// Final in the core, with the content the workload asked for.
		if !c.State.Final() {
			bad("NOT FINAL: %s on %s is %s in the core", a.id, a.node, c.State)
		}
		if c.NodeID != a.node || c.Kind != a.kind || string(c.Args) != string(a.args) {
			bad("CONTENT: %s is %s %s on %s in the core; the workload created %s %s on %s",
				a.id, c.Kind, c.Args, c.NodeID, a.kind, a.args, a.node)
		}
		// Equal to the agent's record, when the agent still has it.
		if ag, ok := agents[a.node][a.id]; ok {
			if ag.State != c.State || ag.Kind != c.Kind || string(ag.Args) != string(c.Args) {
				bad("CORE ≠ AGENT: %s: the core has %s %s %s (%s), %s has %s %s %s (%s)", a.id,
					c.State, c.Kind, c.Args, c.StateReason, a.node, ag.State, ag.Kind, ag.Args, ag.StateReason)
			}
		} else if !c.CreatedTS.Before(last(replaced[a.node])) {
			// The agent never had it (its database was not replaced since):
			// only an action cancelled before it was pushed may be missing,
			// and it never ran.
			if c.State != action.Cancelled {
				bad("MISSING ON AGENT: %s is %s in the core, but %s has no record of it (and its database was not replaced since)", a.id, c.State, a.node)
			} else if len(execs[a.id]) > 0 {
				bad("RAN UNRECORDED: %s is CANCELLED in the core, %s has no record of it, yet its command started", a.id, a.node)
			}
		}

		runs := execs[a.id]
		if len(runs) > 1 {
			bad("RAN TWICE: %s started %d times (nodes %s)", a.id, len(runs), execNodes(runs))
		}
		for _, e := range runs {
			if e.node != a.node {
				bad("WRONG NODE: %s ran on %s; it belongs to %s", a.id, e.node, a.node)
			}
		}
		if a.rejected && c.State != action.Cancelled {
			bad("REJECTED: %s was rejected but is %s", a.id, c.State)
		}
		switch c.State {
		case action.Done:
			if len(runs) != 1 || runs[0].end == 0 {
				bad("DONE WITHOUT ONE WHOLE RUN: %s is DONE but its command started %d time(s)%s", a.id, len(runs), endNote(runs))
			}
		case action.Failed:
			if c.StateReason != action.ReasonInterrupted {
				bad("FAILED: %s failed with %q; only %q (its agent was killed mid-run) is expected", a.id, c.StateReason, action.ReasonInterrupted)
			}
			// The agent records "launching" before it starts the command, so
			// a kill in between interrupts an action whose command never
			// wrote its start line: zero runs or one, after a kill.
			started := int64(0)
			if c.StartedTS != nil {
				started = c.StartedTS.UnixNano()
			}
			if len(runs) == 1 {
				started = runs[0].start
			}
			switch {
			case len(runs) > 1:
			case started == 0:
				bad("INTERRUPTED WITHOUT A START: %s failed %q but never started", a.id, c.StateReason)
			case killedAfter(kills[a.node], started).IsZero():
				bad("INTERRUPTED WITHOUT A CRASH: %s failed %q but %s was not killed after it started", a.id, c.StateReason, a.node)
			}
		case action.Cancelled:
			if !a.cancelled && !a.rejected {
				bad("CANCELLED UNASKED: %s is CANCELLED (%s) but nobody cancelled or rejected it", a.id, c.StateReason)
			}
			if a.rejected && !a.cancelled && len(runs) > 0 {
				bad("REJECTED BUT RAN: %s was rejected but its command started", a.id)
			}
		case action.Lost:
			if !c.CreatedTS.Before(last(replaced[a.node])) {
				bad("LOST: %s is LOST on %s, whose database was not replaced after the action was created", a.id, a.node)
			}
			if len(runs) == 1 && runs[0].start > last(replaced[a.node]).UnixNano() {
				bad("LOST AFTER THE LAST REPLACEMENT: %s is LOST but ran on %s's current database", a.id, a.node)
			}
		}
	}
	// Nothing in the core or on an agent that the workload did not create.
	for id, c := range core {
		if _, ok := workload[id]; !ok {
			bad("UNEXPECTED IN THE CORE: %s (%s on %s, %s, origin %s)", id, c.Kind, c.NodeID, c.State, c.Origin)
		}
	}
	for node, recs := range agents {
		for id := range recs {
			if c, ok := core[id]; !ok || c.NodeID != node {
				bad("UNEXPECTED ON AN AGENT: %s holds %s, which the core does not have on that node", node, id)
			}
		}
	}
	// Executions: every one of an accepted action, and none overlapping
	// another on its node. A run without an end line was SIGKILLed with its
	// agent (a cancel's SIGTERM writes the end line): it ended, at the
	// latest, when the test saw that agent dead.
	for node, list := range byNode {
		sort.Slice(list, func(i, j int) bool { return list[i].start < list[j].start })
		for i, e := range list {
			if _, ok := core[e.id]; !ok {
				bad("UNEXPECTED RUN: %s ran on %s; the core has no such action", e.id, node)
			}
			end := e.end
			if end == 0 {
				k := killedAfter(kills[node], e.start)
				if k.IsZero() {
					bad("NEVER ENDED: %s started on %s at %d and has no end line, yet its agent was not killed after that", e.id, node, e.start)
					continue
				}
				end = k.UnixNano()
			}
			if i+1 < len(list) && list[i+1].start <= end {
				bad("OVERLAP on %s: %s started at %d before %s (started %d) ended at %d", node, list[i+1].id, list[i+1].start, e.id, e.start, end)
			}
		}
	}

	for _, l := range byNode {
		counts["executions"] += len(l)
	}
	sort.Strings(violations)
	return violations, counts
}

// last returns the last time of ts, or the zero time.
func last(ts []time.Time) time.Time {
	if len(ts) == 0 {
		return time.Time{}
	}
	return ts[len(ts)-1]
}

// killedAfter returns the first time in kills after ns, or the zero time.
func killedAfter(kills []time.Time, ns int64) time.Time {
	for _, k := range kills {
		if k.UnixNano() > ns {
			return k
		}
	}
	return time.Time{}
}

func execNodes(runs []*execution) string {
	var n []string
	for _, e := range runs {
		n = append(n, e.node)
	}
	return strings.Join(n, ",")
}

func endNote(runs []*execution) string {
	for _, e := range runs {
		if e.end == 0 {
			return ", one without its end line"
		}
	}
	return ""
}
