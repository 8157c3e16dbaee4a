package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/musterhq/muster/shared/action"
	"github.com/musterhq/muster/shared/testwait"
)

// standInSystemdRun plays systemd-run for a test, where no systemd runs:
// it starts the command as systemd would start the transient unit the
// agent asks for, with the properties that make a profile's sandbox
// applied by hand. CapabilityBoundingSet and NoNewPrivileges by setpriv (so
// the command has exactly the profile's capabilities, as the unit's main
// process would); ProtectSystem=strict with ReadWritePaths by a mount
// namespace in which / is read-only and only those paths (and /tmp, which
// PrivateTmp makes writable) are bound writable; UMask; --setenv=NAME from
// its own environment, nothing else. --wait runs the command in the
// foreground (stdin, stdout and stderr passed on as --pipe does, the exit
// status its own); without it, the command is started in a session of its
// own, apart from the agent's, as a unit of systemd's would be. Every
// other option is accepted and ignored. Each call is logged to $0.log.
const standInSystemdRun = `#!/bin/bash
set -eu
if [ "${1:-}" = --detached ]; then
	shift
else
	echo "${*//$'\n'/ }" >> "$0.log"
fi
orig=("$@")
caps= rw= strict= nnp= wait= umask_=0022
names=()
while [ $# -gt 0 ]; do
	case "$1" in
	--) shift; break ;;
	--wait) wait=1 ;;
	--setenv=*) names+=("${1#--setenv=}") ;;
	--property=CapabilityBoundingSet=*) caps="${1#--property=CapabilityBoundingSet=}" ;;
	--property=ReadWritePaths=*) rw="$rw ${1#--property=ReadWritePaths=}" ;; # systemd adds up its assignments
	--property=ProtectSystem=strict) strict=1 ;;
	--property=NoNewPrivileges=yes) nnp=--no-new-privs ;;
	--property=UMask=*) umask_="${1#--property=UMask=}" ;;
	esac
	shift
done
envs=()
for n in "${names[@]}"; do envs+=("$n=${!n}"); done
bset=
if [ -n "$caps" ]; then
	bset=-all
	for c in $caps; do c="${c#CAP_}"; bset="$bset,+${c,,}"; done
fi
# The unit: its mounts, then its capabilities, then the command.
unit() {
	unshare --mount --propagation private -- /bin/bash -c '
		set -e
		strict=$1 rw=$2 umask_=$3 bset=$4 nnp=$5; shift 5
		if [ -n "$strict" ]; then
			for p in $rw /tmp; do p="${p#-}"; [ -d "$p" ] && mount --bind "$p" "$p"; done
			mount -o remount,bind,ro /
		fi
		umask "$umask_"
		set -- env -i "$@"
		if [ -n "$bset" ]; then set -- setpriv $nnp --inh-caps=-all --bounding-set="$bset" -- "$@"; fi
		exec "$@"' unit "$strict" "$rw" "$umask_" "$bset" "$nnp" "${envs[@]}" "$@"
}
if [ -n "$wait" ]; then
	unit "$@"
else
	setsid -f "$0" --detached --wait "${orig[@]}" </dev/null >/dev/null 2>&1
fi
`

// writeStandInSystemdRun writes standInSystemdRun into dir and returns
// its path.
func writeStandInSystemdRun(t *testing.T, dir string) string {
	t.Helper()
	p := filepath.Join(dir, "systemd-run")
	if err := os.WriteFile(p, []byte(standInSystemdRun), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// needRoot skips the test when not root: installing packages and dropping
// capabilities need it (CI runs as root).
func needRoot(t *testing.T, tools ...string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root (CI runs as root)")
	}
	for _, tool := range append([]string{"setpriv", "unshare"}, tools...) {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("no %s here", tool)
		}
	}
	// The stand-in for systemd-run makes the profile's read-only paths in a
	// mount namespace: a container that forbids them cannot run the test.
	if out, err := exec.Command("unshare", "--mount", "--propagation", "private", "--", "true").CombinedOutput(); err != nil {
		t.Skipf("this machine forbids mount namespaces (unshare --mount: %v: %s)", err, strings.TrimSpace(string(out)))
	}
}

