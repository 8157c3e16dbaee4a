package runs

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/action"
	"github.com/musterhq/muster/shared/limit"
	"github.com/musterhq/muster/shared/wire"
)

func nodes(n int, labels func(i int) map[string]string) []store.Node {
	var out []store.Node
	for i := 1; i <= n; i++ {
		nd := store.Node{ID: fmt.Sprintf("n%02d", i), Kinds: []string{"muster.io/debug.sleep", "muster.io/debug.ping"}}
		if labels != nil {
			nd.Labels = labels(i)
		}
		out = append(out, nd)
	}
	return out
}

func lim(s string) *limit.Limit { l := limit.MustParse(s); return &l }

// newRun checks and resolves req against ns and returns it RUNNING.
func newRun(t *testing.T, req wire.CreateRunRequest, ns []store.Node) *store.Run {
	t.Helper()
	if err := Check(&req); err != nil {
		t.Fatal(err)
	}
	stages, err := Resolve(&req, ns, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	return &store.Run{ID: "r", ClusterID: req.ClusterID, State: store.RunRunning, Stages: stages}
}

// apply records what a step decided, as the engine would.
func apply(r *store.Run, s Step, children *[]Child) {
	for i := range r.Stages {
		r.Stages[i].State = s.Stages[i]
	}
	r.State = s.State
	for _, n := range s.Create {
		*children = append(*children, Child{Stage: n.Stage, Node: n.Node, State: action.PendingSchedule})
	}
}

func finish(children []Child, state action.State, pick func(c Child) bool) {
	for i := range children {
		if !children[i].State.Final() && pick(children[i]) {
			children[i].State = state
		}
	}
}

func TestPlanKeepsWithinMaxConcurrencyAndCreatesEachChildOnce(t *testing.T) {
	t.Parallel()
	r := newRun(t, wire.CreateRunRequest{ClusterID: "c", Stages: []wire.StageSpec{{
		Kind: "muster.io/debug.sleep", Target: wire.Target{All: true}, MaxConcurrency: lim("30%"),
	}}}, nodes(10, nil))
	var children []Child
	waves := 0
	for r.State == store.RunRunning {
		s := planNow(r, children)
		if got := len(s.Create); s.State == store.RunRunning && (got == 0 || got > 3) {
			t.Fatalf("wave %d created %d children, want 1 to 3", waves, got)
		}
		apply(r, s, &children)
		unfinished := 0
		for _, c := range children {
			if !c.State.Final() {
				unfinished++
			}
		}
		if unfinished > 3 {
			t.Fatalf("%d unfinished children, max_concurrency 30%% of 10 is 3", unfinished)
		}
		finish(children, action.Done, func(Child) bool { return true })
		if waves++; waves > 10 {
			t.Fatal("the run does not end")
		}
	}
	if r.State != store.RunDone || len(children) != 10 {
		t.Fatalf("state %s with %d children, want DONE with 10", r.State, len(children))
	}
	seen := map[string]bool{}
	for _, c := range children {
		if seen[c.Node] {
			t.Fatalf("node %s got two children", c.Node)
		}
		seen[c.Node] = true
	}
	if waves != 5 { // 4 waves of children, then the step that sees them done
		t.Fatalf("took %d steps, want 5", waves)
	}
}

func TestPlanStopsAfterMaxErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		onFailure string
		want      string
	}{{"", store.RunFailed}, {OnFailurePause, store.RunPaused}} {
		t.Run("on_failure="+tc.onFailure, func(t *testing.T) {
			r := newRun(t, wire.CreateRunRequest{ClusterID: "c", Stages: []wire.StageSpec{{
				Kind: "muster.io/debug.sleep", Target: wire.Target{All: true}, OnFailure: tc.onFailure,
			}}}, nodes(3, nil))
			var children []Child
			apply(r, planNow(r, children), &children)
			finish(children, action.Failed, func(Child) bool { return true })
			s := planNow(r, children)
			if s.State != tc.want || len(s.Create) != 0 {
				t.Fatalf("after a failure with max_errors 0: state %s, %d created; want %s, none", s.State, len(s.Create), tc.want)
			}
			if !strings.Contains(s.Reason, "1 errors") {
				t.Fatalf("reason %q does not count the error", s.Reason)
			}
			if tc.want != store.RunPaused {
				return
			}
			// A resume forgives the errors seen so far: the stage goes on.
			apply(r, s, &children)
			r.State, r.Stages[0].Forgiven = store.RunRunning, 1
			for r.State == store.RunRunning {
				apply(r, planNow(r, children), &children)
				finish(children, action.Done, func(Child) bool { return true })
			}
			// The forgiven failure still shows: the run is PARTIAL, not DONE.
			if r.State != store.RunPartial || len(children) != 3 {
				t.Fatalf("after resume: %s with %d children, want PARTIAL with 3", r.State, len(children))
			}
		})
	}
}

