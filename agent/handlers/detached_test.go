package handlers

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/musterhq/muster/shared/action"
)

// detachedSetup is a restarts_agent kind whose systemd-run stand-in starts
// the command after -- in a session of its own (as a unit apart from the
// agent) and logs each call; the command appends to runs.
func detachedSetup(t *testing.T) (h Handler, stateDir, calls, runs string) {
	t.Helper()
	dir := t.TempDir()
	stateDir, calls, runs = filepath.Join(dir, "state"), filepath.Join(dir, "calls"), filepath.Join(dir, "runs")
	sdrun := filepath.Join(dir, "systemd-run")
	if err := os.WriteFile(sdrun, []byte("#!/bin/sh\necho call >> "+calls+"\nwhile [ \"$1\" != -- ]; do shift; done; shift\nsetsid \"$@\" </dev/null >/dev/null 2>&1 &\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := script(t, `echo "ran $MUSTER_AGENT_VERSION"; echo x >> `+runs)
	r, err := NewRegistry([]External{{Kind: "example.com/up", Run: []string{"/bin/sh", cmd}, Privileges: ProfilePackageManager, RestartsAgent: true}},
		Env{NodeID: "n", ClusterID: "c", Version: "9.9.9", SystemdRun: sdrun, Systemctl: "/bin/true", StateDir: stateDir})
	if err != nil {
		t.Fatal(err)
	}
	h, _ = r.Get("example.com/up")
	return h, stateDir, calls, runs
}

func lineCount(path string) int {
	b, _ := os.ReadFile(path)
	return strings.Count(string(b), "\n")
}

// Launched apart, the command's status and output finish the action.
func TestDetachedRunsOnceAndReportsItsResult(t *testing.T) {
	t.Parallel()
	h, _, calls, runs := detachedSetup(t)
	x := NewExec(&action.Action{ID: action.NewID(), Kind: "example.com/up", Args: json.RawMessage(`{}`)}, false)
	res := drive(t, context.Background(), h, x)
	if res.Status != Done || !strings.Contains(x.Output(), "ran 9.9.9") {
		t.Fatalf("%+v, output:\n%s", res, x.Output())
	}
	if lineCount(calls) != 1 || lineCount(runs) != 1 {
		t.Fatalf("systemd-run called %d times, the command ran %d times; want once each", lineCount(calls), lineCount(runs))
	}
}

// A resumed action whose marker was claimed (launched) is never launched
// again, whatever its committed phase; one whose marker is still pending is
// launched once.
func TestDetachedResumeLaunchesAtMostOnce(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, marker, phase string
		launches            int
	}{
		{"claimed, phase launching", detachedLaunched, phaseLaunching, 0},
		{"claimed, phase running", detachedLaunched, phaseRunning, 0},
		{"pending, phase launching", detachedPending, phaseLaunching, 1},
		{"no marker, phase launching", "", phaseLaunching, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h, stateDir, calls, runs := detachedSetup(t)
			a := &action.Action{ID: action.NewID(), Kind: "example.com/up", Args: json.RawMessage(`{}`)}
			a.Progress, _ = json.Marshal(extProgress{Phase: tc.phase})
			dir := filepath.Join(stateDir, DetachedDir, a.ID)
			if err := os.MkdirAll(dir, 0o700); err != nil {
				t.Fatal(err)
			}
			if tc.marker != "" {
				if err := os.WriteFile(filepath.Join(dir, tc.marker), nil, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			x := NewExec(a, true)
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			res := drive(t, ctx, h, x)
			if got := lineCount(calls); got != tc.launches {
				t.Fatalf("launched %d times, want %d", got, tc.launches)
			}
			if tc.launches == 0 {
				if res.Status != Stopped || lineCount(runs) != 0 {
					t.Fatalf("%+v, ran %d times: want stopped at the deadline, never run", res, lineCount(runs))
				}
				return
			}
			if res.Status != Done || lineCount(runs) != 1 {
				t.Fatalf("%+v, ran %d times; output:\n%s", res, lineCount(runs), x.Output())
			}
		})
	}
}

// CleanDetached removes the directories of finished actions only.
func TestCleanDetachedKeepsUnfinishedActions(t *testing.T) {
	t.Parallel()
	state := t.TempDir()
	for _, id := range []string{"done", "running"} {
		if err := os.MkdirAll(filepath.Join(state, DetachedDir, id), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if err := CleanDetached(state, func(id string) bool { return id == "done" }); err != nil {
		t.Fatal(err)
	}
	if exists(filepath.Join(state, DetachedDir, "done")) || !exists(filepath.Join(state, DetachedDir, "running")) {
		t.Fatal("removed the wrong directories")
	}
}

// The agent that reads a detached command's output (maybe not the one that
// launched it) redacts the secrets its args referenced.
func TestDetachedOutputIsRedactedByTheNextAgent(t *testing.T) {
	t.Parallel()
	res, x := resumeSecretDetached(t, Env{StateDir: t.TempDir(), Secrets: func(name string) (string, error) { return "hunter2", nil }})
	if res.Status != Done || strings.Contains(x.Output(), "hunter2") || !strings.Contains(x.Output(), "[redacted:tok]") {
		t.Fatalf("%+v, output:\n%s", res, x.Output())
	}
}

// resumeSecretDetached finishes, as an agent with env would at its start, a
// detached action whose args reference secret tok and whose command printed
// "token is hunter2" and exited 0.
func resumeSecretDetached(t *testing.T, env Env) (Result, *Exec) {
	t.Helper()
	id := action.NewID()
	detachedFiles(t, env.StateDir, id, map[string]string{detachedLaunched: "", detachedOutput: "token is hunter2\n", detachedStatus: "0\n"})
	r, err := NewRegistry([]External{{Kind: "example.com/up", Run: []string{"/bin/true"}, Privileges: ProfileRoot, RestartsAgent: true}}, env)
	if err != nil {
		t.Fatal(err)
	}
	h, _ := r.Get("example.com/up")
	a := &action.Action{ID: id, Kind: "example.com/up", Args: json.RawMessage(`{"token":"{{ secret \"tok\" }}"}`)}
	a.Progress, _ = json.Marshal(extProgress{Phase: phaseRunning})
	x := NewExec(a, true)
	return drive(t, context.Background(), h, x), x
}

// detachedFiles makes an action's directory with the given files.
func detachedFiles(t *testing.T, stateDir, id string, files map[string]string) string {
	t.Helper()
	d := filepath.Join(stateDir, DetachedDir, id)
	if err := os.MkdirAll(d, 0o700); err != nil {
		t.Fatal(err)
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(d, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return d
}

// The record, with the secrets its args reference resolved, is removed
// whenever the launch fails: systemd-run missing, or exiting non-zero with
// the unit not running.
func TestDetachedLaunchFailureRemovesTheRecord(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	systemctl := filepath.Join(dir, "systemctl")
	if err := os.WriteFile(systemctl, []byte("#!/bin/sh\necho inactive\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, sdrun := range map[string]string{"missing": filepath.Join(dir, "nothing"), "fails": "/bin/false"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			state := t.TempDir()
			r, err := NewRegistry([]External{{Kind: "example.com/up", Run: []string{"/bin/true"}, Privileges: ProfileRoot, RestartsAgent: true}},
				Env{StateDir: state, SystemdRun: sdrun, Systemctl: systemctl, Secrets: func(string) (string, error) { return "hunter2", nil }})
			if err != nil {
				t.Fatal(err)
			}
			h, _ := r.Get("example.com/up")
			a := &action.Action{ID: action.NewID(), Kind: "example.com/up", Args: json.RawMessage(`{"token":"{{ secret \"tok\" }}"}`)}
			res := drive(t, context.Background(), h, NewExec(a, false))
			if res.Status != Failed {
				t.Fatalf("%+v, want failed", res)
			}
			if exists(filepath.Join(state, DetachedDir, a.ID, detachedRecord)) {
				t.Fatal("the record (secrets resolved) is left on disk after a failed launch")
			}
		})
	}
}

// The agent that reads the status removes the record the wrapper did not
// (it never started, or stopped before its rm).
func TestDetachedResultRemovesTheRecord(t *testing.T) {
	t.Parallel()
	state := t.TempDir()
	id := action.NewID()
	d := detachedFiles(t, state, id, map[string]string{detachedLaunched: "", detachedRecord: `{"args":{"token":"hunter2"}}`, detachedStatus: "1\n"})
	r, err := NewRegistry([]External{{Kind: "example.com/up", Run: []string{"/bin/true"}, Privileges: ProfileRoot, RestartsAgent: true}}, Env{StateDir: state})
	if err != nil {
		t.Fatal(err)
	}
	h, _ := r.Get("example.com/up")
	a := &action.Action{ID: id, Kind: "example.com/up", Args: json.RawMessage(`{}`)}
	a.Progress, _ = json.Marshal(extProgress{Phase: phaseRunning})
	if res := drive(t, context.Background(), h, NewExec(a, true)); res.Status != Failed {
		t.Fatalf("%+v, want failed (status 1)", res)
	}
	if exists(filepath.Join(d, detachedRecord)) {
		t.Fatal("the record is left after the status was read")
	}
}

// CleanDetached removes the record of every action whose command is not
// running: ended (a status) or never launched.
func TestCleanDetachedRemovesRecordsOfActionsNotRunning(t *testing.T) {
	t.Parallel()
	state := t.TempDir()
	ended := detachedFiles(t, state, "ended", map[string]string{detachedLaunched: "", detachedRecord: "{}", detachedStatus: "0\n"})
	pending := detachedFiles(t, state, "pending", map[string]string{detachedPending: "", detachedRecord: "{}"})
	running := detachedFiles(t, state, "running", map[string]string{detachedLaunched: "", detachedRecord: "{}"})
	if err := CleanDetached(state, func(string) bool { return false }); err != nil {
		t.Fatal(err)
	}
	if exists(filepath.Join(ended, detachedRecord)) || exists(filepath.Join(pending, detachedRecord)) {
		t.Fatal("a record left for an action not running")
	}
	if !exists(filepath.Join(running, detachedRecord)) || !exists(filepath.Join(ended, detachedStatus)) {
		t.Fatal("removed the record of a launch in flight, or more than the record")
	}
}

// When the next agent cannot read a secret the args reference, it cannot
// redact the output: it withholds it, and says why.
func TestDetachedOutputIsWithheldWhenASecretCannotBeRead(t *testing.T) {
	t.Parallel()
	res, x := resumeSecretDetached(t, Env{StateDir: t.TempDir()})
	if res.Status != Done || strings.Contains(x.Output(), "hunter2") || !strings.Contains(x.Output(), "withheld") {
		t.Fatalf("%+v, output:\n%s", res, x.Output())
	}
}

// systemd-run may fail with the unit started all the same: while systemctl
// says the unit is active, the agent waits for its status.
func TestDetachedWaitsWhenSystemdRunFailsButTheUnitRuns(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	sdrun := filepath.Join(dir, "systemd-run")
	if err := os.WriteFile(sdrun, []byte("#!/bin/sh\nwhile [ \"$1\" != -- ]; do shift; done; shift\nsetsid \"$@\" </dev/null >/dev/null 2>&1 &\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	systemctl := filepath.Join(dir, "systemctl")
	if err := os.WriteFile(systemctl, []byte("#!/bin/sh\necho \"$*\" >> \"$0.log\"\necho active\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	// The command outlives systemd-run's exit by far.
	cmd := script(t, `sleep 1; echo upgraded`)
	state := filepath.Join(dir, "state")
	r, err := NewRegistry([]External{{Kind: "example.com/up", Run: []string{"/bin/sh", cmd}, Privileges: ProfileRoot, RestartsAgent: true}},
		Env{StateDir: state, SystemdRun: sdrun, Systemctl: systemctl})
	if err != nil {
		t.Fatal(err)
	}
	h, _ := r.Get("example.com/up")
	x := NewExec(&action.Action{ID: action.NewID(), Kind: "example.com/up", Args: json.RawMessage(`{}`)}, false)
	res := drive(t, context.Background(), h, x)
	if res.Status != Done || !strings.Contains(x.Output(), "upgraded") {
		t.Fatalf("%+v, output:\n%s", res, x.Output())
	}
	b, _ := os.ReadFile(systemctl + ".log")
	if !strings.Contains(string(b), "show -p ActiveState --value -- "+UnitName(x.Action.ID)) {
		t.Fatalf("systemctl calls %q: the unit's state was not asked", b)
	}
}

// Of two claims of one launch marker, one only succeeds, even when a
// second pending marker was written after the first claim.
func TestDetachedClaimSucceedsOnce(t *testing.T) {
	t.Parallel()
	d := detachedFiles(t, t.TempDir(), "a", map[string]string{detachedPending: ""})
	if err := claimLaunch(d); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(d, detachedPending), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := claimLaunch(d); err == nil {
		t.Fatal("claimed twice")
	}
}

// The unit of a restarts_agent kind may write its action's directory
// (which the profile's writable paths may not include), and is stopped
// within kill_grace.
func TestDetachedUnitMayWriteItsDirectory(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	sdrun := filepath.Join(dir, "systemd-run")
	if err := os.WriteFile(sdrun, []byte("#!/bin/sh\necho \"$*\" > \"$0.args\"\nwhile [ \"$1\" != -- ]; do shift; done; shift\nsetsid \"$@\" </dev/null >/dev/null 2>&1 &\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(dir, "state")
	r, err := NewRegistry([]External{{Kind: "example.com/up", Run: []string{"/bin/true"}, Privileges: ProfilePackageManager, RestartsAgent: true}},
		Env{StateDir: state, SystemdRun: sdrun, Systemctl: "/bin/true", Grace: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	h, _ := r.Get("example.com/up")
	x := NewExec(&action.Action{ID: action.NewID(), Kind: "example.com/up", Args: json.RawMessage(`{}`)}, false)
	if res := drive(t, context.Background(), h, x); res.Status != Done {
		t.Fatalf("%+v, output:\n%s", res, x.Output())
	}
	b, _ := os.ReadFile(sdrun + ".args")
	for _, want := range []string{"--property=ReadWritePaths=" + filepath.Join(state, DetachedDir, x.Action.ID) + " ", "--property=TimeoutStopSec=2000ms "} {
		if !strings.Contains(string(b), want) {
			t.Errorf("no %q in %s", want, b)
		}
	}
}

// A cancelled restarts_agent action is over once its unit is stopped; its
// record is gone by then.
func TestCancelledDetachedActionEndsOnceItsUnitIsStopped(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	pid, ended := filepath.Join(dir, "pid"), filepath.Join(dir, "ended")
	sdrun := filepath.Join(dir, "systemd-run")
	if err := os.WriteFile(sdrun, []byte("#!/bin/sh\nwhile [ \"$1\" != -- ]; do shift; done; shift\nsetsid \"$@\" </dev/null >/dev/null 2>&1 &\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	systemctl := filepath.Join(dir, "systemctl")
	if err := os.WriteFile(systemctl, []byte("#!/bin/sh\nkill -TERM $(cat "+pid+")\ncase \"$*\" in *--no-block*) exit 0;; esac\nwhile [ ! -e "+ended+" ]; do sleep 0.05; done\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := script(t, "trap 'sleep 0.5; touch "+ended+"; exit 1' TERM\necho $$ > "+pid+".tmp; mv "+pid+".tmp "+pid+"\nwhile :; do sleep 0.05; done")
	state := filepath.Join(dir, "state")
	r, err := NewRegistry([]External{{Kind: "example.com/up", Run: []string{"/bin/sh", cmd}, Privileges: ProfileRoot, RestartsAgent: true}},
		Env{StateDir: state, SystemdRun: sdrun, Systemctl: systemctl, Secrets: func(string) (string, error) { return "hunter2", nil }})
	if err != nil {
		t.Fatal(err)
	}
	h, _ := r.Get("example.com/up")
	a := &action.Action{ID: action.NewID(), Kind: "example.com/up", Args: json.RawMessage(`{"token":"{{ secret \"tok\" }}"}`)}
	x := NewExec(a, false)
	ctx, cancel := context.WithCancel(context.Background())
	deadline := time.Now().Add(10 * time.Second)
	res := h.Step(ctx, x)
	for res.Status == Running && time.Now().Before(deadline) {
		if exists(pid) {
			cancel()
		}
		time.Sleep(min(res.After, 20*time.Millisecond))
		res = h.Step(ctx, x)
	}
	cancel()
	if res.Status != Stopped && res.Status != Failed {
		t.Fatalf("%+v, want stopped (or failed by its own exit status)", res)
	}
	if !exists(ended) {
		t.Fatal("reported over while the unit's command still ran")
	}
	if exists(filepath.Join(state, DetachedDir, a.ID, detachedRecord)) {
		t.Fatal("the record is left after the action ended")
	}
}
