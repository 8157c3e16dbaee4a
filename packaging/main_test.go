package main

import (
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/goreleaser/nfpm/v2/files"
)

// standIns writes two stand-in binaries, muster and muster-agent, in a
// temporary directory: copies of /bin/true, an ELF binary linked against
// glibc as the real ones are.
func standIns(t *testing.T) (dir, binary, agentBinary string) {
	t.Helper()
	dir = t.TempDir()
	binary, agentBinary = filepath.Join(dir, "muster"), filepath.Join(dir, "muster-agent")
	elf, err := os.ReadFile("/bin/true")
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range []string{binary, agentBinary} {
		if err := os.WriteFile(b, elf, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir, binary, agentBinary
}

// TestEveryArchitectureAndFormat builds the eight packages `make package`
// makes (muster and muster-agent), around stand-in binaries: the arm64 and
// rpm paths run in `make test` too, where only the amd64 .debs are
// installed.
func TestEveryArchitectureAndFormat(t *testing.T) {
	t.Parallel()
	dir, bin, agentBin := standIns(t)
	out := filepath.Join(dir, "dist")
	for _, arch := range []string{"amd64", "arm64"} {
		if err := run("..", bin, agentBin, arch, "v1.2.3", []string{"deb", "rpm"}, out); err != nil {
			t.Fatalf("%s: %v", arch, err)
		}
	}
	entries, err := os.ReadDir(out)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range entries {
		fi, _ := e.Info()
		if fi.Size() == 0 {
			t.Errorf("%s is empty", e.Name())
		}
		got = append(got, e.Name())
	}
	want := []string{
		"muster-1.2.3-1.aarch64.rpm", "muster-1.2.3-1.x86_64.rpm",
		"muster-agent-1.2.3-1.aarch64.rpm", "muster-agent-1.2.3-1.x86_64.rpm",
		"muster-agent_1.2.3_amd64.deb", "muster-agent_1.2.3_arm64.deb",
		"muster_1.2.3_amd64.deb", "muster_1.2.3_arm64.deb",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("packages %q, want %q", got, want)
	}
	wantDepends := "libc6 (>= " + highestGlibc(t, "/bin/true") + ")"
	for _, deb := range []string{"muster-agent_1.2.3_amd64.deb", "muster_1.2.3_arm64.deb"} {
		b, err := exec.Command("dpkg-deb", "-f", filepath.Join(out, deb), "Depends").Output()
		if err != nil {
			t.Fatalf("dpkg-deb -f %s Depends: %v", deb, err)
		}
		if got := strings.TrimSpace(string(b)); got != wantDepends {
			t.Errorf("%s: Depends: %q, want %q", deb, got, wantDepends)
		}
		listing, err := exec.Command("dpkg-deb", "-c", filepath.Join(out, deb)).Output()
		if err != nil {
			t.Fatalf("dpkg-deb -c %s: %v", deb, err)
		}
		name, _, _ := strings.Cut(deb, "_")
		if !strings.Contains(string(listing), " ./usr/share/doc/"+name+"/copyright\n") {
			t.Errorf("%s holds no /usr/share/doc/%s/copyright:\n%s", deb, name, listing)
		}
	}
}

// TestNoFileInBothPackages: one machine may install muster and
// muster-agent, so no file is in both; the directories both hold have the
// same owner and mode in each, and each package holds its binary, its unit
// and its configuration.
func TestNoFileInBothPackages(t *testing.T) {
	t.Parallel()
	_, bin, agentBin := standIns(t)
	owner := map[string]string{} // file → package
	dirs := map[string]string{}  // directory → its owner, group and mode
	for _, p := range packages(bin, agentBin) {
		info := packageInfo("..", p, "amd64", "v1.2.3", "units")
		var held []string
		for _, c := range info.Contents {
			if c.Type == files.TypeDir {
				attrs := c.FileInfo.Owner + ":" + c.FileInfo.Group + " " + c.FileInfo.Mode.String()
				if prev, ok := dirs[c.Destination]; ok && prev != attrs {
					t.Errorf("%s is %s in one package, %s in the other", c.Destination, prev, attrs)
				}
				dirs[c.Destination] = attrs
				continue
			}
			if other, ok := owner[c.Destination]; ok {
				t.Errorf("%s is in %s and %s", c.Destination, other, p.name)
			}
			owner[c.Destination] = p.name
			held = append(held, c.Destination)
		}
		want := []string{binDir + "/" + p.name, unitDir + "/" + p.unit, etcDir + "/" + p.config, docDir + "/" + p.name + "/copyright"}
		if slices.Sort(held); !slices.Equal(held, slices.Sorted(slices.Values(want))) {
			t.Errorf("%s holds %q, want %q", p.name, held, want)
		}
	}
	want := map[string]string{
		etcDir:              "root:muster -rwxr-x---",
		stateDir:            "root:root -rwxr-xr-x",
		stateDir + "/core":  "muster:muster -rwx------",
		stateDir + "/agent": "root:root -rwx------",
	}
	if !maps.Equal(dirs, want) {
		t.Errorf("directories %v, want %v", dirs, want)
	}
}

// TestPackagedUnitsStartTheirBinary: each packaged unit starts its
// package's binary in /usr/bin, the agent's muster-agent.
func TestPackagedUnitsStartTheirBinary(t *testing.T) {
	t.Parallel()
	for unit, want := range map[string]string{
		"muster-agent.service": "ExecStart=/usr/bin/muster-agent --config /etc/muster/agent.yaml ",
		"muster-core.service":  "ExecStart=/usr/bin/muster core --config /etc/muster/core.yaml ",
	} {
		text, err := packagedUnit("..", unit)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(text, want) || strings.Contains(text, manualBinDir) {
			t.Errorf("%s does not start %q:\n%s", unit, want, text)
		}
	}
}

// TestScriptsAreShellScripts: every script of both packages exists and
// parses (sh -n); the two packages share only the one that makes the user.
func TestScriptsAreShellScripts(t *testing.T) {
	t.Parallel()
	_, bin, agentBin := standIns(t)
	seen := map[string]int{}
	for _, p := range packages(bin, agentBin) {
		s := packageInfo("..", p, "amd64", "v1.2.3", "units").Scripts
		for _, path := range []string{s.PreInstall, s.PostInstall, s.PreRemove, s.PostRemove} {
			seen[path]++
			if out, err := exec.Command("sh", "-n", path).CombinedOutput(); err != nil {
				t.Errorf("sh -n %s: %v\n%s", path, err, out)
			}
		}
	}
	for path, n := range seen {
		if shared := filepath.Base(path) == "preinstall.sh"; (n == 2) != shared {
			t.Errorf("%s is a script of %d packages", path, n)
		}
	}
}

func TestRunRefusesBadInput(t *testing.T) {
	t.Parallel()
	_, bin, agentBin := standIns(t)
	for name, tc := range map[string]struct {
		bin, agentBin, arch string
		formats             []string
	}{
		"no binary":            {"", agentBin, "amd64", []string{"deb"}},
		"no agent binary":      {bin, "", "amd64", []string{"deb"}},
		"missing binary":       {bin + ".gone", agentBin, "amd64", []string{"deb"}},
		"missing agent binary": {bin, agentBin + ".gone", "amd64", []string{"deb"}},
		"unknown arch":         {bin, agentBin, "riscv64", []string{"deb"}},
		"unknown format":       {bin, agentBin, "amd64", []string{"msi"}},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			if err := run("..", tc.bin, tc.agentBin, tc.arch, "v1.0.0", tc.formats, t.TempDir()); err == nil {
				t.Fatal("no error")
			}
		})
	}
}

func TestPackageVersion(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"v1.2.0":              "v1.2.0",
		"1.2.0":               "1.2.0",
		"v1.2.0-3-gabcdef0":   "v1.2.0-3-gabcdef0",
		"abcdef0":             "0.0.0+abcdef0",
		"abcdef0-dirty":       "0.0.0+abcdef0.dirty",
		"dev":                 "0.0.0+dev",
		"v1.2.0-3-gabc-dirty": "v1.2.0-3-gabc-dirty",
	} {
		if got := packageVersion(in); got != want {
			t.Errorf("packageVersion(%q) = %q, want %q", in, got, want)
		}
	}
}
