package handlers

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/musterhq/muster/shared/action"
)

// The unit's command line carries the profile and the names of the
// environment's variables, never their values (any user of the host reads
// a command line).
func TestUnitArgvCarriesTheProfileAndNoValues(t *testing.T) {
	t.Parallel()
	argv := unitArgv("/usr/bin/systemd-run", UnitName("a1"), Profiles[ProfilePackageManager], []string{"TimeoutStopSec=10000ms"},
		envNames([]string{"PATH=/usr/bin", "TOKEN=s3cret"}), []string{"/usr/bin/apt-get", "install", "-y", "x"}, true)
	line := strings.Join(argv, "\n")
	for _, want := range []string{
		"--unit=muster-action-a1.service", "--wait", "--pipe", "--collect",
		"--property=CapabilityBoundingSet=CAP_CHOWN CAP_DAC_OVERRIDE CAP_FOWNER CAP_FSETID CAP_SETFCAP CAP_SETUID CAP_SETGID CAP_KILL",
		"--property=ReadWritePaths=/usr /etc -/opt -/boot /var /run",
		"--property=ProtectSystem=strict", "--property=TimeoutStopSec=10000ms", "--setenv=PATH", "--setenv=TOKEN",
	} {
		if !slices.Contains(argv, want) {
			t.Errorf("no %q in\n%s", want, line)
		}
	}
	if strings.Contains(line, "s3cret") {
		t.Fatalf("a value on the command line:\n%s", line)
	}
	if i := slices.Index(argv, "--"); i < 0 || !slices.Equal(argv[i+1:], []string{"/usr/bin/apt-get", "install", "-y", "x"}) {
		t.Fatalf("the command is not after --:\n%s", line)
	}
	// Without wait (restarts_agent): no --wait, no --pipe.
	argv = unitArgv("/usr/bin/systemd-run", UnitName("a1"), Profiles[ProfileRoot], nil, nil, []string{"/bin/true"}, false)
	if slices.Contains(argv, "--wait") || slices.Contains(argv, "--pipe") {
		t.Fatalf("detached with --wait or --pipe: %q", argv)
	}
}

// A privileged command's unit is systemd's: it does not die with the
// agent. A resumed action stops it (and waits) before it fails as
// interrupted or runs again.
func TestResumedPrivilegedKindStopsItsUnitFirst(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	systemctl := filepath.Join(dir, "systemctl")
	if err := os.WriteFile(systemctl, []byte("#!/bin/sh\necho \"$*\" >> \"$0.log\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	r, err := NewRegistry([]External{{Kind: "example.com/pkg", Run: []string{"/bin/true"}, Privileges: ProfilePackageManager}},
		Env{NodeID: "n", ClusterID: "c", SystemdRun: "/bin/false", Systemctl: systemctl})
	if err != nil {
		t.Fatal(err)
	}
	h, _ := r.Get("example.com/pkg")
	a := &action.Action{ID: action.NewID(), Kind: "example.com/pkg", Args: json.RawMessage(`{}`)}
	a.Progress, _ = json.Marshal(extProgress{Phase: phaseRunning})
	res := drive(t, context.Background(), h, NewExec(a, true))
	if res.Status != Failed || res.Message != action.ReasonInterrupted {
		t.Fatalf("%+v, want failed as interrupted", res)
	}
	b, _ := os.ReadFile(systemctl + ".log")
	if string(b) != "stop -- "+UnitName(a.ID)+"\n" {
		t.Fatalf("systemctl calls %q, want a stop of the action's unit", b)
	}
}

// Every profile's properties are ones systemd takes: a unit file made of
// them passes systemd-analyze verify.
func TestProfilesAreValidUnitProperties(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("systemd-analyze"); err != nil {
		t.Skip("no systemd-analyze here (Debian package systemd)")
	}
	for _, name := range ProfileNames() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			unit := "muster-action-test.service"
			text := "[Unit]\nDescription=test\n[Service]\nExecStart=/bin/true\n" + strings.Join(Profiles[name].properties(), "\n") + "\n"
			if err := os.WriteFile(filepath.Join(dir, unit), []byte(text), 0o644); err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command("systemd-analyze", "verify", "--man=no", unit)
			cmd.Dir = dir
			out, err := cmd.CombinedOutput()
			if err != nil || strings.Contains(string(out), unit) {
				t.Fatalf("systemd-analyze verify: %v\n%s\n%s", err, out, text)
			}
		})
	}
}

