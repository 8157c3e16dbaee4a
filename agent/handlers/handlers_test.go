package handlers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/musterhq/muster/shared/action"
	"github.com/musterhq/muster/shared/testwait"
)

// drive calls Step like the runner does until the action is finished or the
// deadline passes. It returns the final result.
func drive(t *testing.T, ctx context.Context, h Handler, x *Exec) Result {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		res := h.Step(ctx, x)
		if res.Status != Running {
			return res
		}
		wait := min(res.After, 50*time.Millisecond)
		select {
		case <-time.After(wait):
		case <-ctx.Done():
		}
	}
	t.Fatal("handler did not finish before the deadline")
	return Result{}
}

func execFor(kind, args string) *Exec {
	return NewExec(&action.Action{ID: action.NewID(), Kind: kind, Args: json.RawMessage(args), Progress: json.RawMessage("{}")}, false)
}

func registry(t *testing.T, ext ...External) *Registry {
	t.Helper()
	r, err := NewRegistry(ext, Env{NodeID: "node-1", ClusterID: "c-1", Grace: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestBuiltinValidate(t *testing.T) {
	t.Parallel()
	r := registry(t)
	cases := []struct {
		kind, args string
		ok         bool
	}{
		{KindPing, `{}`, true},
		{KindPing, `{"x":1}`, false},
		{KindSleep, `{"seconds":1.5}`, true},
		{KindSleep, `{}`, false},
		{KindSleep, `{"seconds":-1}`, false},
		{KindSleep, `{"seconds":"1"}`, false},
		{KindSleep, `{"seconds":99999999}`, false},
		{KindFail, `{"message":"x"}`, true},
		{KindFail, `{"msg":"x"}`, false},
	}
	for _, c := range cases {
		h, _ := r.Get(c.kind)
		err := h.Validate(json.RawMessage(c.args))
		if (err == nil) != c.ok {
			t.Errorf("%s %s: err = %v, want ok=%v", c.kind, c.args, err, c.ok)
		}
		if err != nil && !errors.Is(err, ErrBadArgs) {
			t.Errorf("%s %s: error %v does not wrap ErrBadArgs", c.kind, c.args, err)
		}
	}
}

func TestPingAndFail(t *testing.T) {
	t.Parallel()
	r := registry(t)
	h, _ := r.Get(KindPing)
	x := execFor(KindPing, `{}`)
	if res := drive(t, context.Background(), h, x); res.Status != Done || strings.TrimSpace(x.Output()) != "pong" {
		t.Fatalf("ping: %+v output %q", res, x.Output())
	}
	h, _ = r.Get(KindFail)
	x = execFor(KindFail, `{"message":"disk full"}`)
	if res := drive(t, context.Background(), h, x); res.Status != Failed || res.Message != "disk full" {
		t.Fatalf("fail: %+v", res)
	}
}

func TestSleepKeepsItsDeadlineAcrossRuns(t *testing.T) {
	t.Parallel()
	r := registry(t)
	h, _ := r.Get(KindSleep)
	x := execFor(KindSleep, `{"seconds":3600}`)
	res := h.Step(context.Background(), x)
	if res.Status != Running || res.After > time.Second {
		t.Fatalf("first step: %+v", res)
	}
	var p sleepProgress
	if err := json.Unmarshal(x.Progress, &p); err != nil || time.Until(p.Deadline) < 59*time.Minute {
		t.Fatalf("progress %s: %v", x.Progress, err)
	}
	// A new run (after a restart) with the saved progress keeps the deadline.
	a := x.Action
	a.Progress = x.Progress
	y := NewExec(&a, true)
	h.Step(context.Background(), y)
	var q sleepProgress
	_ = json.Unmarshal(y.Progress, &q)
	if !q.Deadline.Equal(p.Deadline) {
		t.Fatalf("deadline moved from %s to %s", p.Deadline, q.Deadline)
	}
	// A deadline in the past finishes at once.
	a.Progress, _ = json.Marshal(sleepProgress{Deadline: time.Now().Add(-time.Second)})
	if res := h.Step(context.Background(), NewExec(&a, true)); res.Status != Done {
		t.Fatalf("past deadline: %+v", res)
	}
}

func TestSleepStopsWhenCancelled(t *testing.T) {
	t.Parallel()
	h, _ := registry(t).Get(KindSleep)
	ctx, cancel := context.WithCancel(context.Background())
	x := execFor(KindSleep, `{"seconds":3600}`)
	h.Step(ctx, x)
	cancel()
	if res := h.Step(ctx, x); res.Status == Running {
		t.Fatal("sleep keeps running after cancel")
	}
}

func script(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "s.sh")
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestExternalRunGetsRecordAndEnvironmentNotArgv(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := script(t, `cat > "`+dir+`/stdin.json"; echo "$MUSTER_ACTION_ID $MUSTER_ACTION_KIND $MUSTER_NODE_ID $MUSTER_CLUSTER_ID"; echo "argv: $*"; echo err >&2`)
	r := registry(t, External{Kind: "example.com/x", Run: []string{"/bin/sh", s, "fixed"}})
	h, _ := r.Get("example.com/x")
	x := execFor("example.com/x", `{"target":"; rm -rf /"}`)
	res := drive(t, context.Background(), h, x)
	if res.Status != Done {
		t.Fatalf("run: %+v output %q", res, x.Output())
	}
	out := x.Output()
	if !strings.Contains(out, x.Action.ID+" example.com/x node-1 c-1") {
		t.Errorf("environment missing from output %q", out)
	}
	if !strings.Contains(out, "argv: fixed\n") || !strings.Contains(out, "err\n") {
		t.Errorf("argv or stderr wrong in %q", out)
	}
	var rec action.Action
	b, _ := os.ReadFile(filepath.Join(dir, "stdin.json"))
	if err := json.Unmarshal(b, &rec); err != nil || rec.ID != x.Action.ID || string(rec.Args) != `{"target":"; rm -rf /"}` {
		t.Fatalf("stdin record %s: %v", b, err)
	}
}

func TestExternalExitCodeDecides(t *testing.T) {
	t.Parallel()
	s := script(t, `exit 3`)
	h, _ := registry(t, External{Kind: "example.com/x", Run: []string{"/bin/sh", s}}).Get("example.com/x")
	res := drive(t, context.Background(), h, execFor("example.com/x", `{}`))
	if res.Status != Failed || !strings.Contains(res.Message, "status 3") {
		t.Fatalf("result %+v", res)
	}
	h, _ = registry(t, External{Kind: "example.com/x", Run: []string{"/nonexistent/prog"}}).Get("example.com/x")
	if res := drive(t, context.Background(), h, execFor("example.com/x", `{}`)); res.Status != Failed {
		t.Fatalf("missing program: %+v", res)
	}
}

func TestExternalWithCheck(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	run := script(t, `echo started; echo 0 > "`+dir+`/n"`)
	check := script(t, `n=$(cat "`+dir+`/n"); n=$((n+1)); echo $n > "`+dir+`/n"
if [ $n -lt 3 ]; then echo "{\"state\":\"RUNNING\",\"message\":\"step $n\",\"progress\":{\"n\":$n}}"; else echo '{"state":"DONE","message":"all good"}'; fi`)
	h, _ := registry(t, External{Kind: "example.com/x", Run: []string{"/bin/sh", run}, Check: []string{"/bin/sh", check}, CheckInterval: 10 * time.Millisecond}).Get("example.com/x")
	x := execFor("example.com/x", `{}`)
	res := drive(t, context.Background(), h, x)
	if res.Status != Done {
		t.Fatalf("result %+v, output %q", res, x.Output())
	}
	for _, want := range []string{"started", "step 1", "step 2", "all good"} {
		if !strings.Contains(x.Output(), want) {
			t.Errorf("output %q lacks %q", x.Output(), want)
		}
	}
	var p extProgress
	_ = json.Unmarshal(x.Progress, &p)
	if p.Phase != phaseChecking || string(p.Check) != `{"n":2}` {
		t.Errorf("progress = %s", x.Progress)
	}
}

func TestExternalCheckBadOutputFails(t *testing.T) {
	t.Parallel()
	run := script(t, `exit 0`)
	check := script(t, `echo not json`)
	h, _ := registry(t, External{Kind: "example.com/x", Run: []string{"/bin/sh", run}, Check: []string{"/bin/sh", check}}).Get("example.com/x")
	if res := drive(t, context.Background(), h, execFor("example.com/x", `{}`)); res.Status != Failed || !strings.Contains(res.Message, "not json") {
		t.Fatalf("result %+v", res)
	}
}

func TestExternalResume(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name       string
		phase      string
		idempotent bool
		check      bool
		want       Status
		wantMsg    string
	}{
		{"running, not idempotent", phaseRunning, false, false, Failed, action.ReasonInterrupted},
		{"launching, not idempotent", phaseLaunching, false, false, Failed, action.ReasonInterrupted},
		{"running, idempotent", phaseRunning, true, false, Done, ""},
		{"checking resumes", phaseChecking, false, true, Done, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			run := script(t, `exit 0`)
			spec := External{Kind: "example.com/x", Run: []string{"/bin/sh", run}, Idempotent: c.idempotent, CheckInterval: time.Millisecond}
			if c.check {
				spec.Check = []string{"/bin/sh", script(t, `echo '{"state":"DONE"}'`)}
			}
			h, _ := registry(t, spec).Get("example.com/x")
			a := &action.Action{ID: action.NewID(), Kind: "example.com/x", Args: json.RawMessage(`{}`)}
			a.Progress, _ = json.Marshal(extProgress{Phase: c.phase})
			res := drive(t, context.Background(), h, NewExec(a, true))
			if res.Status != c.want || res.Message != c.wantMsg {
				t.Fatalf("result %+v, want status %v message %q", res, c.want, c.wantMsg)
			}
		})
	}
}

func TestExternalCancelEndsTheWholeProcessGroup(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	// The command starts a grandchild that ignores nothing and records its pid;
	// the command itself ignores SIGTERM, so only SIGKILL after the grace ends it.
	s := script(t, `trap '' TERM; sleep 300 & echo $! > "`+dir+`/child"; echo $$ > "`+dir+`/self"; wait`)
	h, _ := registry(t, External{Kind: "example.com/x", Run: []string{"/bin/sh", s}}).Get("example.com/x")
	ctx, cancel := context.WithCancel(context.Background())
	x := execFor("example.com/x", `{}`)
	for i := 0; i < 2; i++ { // launching, then start
		h.Step(ctx, x)
	}
	child := waitPid(t, filepath.Join(dir, "child"))
	self := waitPid(t, filepath.Join(dir, "self"))
	cancel()
	start := time.Now()
	res := drive(t, ctx, h, x)
	if res.Status == Running {
		t.Fatal("still running")
	}
	if time.Since(start) < 400*time.Millisecond {
		t.Errorf("a process ignoring SIGTERM ended before the grace period")
	}
	// SIGKILL has been sent to the whole group when drive returns; the
	// kernel ends its processes a moment later.
	for _, pid := range []int{self, child} {
		testwait.For(t, fmt.Sprintf("pid %d ended after cancel", pid), func() bool { return !alive(pid) })
	}
}

func waitPid(t *testing.T, file string) int {
	t.Helper()
	return testwait.Value(t, "a pid in "+file, func() (int, bool) {
		b, err := os.ReadFile(file)
		n, perr := strconv.Atoi(strings.TrimSpace(string(b)))
		return n, err == nil && perr == nil
	})
}

// alive reports whether pid exists and is not a zombie.
func alive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	f := strings.Fields(string(b))
	return len(f) > 2 && f[2] != "Z"
}

