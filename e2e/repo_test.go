package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/musterhq/muster/shared/action"
	"github.com/musterhq/muster/shared/client"
	"github.com/musterhq/muster/shared/testwait"
)

// needRepoTools skips the test when not root (it installs packages into
// this machine's root, or runs rpm's scripts as root in a mount namespace:
// CI runs as root) and fails when one of tools is missing (CI installs
// them: make test-deps).
func needRepoTools(t *testing.T, tools ...string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: it installs packages as root (CI runs as root)")
	}
	for _, tool := range tools {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("no %s here: make test-deps installs what the tests need", tool)
		}
	}
}

// makeRepo runs `make repo` on the packages in dist, into out, signed with
// the throwaway key `make repo` makes in gnupg.
func makeRepo(t *testing.T, dist, out, gnupg string) {
	t.Helper()
	cmd := exec.Command("make", "--no-print-directory", "repo", "DIST="+dist, "REPO="+out, "REPO_GNUPGHOME="+gnupg)
	cmd.Dir = ".."
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make repo: %v\n%s", err, b)
	}
}

// aptGet runs apt-get on the throwaway configuration of dir: its sources
// list (dir/sources.list, no sources.list.d), its lists and caches, no
// trusted keys but the sources' signed-by. Packages are installed into
// this machine's root, with its dpkg database.
func aptGet(t *testing.T, dir string, args ...string) ([]byte, error) {
	t.Helper()
	for _, d := range []string{"parts", "trusted.gpg.d", "state/lists/partial", "cache/archives/partial"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	opts := []string{
		"-o", "Dir::Etc::sourcelist=" + filepath.Join(dir, "sources.list"),
		"-o", "Dir::Etc::sourceparts=" + filepath.Join(dir, "parts"),
		"-o", "Dir::Etc::trusted=" + filepath.Join(dir, "trusted.gpg"),
		"-o", "Dir::Etc::trustedparts=" + filepath.Join(dir, "trusted.gpg.d"),
		"-o", "Dir::State=" + filepath.Join(dir, "state"),
		"-o", "Dir::State::status=/var/lib/dpkg/status",
		"-o", "Dir::Cache=" + filepath.Join(dir, "cache"),
		"-o", "APT::Sandbox::User=root", // the lists are in a directory _apt cannot read
		"-o", "DPkg::Lock::Timeout=120",
		"-o", "Dpkg::Options::=--force-confold",
	}
	cmd := exec.Command("apt-get", append(opts, args...)...)
	cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
	return cmd.CombinedOutput()
}

// installedAgent is /usr/bin/muster-agent run with the installed
// configuration as root, as muster-agent.service runs it.
type installedAgent struct {
	cmd    *exec.Cmd
	exited chan error
	log    string
}

// startInstalled starts /usr/bin/muster-agent and waits for its health on
// its socket.
func startInstalled(t *testing.T, log string) (*installedAgent, *client.Agent) {
	t.Helper()
	f, err := os.OpenFile(log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	a := &installedAgent{exited: make(chan error, 1), log: log}
	a.cmd = exec.Command("/usr/bin/muster-agent", "--config", "/etc/muster/agent.yaml", "--data-dir", "/var/lib/muster/agent")
	a.cmd.Dir = "/"
	a.cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=/var/lib/muster"}
	a.cmd.Stdout, a.cmd.Stderr = f, f
	if err := a.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { a.exited <- a.cmd.Wait() }()
	t.Cleanup(func() { a.stop(t) })
	ag := client.NewAgent("http://agent", socketClient(t, "/var/lib/muster/agent/agent.sock"))
	testwait.Within(t, time.Minute, "the installed agent's health on its socket", func() bool {
		select {
		case err := <-a.exited:
			a.exited <- err
			b, _ := os.ReadFile(log)
			t.Fatalf("the installed agent exited: %v\n%s", err, b)
		default:
		}
		return ag.Health(ctxT(t)) == nil
	})
	return a, ag
}

// stop sends SIGTERM, as systemctl stop (and try-restart) does, and waits
// for the agent to exit.
func (a *installedAgent) stop(t *testing.T) {
	t.Helper()
	if a.cmd.ProcessState != nil {
		return
	}
	_ = a.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-a.exited:
		a.exited <- err
		if err != nil {
			b, _ := os.ReadFile(a.log)
			t.Errorf("the agent did not stop cleanly on SIGTERM: %v\n%s", err, b)
		}
	case <-time.After(30 * time.Second):
		_ = a.cmd.Process.Kill()
		t.Errorf("the agent did not stop within 30s of SIGTERM")
	}
}

// TestRepoAptInstallAndUpgradeAgent: `make repo` builds a signed apt
// repository of the .debs of version 1.0.0; apt-get, with a throwaway
// configuration that trusts only the repository's key through signed-by,
// installs muster-agent from it (and refuses the repository without
// signed-by). The installed agent runs, with an action done, one running
// and one queued behind it. Then the repository is rebuilt with 1.0.1 too,
// and apt-get upgrades muster-agent from it while the agent runs; the
// agent is restarted as the package's postinst asks systemd to
// (try-restart: SIGTERM, then a start, by the test, as systemd does not
// run here), and the new agent reports 1.0.1 on the same queue: the
// running action resumed (same start, same deadline; cancelled by the
// test, it stops), the queued one DONE after it, the done one still there,
// nothing else.
//
// The install is into this machine's root (dpkg's maintainer scripts need
// a whole system to run in): the test refuses to start when muster's
// packages or user are there already, and purges what it installed.
func TestRepoAptInstallAndUpgradeAgent(t *testing.T) {
	t.Parallel()
	needRepoTools(t, "apt-get", "dpkg", "reprepro", "createrepo_c", "gpg", "make")
	start := time.Now()
	dir := t.TempDir()
	v2agent := buildAgentVersion(t, dir, "v1.0.1")
	dist, repo, gnupg, apt := filepath.Join(dir, "dist"), filepath.Join(dir, "repo"), filepath.Join(dir, "gnupg"), filepath.Join(dir, "apt")
	old := buildPackages(t, dist, "v1.0.0", binary, agentBinary, "deb")
	newer := buildPackages(t, filepath.Join(dir, "dist2"), "v1.0.1", binary, v2agent, "deb")
	if len(old) != 2 || len(newer) != 2 || filepath.Base(newer[1]) != "muster-agent_1.0.1_amd64.deb" {
		t.Fatalf("packaging printed %q and %q, want two .debs each", old, newer)
	}
	t.Logf("packages of 1.0.0 and 1.0.1 built in %s", time.Since(start).Round(time.Second))
	makeRepo(t, dist, repo, gnupg)
	for _, f := range []string{"apt/dists/stable/InRelease", "apt/dists/stable/Release.gpg", "apt/pool/main/m/muster-agent/muster-agent_1.0.0_amd64.deb", "muster-archive-keyring.gpg"} {
		if _, err := os.Stat(filepath.Join(repo, f)); err != nil {
			t.Fatalf("make repo wrote no %s: %v", f, err)
		}
	}
	runOK(t, "gpgv", "--keyring", filepath.Join(repo, "muster-archive-keyring.gpg"), filepath.Join(repo, "apt/dists/stable/InRelease"))

	// Without signed-by (and no trusted key in this configuration) apt
	// refuses the repository.
	if err := os.MkdirAll(apt, 0o755); err != nil {
		t.Fatal(err)
	}
	source := func(opts string) {
		line := fmt.Sprintf("deb %s file:%s stable main\n", opts, filepath.Join(repo, "apt"))
		if err := os.WriteFile(filepath.Join(apt, "sources.list"), []byte(line), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	source("")
	if b, err := aptGet(t, apt, "update"); err == nil && !strings.Contains(string(b), "NO_PUBKEY") {
		t.Fatalf("apt-get update took the repository without its key:\n%s", b)
	}
	source("[signed-by=" + filepath.Join(repo, "muster-archive-keyring.gpg") + "]")
	if b, err := aptGet(t, apt, "update"); err != nil || strings.Contains(string(b), "NO_PUBKEY") || strings.Contains(string(b), "not signed") {
		t.Fatalf("apt-get update: %v\n%s", err, b)
	}

	waited := time.Now()
	realRoot.Lock()
	t.Cleanup(realRoot.Unlock) // after the cleanups registered below, which purge what the test installed
	t.Logf("waited %s for the other tests that install into this machine", time.Since(waited).Round(time.Second))
	installed := time.Now()
	defer func() { t.Logf("installed, upgraded and checked in %s", time.Since(installed).Round(time.Second)) }()
	for _, name := range []string{"muster", "muster-agent"} {
		if exec.Command("dpkg-query", "-W", name).Run() == nil {
			t.Fatalf("a %s package is installed on this machine already: dpkg --purge %s first", name, name)
		}
	}
	if _, err := user.Lookup("muster"); err == nil {
		t.Fatal("a muster user exists on this machine already: the test would not know what to leave")
	}
	t.Cleanup(func() {
		if exec.Command("dpkg-query", "-W", "muster-agent").Run() == nil {
			if b, err := exec.Command("dpkg", "--purge", "muster-agent").CombinedOutput(); err != nil {
				t.Errorf("dpkg --purge muster-agent: %v\n%s", err, b)
			}
		}
	})
	b, err := aptGet(t, apt, "install", "-y", "muster-agent")
	if err != nil {
		t.Fatalf("apt-get install muster-agent: %v\n%s", err, b)
	}
	if !strings.Contains(string(b), "Edit /etc/muster/agent.yaml") {
		t.Errorf("the first install printed no note:\n%s", b)
	}
	if v := string(runOK(t, "dpkg-query", "-W", "-f=${Version}", "muster-agent")); v != "1.0.0" {
		t.Fatalf("muster-agent %s installed, want 1.0.0", v)
	}
	if exec.Command("dpkg-query", "-W", "muster").Run() == nil {
		t.Error("apt-get installed muster too")
	}

	log := filepath.Join(dir, "agent.log")
	first, ag := startInstalled(t, log)
	before, err := ag.Info(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	// 1.0.1 joins the repository, and apt learns of it.
	for _, p := range newer {
		runOK(t, "cp", p, dist)
	}
	makeRepo(t, dist, repo, gnupg)
	if b, err := aptGet(t, apt, "update"); err != nil {
		t.Fatalf("apt-get update: %v\n%s", err, b)
	}

	done := push(t, ag, "muster.io/debug.ping", `{}`)
	waitAgentState(t, ag, done.ID, 20*time.Second, action.Done)
	// The sleep outlasts the test (its deadline is kept across the
	// restart); the ping waits behind it.
	running := push(t, ag, "muster.io/debug.sleep", `{"seconds": 3600}`)
	waitAgentState(t, ag, running.ID, 20*time.Second, action.Running)
	queued := push(t, ag, "muster.io/debug.ping", `{}`)

	// apt-get upgrades the running agent.
	b, err = aptGet(t, apt, "install", "-y", "--only-upgrade", "muster-agent")
	if err != nil {
		t.Fatalf("apt-get upgrade of muster-agent: %v\n%s", err, b)
	}
	if !strings.Contains(string(b), "1.0.1") || strings.Contains(string(b), "Edit /etc/muster/agent.yaml") {
		t.Errorf("the upgrade to 1.0.1 said:\n%s", b)
	}
	if v := string(runOK(t, "dpkg-query", "-W", "-f=${Version}", "muster-agent")); v != "1.0.1" {
		t.Fatalf("muster-agent %s installed after the upgrade, want 1.0.1", v)
	}
	// The old agent still runs (no systemd here to restart it), its queue
	// as it was.
	sleeping, err := ag.Get(ctxT(t), running.ID)
	if err != nil || sleeping.State != action.Running || sleeping.StartedTS == nil {
		t.Fatalf("the sleep before the restart: %+v %v", sleeping, err)
	}
	if got, err := ag.Get(ctxT(t), queued.ID); err != nil || got.State != action.New {
		t.Fatalf("the queued ping before the restart: %+v %v", got, err)
	}

	// try-restart's stand-in: SIGTERM the running agent, start the unit's
	// command again.
	first.stop(t)
	_, ag = startInstalled(t, log)
	after, err := ag.Info(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	if after.Version != "v1.0.1" || after.Version == before.Version || after.StoreID != before.StoreID {
		t.Fatalf("after the restart the agent is %s (store %s), before %s (store %s): want v1.0.1 on the same queue",
			after.Version, after.StoreID, before.Version, before.StoreID)
	}
	// The new agent resumed the sleep where the old one left it (the same
	// start, the same deadline in its progress): it stops it when asked,
	// and then runs the ping queued behind it.
	got, err := ag.Get(ctxT(t), running.ID)
	if err != nil || got.State != action.Running || got.StartedTS == nil || !got.StartedTS.Equal(*sleeping.StartedTS) ||
		string(got.Progress) != string(sleeping.Progress) {
		t.Fatalf("the sleep after the restart: %+v %v, before %+v", got, err, sleeping)
	}
	if _, err := ag.Cancel(ctxT(t), running.ID); err != nil {
		t.Fatal(err)
	}
	waitAgentState(t, ag, running.ID, 20*time.Second, action.Cancelled)
	waitAgentState(t, ag, queued.ID, 20*time.Second, action.Done)
	waitAgentState(t, ag, done.ID, time.Second, action.Done)
	page, err := ag.Changes(ctxT(t), 0, 100, false)
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]bool{}
	for _, a := range page.Actions {
		ids[a.ID] = true
	}
	if len(ids) != 3 || !ids[done.ID] || !ids[running.ID] || !ids[queued.ID] {
		t.Fatalf("the queue after the upgrade holds %v, want exactly %s, %s and %s", ids, done.ID, running.ID, queued.ID)
	}
}

// rpmInRoot is the shell script TestRepoRpmInstallIntoTemporaryRoot runs in
// a mount namespace of its own: a temporary root ($1) that is this
// machine's root seen through an overlay whose writes go to a tmpfs, so
// rpm's scriptlets, which rpm runs chrooted in the root, find a shell,
// getent, groupadd and useradd, and nothing they do reaches the machine.
// It imports the repository's key ($3), checks the package's signature,
// installs the package ($2) with rpm (--nodeps: the root's rpm database
// knows no glibc), then writes what rpm -V and rpm -q say, and a copy of
// everything the install wrote (owners and modes kept), into $4. Then,
// with the configuration edited and a file in the data directory (as a
// running agent leaves its queue), it erases the package, and writes
// which of its paths are left, and the muster user if it is, into
// $4.erased.
const rpmInRoot = `set -eu
root=$1 pkg=$2 key=$3 out=$4 w=$(mktemp -d)
mount -t tmpfs tmpfs "$w"
mkdir "$w/up" "$w/work"
mount -t overlay overlay -o lowerdir=/,upperdir="$w/up",workdir="$w/work" "$root"
mount --rbind /dev "$root/dev"
mount --rbind /proc "$root/proc"
db="--root $root --dbpath /var/lib/rpm"
rpm $db --initdb
rpm $db --import "$key"
rpm $db -K "$pkg" > "$out.sig"
rpm $db -i --nodeps --force-debian "$pkg" > "$out.install" 2>&1
rpm $db -V --nodeps muster-agent > "$out.verify" 2>&1 || true
rpm $db -q --qf '%{NAME} %{VERSION}\n' muster-agent > "$out.query"
mkdir -p "$out"
(cd "$w/up" && tar --exclude=./var/lib/rpm -cf - .) | (cd "$out" && tar -xpf -)
echo "# edited" >> "$root/etc/muster/agent.yaml"
echo "the queue" > "$root/var/lib/muster/agent/queue.db"
rpm $db -e --nodeps muster-agent > "$out.erase" 2>&1
for p in /usr/bin/muster-agent /usr/lib/systemd/system/muster-agent.service /etc/muster/agent.yaml.rpmsave /var/lib/muster/agent/queue.db; do
	if [ -e "$root$p" ]; then echo "$p"; fi
done > "$out.erased"
grep '^muster:' "$root/etc/passwd" >> "$out.erased" || true
`

// TestRepoRpmInstallIntoTemporaryRoot: the .rpm of muster-agent from the
// yum repository `make repo` builds, signed with the repository's key, is
// installed with rpm (Debian's) into a temporary root with its scriptlets
// run: the muster user and group made by the preinstall script, the files
// with their owners and modes (rpm -V finds nothing amiss), the directory
// modes the postinstall sets; erased, its binary and unit go, while the
// edited configuration (as agent.yaml.rpmsave), the queue in its data
// directory and the user stay.
//
// What the temporary root cannot check: that the package's Requires are
// met on an RPM distribution (rpm runs with --nodeps, as its database
// knows nothing of this Debian machine's libraries), the scriptlets under
// a RHEL shadow-utils and SELinux, and systemd's part (no systemd runs:
// the postinstall's daemon-reload and try-restart are skipped as on a
// machine without it).
func TestRepoRpmInstallIntoTemporaryRoot(t *testing.T) {
	t.Parallel()
	needRepoTools(t, "rpm", "reprepro", "createrepo_c", "gpg", "make", "unshare", "tar")
	if out, err := exec.Command("unshare", "--mount", "--propagation", "private", "--", "true").CombinedOutput(); err != nil {
		t.Skipf("this machine forbids mount namespaces (unshare --mount: %v: %s)", err, strings.TrimSpace(string(out)))
	}
	dir := t.TempDir()
	dist, repo := filepath.Join(dir, "dist"), filepath.Join(dir, "repo")
	buildPackages(t, dist, "v1.0.0", binary, agentBinary, "rpm")
	makeRepo(t, dist, repo, filepath.Join(dir, "gnupg"))
	pkg := filepath.Join(repo, "yum", "muster-agent-1.0.0-1.x86_64.rpm")
	root, out := filepath.Join(dir, "root"), filepath.Join(dir, "out")
	if err := os.Mkdir(root, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("unshare", "--mount", "--propagation", "private", "--", "/bin/sh", "-c", rpmInRoot, "rpm-in-root",
		root, pkg, filepath.Join(repo, "muster-archive-keyring.asc"), out)
	if b, err := cmd.CombinedOutput(); err != nil {
		install, _ := os.ReadFile(out + ".install")
		t.Fatalf("rpm in a temporary root: %v\n%s\n%s", err, b, install)
	}
	read := func(name string) string {
		b, err := os.ReadFile(out + name)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	if sig := read(".sig"); !strings.Contains(sig, "signatures OK") {
		t.Errorf("rpm -K of the repository's package: %s", sig)
	}
	if q := read(".query"); q != "muster-agent 1.0.0\n" {
		t.Errorf("rpm -q: %q", q)
	}
	if v := read(".verify"); v != "" {
		t.Errorf("rpm -V finds the installed files differ from the package's:\n%s", v)
	}
	if inst := read(".install"); !strings.Contains(inst, "Edit /etc/muster/agent.yaml") {
		t.Errorf("the first install printed no note:\n%s", inst)
	}

	// The user and group the preinstall script made, in the root's files.
	uid, gid := -1, -1
	for _, l := range strings.Split(read("/etc/passwd"), "\n") {
		if f := strings.Split(l, ":"); len(f) == 7 && f[0] == "muster" {
			fmt.Sscan(f[2], &uid)
			if f[5] != "/var/lib/muster" || !strings.HasSuffix(f[6], "nologin") {
				t.Errorf("the muster user: %s", l)
			}
		}
	}
	for _, l := range strings.Split(read("/etc/group"), "\n") {
		if f := strings.Split(l, ":"); len(f) == 4 && f[0] == "muster" {
			fmt.Sscan(f[2], &gid)
		}
	}
	if uid < 1 || uid >= 1000 || gid < 1 {
		t.Fatalf("the muster user is uid %d, its group gid %d: want a system user and group", uid, gid)
	}
	checkAgentFiles(t, out, gid)
	if b, err := exec.Command(out+"/usr/bin/muster-agent", "version").Output(); err != nil || !strings.HasPrefix(string(b), "muster-agent ") {
		t.Errorf("the installed muster-agent version: %v %q", err, b)
	}

	// rpm -e: the binary and the unit go; the edited configuration is
	// kept as agent.yaml.rpmsave, the data directory's queue and the user
	// stay.
	left := map[string]bool{}
	for _, l := range strings.Split(read(".erased"), "\n") {
		left[strings.SplitN(l, ":", 2)[0]] = true // a path, or the user's name
	}
	for _, gone := range []string{"/usr/bin/muster-agent", "/usr/lib/systemd/system/muster-agent.service"} {
		if left[gone] {
			t.Errorf("%s is still there after rpm -e:\n%s", gone, read(".erase"))
		}
	}
	for _, kept := range []string{"/etc/muster/agent.yaml.rpmsave", "/var/lib/muster/agent/queue.db", "muster"} {
		if !left[kept] {
			t.Errorf("rpm -e removed %s (left: %v)\n%s", kept, left, read(".erase"))
		}
	}
}

// upgradeInRoot is the shell script the upgrade tests run in a mount
// namespace of their own, in a temporary root ($1) made as rpmInRoot makes
// it (this machine's root through an overlay whose writes go to a tmpfs).
// systemd runs there as far as the scripts can tell (/run/systemd/system
// is a directory), and systemctl is a stand-in that appends its arguments
// to /systemctl.calls. With rpm or dpkg ($2) it installs the package $3,
// saves the root's passwd and group as $5.passwd and $5.group, edits the
// configuration, forgets the calls so far, and upgrades to $4 (rpm -U, or
// dpkg -i of the newer .deb, keeping the edited configuration), its output
// in $5.upgrade; then it copies everything written (owners and modes
// kept) into $5.
const upgradeInRoot = `set -eu
root=$1 tool=$2 old=$3 new=$4 out=$5 w=$(mktemp -d)
mount -t tmpfs tmpfs "$w"
mkdir "$w/up" "$w/work"
mount -t overlay overlay -o lowerdir=/,upperdir="$w/up",workdir="$w/work" "$root"
mount --rbind /dev "$root/dev"
mount --rbind /proc "$root/proc"
mkdir -p "$root/run/systemd/system"
# man-db's trigger would rebuild the root's whole manual index for the
# pages the packages hold: minutes, and not what is tested.
rm -f "$root/var/lib/man-db/auto-update"
for d in /usr/bin /usr/sbin /bin /sbin; do
	if [ -d "$root$d" ] && [ ! -L "$root$d" ]; then
		rm -f "$root$d/systemctl"
		printf '#!/bin/sh\necho "$*" >> /systemctl.calls\n' > "$root$d/systemctl"
		chmod 0755 "$root$d/systemctl"
	fi
done
case $tool in
rpm)
	db="--root $root --dbpath /var/lib/rpm"
	rpm $db --initdb
	rpm $db -i --nodeps --force-debian "$old" > "$out.install" 2>&1
	;;
dpkg)
	# chrooted, not dpkg --root: dpkg resolves the owners the package
	# names (root:muster) with the root's own users and groups.
	cp "$old" "$root/tmp/old.deb"
	cp "$new" "$root/tmp/new.deb"
	chroot "$root" dpkg --force-confold -i /tmp/old.deb > "$out.install" 2>&1
	;;
esac
cp "$root/etc/passwd" "$out.passwd"
cp "$root/etc/group" "$out.group"
echo "# edited" >> "$root/etc/muster/agent.yaml"
rm -f "$root/systemctl.calls"
case $tool in
rpm)
	rpm $db -U --nodeps --force-debian "$new" > "$out.upgrade" 2>&1
	rpm $db -q --qf '%{NAME} %{VERSION}\n' muster-agent > "$out.query"
	rpm $db -V --nodeps muster-agent > "$out.verify" 2>&1 || true
	;;
dpkg)
	chroot "$root" dpkg --force-confold -i /tmp/new.deb > "$out.upgrade" 2>&1
	chroot "$root" dpkg-query -W -f '${Package} ${Version}\n' muster-agent > "$out.query"
	;;
esac
mkdir -p "$out"
(cd "$w/up" && tar --exclude=./var/lib/rpm --exclude=./var/lib/dpkg --exclude=./tmp -cf - .) | (cd "$out" && tar -xpf -)
`

// upgradeAgentPackage builds muster-agent's packages of 1.0.0 and of
// 1.0.1 (with a newer binary and a changed agent.yaml) in format (deb or
// rpm), and runs upgradeInRoot with tool on them; it returns where the
// script wrote and the changed configuration's text.
func upgradeAgentPackage(t *testing.T, format, tool string) (out, newConfig string) {
	t.Helper()
	needRepoTools(t, tool, "unshare", "tar")
	if b, err := exec.Command("unshare", "--mount", "--propagation", "private", "--", "true").CombinedOutput(); err != nil {
		t.Skipf("this machine forbids mount namespaces (unshare --mount: %v: %s)", err, strings.TrimSpace(string(b)))
	}
	dir := t.TempDir()
	// 1.0.1's tree: the repository's configuration, scripts and license,
	// with a line added to agent.yaml.
	tree := filepath.Join(dir, "tree")
	runOK(t, "mkdir", "-p", filepath.Join(tree, "packaging"))
	runOK(t, "cp", "-a", "../configs", tree)
	runOK(t, "cp", "-a", "../packaging/scripts", filepath.Join(tree, "packaging"))
	if _, err := os.Stat("../LICENSE"); err == nil {
		runOK(t, "cp", "../LICENSE", tree)
	}
	b, err := os.ReadFile("../configs/agent.yaml")
	if err != nil {
		t.Fatal(err)
	}
	newConfig = string(b) + "# a setting 1.0.1 documents\n"
	if err := os.WriteFile(filepath.Join(tree, "configs", "agent.yaml"), []byte(newConfig), 0o644); err != nil {
		t.Fatal(err)
	}
	old := buildPackages(t, filepath.Join(dir, "dist"), "v1.0.0", binary, agentBinary, format)
	newer := buildPackagesFrom(t, tree, filepath.Join(dir, "dist2"), "v1.0.1", binary,
		buildAgentVersion(t, dir, "v1.0.1"), format)
	if len(old) != 2 || len(newer) != 2 {
		t.Fatalf("packaging printed %q and %q, want two packages each", old, newer)
	}
	root, out := filepath.Join(dir, "root"), filepath.Join(dir, "out")
	if err := os.Mkdir(root, 0o755); err != nil {
		t.Fatal(err)
	}
	// The overlay shows this machine's root as it is: none of the tests
	// that install muster into it may be halfway.
	realRoot.Lock()
	t.Cleanup(realRoot.Unlock) // after the cleanups registered below, which purge what the test installed
	cmd := exec.Command("unshare", "--mount", "--propagation", "private", "--", "/bin/sh", "-c", upgradeInRoot, "upgrade-in-root",
		root, tool, old[1], newer[1], out)
	if b, err := cmd.CombinedOutput(); err != nil {
		install, _ := os.ReadFile(out + ".install")
		upgrade, _ := os.ReadFile(out + ".upgrade")
		t.Fatalf("%s in a temporary root: %v\n%s\ninstall:\n%s\nupgrade:\n%s", tool, err, b, install, upgrade)
	}
	return out, newConfig
}

// readOut reads the file out+name the upgrade script wrote.
func readOut(t *testing.T, out, name string) string {
	t.Helper()
	b, err := os.ReadFile(out + name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// checkUpgraded checks the root after an upgrade of muster-agent from
// 1.0.0 to 1.0.1 whose agent.yaml changed: the scripts ran without error;
// the user and group are there once each, as the install made them; the
// edited configuration is kept and the new one is beside it as
// agent.yaml+newSuffix; the files have their owners and modes and the
// binary is 1.0.1's; and the scripts asked systemd for exactly calls
// (try-restart, never a start of a stopped unit).
func checkUpgraded(t *testing.T, out, newConfig, newSuffix string, calls []string) {
	t.Helper()
	upgrade := readOut(t, out, ".upgrade")
	for _, bad := range []string{"scriptlet failed", "error", "warning: %", "subprocess"} {
		if strings.Contains(upgrade, bad) {
			t.Errorf("the upgrade said %q:\n%s", bad, upgrade)
		}
	}
	if strings.Contains(upgrade, "Edit /etc/muster/agent.yaml") {
		t.Errorf("the upgrade printed the first install's note:\n%s", upgrade)
	}
	if q := strings.TrimSpace(readOut(t, out, ".query")); q != "muster-agent 1.0.1" {
		t.Errorf("after the upgrade the package database says %q", q)
	}
	// The user and group: once each, as the install made them.
	count := func(text, name string) (n int, line string) {
		for _, l := range strings.Split(text, "\n") {
			if strings.HasPrefix(l, name+":") {
				n, line = n+1, l
			}
		}
		return n, line
	}
	for _, f := range []string{"/etc/passwd", "/etc/group"} {
		before := readOut(t, out, "."+filepath.Base(f))
		after := readOut(t, out, f)
		nb, lb := count(before, "muster")
		na, la := count(after, "muster")
		if nb != 1 || na != 1 || la != lb {
			t.Errorf("%s: muster %d time(s) after the install (%q), %d after the upgrade (%q): want once, unchanged", f, nb, lb, na, la)
		}
	}
	gid := -1
	for _, l := range strings.Split(readOut(t, out, "/etc/group"), "\n") {
		if f := strings.Split(l, ":"); len(f) == 4 && f[0] == "muster" {
			fmt.Sscan(f[2], &gid)
		}
	}
	// The edited configuration stays; the new one is beside it.
	if conf := readOut(t, out, "/etc/muster/agent.yaml"); !strings.HasSuffix(conf, "# edited\n") {
		t.Errorf("the edited agent.yaml was replaced by the upgrade:\n%s", conf)
	}
	if got := readOut(t, out, "/etc/muster/agent.yaml"+newSuffix); got != newConfig {
		t.Errorf("agent.yaml%s is not 1.0.1's configuration:\n%s", newSuffix, got)
	}
	checkAgentFiles(t, out, gid)
	if b, err := exec.Command(out+"/usr/bin/muster-agent", "version").Output(); err != nil || !strings.Contains(string(b), "v1.0.1") {
		t.Errorf("the upgraded muster-agent version: %v %q", err, b)
	}
	got := strings.Split(strings.TrimSpace(readOut(t, out, "/systemctl.calls")), "\n")
	if !slices.Equal(got, calls) {
		t.Errorf("the upgrade's scripts called systemctl %q, want %q", got, calls)
	}
}

// TestRepoRpmUpgradeKeepsConfigAndTryRestarts: muster-agent's .rpm of
// 1.0.0 installed into a temporary root (as
// TestRepoRpmInstallIntoTemporaryRoot does), its configuration edited, is
// upgraded with rpm -U to 1.0.1, whose agent.yaml changed, with systemd
// running as far as the scriptlets can tell and a systemctl that records
// its calls. The scriptlets run without error; the muster user and group
// are not made twice; the edited agent.yaml stays (%config(noreplace)) and
// 1.0.1's lands as agent.yaml.rpmnew, which rpm -V then reports as the
// only change; the files keep their owners and modes and the binary is
// 1.0.1's; and systemctl is asked for a daemon-reload and a try-restart of
// muster-agent.service by the new %post, and a daemon-reload by the old
// %postun: never a start.
func TestRepoRpmUpgradeKeepsConfigAndTryRestarts(t *testing.T) {
	t.Parallel()
	out, newConfig := upgradeAgentPackage(t, "rpm", "rpm")
	checkUpgraded(t, out, newConfig, ".rpmnew", []string{
		"daemon-reload", "try-restart muster-agent.service", // 1.0.1's %post 2
		"daemon-reload", // 1.0.0's %postun 1
	})
	if v := strings.TrimSpace(readOut(t, out, ".verify")); !strings.HasSuffix(v, " c /etc/muster/agent.yaml") || strings.Contains(v, "\n") {
		t.Errorf("rpm -V after the upgrade, want only the edited configuration:\n%s", v)
	}
}

// TestPackageDebUpgradeTryRestarts is TestRepoRpmUpgradeKeepsConfigAndTryRestarts
// for the .deb, with dpkg chrooted into the temporary root (--force-confold,
// as apt-get in TestRepoAptInstallAndUpgradeAgent, where systemd does not
// run): the edited conffile stays, 1.0.1's lands as agent.yaml.dpkg-dist,
// and systemctl is asked for a daemon-reload by 1.0.0's postrm upgrade,
// then a daemon-reload and a try-restart by 1.0.1's postinst configure.
func TestPackageDebUpgradeTryRestarts(t *testing.T) {
	t.Parallel()
	out, newConfig := upgradeAgentPackage(t, "deb", "dpkg")
	checkUpgraded(t, out, newConfig, ".dpkg-dist", []string{
		"daemon-reload",                                     // 1.0.0's postrm upgrade
		"daemon-reload", "try-restart muster-agent.service", // 1.0.1's postinst configure 1.0.0
	})
}

// checkAgentFiles checks the owners and modes of muster-agent's files as
// an rpm install left them in the copy out of a temporary root (gid: the
// muster group's).
func checkAgentFiles(t *testing.T, out string, gid int) {
	t.Helper()
	for _, f := range []struct {
		path       string
		mode       os.FileMode
		owner, grp int
		dir        bool
	}{
		{path: "/usr/bin/muster-agent", mode: 0o755},
		{path: "/usr/lib/systemd/system/muster-agent.service", mode: 0o644},
		{path: "/usr/share/doc/muster-agent/copyright", mode: 0o644},
		{path: "/etc/muster", mode: 0o750, grp: gid, dir: true},
		{path: "/etc/muster/agent.yaml", mode: 0o640, grp: gid},
		{path: "/var/lib/muster", mode: 0o755, dir: true},
		{path: "/var/lib/muster/agent", mode: 0o700, dir: true},
	} {
		fi, err := os.Lstat(out + f.path)
		if err != nil {
			t.Errorf("%s: %v", f.path, err)
			continue
		}
		st := fi.Sys().(*syscall.Stat_t)
		if fi.Mode().Perm() != f.mode || fi.IsDir() != f.dir || int(st.Uid) != f.owner || int(st.Gid) != f.grp {
			t.Errorf("%s: %v %d:%d, want %v (dir %v) %d:%d", f.path, fi.Mode(), st.Uid, st.Gid, f.mode, f.dir, f.owner, f.grp)
		}
	}
}
