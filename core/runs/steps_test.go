package runs_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/musterhq/muster/core/actions"
	"github.com/musterhq/muster/core/runs"
	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/action"
	"github.com/musterhq/muster/shared/limit"
	"github.com/musterhq/muster/shared/wire"
)

// procedure is a stage of steps drain → upgrade → verify → undrain over
// every node, with verify's retry.
func procedure(conc, errs, onFailure string, retry *wire.Retry) *wire.CreateRunRequest {
	c, e := limit.MustParse(conc), limit.MustParse(errs)
	step := func(name string) wire.StepSpec {
		return wire.StepSpec{Name: name, Kind: "muster.io/debug.ping", Args: []byte(fmt.Sprintf(`{"step":%q}`, name))}
	}
	verify := step("verify")
	verify.Retry = retry
	return &wire.CreateRunRequest{ClusterID: "c", Stages: []wire.StageSpec{{
		Name: "roll", Target: wire.Target{All: true}, MaxConcurrency: &c, MaxErrors: &e, OnFailure: onFailure,
		Steps: []wire.StepSpec{step("drain"), step("upgrade"), verify, step("undrain")},
	}}}
}

func (env *engineEnv) startReq(req *wire.CreateRunRequest) *store.Run {
	env.t.Helper()
	var r *store.Run
	env.update(func(ctx context.Context, tx store.Tx) error {
		var err error
		if r, err = env.e.Create(ctx, tx, req, actions.Actor{Name: "alice"}); err != nil {
			return err
		}
		r, err = env.e.Approve(ctx, tx, r.ID, "", actions.Actor{Name: "bob"})
		return err
	})
	return r
}

// open is the run's one unfinished child; it fails the test when there
// is not exactly one.
func (env *engineEnv) open(id string) store.Record {
	env.t.Helper()
	var out []store.Record
	for _, k := range env.children(id) {
		if !k.State.Final() {
			out = append(out, k)
		}
	}
	if len(out) != 1 {
		env.t.Fatalf("%d unfinished children, want 1: %+v", len(out), out)
	}
	return out[0]
}

func TestStepsGoNodeFirstOneNodeAtATime(t *testing.T) {
	t.Parallel()
	env := setupEngine(t)
	r := env.startReq(procedure("1", "0", "", nil))
	var order []string
	for i := 0; i < 16; i++ {
		k := env.open(r.ID)
		if k.Attempt != 1 || k.Wave == 0 || k.Stage != "roll" {
			t.Fatalf("child %+v: want attempt 1 of stage roll in a wave", k.Action)
		}
		if want := fmt.Sprintf(`{"step":%q}`, k.Step); string(k.Args) != want {
			t.Fatalf("step %s carries args %s, want %s", k.Step, k.Args, want)
		}
		order = append(order, k.NodeID+":"+k.Step)
		env.finishChild(k.ID, action.Done)
		r = env.advance(r.ID)
	}
	if r.State != store.RunDone {
		t.Fatalf("run is %s (%s), want DONE", r.State, r.StateReason)
	}
	var want []string
	for _, n := range []string{"n1", "n2", "n3", "n4"} {
		for _, s := range []string{"drain", "upgrade", "verify", "undrain"} {
			want = append(want, n+":"+s)
		}
	}
	if strings.Join(order, " ") != strings.Join(want, " ") {
		t.Fatalf("order %v, want %v", order, want)
	}
	if n := len(env.children(r.ID)); n != 16 {
		t.Fatalf("%d children, want 16 (4 nodes × 4 steps, each once)", n)
	}
}

func TestStepsMaxConcurrencyBoundsNodesInFlight(t *testing.T) {
	t.Parallel()
	env := setupEngine(t)
	r := env.startReq(procedure("2", "0", "", nil))
	kids := env.children(r.ID)
	if len(kids) != 2 || kids[0].Step != "drain" || kids[1].Step != "drain" {
		t.Fatalf("first children %+v, want drain on 2 nodes", kids)
	}
	// n1 goes on to upgrade; n3 does not start while n1 and n2 are in
	// flight, though n2's drain is the only child running.
	env.finishChild(kids[0].ID, action.Done)
	env.advance(r.ID)
	kids = env.children(r.ID)
	if len(kids) != 3 || kids[2].NodeID != kids[0].NodeID || kids[2].Step != "upgrade" {
		t.Fatalf("children %d, the third %s:%s, want n1's upgrade and no new node", len(kids), kids[2].NodeID, kids[2].Step)
	}
}

func TestAOneStepStageKeepsItsChildrenUnnamed(t *testing.T) {
	t.Parallel()
	env := setupEngine(t)
	r := env.start("4", "0", "")
	for _, k := range env.children(r.ID) {
		if k.Step != "" || k.Attempt != 1 {
			t.Fatalf("child of a one-step stage has step %q attempt %d, want \"\" and 1", k.Step, k.Attempt)
		}
	}
}