func TestPlanCountsErrorsAgainstAPercentage(t *testing.T) {
	t.Parallel()
	r := newRun(t, wire.CreateRunRequest{ClusterID: "c", Stages: []wire.StageSpec{{
		Kind: "muster.io/debug.sleep", Target: wire.Target{All: true}, MaxConcurrency: lim("10"), MaxErrors: lim("20%"),
	}}}, nodes(10, nil))
	var children []Child
	apply(r, planNow(r, children), &children)
	finish(children, action.Failed, func(c Child) bool { return c.Node == "n01" || c.Node == "n02" })
	finish(children, action.Lost, func(c Child) bool { return c.Node == "n03" })
	finish(children, action.Done, func(Child) bool { return true })
	if s := planNow(r, children); s.State != store.RunFailed {
		t.Fatalf("3 errors with max_errors 20%% of 10: %s, want FAILED", s.State)
	}
	children[2].State = action.Done // n03 did not fail after all: 2 errors are allowed
	s := planNow(r, children)
	if s.State != store.RunPartial || strings.Join(s.Failed[0], ",") != "n01,n02" {
		t.Fatalf("2 errors with max_errors 20%% of 10: %s failing %v, want PARTIAL listing n01 and n02", s.State, s.Failed)
	}
}

func TestPlanStartsAStageWhenItsDependenciesAreDone(t *testing.T) {
	t.Parallel()
	ns := nodes(4, func(i int) map[string]string {
		if i == 4 {
			return map[string]string{"role": "primary"}
		}
		return map[string]string{"role": "replica"}
	})
	r := newRun(t, wire.CreateRunRequest{ClusterID: "c", Stages: []wire.StageSpec{
		{Name: "replicas", Kind: "muster.io/debug.sleep", Target: wire.Target{Labels: map[string]string{"role": "replica"}}},
		{Name: "primary", Kind: "muster.io/debug.sleep", Target: wire.Target{Labels: map[string]string{"role": "primary"}}},
		{Name: "check", Kind: "muster.io/debug.ping", Target: wire.Target{All: true}, MaxConcurrency: lim("100%"), DependsOn: []string{}},
	}}, ns)
	var children []Child
	s := planNow(r, children)
	var stages []string
	for _, n := range s.Create {
		stages = append(stages, n.Stage+"/"+n.Node)
	}
	want := []string{"replicas/n01", "check/n01", "check/n02", "check/n03", "check/n04"}
	if !slices.Equal(stages, want) {
		t.Fatalf("first step creates %v, want %v (independent stages run at once)", stages, want)
	}
	for r.State == store.RunRunning {
		s := planNow(r, children)
		for _, n := range s.Create {
			if n.Stage == "primary" && slices.ContainsFunc(children, func(c Child) bool {
				return c.Stage == "replicas" && c.State != action.Done
			}) {
				t.Fatal("primary started before every replica was done")
			}
		}
		apply(r, s, &children)
		finish(children, action.Done, func(Child) bool { return true })
	}
	if r.State != store.RunDone || len(children) != 8 {
		t.Fatalf("%s with %d children, want DONE with 8", r.State, len(children))
	}
}

func TestPlanCreatesNothingUnlessRunning(t *testing.T) {
	t.Parallel()
	for _, st := range []string{store.RunPendingApprove, store.RunPaused, store.RunCancelled, store.RunFailed} {
		r := newRun(t, wire.CreateRunRequest{ClusterID: "c", Stages: []wire.StageSpec{{
			Kind: "muster.io/debug.ping", Target: wire.Target{All: true},
		}}}, nodes(2, nil))
		r.State = st
		if s := planNow(r, nil); len(s.Create) != 0 || s.State != st {
			t.Errorf("%s: created %d, state %s", st, len(s.Create), s.State)
		}
	}
}