func TestExternalValidate(t *testing.T) {
	t.Parallel()
	good := External{Kind: "example.com/db.backup", Run: []string{"/usr/local/bin/backup", "start"}}
	if errs := good.Validate(0); len(errs) != 0 {
		t.Fatalf("good spec: %v", errs)
	}
	bad := External{Kind: "muster.io/x", Run: nil, Timeout: -1}
	if errs := bad.Validate(0); len(errs) != 3 {
		t.Fatalf("bad spec: %d errors %v", len(errs), errs)
	}
	if _, err := NewRegistry([]External{good, good}, Env{}); err == nil {
		t.Fatal("duplicate kind accepted")
	}
}

// A kind's args_schema: a bad one is a config error naming the field; a
// good one makes Validate refuse args that break it, naming the field, and
// is announced by the registry.
func TestExternalArgsSchema(t *testing.T) {
	t.Parallel()
	bad := External{Kind: "example.com/x", Run: []string{"/bin/true"}, ArgsSchema: `{"type": "banana"}`}
	if errs := bad.Validate(0); len(errs) != 1 || errs[0].Field != "actions.external[0].args_schema" {
		t.Fatalf("bad schema: %v", errs)
	}
	if _, err := NewRegistry([]External{bad}, Env{}); err == nil {
		t.Fatal("a registry was made with a bad schema")
	}
	good := External{Kind: "example.com/pkg.upgrade", Run: []string{"/bin/true"},
		ArgsSchema: "type: object\nrequired: [version]\nproperties: {version: {type: string}}\n"}
	r, err := NewRegistry([]External{good}, Env{})
	if err != nil {
		t.Fatal(err)
	}
	h, _ := r.Get(good.Kind)
	if err := h.Validate(json.RawMessage(`{"version": 3}`)); !errors.Is(err, ErrBadArgs) || !strings.Contains(err.Error(), "args.version") {
		t.Fatalf("bad args: %v", err)
	}
	if err := h.Validate(json.RawMessage(`{"version": "3"}`)); err != nil {
		t.Fatalf("good args: %v", err)
	}
	if s := r.Schemas(); len(s) != 1 || !json.Valid(s[good.Kind]) {
		t.Fatalf("schemas: %v", s)
	}
}