// testDeb builds the package name at version with dpkg-deb: a file owned
// by nobody:nogroup with mode 0640 holding the version, and a set-user-id
// program of root's.
func testDeb(t *testing.T, dir, name, version string) string {
	t.Helper()
	root := filepath.Join(dir, name+"-"+version)
	share := filepath.Join(root, "usr", "share", name)
	for _, d := range []string{filepath.Join(root, "DEBIAN"), share, filepath.Join(root, "usr", "lib", name)} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	control := fmt.Sprintf("Package: %s\nVersion: %s\nArchitecture: all\nMaintainer: muster tests <tests@example.com>\nDescription: muster's privilege profile test package\n", name, version)
	files := []struct {
		path  string
		body  string
		mode  os.FileMode
		owner string
	}{
		{filepath.Join(root, "DEBIAN", "control"), control, 0o644, ""},
		{filepath.Join(share, "owned"), version + "\n", 0o640, "nobody:nogroup"},
		{filepath.Join(root, "usr", "lib", name, "suid"), "#!/bin/sh\n", 0o755 | os.ModeSetuid, ""},
	}
	for _, f := range files {
		if err := os.WriteFile(f.path, []byte(f.body), 0o600); err != nil {
			t.Fatal(err)
		}
		if f.owner != "" {
			if out, err := exec.Command("chown", f.owner, f.path).CombinedOutput(); err != nil {
				t.Fatalf("chown: %v\n%s", err, out)
			}
		}
		if err := os.Chmod(f.path, f.mode); err != nil {
			t.Fatal(err)
		}
	}
	deb := filepath.Join(dir, name+"_"+version+"_all.deb")
	if out, err := exec.Command("dpkg-deb", "--build", root, deb).CombinedOutput(); err != nil {
		t.Fatalf("dpkg-deb: %v\n%s", err, out)
	}
	return deb
}

// installedVersion is the package's installed version, "" when it is not
// installed.
func installedVersion(name string) string {
	out, err := exec.Command("dpkg-query", "-W", "-f", "${db:Status-Status} ${Version}", name).Output()
	if err != nil {
		return ""
	}
	status, v, _ := strings.Cut(string(out), " ")
	if status != "installed" {
		return ""
	}
	return v
}

// A kind with privileges: package-manager installs a package with dpkg -i,
// upgrades it with apt-get install ./x.deb and removes it, under exactly
// the profile's capabilities and writable paths (the stand-in systemd-run
// applies them): the files keep the owners and modes of the archive.
func TestPackageManagerProfileInstallsUpgradesAndRemovesADeb(t *testing.T) {
	t.Parallel()
	needRoot(t, "dpkg-deb", "dpkg", "apt-get")
	realRoot.Lock()            // dpkg's lock: one test installs into this machine at a time
	t.Cleanup(realRoot.Unlock) // after the cleanups registered below, which purge what the test installed
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil { // apt's _apt reads the .deb
		t.Fatal(err)
	}
	name := fmt.Sprintf("muster-e2e-priv-%d", time.Now().UnixNano())
	v1, v2 := testDeb(t, dir, name, "1.0"), testDeb(t, dir, name, "2.0")
	t.Cleanup(func() { _ = exec.Command("dpkg", "--purge", name).Run() })
	sdrun := writeStandInSystemdRun(t, dir)
	extra := fmt.Sprintf(`actions:
  systemd_run: %q
  systemctl: /bin/true
  external:
    - kind: example.com/dpkg-install
      privileges: package-manager
      run: [dpkg, -i, %q]
    - kind: example.com/apt-install
      privileges: package-manager
      env: [DEBIAN_FRONTEND=noninteractive]
      run: [apt-get, install, -y, %q]
    - kind: example.com/remove
      privileges: package-manager
      run: [dpkg, --purge, %q]
`, sdrun, v1, v2, name)
	_, ag, _ := agentProc(t, "pm-1", extra)

	run := func(kind string) *action.Action {
		t.Helper()
		rec := push(t, ag, kind, `{}`)
		got := waitAgentState(t, ag, rec.ID, 45*time.Second, action.Done, action.Failed)
		if got.State != action.Done {
			t.Fatalf("%s: %s (%s):\n%s", kind, got.State, got.StateReason, got.Output)
		}
		return got
	}
	owned := filepath.Join("/usr/share", name, "owned")
	suid := filepath.Join("/usr/lib", name, "suid")
	checkFiles := func(version string) {
		t.Helper()
		if v := installedVersion(name); v != version {
			t.Fatalf("installed version %q, want %q", v, version)
		}
		b, err := os.ReadFile(owned)
		if err != nil || string(b) != version+"\n" {
			t.Fatalf("%s: %q %v", owned, b, err)
		}
		fi, err := os.Stat(owned)
		if err != nil {
			t.Fatal(err)
		}
		st := fi.Sys().(*syscall.Stat_t)
		if st.Uid != 65534 || fi.Mode().Perm() != 0o640 {
			t.Fatalf("%s: uid %d mode %v, want nobody's, 0640", owned, st.Uid, fi.Mode())
		}
		fi, err = os.Stat(suid)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode()&os.ModeSetuid == 0 || fi.Mode().Perm() != 0o755 {
			t.Fatalf("%s: mode %v, want set-user-id 0755", suid, fi.Mode())
		}
	}

	install := run("example.com/dpkg-install")
	checkFiles("1.0")
	if !strings.Contains(install.Output, "Setting up "+name+" (1.0)") {
		t.Fatalf("dpkg's output is not the action's:\n%s", install.Output)
	}
	run("example.com/apt-install")
	checkFiles("2.0")
	run("example.com/remove")
	if v := installedVersion(name); v != "" {
		t.Fatalf("still installed: %s", v)
	}
	if _, err := os.Stat(owned); !os.IsNotExist(err) {
		t.Fatalf("%s after removal: %v", owned, err)
	}
	// Every command went through the stand-in, with the profile.
	calls := lines(sdrun + ".log")
	if len(calls) != 3 {
		t.Fatalf("systemd-run called %d times, want 3:\n%s", len(calls), strings.Join(calls, "\n"))
	}
	for _, c := range calls {
		if !strings.Contains(c, "--property=CapabilityBoundingSet=CAP_CHOWN ") || !strings.Contains(c, "--wait --pipe") {
			t.Fatalf("systemd-run called without the profile: %s", c)
		}
	}
}