func TestCheckRefusesBadSpecs(t *testing.T) {
	t.Parallel()
	ok := func() wire.StageSpec {
		return wire.StageSpec{Name: "a", Kind: "muster.io/debug.ping", Target: wire.Target{All: true}}
	}
	cases := []struct {
		name   string
		mutate func(r *wire.CreateRunRequest)
		want   string
	}{
		{"no stages", func(r *wire.CreateRunRequest) { r.Stages = nil }, "at least one stage"},
		{"empty target", func(r *wire.CreateRunRequest) { r.Stages[0].Target = wire.Target{} }, "target: empty"},
		{"two target forms", func(r *wire.CreateRunRequest) { r.Stages[0].Target.Nodes = []string{"n01"} }, "only one of"},
		{"unknown dependency", func(r *wire.CreateRunRequest) { r.Stages[0].DependsOn = []string{"zz"} }, `no stage "zz"`},
		{"bad on_failure", func(r *wire.CreateRunRequest) { r.Stages[0].OnFailure = "retry" }, "on_failure"},
		{"zero concurrency", func(r *wire.CreateRunRequest) { r.Stages[0].MaxConcurrency = lim("0%") }, "max_concurrency"},
		{"duplicate name", func(r *wire.CreateRunRequest) { r.Stages = append(r.Stages, ok()) }, "used twice"},
		{"cycle", func(r *wire.CreateRunRequest) {
			b, c := ok(), ok()
			b.Name, c.Name = "b", "c"
			r.Stages[0].DependsOn, b.DependsOn, c.DependsOn = []string{"c"}, []string{"a"}, []string{"b"}
			r.Stages = append(r.Stages, b, c)
		}, "cycle: "},
		{"args not an object", func(r *wire.CreateRunRequest) { r.Stages[0].Args = []byte(`[1]`) }, "JSON object"},
		{"lock without a name", func(r *wire.CreateRunRequest) { r.Lock = &wire.Lock{} }, "lock: name"},
		{"lock of no scope", func(r *wire.CreateRunRequest) { r.Lock = &wire.Lock{Name: "db", Scope: "galaxy"} }, `scope "galaxy"`},
		{"stage lock with a bad name", func(r *wire.CreateRunRequest) { r.Stages[0].Lock = &wire.Lock{Name: "a b"} }, "stage a: lock: name"},
		{"a stage lock beside another run lock", func(r *wire.CreateRunRequest) {
			r.Lock, r.Stages[0].Lock = &wire.Lock{Name: "db"}, &wire.Lock{Name: "lb"}
		}, "a stage may take no other"},
		{"args over the run's bound", func(r *wire.CreateRunRequest) {
			for i := range 5 {
				s := ok()
				s.Name, s.Args = fmt.Sprint("s", i), []byte(`{"a":"`+strings.Repeat("x", 60<<10)+`"}`)
				r.Stages = append(r.Stages, s)
			}
		}, "more than a run may carry"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req := wire.CreateRunRequest{ClusterID: "c", Stages: []wire.StageSpec{ok()}}
			tc.mutate(&req)
			err := Check(&req)
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Check = %v, want ErrInvalid containing %q", err, tc.want)
			}
		})
	}
	req := wire.CreateRunRequest{ClusterID: "c", Stages: []wire.StageSpec{ok(), ok(), ok()}}
	req.Stages[1].Name, req.Stages[2].Name = "b", "c"
	req.Stages[0].DependsOn = []string{"c"}
	err := Check(&req)
	if err == nil || !strings.Contains(err.Error(), "a → b → c → a") {
		t.Fatalf("cycle message %v does not name the stages in order", err)
	}
}

func TestResolveRefusesWhatDoesNotFitTheCluster(t *testing.T) {
	t.Parallel()
	ns := nodes(3, func(i int) map[string]string { return map[string]string{"zone": fmt.Sprint("z", i)} })
	ns[2].Kinds = []string{"muster.io/debug.ping"}
	cases := []struct {
		name string
		spec wire.StageSpec
		want string
	}{
		{"unknown node", wire.StageSpec{Kind: "muster.io/debug.ping", Target: wire.Target{Nodes: []string{"n01", "zz"}}}, "unknown node(s) zz"},
		{"no label match", wire.StageSpec{Kind: "muster.io/debug.ping", Target: wire.Target{Labels: map[string]string{"zone": "mars"}}}, "no node has the labels zone=mars"},
		{"kind unknown to a node", wire.StageSpec{Kind: "muster.io/debug.sleep", Target: wire.Target{All: true}}, "unknown to node(s) n03"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req := wire.CreateRunRequest{ClusterID: "c", Stages: []wire.StageSpec{tc.spec}}
			if err := Check(&req); err != nil {
				t.Fatal(err)
			}
			_, err := Resolve(&req, ns, nil, nil)
			if !errors.Is(err, ErrUnresolvable) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Resolve = %v, want ErrUnresolvable containing %q", err, tc.want)
			}
		})
	}
	req := wire.CreateRunRequest{ClusterID: "c", Stages: []wire.StageSpec{{Kind: "muster.io/debug.ping", Target: wire.Target{Nodes: []string{"n03", "n01", "n03"}}}}}
	if err := Check(&req); err != nil {
		t.Fatal(err)
	}
	st, err := Resolve(&req, ns, nil, nil)
	if err != nil || !slices.Equal(st[0].Nodes, []string{"n01", "n03"}) {
		t.Fatalf("Resolve = %v, %v; want the sorted, deduplicated list", st, err)
	}
}

