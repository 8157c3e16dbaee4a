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
			"make repo needs: reprepro createrepo-c gpg (for example: sudo apt-get install reprepro createrepo-c gpg)\n"},
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