// A kind without privileges runs under the agent's own unit: with its
// capabilities (setpriv, as TestExternalUserUnderTheUnitsCapabilities does)
// chown fails, and systemd-run is never called for it.
func TestOrdinaryKindCannotChown(t *testing.T) {
	t.Parallel()
	needRoot(t)
	dir := t.TempDir()
	target := filepath.Join(dir, "target")
	if err := os.WriteFile(target, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	sdrun := writeStandInSystemdRun(t, dir)
	extra := fmt.Sprintf(`actions:
  systemd_run: %q
  external:
    - kind: example.com/chown
      run: [chown, nobody, %q]
`, sdrun, target)
	setpriv, _ := exec.LookPath("setpriv")
	// The capabilities configs/systemd/muster-agent.service leaves the agent.
	unit := []string{"--no-new-privs", "--inh-caps=-all", "--bounding-set=-all,+setuid,+setgid,+kill", "--", agentBinary}
	p := startAll(t, agentAttempt(t, setpriv, unit, dir, "plain-1", extra))[0]
	t.Cleanup(p.kill)
	ag := agentClient(p)
	rec := push(t, ag, "example.com/chown", `{}`)
	got := waitAgentState(t, ag, rec.ID, 20*time.Second, action.Done, action.Failed)
	if got.State != action.Failed || !strings.Contains(got.Output, "Operation not permitted") {
		t.Fatalf("chown under the agent's unit: %s (%s):\n%s", got.State, got.StateReason, got.Output)
	}
	fi, err := os.Stat(target)
	if err != nil {
		t.Fatal(err)
	}
	if uid := fi.Sys().(*syscall.Stat_t).Uid; uid != 0 {
		t.Fatalf("owner %d, want root's", uid)
	}
	if _, err := os.Stat(sdrun + ".log"); !os.IsNotExist(err) {
		t.Fatalf("systemd-run was called for an ordinary kind")
	}
}

// A privileged kind's output comes back as it is written, and a cancel
// stops its unit (systemctl stop) as well as systemd-run.
func TestPrivilegedKindStreamsOutputAndCancelStopsItsUnit(t *testing.T) {
	t.Parallel()
	needRoot(t)
	dir := t.TempDir()
	sdrun := writeStandInSystemdRun(t, dir)
	systemctl := filepath.Join(dir, "systemctl")
	if err := os.WriteFile(systemctl, []byte("#!/bin/sh\necho \"$*\" >> \"$0.log\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	extra := fmt.Sprintf(`actions:
  systemd_run: %q
  systemctl: %q
  kill_grace: 1s
  external:
    - kind: example.com/long
      privileges: root
      run: [/bin/sh, -c, "echo started; exec sleep 60"]
`, sdrun, systemctl)
	_, ag, _ := agentProc(t, "cancel-1", extra)
	rec := push(t, ag, "example.com/long", `{}`)
	testwait.Within(t, 20*time.Second, "the output while it runs", func() bool {
		got, err := ag.Get(ctxT(t), rec.ID)
		return err == nil && got.State == action.Running && strings.Contains(got.Output, "started")
	})
	if _, err := ag.Cancel(ctxT(t), rec.ID); err != nil {
		t.Fatal(err)
	}
	got := waitAgentState(t, ag, rec.ID, 20*time.Second, action.Cancelled, action.Failed, action.Done)
	if got.State != action.Cancelled {
		t.Fatalf("%s (%s)", got.State, got.StateReason)
	}
	if stops := lines(systemctl + ".log"); len(stops) != 1 || stops[0] != "stop -- muster-action-"+rec.ID+".service" {
		t.Fatalf("systemctl calls %q, want one stop of the action's unit", stops)
	}
}