func TestResolveRefusesARunOverMaxChildren(t *testing.T) {
	t.Parallel()
	ns := nodes(MaxChildren/2+1, nil)
	req := wire.CreateRunRequest{ClusterID: "c", Stages: []wire.StageSpec{
		{Name: "a", Kind: "muster.io/debug.ping", Target: wire.Target{All: true}},
		{Name: "b", Kind: "muster.io/debug.ping", Target: wire.Target{All: true}},
	}}
	if err := Check(&req); err != nil {
		t.Fatal(err)
	}
	if _, err := Resolve(&req, ns, nil, nil); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "at most 10000") {
		t.Fatalf("Resolve = %v, want a refusal over %d children", err, MaxChildren)
	}
}

func TestDigestCoversWhatIsApproved(t *testing.T) {
	t.Parallel()
	base := func() []store.RunStage {
		return []store.RunStage{{Name: "a", Kind: "muster.io/debug.sleep", Args: []byte(`{"seconds":1}`),
			Nodes: []string{"n1", "n2"}, MaxConcurrency: limit.Limit{N: 1}, OnFailure: OnFailureAbort}}
	}
	d := Digest("c", base())
	for name, mutate := range map[string]func(s []store.RunStage){
		"kind":    func(s []store.RunStage) { s[0].Kind = "muster.io/debug.ping" },
		"args":    func(s []store.RunStage) { s[0].Args = []byte(`{"seconds":2}`) },
		"nodes":   func(s []store.RunStage) { s[0].Nodes = []string{"n1"} },
		"limits":  func(s []store.RunStage) { s[0].MaxConcurrency = limit.Limit{N: 2} },
		"errors":  func(s []store.RunStage) { s[0].MaxErrors = limit.Limit{N: 1} },
		"failure": func(s []store.RunStage) { s[0].OnFailure = OnFailurePause },
		"timeout": func(s []store.RunStage) { s[0].TimeoutS = 5 },
		"depends": func(s []store.RunStage) { s[0].DependsOn = []string{"x"} },
	} {
		s := base()
		mutate(s)
		if Digest("c", s) == d {
			t.Errorf("the digest does not cover %s", name)
		}
	}
	if Digest("other", base()) == d {
		t.Error("the digest does not cover the cluster")
	}
	s := base()
	s[0].Args = []byte(`{ "seconds" : 1 }`)
	s[0].State = store.StageRunning
	if Digest("c", s) != d {
		t.Error("the digest changes with args' spacing or the stage's progress")
	}
}

func TestAPausingStageNeverFailsAndAResumeGoesOn(t *testing.T) {
	t.Parallel()
	r := newRun(t, wire.CreateRunRequest{ClusterID: "c", Stages: []wire.StageSpec{{
		Kind: "muster.io/debug.sleep", Target: wire.Target{All: true}, OnFailure: OnFailurePause,
	}}}, nodes(3, nil))
	var children []Child
	apply(r, planNow(r, children), &children)
	finish(children, action.Failed, func(Child) bool { return true })
	s := planNow(r, children)
	apply(r, s, &children)
	if r.State != store.RunPaused || r.Stages[0].State != store.StageRunning {
		t.Fatalf("after the failure: run %s, stage %s; want PAUSED with the stage RUNNING", r.State, r.Stages[0].State)
	}
	// Passes go on while it is paused: the stage must not turn FAILED.
	for range 3 {
		s := planNow(r, children)
		if s.Stages[0] != store.StageRunning || s.State != store.RunPaused || len(s.Create) != 0 {
			t.Fatalf("a pass while paused: stage %s, run %s, %d created", s.Stages[0], s.State, len(s.Create))
		}
	}
	r.State, r.Stages[0].Forgiven = store.RunRunning, 1 // what Resume stores
	if s := planNow(r, children); s.State != store.RunRunning || len(s.Create) != 1 {
		t.Fatalf("after resume: %s with %d created; want RUNNING and the next child", s.State, len(s.Create))
	}
}

func TestAnAbortingStageWinsOverAPausingOne(t *testing.T) {
	t.Parallel()
	r := newRun(t, wire.CreateRunRequest{ClusterID: "c", Stages: []wire.StageSpec{
		{Name: "a", Kind: "muster.io/debug.ping", Target: wire.Target{Nodes: []string{"n01"}}, OnFailure: OnFailurePause, DependsOn: []string{}},
		{Name: "b", Kind: "muster.io/debug.ping", Target: wire.Target{Nodes: []string{"n02"}}, DependsOn: []string{}},
	}}, nodes(2, nil))
	var children []Child
	apply(r, planNow(r, children), &children)
	finish(children, action.Failed, func(Child) bool { return true })
	if s := planNow(r, children); s.State != store.RunFailed || !strings.Contains(s.Reason, "stage b") {
		t.Fatalf("both stages over their errors: %s (%s), want FAILED by stage b", s.State, s.Reason)
	}
}

// planNow decides the next step of run r given its children, now.
func planNow(r *store.Run, children []Child) Step {
	return PlanWith(r, children, PlanEnv{Now: time.Now()})
}