// Item 8 of the attack review: a command's environment is an allowlist
// (PATH, LANG, TZ, the action's MUSTER_* variables, $MUSTER_OUTPUTS included)
// plus its kind's env, never
// the agent's own: its token and cloud credentials stayed out of the output.
// Not parallel: it sets the process environment, which the agent would have.
func TestExternalCommandEnvironmentIsAnAllowlist(t *testing.T) {
	t.Setenv("AWS_SECRET_ACCESS_KEY", "leaked-aws-secret")
	t.Setenv("MUSTER_TOKEN", "mst_leaked-token")
	t.Setenv("TZ", "Europe/Paris")
	r := registry(t, External{Kind: "example.com/env", Run: []string{"/usr/bin/env"},
		Env: []string{"BACKUP_BUCKET=s3://backups", "PATH=/usr/bin:/bin"}})
	h, _ := r.Get("example.com/env")
	x := execFor("example.com/env", `{}`)
	if res := drive(t, context.Background(), h, x); res.Status != Done {
		t.Fatalf("run: %+v output %q", res, x.Output())
	}
	got := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(x.Output()), "\n") {
		k, v, _ := strings.Cut(line, "=")
		got[k] = v
	}
	for _, k := range []string{"AWS_SECRET_ACCESS_KEY", "MUSTER_TOKEN", "HOME"} {
		if _, ok := got[k]; ok {
			t.Errorf("the command sees the agent's %s", k)
		}
	}
	want := map[string]string{
		"BACKUP_BUCKET": "s3://backups", "PATH": "/usr/bin:/bin", "TZ": "Europe/Paris",
		"MUSTER_ACTION_ID": x.Action.ID, "MUSTER_ACTION_KIND": "example.com/env",
		"MUSTER_NODE_ID": "node-1", "MUSTER_CLUSTER_ID": "c-1",
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %q, want %q", k, got[k], v)
		}
	}
	if got["MUSTER_OUTPUTS"] != "/dev/fd/3" {
		t.Errorf("MUSTER_OUTPUTS = %q, want the outputs file", got["MUSTER_OUTPUTS"])
	}
	for k := range got {
		if _, ok := want[k]; !ok && k != "LANG" && k != "MUSTER_OUTPUTS" {
			t.Errorf("unexpected variable %s in the command's environment", k)
		}
	}
}

