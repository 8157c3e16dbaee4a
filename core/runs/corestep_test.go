package runs_test

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/musterhq/muster/core/actions"
	"github.com/musterhq/muster/core/runs"
	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/action"
	"github.com/musterhq/muster/shared/limit"
	"github.com/musterhq/muster/shared/wire"
)

// fakeProber answers gates from a value per URL (a gate passes when its
// value is "ok") and records the calls it was asked to send.
type fakeProber struct {
	mu     sync.Mutex
	values map[string]string
	asked  []string
}

func (p *fakeProber) set(url, v string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.values[url] = v
}

func (p *fakeProber) Gate(_ context.Context, g wire.Gate, _ time.Duration) (string, bool, string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	u := ""
	if g.HTTP != nil {
		u = g.HTTP.URL
	} else {
		u = g.Prometheus.URL + "?" + g.Prometheus.Query
	}
	p.asked = append(p.asked, "gate "+u)
	v := p.values[u]
	return v, v == "ok", "value " + v
}

func (p *fakeProber) Call(_ context.Context, c wire.Call, _ time.Duration) (string, bool, string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.asked = append(p.asked, "call "+c.HTTP.Method+" "+c.HTTP.URL+" "+c.HTTP.Headers["Authorization"])
	return "200", true, "answered 200"
}

func (env *engineEnv) runCore(p *fakeProber) bool {
	env.t.Helper()
	env.e.SetProber(p)
	changed, _, err := env.e.RunCore(context.Background(), env.st, "c")
	if err != nil {
		env.t.Fatal(err)
	}
	return changed
}

func (env *engineEnv) run(id string) *store.Run {
	env.t.Helper()
	var r *store.Run
	env.update(func(ctx context.Context, tx store.Tx) error {
		var err error
		r, err = tx.Run(ctx, id)
		return err
	})
	return r
}

// gatedCanary is a run over n1…n4, canary 1: lb-out (a call), upgrade,
// healthy (a gate per node), with a rollback; auto_promote_after_s 30 and
// abort_on healthy.
func gatedCanary() *wire.CreateRunRequest {
	c, e := limit.MustParse("1"), limit.MustParse("0")
	k := "muster.io/debug.ping"
	return &wire.CreateRunRequest{ClusterID: "c", Stages: []wire.StageSpec{{
		Name: "roll", Target: wire.Target{All: true}, MaxConcurrency: &c, MaxErrors: &e, Canary: 1,
		AutoPromoteAfterS: 30, AbortOn: []string{"healthy"},
		Steps: []wire.StepSpec{
			{Name: "lb-out", Call: &wire.Call{HTTP: &wire.HTTPCall{Method: "POST", URL: "https://lb.example/{{ .node.id }}/out",
				Headers: map[string]string{"Authorization": `Bearer {{ secret "lb-token" }}`}}}},
			{Name: "upgrade", Kind: k},
			{Name: "healthy", Gate: &wire.Gate{HTTP: &wire.HTTPGate{URL: "https://{{ .node.id }}.example/health"}},
				Retry: &wire.Retry{Attempts: 2}},
		},
		Rollback: []wire.StepSpec{{Name: "downgrade", Kind: k}},
	}}}
}

func coreOf(r *store.Run, node, step string) store.CoreStep {
	for _, cs := range r.Stages[0].Core[node] {
		if cs.Step == step {
			return cs
		}
	}
	return store.CoreStep{}
}

