//go:build linux

package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/musterhq/muster/shared/action"
	"github.com/musterhq/muster/shared/client"
	"github.com/musterhq/muster/shared/testwait"
)

// bootSystemd is the shell script bootedSystemd runs in a PID and a mount
// namespace of their own: it makes a temporary root ($1) that is this
// machine's root seen through an overlay whose writes go to a tmpfs, binds
// the test's directory ($2) into it, and starts systemd there as the
// namespace's first process. Nothing systemd, dpkg or the agent write
// there reaches the machine: only the test's directory is shared. The
// kernel's settings (/proc/sys, /sys but its cgroup hierarchies, which
// systemd needs) are read-only in there, and the host name and IPC are the
// namespace's own (unshare --uts --ipc), so systemd's start changes none of
// the machine's. /dev is the machine's: the masked units are those that
// would act on devices.
//
// systemd boots a target of its own, muster-e2e.target, with no unit of
// this machine's boot: every unit that sysinit, sockets, timers, paths and
// basic targets pull in (udev, which would replay the machine's devices;
// sysctl, binfmt, modules and the clock, which are the kernel's, shared
// with the machine; tmpfiles; getty) is masked in /run, except the journal.
// A unit started later (muster-agent.service, a transient unit of
// systemd-run) still orders itself after those targets, which are then
// reached with nothing in them.
const bootSystemd = `set -eu
w=$1 share=$2
mount -t tmpfs tmpfs "$w"
mkdir "$w/up" "$w/work" "$w/root"
r=$w/root
mount -t overlay overlay -o lowerdir=/,upperdir="$w/up",workdir="$w/work" "$r"
mount --rbind /dev "$r/dev"
mount -t proc proc "$r/proc"
mount --bind "$r/proc/sys" "$r/proc/sys"
mount -o remount,bind,ro "$r/proc/sys"
if [ -e "$r/proc/sysrq-trigger" ]; then
	mount --bind "$r/proc/sysrq-trigger" "$r/proc/sysrq-trigger"
	mount -o remount,bind,ro "$r/proc/sysrq-trigger"
fi
mount --rbind /sys "$r/sys"
mount -o remount,bind,ro "$r/sys"
mount -t tmpfs tmpfs "$r/run"
mount --bind "$share" "$r$share"
u=$r/run/systemd/system
mkdir -p "$u"
printf '[Unit]\nDescription=muster end-to-end tests\nWants=basic.target dbus.socket\nAfter=basic.target dbus.socket\n' > "$u/muster-e2e.target"
for d in /lib/systemd/system /etc/systemd/system; do
	for t in sysinit sockets timers paths basic local-fs remote-fs getty multi-user; do
		for f in "$d/$t.target.wants"/*; do
			[ -e "$f" ] || [ -L "$f" ] || continue
			case ${f##*/} in systemd-journald* | dbus.*) continue ;; esac
			ln -sf /dev/null "$u/${f##*/}"
		done
	done
done
exec chroot "$r" /usr/bin/env -i container=muster-e2e PATH=/usr/sbin:/usr/bin:/sbin:/bin \
	/lib/systemd/systemd --unit=muster-e2e.target --log-target=console --log-level=notice
`

// bootedSystemd is a real systemd, PID 1 of its namespace, on a temporary
// root (bootSystemd). pid is its process id on this machine; root reaches
// its files from here (/proc/PID/root).
type bootedSystemd struct {
	pid  int
	root string
	log  string
}

// needSystemd skips the test when not root, and fails when what it needs
// is missing (CI installs systemd: make test-deps).
func needSystemd(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: it boots systemd in namespaces of its own (CI runs as root)")
	}
	for _, tool := range []string{"unshare", "nsenter", "chroot", "dpkg", "dpkg-deb", "apt-get", "/lib/systemd/systemd", "systemctl", "systemd-run", "dbus-daemon"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("no %s here: make test-deps installs what the tests need", tool)
		}
	}
}