func TestAFailedStepStopsItsNode(t *testing.T) {
	t.Parallel()
	env := setupEngine(t)
	r := env.startReq(procedure("1", "0", "", nil))
	k := env.open(r.ID) // n1 drain
	env.finishChild(k.ID, action.Done)
	env.advance(r.ID)
	k = env.open(r.ID) // n1 upgrade
	env.finishChild(k.ID, action.Failed)
	r = env.advance(r.ID)
	if r.State != store.RunFailed {
		t.Fatalf("run is %s, want FAILED", r.State)
	}
	if n := len(env.children(r.ID)); n != 2 {
		t.Fatalf("%d children, want 2: nothing after the failed upgrade", n)
	}
}

func TestRetryMakesANewChildPerAttempt(t *testing.T) {
	t.Parallel()
	env := setupEngine(t)
	r := env.startReq(procedure("1", "0", "", &wire.Retry{Attempts: 3, DelayS: 10, Backoff: 2, MaxDelayS: 15}))
	for range 2 { // drain, upgrade
		env.finishChild(env.open(r.ID).ID, action.Done)
		env.advance(r.ID)
	}
	first := env.open(r.ID)
	env.finishChild(first.ID, action.Failed)
	env.advance(r.ID)
	if k := env.children(r.ID); len(k) != 3 {
		t.Fatalf("%d children before the delay, want no retry yet", len(k))
	}
	env.now = env.now.Add(10 * time.Second)
	env.advance(r.ID)
	second := env.open(r.ID)
	if second.Step != "verify" || second.Attempt != 2 || second.RetryOf != first.ID || second.ID == first.ID {
		t.Fatalf("second attempt %+v, want verify attempt 2 retrying %s", second.Action, first.ID)
	}
	env.finishChild(second.ID, action.Failed)
	// The second retry waits 10s × 2, at most 15s.
	env.now = env.now.Add(14 * time.Second)
	env.advance(r.ID)
	if k := env.children(r.ID); len(k) != 4 {
		t.Fatalf("%d children after 14s, want the third attempt to wait 15s", len(k))
	}
	env.now = env.now.Add(time.Second)
	env.advance(r.ID)
	third := env.open(r.ID)
	if third.Attempt != 3 || third.RetryOf != second.ID {
		t.Fatalf("third attempt %+v", third.Action)
	}
	env.finishChild(third.ID, action.Done)
	r = env.advance(r.ID)
	if k := env.open(r.ID); k.Step != "undrain" || k.NodeID != "n1" {
		t.Fatalf("after the passing verify came %s:%s, want n1:undrain", k.NodeID, k.Step)
	}
	if r.State != store.RunRunning {
		t.Fatalf("run is %s, want RUNNING: only the last attempt's failure fails the node", r.State)
	}
}

func TestTheLastAttemptsFailureFailsTheNode(t *testing.T) {
	t.Parallel()
	env := setupEngine(t)
	r := env.startReq(procedure("1", "0", "", &wire.Retry{Attempts: 2}))
	for range 2 {
		env.finishChild(env.open(r.ID).ID, action.Done)
		env.advance(r.ID)
	}
	for range 2 {
		env.finishChild(env.open(r.ID).ID, action.Failed)
		r = env.advance(r.ID)
	}
	if r.State != store.RunFailed || len(env.children(r.ID)) != 4 {
		t.Fatalf("run %s with %d children, want FAILED after 2 attempts of verify", r.State, len(env.children(r.ID)))
	}
}

func TestBadProceduresAreRefused(t *testing.T) {
	t.Parallel()
	env := setupEngine(t)
	many := procedure("1", "0", "", nil)
	for i := 0; i < 47; i++ {
		many.Stages[0].Steps = append(many.Stages[0].Steps, wire.StepSpec{Name: fmt.Sprintf("s%d", i), Kind: "muster.io/debug.ping"})
	}
	huge := procedure("1", "0", "", &wire.Retry{Attempts: 20})
	for i := 0; i < 46; i++ {
		huge.Stages[0].Steps = append(huge.Stages[0].Steps, wire.StepSpec{Name: fmt.Sprintf("s%d", i), Kind: "muster.io/debug.ping",
			Retry: &wire.Retry{Attempts: 20}})
	}
	// 4 nodes × (3 + 47 × 20) possible children a stage, three stages.
	for _, name := range []string{"again", "more"} {
		st := huge.Stages[0]
		st.Name, st.DependsOn = name, nil
		huge.Stages = append(huge.Stages, st)
	}
	cases := map[string]struct {
		req  *wire.CreateRunRequest
		want string
	}{
		"51 steps":      {many, "at most 50 steps"},
		"attempts":      {procedure("1", "0", "", &wire.Retry{Attempts: 21}), "attempts must be between 1 and 20"},
		"max delay":     {procedure("1", "0", "", &wire.Retry{Attempts: 2, MaxDelayS: 3601}), "max_delay_s"},
		"backoff":       {procedure("1", "0", "", &wire.Retry{Attempts: 2, Backoff: 0.5}), "backoff"},
		"children":      {huge, "at most 10000 child actions, counting every step and retry"},
		"kind and step": {func() *wire.CreateRunRequest { r := procedure("1", "0", "", nil); r.Stages[0].Kind = "a.b/c"; return r }(), "in each step"},
		"step twice": {func() *wire.CreateRunRequest {
			r := procedure("1", "0", "", nil)
			r.Stages[0].Steps[1].Name = "drain"
			return r
		}(), "used twice"},
	}
	for name, tc := range cases {
		err := env.st.Update(context.Background(), func(tx store.Tx) error {
			_, err := env.e.Create(context.Background(), tx, tc.req, actions.Actor{Name: "alice"})
			return err
		})
		if !errors.Is(err, runs.ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want ErrInvalid naming %q", name, err, tc.want)
		}
	}
	var list []store.Run
	env.update(func(ctx context.Context, tx store.Tx) error {
		var err error
		list, err = tx.ListRuns(ctx, store.RunQuery{Limit: 10})
		return err
	})
	if len(list) != 0 {
		t.Fatalf("%d runs stored from bad input", len(list))
	}
}