func TestGatesAndCallsAreRunByTheCoreAndTheCanaryPromotesItself(t *testing.T) {
	t.Parallel()
	env := setupEngine(t)
	p := &fakeProber{values: map[string]string{"https://n1.example/health": "ok", "https://n2.example/health": "ok"}}
	r := env.startReq(gatedCanary())
	// The call is the core's: no child, a PENDING core step.
	if kids := env.children(r.ID); len(kids) != 0 {
		t.Fatalf("%d children, want none: the call is the core's", len(kids))
	}
	if cs := coreOf(r, "n1", "lb-out"); cs.State != runs.CorePending {
		t.Fatalf("lb-out on n1: %+v, want PENDING", cs)
	}
	if !env.runCore(p) {
		t.Fatal("RunCore changed nothing")
	}
	r = env.advance(r.ID)
	// The secret stays a reference: what the core stored and sent.
	if cs := coreOf(r, "n1", "lb-out"); cs.State != string(action.Done) ||
		!strings.Contains(string(cs.Args), `{{ secret \"lb-token\" }}`) || !strings.Contains(string(cs.Args), "n1.example") &&
		!strings.Contains(string(cs.Args), "lb.example/n1/out") {
		t.Fatalf("lb-out on n1: %+v", cs)
	}
	up := env.open(r.ID)
	if up.Step != "upgrade" || up.NodeID != "n1" {
		t.Fatalf("child %s on %s, want n1's upgrade", up.Step, up.NodeID)
	}
	env.finishWith(up.ID, action.Done, "")
	r = env.advance(r.ID)
	env.runCore(p)
	r = env.advance(r.ID)
	if cs := coreOf(r, "n1", "healthy"); cs.State != string(action.Done) || cs.Value != "ok" || cs.At == nil {
		t.Fatalf("healthy on n1: %+v, want DONE with its value", cs)
	}
	if runs.PausedFor(r) != runs.PauseCanary {
		t.Fatalf("run %s (%s), want paused for its promote", r.State, r.StateReason)
	}
	// Watched: the gates hold; 30 s later the canary promotes itself.
	env.now = env.now.Add(10 * time.Second)
	env.runCore(p)
	if r = env.run(r.ID); r.State != store.RunPaused || r.Stages[0].HeldSince == nil {
		t.Fatalf("run %s, held since %v: want still paused, holding", r.State, r.Stages[0].HeldSince)
	}
	env.now = env.now.Add(31 * time.Second)
	env.runCore(p)
	r = env.run(r.ID)
	if r.State != store.RunRunning || !r.Stages[0].Promoted ||
		!strings.HasPrefix(r.Stages[0].PromotedBy, "promoted by the rule auto_promote_after_s") ||
		!strings.Contains(r.Stages[0].PromotedBy, "healthy on n1: ok") {
		t.Fatalf("run %s, promoted %v by %q", r.State, r.Stages[0].Promoted, r.Stages[0].PromotedBy)
	}
	if cs := coreOf(r, "n2", "lb-out"); cs.State != runs.CorePending {
		t.Fatalf("lb-out on n2: %+v, want PENDING after the promote", cs)
	}
	evs := env.events(r.ID)
	if !strings.Contains(evs, store.EventRunCoreStep) || !strings.Contains(evs, "run.promoted by rule") {
		t.Fatalf("events:\n%s", evs)
	}
	if strings.Contains(evs, "s3cr3t") {
		t.Fatal("a secret's value reached the events")
	}
}

func TestAnAbortOnGateThatFailsAbortsTheRunAndRollsTheCanaryBack(t *testing.T) {
	t.Parallel()
	env := setupEngine(t)
	p := &fakeProber{values: map[string]string{"https://n1.example/health": "ok"}}
	r := env.startReq(gatedCanary())
	env.runCore(p)
	r = env.advance(r.ID)
	env.finishWith(env.open(r.ID).ID, action.Done, "")
	r = env.advance(r.ID)
	env.runCore(p)
	r = env.advance(r.ID)
	if runs.PausedFor(r) != runs.PauseCanary {
		t.Fatalf("run %s (%s), want paused for its promote", r.State, r.StateReason)
	}
	// The metric breaks while the canary waits: the run aborts itself.
	p.set("https://n1.example/health", "bad")
	env.now = env.now.Add(10 * time.Second)
	env.runCore(p)
	r = env.run(r.ID)
	if !runs.Aborting(r) || !strings.HasPrefix(r.StateReason, "aborted by rule: gate healthy failed on node n1") {
		t.Fatalf("run %s (%s), want aborting by the rule", r.State, r.StateReason)
	}
	down := env.open(r.ID)
	if down.Step != "downgrade" || down.NodeID != "n1" {
		t.Fatalf("child %s on %s, want n1's downgrade", down.Step, down.NodeID)
	}
	env.finishWith(down.ID, action.Done, "")
	if r = env.advance(r.ID); r.State != store.RunAborted {
		t.Fatalf("run %s (%s), want ABORTED", r.State, r.StateReason)
	}
}