// Issue 38: the trace context the core pushed with an action reaches the
// kind's command as $TRACEPARENT, so that its own spans join the trace; an
// action pushed without one sets none.
func TestExternalCommandGetsTheActionsTraceparent(t *testing.T) {
	t.Parallel()
	r := registry(t, External{Kind: "example.com/env", Run: []string{"/usr/bin/env"}})
	h, _ := r.Get("example.com/env")
	const tp = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	for _, tc := range []struct{ name, traceparent string }{{"pushed with one", tp}, {"pushed without", ""}} {
		x := execFor("example.com/env", `{}`)
		x.Action.Traceparent = tc.traceparent
		if res := drive(t, context.Background(), h, x); res.Status != Done {
			t.Fatalf("%s: run: %+v output %q", tc.name, res, x.Output())
		}
		var got []string
		for _, line := range strings.Split(x.Output(), "\n") {
			if v, ok := strings.CutPrefix(line, "TRACEPARENT="); ok {
				got = append(got, v)
			}
		}
		want := []string{tc.traceparent}
		if tc.traceparent == "" {
			want = nil
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s: TRACEPARENT in the environment %q, want %q", tc.name, got, want)
		}
	}
}

func TestExternalEnvValidation(t *testing.T) {
	t.Parallel()
	for name, env := range map[string][]string{
		"reserved prefix": {"MUSTER_NODE_ID=x"},
		"no equals":       {"A"},
		"empty name":      {"=x"},
		"NUL in value":    {"A=x\x00y"},
		"twice":           {"A=1", "A=2"},
	} {
		e := External{Kind: "example.com/x", Run: []string{"/bin/true"}, Env: env}
		if errs := e.Validate(0); len(errs) != 1 || !strings.Contains(errs[0].Error(), "actions.external[0].env") {
			t.Errorf("%s: %v", name, errs)
		}
	}
}