// bootSystemdIn boots systemd (bootSystemd) with dir shared, and waits
// until it runs. The test's cleanup kills it, and with it every process
// of its namespace.
func bootSystemdIn(t *testing.T, dir string) *bootedSystemd {
	t.Helper()
	w := filepath.Join(dir, "overlay")
	if err := os.Mkdir(w, 0o700); err != nil {
		t.Fatal(err)
	}
	s := &bootedSystemd{log: filepath.Join(dir, "systemd.log")}
	f, err := os.Create(s.log)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	// --kill-child and the parent-death signal: if the test process dies
	// without its cleanup (a timeout, a crash), the namespace's systemd,
	// and with it every process of the namespace, dies too.
	cmd := exec.Command("unshare", "--pid", "--fork", "--kill-child", "--mount", "--uts", "--ipc", "--propagation", "private",
		"--", "/bin/sh", "-c", bootSystemd, "boot", w, dir)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		if s.pid > 0 {
			_ = syscall.Kill(s.pid, syscall.SIGKILL)
		}
		_ = cmd.Process.Kill()
		<-exited
	})
	children := fmt.Sprintf("/proc/%d/task/%d/children", cmd.Process.Pid, cmd.Process.Pid)
	testwait.Within(t, 30*time.Second, "unshare's child, systemd", func() bool {
		b, _ := os.ReadFile(children)
		if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
			s.pid = pid
			return true
		}
		return false
	})
	s.root = fmt.Sprintf("/proc/%d/root", s.pid)
	testwait.Within(t, time.Minute, "systemd running", func() bool {
		select {
		case err := <-exited:
			exited <- err
			t.Fatalf("systemd exited: %v\n%s", err, s.logs())
		default:
		}
		out, _ := s.command("systemctl", "is-system-running")
		state := strings.TrimSpace(string(out))
		return state == "running" || state == "degraded"
	})
	return s
}

// command runs name with args inside the booted system: its namespaces,
// root and working directory.
func (s *bootedSystemd) command(name string, args ...string) ([]byte, error) {
	cmd := exec.Command("nsenter", append([]string{"-t", strconv.Itoa(s.pid), "-m", "-p", "-r", "-w", "--", name}, args...)...)
	cmd.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "DEBIAN_FRONTEND=noninteractive", "LANG=C"}
	return cmd.CombinedOutput()
}

// run is command that must succeed.
func (s *bootedSystemd) run(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := s.command(name, args...)
	if err != nil {
		t.Fatalf("%s %s in the booted system: %v\n%s\n%s", name, strings.Join(args, " "), err, out, s.logs())
	}
	return string(out)
}

// logs are systemd's console and the agent's journal, for a failure.
func (s *bootedSystemd) logs() string {
	b, _ := os.ReadFile(s.log)
	j, _ := s.command("journalctl", "--no-pager", "-n", "80", "-u", "muster-agent", "-u", "muster-action-*")
	return fmt.Sprintf("systemd:\n%s\njournal:\n%s", b, j)
}

// mainPID is the main process of unit, as systemd tells it (0: none).
func (s *bootedSystemd) mainPID(t *testing.T, unit string) int {
	t.Helper()
	pid, err := strconv.Atoi(strings.TrimSpace(s.run(t, "systemctl", "show", "-p", "MainPID", "--value", unit)))
	if err != nil {
		t.Fatal(err)
	}
	return pid
}