func TestAGateRetriesThenFailsItsNodeWithTheValueSeen(t *testing.T) {
	t.Parallel()
	env := setupEngine(t)
	req := gatedCanary()
	req.Stages[0].Canary, req.Stages[0].AutoPromoteAfterS, req.Stages[0].AbortOn = 0, 0, nil
	p := &fakeProber{values: map[string]string{"https://n1.example/health": "500"}}
	r := env.startReq(req)
	env.runCore(p)
	r = env.advance(r.ID)
	env.finishWith(env.open(r.ID).ID, action.Done, "")
	r = env.advance(r.ID)
	env.runCore(p) // attempt 1 fails
	r = env.advance(r.ID)
	if cs := coreOf(r, "n1", "healthy"); cs.Attempt != 2 || cs.State != runs.CorePending {
		t.Fatalf("healthy on n1: %+v, want attempt 2 PENDING", cs)
	}
	env.runCore(p) // attempt 2 fails: the node fails, the run fails
	r = env.advance(r.ID)
	env.finishWith(env.open(r.ID).ID, action.Done, "") // its rollback
	r = env.advance(r.ID)
	if r.State != store.RunFailed {
		t.Fatalf("run %s (%s), want FAILED", r.State, r.StateReason)
	}
	if why := r.Stages[0].Why["n1"].Reason; !strings.Contains(why, "step healthy FAILED (attempt 2 of 2): value 500") {
		t.Fatalf("why n1 failed: %q", why)
	}
}

func TestCheckRefusesBadGatesAndCalls(t *testing.T) {
	t.Parallel()
	k := "muster.io/debug.ping"
	for _, tc := range []struct {
		name string
		edit func(st *wire.StageSpec)
		want string
	}{
		{"gate and kind", func(st *wire.StageSpec) { st.Steps[2].Kind = k }, "no kind or args"},
		{"two gate kinds", func(st *wire.StageSpec) {
			st.Steps[2].Gate.Prometheus = &wire.PrometheusGate{URL: "http://p:9090", Query: "up", Expect: "== 1"}
		}, "one of http or prometheus"},
		{"bad expect", func(st *wire.StageSpec) {
			st.Steps[2].Gate = &wire.Gate{Prometheus: &wire.PrometheusGate{URL: "http://p:9090", Query: "up", Expect: "about 1"}}
		}, "not a comparison"},
		{"bad url", func(st *wire.StageSpec) { st.Steps[2].Gate.HTTP.URL = "ftp://x/y" }, "not an http(s) URL"},
		{"bad method", func(st *wire.StageSpec) { st.Steps[0].Call.HTTP.Method = "TRACE" }, "method"},
		{"abort_on a kind", func(st *wire.StageSpec) { st.AbortOn = []string{"upgrade"} }, "not a gate step"},
		{"auto promote without canary", func(st *wire.StageSpec) { st.Canary = 0 }, "has none"},
		{"soak on a call", func(st *wire.StageSpec) { st.Steps[0].SoakS = 5 }, "soak_s is for gates"},
		{"core kind as a stage's", func(st *wire.StageSpec) {
			st.Steps, st.Rollback, st.AbortOn, st.AutoPromoteAfterS, st.Kind = nil, nil, nil, 0, runs.KindGate
		}, "give it in steps"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			req := gatedCanary()
			tc.edit(&req.Stages[0])
			err := runs.Check(req)
			if !errors.Is(err, runs.ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Check: %v, want invalid with %q", err, tc.want)
			}
		})
	}
	// A good one is stored as kinds and args, covered by the digest.
	req := gatedCanary()
	if err := runs.Check(req); err != nil {
		t.Fatal(err)
	}
	if sp := req.Stages[0].Steps[2]; sp.Kind != runs.KindGate || sp.Gate != nil || !json.Valid(sp.Args) {
		t.Fatalf("healthy stored as %+v", sp)
	}
}

// events is every event of run id, a line each: type, actor, message.
func (env *engineEnv) events(id string) string {
	env.t.Helper()
	var b strings.Builder
	for _, ev := range env.eventsSince(0) {
		if ev.RunID == id {
			b.WriteString(ev.Type + " by " + ev.Actor + ": " + ev.Message + "\n")
		}
	}
	return b.String()
}

