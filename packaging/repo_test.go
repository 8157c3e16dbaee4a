package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// On a machine without the repository's tools, `make repo`'s scripts name
// what to install and stop, writing nothing: they never install a system
// package. (TestRepoAptInstallAndUpgradeAgent and
// TestRepoRpmInstallIntoTemporaryRoot in e2e build and use the
// repositories.)
func TestRepoScriptsNameMissingToolsAndStop(t *testing.T) {
	empty, dir := t.TempDir(), t.TempDir()
	out, gnupg := filepath.Join(dir, "repo"), filepath.Join(dir, "gnupg")
	for _, c := range []struct {
		script string
		args   []string
		want   string
	}{
		{"repo.sh", []string{dir, out, gnupg, "0123456789ABCDEF"},
			"make repo needs: reprepro createrepo-c gpg dpkg (for example: sudo apt-get install reprepro createrepo-c gpg dpkg)\n"},
		{"repo-key.sh", []string{gnupg}, "make repo needs: gpg (for example: sudo apt-get install gpg)\n"},
	} {
		cmd := exec.Command("/bin/sh", append([]string{c.script}, c.args...)...)
		cmd.Env = []string{"PATH=" + empty, "HOME=" + dir}
		var stderr strings.Builder
		cmd.Stderr = &stderr
		b, err := cmd.Output()
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 || stderr.String() != c.want || len(b) != 0 {
			t.Errorf("%s without its tools: %v, printed %q and %q, want exit 1 and %q", c.script, err, b, stderr.String(), c.want)
		}
	}
	for _, p := range []string{out, gnupg} {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("%s was made (%v)", p, err)
		}
	}
}

// fakeTools writes stand-ins of the tools repo.sh runs into a new directory
// and returns it: gpg knows every key and exports a few bytes, dpkg-deb
// says version 1.0, createrepo_c makes repodata/repomd.xml, and reprepro
// stores the .deb it is given, or fails when failReprepro.
func fakeTools(t *testing.T, failReprepro bool) string {
	t.Helper()
	bin := t.TempDir()
	reprepro := `for a; do last=$a; done; mkdir -p "$3/pool" && cp "$last" "$3/pool/"`
	if failReprepro {
		reprepro = `echo "reprepro: broken" >&2; exit 1`
	}
	for name, body := range map[string]string{
		"gpg":          `case "$*" in *--detach-sign*) for a; do last=$a; done; echo sig >"$last.asc";; *--export*) echo key;; esac`,
		"dpkg-deb":     `echo 1.0`,
		"createrepo_c": `for a; do last=$a; done; mkdir -p "$last/repodata" && echo x >"$last/repodata/repomd.xml"`,
		"reprepro":     reprepro,
	} {
		if err := os.WriteFile(filepath.Join(bin, name), []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return bin
}

// runRepo runs repo.sh with the tools of bin (and the shell's own).
func runRepo(t *testing.T, bin, dist, out string) (string, error) {
	t.Helper()
	cmd := exec.Command("/bin/sh", "repo.sh", dist, out, filepath.Join(t.TempDir(), "gnupg"), "0123456789ABCDEF")
	cmd.Env = []string{"PATH=" + bin + ":/usr/bin:/bin", "HOME=" + t.TempDir()}
	b, err := cmd.CombinedOutput()
	return string(b), err
}

// repo.sh replaces OUT only when it is empty, absent, or carries the
// .muster-repo marker it writes: a directory that only serves the keyring
// (a web root) is refused and left as it was. It builds beside OUT and
// swaps only on success, so a failed build leaves the old repository whole
// and no build directory behind; paths with spaces work.
func TestRepoScriptReplacesOnlyItsOwnOutputAndOnlyOnSuccess(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "with space")
	dist, out := filepath.Join(dir, "dist dir"), filepath.Join(dir, "www root")
	for _, d := range []string{dist, out} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write := func(p, s string) {
		t.Helper()
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(dist, "muster agent_1.0_amd64.deb"), "deb")
	write(filepath.Join(out, "index.html"), "site")
	write(filepath.Join(out, "muster-archive-keyring.gpg"), "key")

	said, err := runRepo(t, fakeTools(t, false), dist, out)
	if err == nil || !strings.Contains(said, "not replacing it") {
		t.Fatalf("a web root serving the keyring: %v %q, want refused", err, said)
	}
	if b, err := os.ReadFile(filepath.Join(out, "index.html")); err != nil || string(b) != "site" {
		t.Fatalf("the refused directory changed: %q %v", b, err)
	}

	if err := os.RemoveAll(out); err != nil {
		t.Fatal(err)
	}
	if said, err := runRepo(t, fakeTools(t, false), dist, out); err != nil {
		t.Fatalf("first build: %v\n%s", err, said)
	}
	for _, p := range []string{".muster-repo", "muster-archive-keyring.gpg", "apt/pool/muster agent_1.0_amd64.deb"} {
		if _, err := os.Stat(filepath.Join(out, p)); err != nil {
			t.Fatalf("the build wrote no %s: %v", p, err)
		}
	}
	if fi, err := os.Stat(out); err != nil || fi.Mode().Perm() != 0o755 {
		t.Fatalf("the repository's mode: %v %v, want 0755 (it is served)", fi, err)
	}

	write(filepath.Join(out, "old"), "served")
	said, err = runRepo(t, fakeTools(t, true), dist, out)
	if err == nil || !strings.Contains(said, "reprepro: broken") {
		t.Fatalf("a failing build: %v %q, want its error", err, said)
	}
	if b, err := os.ReadFile(filepath.Join(out, "old")); err != nil || string(b) != "served" {
		t.Fatalf("a failed build touched the served repository: %q %v", b, err)
	}
	left, _ := filepath.Glob(filepath.Join(dir, ".muster-repo*"))
	if len(left) != 0 {
		t.Fatalf("a failed build left %v", left)
	}

	if said, err := runRepo(t, fakeTools(t, false), dist, out); err != nil {
		t.Fatalf("rebuild: %v\n%s", err, said)
	}
	if _, err := os.Stat(filepath.Join(out, "old")); !os.IsNotExist(err) {
		t.Fatalf("a rebuild kept what the old repository held: %v", err)
	}
}