// TestSystemdAgentUnitRunsPrivilegedKindsAndUpgradesItself: muster-agent's
// package, installed with dpkg into a machine where systemd runs (booted
// by the test in namespaces of its own, on a throwaway root), under its
// shipped unit and that unit's sandbox, with no stand-in:
//
//   - an ordinary kind runs under the agent's unit and cannot chown;
//   - a kind with privileges: package-manager runs in a transient unit of
//     systemd-run with the profile, and installs a .deb with dpkg, the
//     archive's owners and modes kept;
//   - a restarts_agent kind (docs/operations.md's upgrade kind) installs the
//     next muster-agent package with apt-get while an action waits behind
//     it: the package's postinst has systemd restart the agent
//     (try-restart) under the running action, the new agent (v1.0.1, a
//     new main process of the same unit) records the upgrade DONE, once,
//     and runs the queued action; the queue is the same store;
//   - the package's postinst never starts a stopped agent: the unit
//     stopped, the package configured again, it stays stopped.
func TestSystemdAgentUnitRunsPrivilegedKindsAndUpgradesItself(t *testing.T) {
	t.Parallel()
	needSystemd(t)
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil { // apt's _apt reads the .debs
		t.Fatal(err)
	}
	start := time.Now()
	v2agent := buildAgentVersion(t, dir, "v1.0.1")
	old := buildPackages(t, filepath.Join(dir, "dist1"), "v1.0.0", binary, agentBinary, "deb")
	newer := buildPackages(t, filepath.Join(dir, "dist2"), "v1.0.1", binary, v2agent, "deb")
	if len(old) != 2 || len(newer) != 2 {
		t.Fatalf("packaging printed %q and %q, want two .debs each", old, newer)
	}
	oldDeb, newDeb := old[1], newer[1]
	testPkg := fmt.Sprintf("muster-e2e-sd-%d", time.Now().UnixNano())
	deb := testDeb(t, dir, testPkg, "1.0")
	t.Logf("packages built in %s", time.Since(start).Round(time.Second))

	booted := time.Now()
	sd := bootSystemdIn(t, dir)
	t.Logf("systemd running in %s", time.Since(booted).Round(time.Millisecond))
	root := sd.root
	// The packages are on the node where a fleet puts them, not in /tmp,
	// which every unit of a profile has its own of (PrivateTmp).
	cache := "/var/cache/muster-e2e"
	if err := os.MkdirAll(filepath.Join(root, cache), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, p := range []*string{&oldDeb, &newDeb, &deb} {
		b, err := os.ReadFile(*p)
		if err != nil {
			t.Fatal(err)
		}
		*p = filepath.Join(cache, filepath.Base(*p))
		if err := os.WriteFile(filepath.Join(root, *p), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if got := sd.run(t, "systemd-detect-virt", "--container"); strings.TrimSpace(got) != "container-other" {
		t.Logf("systemd-detect-virt --container: %s", got)
	}

	out := sd.run(t, "dpkg", "-i", oldDeb)
	if !strings.Contains(out, "Edit /etc/muster/agent.yaml") {
		t.Errorf("the first install printed no note:\n%s", out)
	}
	if state, _ := sd.command("systemctl", "is-active", "muster-agent"); strings.TrimSpace(string(state)) != "inactive" {
		t.Fatalf("the first install started the agent (%s): the note says to enable it", state)
	}
	conf := filepath.Join(root, "etc/muster/agent.yaml")
	b, err := os.ReadFile(conf)
	if err != nil {
		t.Fatal(err)
	}
	target := "/var/lib/muster/agent/chown-target"
	kinds := fmt.Sprintf(`  external:
    - kind: example.com/chown
      run: [chown, nobody, %q]
    - kind: example.com/dpkg-install
      privileges: package-manager
      run: [dpkg, -i, %q]
    - kind: example.com/muster-agent.upgrade
      privileges: package-manager
      restarts_agent: true
      env: [DEBIAN_FRONTEND=noninteractive]
      run: [apt-get, install, -y, -o, "Dpkg::Options::=--force-confold", --, %q]
`, target, deb, newDeb)
	edited := strings.Replace(string(b), "  external: []\n", kinds, 1)
	if edited == string(b) {
		t.Fatalf("the installed agent.yaml has no `external: []` to replace:\n%s", b)
	}
	if err := os.WriteFile(conf, []byte(edited), 0o640); err != nil {
		t.Fatal(err)
	}
	sd.run(t, "systemctl", "start", "muster-agent")
	ag := client.NewAgent("http://agent", socketClient(t, filepath.Join(root, "var/lib/muster/agent/agent.sock")))
	testwait.Within(t, time.Minute, "the agent's health on its socket", func() bool { return ag.Health(ctxT(t)) == nil })
	before, err := ag.Info(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	firstPID := sd.mainPID(t, "muster-agent")

	// An ordinary kind: the unit's capabilities, no chown.
	if err := os.WriteFile(filepath.Join(root, target), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	rec := push(t, ag, "example.com/chown", `{}`)
	got := waitAgentState(t, ag, rec.ID, 30*time.Second, action.Done, action.Failed)
	if got.State != action.Failed || !strings.Contains(got.Output, "Operation not permitted") {
		t.Fatalf("chown under the agent's unit: %s (%s):\n%s", got.State, got.StateReason, got.Output)
	}

	// The package-manager profile: dpkg -i in a transient unit.
	rec = push(t, ag, "example.com/dpkg-install", `{}`)
	got = waitAgentState(t, ag, rec.ID, time.Minute, action.Done, action.Failed)
	if got.State != action.Done || !strings.Contains(got.Output, "Setting up "+testPkg+" (1.0)") {
		t.Fatalf("dpkg -i under the package-manager profile: %s (%s):\n%s\n%s", got.State, got.StateReason, got.Output, sd.logs())
	}
	owned := filepath.Join(root, "usr/share", testPkg, "owned")
	fi, err := os.Stat(owned)
	if err != nil {
		t.Fatal(err)
	}
	if st := fi.Sys().(*syscall.Stat_t); st.Uid != 65534 || fi.Mode().Perm() != 0o640 {
		t.Fatalf("%s: uid %d mode %v, want nobody's, 0640", owned, st.Uid, fi.Mode())
	}
	fi, err = os.Stat(filepath.Join(root, "usr/lib", testPkg, "suid"))
	if err != nil || fi.Mode()&os.ModeSetuid == 0 {
		t.Fatalf("the set-user-id program: %v %v", fi, err)
	}

	// muster upgrades muster: the upgrade runs, the ping waits behind it.
	upgrade := push(t, ag, "example.com/muster-agent.upgrade", `{}`)
	queued := push(t, ag, "muster.io/debug.ping", `{}`)
	testwait.Within(t, 3*time.Minute, "the agent of v1.0.1 answering", func() bool {
		info, err := ag.Info(ctxT(t))
		return err == nil && info.Version == "v1.0.1"
	})
	got = waitAgentState(t, ag, upgrade.ID, time.Minute, action.Done, action.Failed)
	if got.State != action.Done || strings.Count(got.Output, "Setting up muster-agent (1.0.1)") != 1 {
		t.Fatalf("the upgrade: %s (%s), want DONE with one install:\n%s\n%s", got.State, got.StateReason, got.Output, sd.logs())
	}
	waitAgentState(t, ag, queued.ID, 30*time.Second, action.Done)
	after, err := ag.Info(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	if after.StoreID != before.StoreID {
		t.Fatalf("the upgraded agent's store is %s, was %s", after.StoreID, before.StoreID)
	}
	if pid := sd.mainPID(t, "muster-agent"); pid == 0 || pid == firstPID {
		t.Fatalf("muster-agent's main process after the upgrade is %d, before %d: systemd did not restart it", pid, firstPID)
	}
	if v := strings.TrimSpace(sd.run(t, "dpkg-query", "-W", "-f=${Version}", "muster-agent")); v != "1.0.1" {
		t.Fatalf("muster-agent %s installed after the upgrade, want 1.0.1", v)
	}
	page, err := ag.Changes(ctxT(t), 0, 100, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Actions) != 4 {
		t.Fatalf("the queue after the upgrade holds %d actions, want the 4 pushed", len(page.Actions))
	}

	// try-restart never starts a stopped unit.
	sd.run(t, "systemctl", "stop", "muster-agent")
	sd.run(t, "dpkg", "-i", newDeb)
	if state, _ := sd.command("systemctl", "is-active", "muster-agent"); strings.TrimSpace(string(state)) != "inactive" {
		t.Fatalf("configuring the package again started the stopped agent: %s", state)
	}
}