func TestAGateHeldForItsSoakPassesAndOneThatBreaksInItAbortsTheRun(t *testing.T) {
	t.Parallel()
	for _, breaks := range []bool{false, true} {
		env := setupEngine(t)
		req := gatedCanary()
		req.Stages[0].Steps[2].SoakS = 30
		p := &fakeProber{values: map[string]string{"https://n1.example/health": "ok"}}
		r := env.startReq(req)
		env.runCore(p)
		r = env.advance(r.ID)
		env.finishWith(env.open(r.ID).ID, action.Done, "")
		r = env.advance(r.ID)
		env.runCore(p) // passes: its soak begins
		r = env.advance(r.ID)
		if cs := coreOf(r, "n1", "healthy"); cs.State != runs.CoreRunning || cs.Passed == nil {
			t.Fatalf("healthy on n1: %+v, want RUNNING under its soak", cs)
		}
		if breaks {
			p.set("https://n1.example/health", "bad")
		}
		env.now = env.now.Add(31 * time.Second)
		env.runCore(p)
		r = env.advance(r.ID)
		cs := coreOf(r, "n1", "healthy")
		switch {
		case !breaks && (cs.State != string(action.Done) || cs.Checks != 2 || runs.PausedFor(r) != runs.PauseCanary):
			t.Fatalf("held: %+v, run %s (%s); want DONE after 2 checks, paused for its promote", cs, r.State, r.StateReason)
		case breaks && (cs.State != string(action.Failed) || !strings.Contains(cs.Reason, "failed during its soak") ||
			!runs.Aborting(r)):
			t.Fatalf("broken: %+v, run %s (%s); want FAILED in its soak, the run aborting", cs, r.State, r.StateReason)
		}
	}
}

func TestAPausedRunSendsNoCallUntilResumed(t *testing.T) {
	t.Parallel()
	env := setupEngine(t)
	p := &fakeProber{values: map[string]string{}}
	r := env.startReq(gatedCanary())
	env.update(func(ctx context.Context, tx store.Tx) error {
		_, err := env.e.Pause(ctx, tx, r.ID, actions.Actor{Name: "op"})
		return err
	})
	if env.runCore(p) || len(p.asked) != 0 {
		t.Fatalf("a paused run's call was sent: %v", p.asked)
	}
	env.update(func(ctx context.Context, tx store.Tx) error {
		_, err := env.e.Resume(ctx, tx, r.ID, actions.Actor{Name: "op"}, false)
		return err
	})
	if !env.runCore(p) || len(p.asked) != 1 || !strings.HasPrefix(p.asked[0], "call POST https://lb.example/n1/out") {
		t.Fatalf("after the resume: %v, want n1's call", p.asked)
	}
}

func TestWhatAnotherServerSaysIsKeptBounded(t *testing.T) {
	t.Parallel()
	env := setupEngine(t)
	req := gatedCanary()
	req.Stages[0].Canary, req.Stages[0].AutoPromoteAfterS, req.Stages[0].AbortOn = 0, 0, nil
	p := &fakeProber{values: map[string]string{"https://n1.example/health": strings.Repeat("é", 10_000)}}
	r := env.startReq(req)
	env.runCore(p)
	r = env.advance(r.ID)
	env.finishWith(env.open(r.ID).ID, action.Done, "")
	r = env.advance(r.ID)
	env.runCore(p)
	cs := coreOf(env.run(r.ID), "n1", "healthy")
	if cs.State != string(action.Failed) || len(cs.Value) > 260 || len(cs.Reason) > 520 || !utf8.ValidString(cs.Reason) {
		t.Fatalf("kept a value of %d bytes and a reason of %d (valid %v), state %s", len(cs.Value), len(cs.Reason),
			utf8.ValidString(cs.Reason), cs.State)
	}
}

func TestAStageGateIsAskedOnceForTheNodesWaitingOnIt(t *testing.T) {
	t.Parallel()
	env := setupEngine(t)
	two, zero := limit.MustParse("2"), limit.MustParse("0")
	req := &wire.CreateRunRequest{ClusterID: "c", Stages: []wire.StageSpec{{
		Name: "roll", Target: wire.Target{Nodes: []string{"n1", "n2"}}, MaxConcurrency: &two, MaxErrors: &zero,
		Steps: []wire.StepSpec{{Name: "up", Kind: "muster.io/debug.ping"},
			{Name: "fleet-ok", Gate: &wire.Gate{HTTP: &wire.HTTPGate{URL: "https://status.example/fleet"}}}},
	}}}
	p := &fakeProber{values: map[string]string{"https://status.example/fleet": "ok"}}
	r := env.startReq(req)
	for _, k := range env.children(r.ID) {
		env.finishWith(k.ID, action.Done, "")
	}
	r = env.advance(r.ID)
	env.runCore(p)
	if len(p.asked) != 1 {
		t.Fatalf("asked %v, want the stage's gate once for both nodes", p.asked)
	}
	if r = env.advance(r.ID); r.State != store.RunDone {
		t.Fatalf("run %s (%s), want DONE", r.State, r.StateReason)
	}
}