// A cancelled privileged action is over once its unit is stopped, not when
// systemd-run (which only stops waiting) exits: the stand-ins run the
// command in a session of its own, as systemd would, and systemctl stop
// returns once it has ended.
func TestCancelledPrivilegedActionEndsOnceItsUnitIsStopped(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	pid, ended, started := filepath.Join(dir, "pid"), filepath.Join(dir, "ended"), filepath.Join(dir, "started")
	sdrun := filepath.Join(dir, "systemd-run")
	if err := os.WriteFile(sdrun, []byte("#!/bin/sh\necho \"$*\" > \"$0.args\"\nwhile [ \"$1\" != -- ]; do shift; done; shift\nsetsid \"$@\" </dev/null >/dev/null 2>&1 &\nwait\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	systemctl := filepath.Join(dir, "systemctl")
	if err := os.WriteFile(systemctl, []byte("#!/bin/sh\nkill -TERM $(cat "+pid+")\ncase \"$*\" in *--no-block*) exit 0;; esac\nwhile [ ! -e "+ended+" ]; do sleep 0.05; done\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := script(t, "echo $$ > "+pid+".tmp; mv "+pid+".tmp "+pid+"\ntrap 'sleep 0.5; touch "+ended+"; exit 1' TERM\ntouch "+started+"\nwhile :; do sleep 0.05; done")
	r, err := NewRegistry([]External{{Kind: "example.com/pkg", Run: []string{"/bin/sh", cmd}, Privileges: ProfileRoot}},
		Env{NodeID: "n", ClusterID: "c", SystemdRun: sdrun, Systemctl: systemctl, Grace: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	h, _ := r.Get("example.com/pkg")
	ctx, cancel := context.WithCancel(context.Background())
	x := execFor("example.com/pkg", `{}`)
	deadline := time.Now().Add(10 * time.Second)
	res := h.Step(ctx, x)
	for res.Status == Running && time.Now().Before(deadline) {
		if exists(started) && exists(pid) {
			cancel()
		}
		time.Sleep(min(res.After, 20*time.Millisecond))
		res = h.Step(ctx, x)
	}
	cancel()
	if res.Status != Stopped {
		t.Fatalf("%+v, want stopped", res)
	}
	if !exists(ended) {
		t.Fatal("reported stopped while the unit's command still ran")
	}
	b, _ := os.ReadFile(sdrun + ".args")
	if !strings.Contains(string(b), "--property=TimeoutStopSec=3000ms") {
		t.Fatalf("no TimeoutStopSec of kill_grace in %s", b)
	}
}

// A resumed privileged check stops the old check's unit, which may outlive
// the agent, before it starts the next one under the same name.
func TestResumedPrivilegedCheckStopsTheOldCheckUnit(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	systemctl := filepath.Join(dir, "systemctl")
	if err := os.WriteFile(systemctl, []byte("#!/bin/sh\necho \"$*\" >> \"$0.log\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	sdrun := filepath.Join(dir, "systemd-run")
	if err := os.WriteFile(sdrun, []byte("#!/bin/sh\necho \"$1\" >> \"$0.log\"\nwhile [ \"$1\" != -- ]; do shift; done; shift\nexec \"$@\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	check := script(t, `echo '{"state":"DONE"}'`)
	r, err := NewRegistry([]External{{Kind: "example.com/pkg", Run: []string{"/bin/true"}, Check: []string{"/bin/sh", check}, Privileges: ProfilePackageManager}},
		Env{NodeID: "n", ClusterID: "c", SystemdRun: sdrun, Systemctl: systemctl})
	if err != nil {
		t.Fatal(err)
	}
	h, _ := r.Get("example.com/pkg")
	a := &action.Action{ID: action.NewID(), Kind: "example.com/pkg", Args: json.RawMessage(`{}`)}
	a.Progress, _ = json.Marshal(extProgress{Phase: phaseChecking})
	if res := drive(t, context.Background(), h, NewExec(a, true)); res.Status != Done {
		t.Fatalf("%+v, want done", res)
	}
	b, _ := os.ReadFile(systemctl + ".log")
	if string(b) != "stop -- "+unitFor(a.ID, true)+"\n" {
		t.Fatalf("systemctl calls %q, want a stop of the check's unit", b)
	}
	b, _ = os.ReadFile(sdrun + ".log")
	if string(b) != "--unit="+unitFor(a.ID, true)+"\n" {
		t.Fatalf("systemd-run calls %q, want the check's unit", b)
	}
}
