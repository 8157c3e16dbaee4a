package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/musterhq/muster/shared/testwait"
	"github.com/musterhq/muster/shared/wire"
)

// packageVersion is the version the test's package is built with.
const packageVersion = "v9.8.7"

// TestPackageDebInstallStartRemove builds the amd64 .debs as `make package`
// does (with the binaries the tests built), installs both packages, muster
// and muster-agent, with dpkg on this machine, checks the files, their
// owners and modes, the muster user, runs `muster version` and
// `muster-agent version`, starts muster-agent from the installed
// configuration as the muster user (not through systemd, which does not
// run here) and waits for its health. Then it removes and purges
// muster-agent, which leaves muster, its configuration, the directories and
// the user alone, and purges muster, after which nothing is left. It needs
// root and dpkg, as CI has.
func TestPackageDebInstallStartRemove(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Fatal("this test installs a .deb with dpkg: run it as root (CI does)")
	}
	if _, err := exec.LookPath("dpkg"); err != nil {
		t.Fatal("this test needs dpkg (a Debian machine)")
	}
	realRoot.Lock()
	t.Cleanup(realRoot.Unlock) // after the cleanups registered below, which purge what the test installed
	for _, name := range []string{"muster", "muster-agent"} {
		if exec.Command("dpkg-query", "-W", name).Run() == nil {
			t.Fatalf("a %s package is installed on this machine already: dpkg --purge %s first", name, name)
		}
	}
	if _, err := user.Lookup("muster"); err == nil {
		t.Fatal("a muster user exists on this machine already: the test would not know what to leave")
	}

	debs := buildPackages(t, t.TempDir(), packageVersion, binary, agentBinary, "deb")
	if len(debs) != 2 || filepath.Base(debs[0]) != "muster_9.8.7_amd64.deb" || filepath.Base(debs[1]) != "muster-agent_9.8.7_amd64.deb" {
		t.Fatalf("packaging printed %q, want the paths of the two .debs", debs)
	}

	t.Cleanup(func() {
		// Whatever happened, the machine is left as it was.
		for _, name := range []string{"muster-agent", "muster"} {
			if exec.Command("dpkg-query", "-W", name).Run() == nil {
				if b, err := exec.Command("dpkg", "--purge", name).CombinedOutput(); err != nil {
					t.Errorf("dpkg --purge %s: %v\n%s", name, err, b)
				}
			}
		}
	})
	b := runOK(t, "dpkg", "-i", debs[0], debs[1])
	for _, note := range []string{"edit /etc/muster/core.yaml", "Edit /etc/muster/agent.yaml"} {
		if !strings.Contains(string(b), note) {
			t.Errorf("the post-install notes do not say %q:\n%s", note, b)
		}
	}

	u, err := user.Lookup("muster")
	if err != nil {
		t.Fatalf("no muster user after the install: %v", err)
	}
	g, err := user.LookupGroup("muster")
	if err != nil {
		t.Fatalf("no muster group after the install: %v", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(g.Gid)
	if uid >= 1000 || u.Gid != g.Gid || u.HomeDir != "/var/lib/muster" {
		t.Errorf("user muster: uid %d (want a system uid), gid %s (want %s), home %s", uid, u.Gid, g.Gid, u.HomeDir)
	}
	if entry := runOK(t, "getent", "passwd", "muster"); !strings.HasSuffix(strings.TrimSpace(string(entry)), "nologin") {
		t.Errorf("user muster can log in: %s", entry)
	}

	for _, f := range []struct {
		path       string
		mode       os.FileMode
		owner, grp int
		sameAs     string // the repository's file it must equal
		dir        bool
	}{
		{path: "/usr/bin/muster", mode: 0o755},
		{path: "/usr/bin/muster-agent", mode: 0o755},
		{path: "/usr/lib/systemd/system/muster-agent.service", mode: 0o644},
		{path: "/usr/lib/systemd/system/muster-core.service", mode: 0o644},
		{path: "/etc/muster", mode: 0o750, grp: gid, dir: true},
		{path: "/etc/muster/agent.yaml", mode: 0o640, grp: gid, sameAs: "../configs/agent.yaml"},
		{path: "/etc/muster/core.yaml", mode: 0o640, grp: gid, sameAs: "../configs/core.yaml"},
		{path: "/var/lib/muster", mode: 0o755, dir: true},
		{path: "/var/lib/muster/core", mode: 0o700, owner: uid, grp: gid, dir: true},
		{path: "/var/lib/muster/agent", mode: 0o700, dir: true},
	} {
		fi, err := os.Stat(f.path)
		if err != nil {
			t.Errorf("%s: %v", f.path, err)
			continue
		}
		st := fi.Sys().(*syscall.Stat_t)
		if fi.Mode().Perm() != f.mode || fi.IsDir() != f.dir || int(st.Uid) != f.owner || int(st.Gid) != f.grp {
			t.Errorf("%s: %v %d:%d, want %v (dir %v) %d:%d", f.path, fi.Mode(), st.Uid, st.Gid, f.mode, f.dir, f.owner, f.grp)
		}
		if f.sameAs != "" {
			want, _ := os.ReadFile(f.sameAs)
			if got, _ := os.ReadFile(f.path); !bytes.Equal(got, want) {
				t.Errorf("%s differs from %s", f.path, f.sameAs)
			}
		}
	}
	for unit, start := range map[string]string{"muster-agent": "/usr/bin/muster-agent --config", "muster-core": "/usr/bin/muster core"} {
		text, _ := os.ReadFile("/usr/lib/systemd/system/" + unit + ".service")
		if !strings.Contains(string(text), "ExecStart="+start+" ") || strings.Contains(string(text), "/usr/local/bin/") {
			t.Errorf("%s.service does not start %s:\n%s", unit, start, text)
		}
	}
	for name, conffile := range map[string]string{"muster": "/etc/muster/core.yaml", "muster-agent": "/etc/muster/agent.yaml"} {
		if got := string(runOK(t, "dpkg-query", "-W", "-f=${Conffiles}", name)); !strings.Contains(got, conffile) {
			t.Errorf("%s is not a configuration file of the package %s: %q", conffile, name, got)
		}
		if v := string(runOK(t, "dpkg-query", "-W", "-f=${Version}", name)); v != strings.TrimPrefix(packageVersion, "v") {
			t.Errorf("%s: package version %q, want %q", name, v, strings.TrimPrefix(packageVersion, "v"))
		}
	}
	for _, bin := range []string{"/usr/bin/muster", "/usr/bin/muster-agent"} {
		if b := runOK(t, bin, "version"); !strings.HasPrefix(string(b), filepath.Base(bin)+" ") {
			t.Errorf("%s version printed %q", bin, b)
		}
	}
	checkPackageHabits(t)

	// An upgrade (here to the same version: dpkg runs the postinst with
	// "configure" and the version installed) prints no note again.
	if b := runOK(t, "dpkg", "-i", debs[0], debs[1]); strings.Contains(string(b), "/etc/muster/") {
		t.Errorf("the upgrade printed the post-install notes again:\n%s", b)
	}

	refuseAgentAs(t, uint32(uid), uint32(gid))
	startInstalledAgent(t)

	// The agent goes; the core's package, its files, the directories and
	// the user stay.
	runOK(t, "dpkg", "-r", "muster-agent")
	for _, gone := range []string{"/usr/bin/muster-agent", "/usr/lib/systemd/system/muster-agent.service"} {
		if _, err := os.Stat(gone); !os.IsNotExist(err) {
			t.Errorf("%s is still there after dpkg -r muster-agent (%v)", gone, err)
		}
	}
	if _, err := os.Stat("/etc/muster/agent.yaml"); err != nil {
		t.Errorf("dpkg -r removed the configuration, which only a purge removes: %v", err)
	}
	runOK(t, "dpkg", "--purge", "muster-agent")
	for _, gone := range []string{"/etc/muster/agent.yaml", "/var/lib/muster/agent"} {
		if _, err := os.Stat(gone); !os.IsNotExist(err) {
			t.Errorf("%s is still there after the purge of muster-agent (%v)", gone, err)
		}
	}
	for _, kept := range []string{"/usr/bin/muster", "/usr/lib/systemd/system/muster-core.service", "/etc/muster/core.yaml", "/var/lib/muster"} {
		if _, err := os.Stat(kept); err != nil {
			t.Errorf("the purge of muster-agent removed %s of muster: %v", kept, err)
		}
	}
	if _, err := user.Lookup("muster"); err != nil {
		t.Errorf("the purge of muster-agent removed the muster user, which muster's files name: %v", err)
	}

	// The last package goes: nothing is left.
	runOK(t, "dpkg", "--purge", "muster")
	for _, gone := range []string{"/usr/bin/muster", "/etc/muster", "/var/lib/muster"} {
		if _, err := os.Stat(gone); !os.IsNotExist(err) {
			t.Errorf("%s is still there after the purge (%v)", gone, err)
		}
	}
	if _, err := user.Lookup("muster"); err == nil {
		t.Error("the muster user is still there after the purge")
	}
	if _, err := user.LookupGroup("muster"); err == nil {
		t.Error("the muster group is still there after the purge")
	}

	// The other order, and dpkg's word over files: muster removed with its
	// configuration kept (and core.yaml deleted by hand), then muster-agent
	// purged, leaves the core's data and the user.
	runOK(t, "dpkg", "-i", debs[0], debs[1])
	marker := "/var/lib/muster/core/kept"
	if err := os.MkdirAll(filepath.Dir(marker), 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(marker, []byte("the core's data\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	runOK(t, "dpkg", "-r", "muster")
	if err := os.Remove("/etc/muster/core.yaml"); err != nil {
		t.Fatal(err)
	}
	runOK(t, "dpkg", "--purge", "muster-agent")
	if _, err := os.Stat(marker); err != nil {
		t.Errorf("the purge of muster-agent removed the data of muster, removed but not purged: %v", err)
	}
	if _, err := user.Lookup("muster"); err != nil {
		t.Errorf("the purge of muster-agent removed the muster user while muster is not purged: %v", err)
	}
	runOK(t, "dpkg", "--purge", "muster")
	for _, gone := range []string{"/etc/muster", "/var/lib/muster"} {
		if _, err := os.Stat(gone); !os.IsNotExist(err) {
			t.Errorf("%s is still there after both purges (%v)", gone, err)
		}
	}
	if _, err := user.Lookup("muster"); err == nil {
		t.Error("the muster user is still there after both purges")
	}

	// The core's package purged first, the node's still installed: the
	// node keeps its configuration, its directories and the user.
	runOK(t, "dpkg", "-i", debs[0], debs[1])
	runOK(t, "dpkg", "--purge", "muster")
	if _, err := os.Stat("/etc/muster/core.yaml"); !os.IsNotExist(err) {
		t.Errorf("/etc/muster/core.yaml is still there after the purge of muster (%v)", err)
	}
	for _, kept := range []string{"/usr/bin/muster-agent", "/etc/muster/agent.yaml", "/var/lib/muster"} {
		if _, err := os.Stat(kept); err != nil {
			t.Errorf("the purge of muster removed %s of muster-agent: %v", kept, err)
		}
	}
	if _, err := user.Lookup("muster"); err != nil {
		t.Errorf("the purge of muster removed the muster user, which muster-agent's files name: %v", err)
	}
	runOK(t, "dpkg", "--purge", "muster-agent")
	for _, gone := range []string{"/etc/muster", "/var/lib/muster"} {
		if _, err := os.Stat(gone); !os.IsNotExist(err) {
			t.Errorf("%s is still there after both purges, muster first (%v)", gone, err)
		}
	}
}

// realRoot is held by the tests that install packages into this machine's
// root: one at a time (dpkg takes its lock or fails), those of muster's
// packages each starting from a machine without them. A test releases it
// with t.Cleanup, registered before the cleanups that purge what it
// installed, so that it is released after them (a deferred Unlock ran
// before them, and the next test found muster-agent still installed).
var realRoot sync.Mutex

// buildPackages builds the amd64 packages of muster (bin) and muster-agent
// (agentBin) at version in formats (deb, rpm or both) into out, as `make
// package` does, and returns their paths: muster's first, per format.
func buildPackages(t *testing.T, out, version, bin, agentBin, formats string) []string {
	t.Helper()
	return buildPackagesFrom(t, "", out, version, bin, agentBin, formats)
}

// buildPackagesFrom is buildPackages with the configuration files, the
// scripts and the license read from root (packaging's -root) instead of
// the repository: a release whose configuration changed.
func buildPackagesFrom(t *testing.T, root, out, version, bin, agentBin, formats string) []string {
	t.Helper()
	args := []string{"run", "./packaging", "-binary", bin, "-agent-binary", agentBin, "-arch", "amd64",
		"-version", version, "-formats", formats, "-out", out}
	if root != "" {
		args = append(args, "-root", root)
	}
	if raceEnabled {
		// The man pages' build reuses the race build's compiled SQLite.
		args = append(args, "-docs-build-flags", "-race")
	}
	build := exec.Command("go", args...)
	build.Dir = ".."
	var stderr bytes.Buffer
	build.Stderr = &stderr
	b, err := build.Output()
	if err != nil {
		t.Fatalf("go run ./packaging: %v\n%s%s", err, b, stderr.Bytes())
	}
	return strings.Fields(string(b))
}

// checkPackageHabits checks what Debian's habits ask of the installed
// packages: Depends: on libc6 at a version, the copyright file, man pages
// (gzipped roff, muster's own and muster-agent's) and the completion
// scripts of both programs at Debian's paths.
func checkPackageHabits(t *testing.T) {
	t.Helper()
	for _, name := range []string{"muster", "muster-agent"} {
		if deps := string(runOK(t, "dpkg-query", "-W", "-f=${Depends}", name)); !strings.HasPrefix(deps, "libc6 (>= 2.") {
			t.Errorf("%s: Depends: %q, want libc6 (>= 2.x)", name, deps)
		}
		if b, err := os.ReadFile("/usr/share/doc/" + name + "/copyright"); err != nil || !strings.HasPrefix(string(b), "Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/\n") {
			t.Errorf("/usr/share/doc/%s/copyright: %v\n%s", name, err, b)
		}
		for _, f := range []string{
			"/usr/share/bash-completion/completions/" + name,
			"/usr/share/zsh/vendor-completions/_" + name,
			"/usr/share/fish/vendor_completions.d/" + name + ".fish",
		} {
			if b, err := os.ReadFile(f); err != nil || !strings.Contains(string(b), name) {
				t.Errorf("%s: %v (%d bytes)", f, err, len(b))
			}
		}
	}
	for page, title := range map[string]string{
		"muster.1.gz":               `.TH "MUSTER" "1"`,
		"muster-core.1.gz":          `.TH "MUSTER-CORE" "1"`,
		"muster-action-create.1.gz": `.TH "MUSTER-ACTION-CREATE" "1"`,
		"muster-agent.1.gz":         `.TH "MUSTER-AGENT" "1"`,
		"muster-agent-enroll.1.gz":  `.TH "MUSTER-AGENT-ENROLL" "1"`,
	} {
		b, err := exec.Command("gzip", "-dc", "/usr/share/man/man1/"+page).Output()
		if err != nil || !strings.Contains(string(b), title) || !strings.Contains(string(b), "9.8.7") {
			t.Errorf("/usr/share/man/man1/%s: %v, not a man page of 9.8.7 titled %s:\n%.300s", page, err, title, b)
		}
	}
	// The pages of `muster agent` are muster-agent's, which has the same
	// commands and flags: the file is in one package.
	if owner := strings.TrimSpace(string(runOK(t, "dpkg-query", "-S", "/usr/share/man/man1/muster-agent.1.gz"))); !strings.HasPrefix(owner, "muster-agent: ") {
		t.Errorf("muster-agent.1.gz belongs to %q, want muster-agent", owner)
	}
}

// refuseAgentAs runs the installed muster-agent as the muster user, as
// docs/production.md once told to enroll: the agent refuses at once, in one
// line, a data directory root owns (and, as root, one the muster user
// owns: TestAgentRefusesStateAnotherUserOwns).
func refuseAgentAs(t *testing.T, uid, gid uint32) {
	t.Helper()
	cmd := exec.Command("/usr/bin/muster-agent", "--config", "/etc/muster/agent.yaml", "--data-dir", "/var/lib/muster/agent")
	cmd.Dir = "/"
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=/var/lib/muster"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: gid}}
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "data_dir: /var/lib/muster/agent belongs to uid 0") {
		t.Errorf("the agent run as muster on root's data directory: %v\n%s", err, out)
	}
}

// startInstalledAgent runs the installed muster-agent with the installed agent
// configuration as root, as muster-agent.service does (keeping only
// CAP_SETUID, CAP_SETGID and CAP_KILL; the unprivileged setup is in
// docs/operations.md, "Privileges"): the package made its data directory
// root's. It waits for its health on its socket, checks that it is the
// configured node, and stops it with SIGTERM.
func startInstalledAgent(t *testing.T) {
	t.Helper()
	logPath := filepath.Join(t.TempDir(), "agent.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logFile.Close()
	cmd := exec.Command("/usr/bin/muster-agent", "--config", "/etc/muster/agent.yaml", "--data-dir", "/var/lib/muster/agent")
	cmd.Dir = "/"
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=/var/lib/muster"}
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	stopped := false
	defer func() {
		if !stopped {
			cmd.Process.Kill()
			<-exited
		}
	}()

	hc := socketClient(t, "/var/lib/muster/agent/agent.sock")
	var info wire.AgentInfo
	testwait.Within(t, time.Minute, "the installed agent's health on its socket", func() bool {
		select {
		case err := <-exited:
			stopped = true
			logs, _ := os.ReadFile(logPath)
			t.Fatalf("the installed agent exited: %v\n%s", err, logs)
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://agent/api/v1/info", nil)
		resp, err := hc.Do(req)
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		return resp.StatusCode == http.StatusOK && json.NewDecoder(resp.Body).Decode(&info) == nil
	})
	if info.NodeID != "node-1" || info.ClusterID != "local" {
		t.Errorf("the agent is %s/%s, not the installed configuration's local/node-1", info.ClusterID, info.NodeID)
	}
	fi, err := os.Stat("/var/lib/muster/agent")
	if err != nil {
		t.Fatal(err)
	}
	if st := fi.Sys().(*syscall.Stat_t); st.Uid != 0 || fi.Mode().Perm() != 0o700 {
		t.Errorf("the agent's data directory is uid %d mode %v, want root's, 0700", st.Uid, fi.Mode().Perm())
	}

	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-exited:
		stopped = true
		if err != nil {
			logs, _ := os.ReadFile(logPath)
			t.Fatalf("the agent did not stop cleanly on SIGTERM: %v\n%s", err, logs)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the agent did not stop within 30s of SIGTERM")
	}
}

// runOK runs a command and fails the test unless it succeeds; it returns
// its standard output.
func runOK(t *testing.T, name string, args ...string) []byte {
	t.Helper()
	var stderr bytes.Buffer
	cmd := exec.Command(name, args...)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s%s", name, strings.Join(args, " "), err, out, stderr.String())
	}
	return out
}

// releaseFlags are the go build flags `make release` builds the packaged
// binaries with (besides its -X of the version): the test checks that the
// Makefile still says so.
const releaseFlags = "-trimpath -buildmode=pie -ldflags '-s -w $(LDFLAGS)'"

// strippedTestBinaries copies this run's muster and muster-agent (the
// test builds of TestMain) into dir, stripped as `make release`'s -s -w
// leaves them, and returns their paths; the Makefile's release target is
// checked to still build with releaseFlags.
//
// A build as `make release` builds (position-independent, -trimpath) is a
// whole second compile of the module and its C code (about 2.5 minutes
// on two cores): lintian judges the packages' files, control data,
// scripts and overrides the same on these binaries, and of its binary
// checks only hardening-no-pie depends on the build (the test ignores it,
// and checks the release flags instead).
func strippedTestBinaries(t *testing.T, dir string) (bin, agentBin string) {
	t.Helper()
	mk, err := os.ReadFile("../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(mk), "$(GO) build "+releaseFlags+" \\") {
		t.Fatalf("the Makefile's release target no longer builds with %s: update releaseFlags", releaseFlags)
	}
	for _, b := range []struct{ from, to string }{{binary, "muster"}, {agentBinary, "muster-agent"}} {
		out := filepath.Join(dir, b.to)
		runOK(t, "strip", "--strip-all", "-o", out, b.from)
		if b.to == "muster" {
			bin = out
		} else {
			agentBin = out
		}
	}
	return bin, agentBin
}

// TestPackageDebsAreLintianClean builds the amd64 .debs as `make package`
// does (of this run's binaries, stripped: strippedTestBinaries) and runs Debian's
// lintian on each: no error and no warning, overridden or not reported.
// What is overridden is in each package's
// /usr/share/lintian/overrides/<package>, each with its reason above it.
// It needs lintian (make test-deps installs it), not root.
func TestPackageDebsAreLintianClean(t *testing.T) {
	t.Parallel()
	lintian, err := exec.LookPath("lintian")
	if err != nil {
		t.Fatal("no lintian here: make test-deps installs what the tests need (apt-get install lintian)")
	}
	dir := t.TempDir()
	bin, agentBin := strippedTestBinaries(t, dir)
	debs := buildPackages(t, filepath.Join(dir, "dist"), packageVersion, bin, agentBin, "deb")
	if len(debs) != 2 {
		t.Fatalf("packaging printed %q, want two .debs", debs)
	}
	for _, deb := range debs {
		// --fail-on none: the tags are read from the output, where
		// every error and warning is named (and, with -I, an override
		// that no longer matches anything).
		cmd := exec.Command(lintian, "-I", "--tag-display-limit", "0", "--fail-on", "none", deb)
		cmd.Env = append(os.Environ(), "LC_ALL=C.UTF-8")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("lintian %s: %v\n%s", filepath.Base(deb), err, out)
		}
		var tags []string
		for _, line := range strings.Split(string(out), "\n") {
			if strings.Contains(line, " hardening-no-pie ") { // the test's build (strippedTestBinaries)
				continue
			}
			if strings.HasPrefix(line, "E: ") || strings.HasPrefix(line, "W: ") || strings.Contains(line, " unused-override ") {
				tags = append(tags, line)
			}
		}
		if len(tags) > 0 {
			t.Errorf("lintian %s:\n%s", filepath.Base(deb), strings.Join(tags, "\n"))
		}
		// Each override says why, on the comment line above it.
		name := strings.SplitN(filepath.Base(deb), "_", 2)[0]
		text := string(runOK(t, "sh", "-c", `dpkg-deb --fsys-tarfile "$1" | tar -xOf - "./usr/share/lintian/overrides/$2"`, "sh", deb, name))
		prev := ""
		for _, line := range strings.Split(strings.TrimSpace(text), "\n") {
			if !strings.HasPrefix(line, "#") && !strings.HasPrefix(prev, "#") {
				t.Errorf("%s's override %q has no reason above it:\n%s", name, line, text)
			}
			prev = line
		}
	}
}