// Issue 30, item 7: a command that has exited is judged by its exit status
// even when the step that sees the exit comes after the deadline (or a
// cancel): the deadline applies only to a command still running.
func TestExitedCommandIsJudgedByItsExitStatusAfterTheDeadline(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, body string
		want       Status
		message    string
	}{
		{"exit 0", "exit 0", Done, ""},
		{"exit 3", "exit 3", Failed, "run exited with status 3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := script(t, tc.body)
			h, _ := registry(t, External{Kind: "example.com/x", Run: []string{"/bin/sh", s}}).Get("example.com/x")
			ctx, cancel := context.WithCancelCause(context.Background())
			x := execFor("example.com/x", `{}`)
			for range 2 { // launching, then start
				h.Step(ctx, x)
			}
			proc := x.State.(*extState).proc
			testwait.For(t, "the command to exit", proc.exited)
			cancel(errors.New("timeout"))
			res := drive(t, ctx, h, x)
			if res.Status != tc.want || res.Message != tc.message {
				t.Fatalf("the command had exited (%s) before the deadline; result %+v", tc.body, res)
			}
		})
	}
}

// The exit is seen as soon as the kernel has it, before the goroutine that
// waits for the process has run (an agent that wakes from SIGSTOP after its
// command exited runs its runner and that goroutine in any order).
func TestExitSeenBeforeItsWaiterRuns(t *testing.T) {
	t.Parallel()
	cmd := exec.Command("/bin/sh", "-c", "exit 0")
	cmd.SysProcAttr = procAttr()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &process{cmd: cmd, done: make(chan struct{})} // nobody waits for it yet
	testwait.For(t, "the command to be a zombie", func() bool { return zombie(cmd.Process.Pid) })
	if p.exited() {
		t.Fatal("done is closed with no waiter")
	}
	if !p.hasExited() {
		t.Fatal("an exited command is not seen as exited before its waiter runs")
	}
	_ = cmd.Wait() // the kernel's check left the exit status to the waiter
	if cmd.ProcessState.ExitCode() != 0 {
		t.Fatalf("exit code %d after the check", cmd.ProcessState.ExitCode())
	}
}

// zombie reports whether pid has exited and not been waited for.
func zombie(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i >= 0 && len(s) > i+2 && s[i+2] == 'Z'
}