func TestTheDigestCoversAGate(t *testing.T) {
	t.Parallel()
	stage := func(expect string) []store.RunStage {
		return []store.RunStage{{Name: "s", Nodes: []string{"n1"}, Steps: []store.RunStep{{Name: "g", Kind: runs.KindGate,
			Args: json.RawMessage(`{"prometheus":{"url":"http://p","query":"q","expect":"` + expect + `"}}`), SoakS: 5}}}}
	}
	a, b := runs.Digest("c", stage("< 0.01")), runs.Digest("c", stage("< 0.1"))
	soak := stage("< 0.01")
	soak[0].Steps[0].SoakS = 6
	auto := stage("< 0.01")
	auto[0].AutoPromoteAfterS = 30
	if a == b || a == runs.Digest("c", soak) || a == runs.Digest("c", auto) {
		t.Fatal("the digest does not cover a gate's expect, its soak or auto_promote_after_s")
	}
}

// A canary waiting for its promote has its gates checked every few
// seconds; a check that sees what the run holds writes nothing (no run
// row, no event), yet the checks go on at their pace, and the first that
// sees something else is written.
func TestAnUnchangedCheckOfAWatchedCanaryWritesNothing(t *testing.T) {
	t.Parallel()
	env := setupEngine(t)
	p := &fakeProber{values: map[string]string{"https://n1.example/health": "ok"}}
	req := gatedCanary()
	req.Stages[0].AutoPromoteAfterS = 3600 // no promote during the test
	r := env.startReq(req)
	env.runCore(p)
	r = env.advance(r.ID)
	env.finishWith(env.open(r.ID).ID, action.Done, "")
	r = env.advance(r.ID)
	env.runCore(p)
	r = env.advance(r.ID)
	if runs.PausedFor(r) != runs.PauseCanary {
		t.Fatalf("run %s (%s), want paused for its promote", r.State, r.StateReason)
	}
	// The first watch notes when the gates began to hold: one write.
	env.now = env.now.Add(10 * time.Second)
	env.runCore(p)
	before := env.run(r.ID)
	if before.Stages[0].HeldSince == nil {
		t.Fatal("the first watch did not note the gates holding")
	}
	events := len(env.eventsSince(0))
	asked := func() int {
		p.mu.Lock()
		defer p.mu.Unlock()
		return len(p.asked)
	}
	for i := range 5 {
		n := asked()
		if env.runCore(p) || asked() != n {
			t.Fatalf("check %d: a second check at the same time (changed, or asked %d → %d)", i, n, asked())
		}
		env.now = env.now.Add(10 * time.Second)
		if env.runCore(p) {
			t.Fatalf("check %d: RunCore reports a change, the gate said the same", i)
		}
		if asked() != n+1 {
			t.Fatalf("check %d: the gate was asked %d time(s), want once", i, asked()-n)
		}
	}
	after := env.run(r.ID)
	if !after.UpdatedTS.Equal(before.UpdatedTS) || !reflect.DeepEqual(after.Stages, before.Stages) {
		t.Fatalf("unchanged checks wrote the run: updated %s → %s", before.UpdatedTS, after.UpdatedTS)
	}
	if n := len(env.eventsSince(0)); n != events {
		t.Fatalf("unchanged checks wrote %d event(s)", n-events)
	}
	// A value that changes is written, with when it was seen.
	p.set("https://n1.example/health", "bad")
	env.now = env.now.Add(10 * time.Second)
	if !env.runCore(p) {
		t.Fatal("a check that saw another value changed nothing")
	}
	if cs := coreOf(env.run(r.ID), "n1", "healthy"); cs.Value != "bad" || cs.At == nil || !cs.At.Equal(env.now) {
		t.Fatalf("healthy on n1 after the change: %+v", cs)
	}
}