func TestTheDigestCoversTheSteps(t *testing.T) {
	t.Parallel()
	base := procedure("1", "0", "", &wire.Retry{Attempts: 3})
	ns := []store.Node{{ID: "n1"}}
	digest := func(mut func(r *wire.CreateRunRequest)) string {
		req := procedure("1", "0", "", &wire.Retry{Attempts: 3})
		mut(req)
		if err := runs.Check(req); err != nil {
			t.Fatal(err)
		}
		st, err := runs.Resolve(req, ns, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		return runs.Digest("c", st)
	}
	_ = base
	d0 := digest(func(*wire.CreateRunRequest) {})
	for name, mut := range map[string]func(r *wire.CreateRunRequest){
		"step order": func(r *wire.CreateRunRequest) { s := r.Stages[0].Steps; s[0], s[1] = s[1], s[0] },
		"step args":  func(r *wire.CreateRunRequest) { r.Stages[0].Steps[1].Args = []byte(`{"step":"other"}`) },
		"retry":      func(r *wire.CreateRunRequest) { r.Stages[0].Steps[2].Retry.Attempts = 4 },
		"step kind":  func(r *wire.CreateRunRequest) { r.Stages[0].Steps[3].Kind = "muster.io/debug.sleep" },
		"when":       func(r *wire.CreateRunRequest) { r.Stages[0].Steps[3].When = "always" },
		"rollback": func(r *wire.CreateRunRequest) {
			r.Stages[0].Rollback = []wire.StepSpec{{Name: "back", Kind: "muster.io/debug.ping"}}
		},
	} {
		if digest(mut) == d0 {
			t.Errorf("changing the %s keeps the digest", name)
		}
	}
}

// InFlight names the nodes of a procedure the budget holds whole from the
// push of their first step until their procedure ended, between steps too;
// a node whose first child was only created is not in flight, and a stage
// the budget does not hold is not listed.
func TestInFlightHoldsANodeBetweenItsSteps(t *testing.T) {
	t.Parallel()
	env := setupEngine(t)
	r := env.startReq(procedure("2", "0", "", nil))
	inFlight := func(holds bool) *runs.Procedures {
		t.Helper()
		var p *runs.Procedures
		err := env.st.Read(context.Background(), func(rd store.Reader) error {
			var err error
			p, err = runs.InFlight(context.Background(), rd, "c", env.now, func([]string) bool { return holds })
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	p := inFlight(true)
	if !p.Stages[r.ID+"/roll"] || len(p.InFlight) != 0 {
		t.Fatalf("two drains created, none pushed: %+v", p)
	}
	var n1 string
	for _, k := range env.children(r.ID) {
		if k.NodeID == "n1" {
			n1 = k.ID
		}
	}
	env.finishChild(n1, action.Done) // n1's drain ended; its upgrade is not yet pushed
	env.advance(r.ID)
	if p := inFlight(true); !p.InFlight["n1"] || p.InFlight["n2"] || len(p.InFlight) != 1 {
		t.Fatalf("after n1's drain: %+v", p.InFlight)
	}
	if p := inFlight(false); len(p.Stages) != 0 || len(p.InFlight) != 0 {
		t.Fatalf("a stage the budget does not hold: %+v", p)
	}
	// Procedures.Holds: a child of the stage, whatever its kind.
	k := env.open2(r.ID, "n1")
	if !inFlight(true).Holds(&k) {
		t.Fatalf("n1's next step is not held by its procedure")
	}
}

// open2 is the unfinished child of node in run id.
func (env *engineEnv) open2(id, node string) store.Record {
	env.t.Helper()
	for _, k := range env.children(id) {
		if k.NodeID == node && !k.State.Final() {
			return k
		}
	}
	env.t.Fatalf("no unfinished child on %s", node)
	return store.Record{}
}
