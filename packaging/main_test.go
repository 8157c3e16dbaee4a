package main

import (
	"errors"
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

// fakeDocs is a docsWriter that writes, for name, the pages name.1 and
// name-version.1 and the three completion scripts; muster also has the
// pages of its agent command, muster-agent.1 and muster-agent-check.1, as
// the muster-agent program has.
func fakeDocs(name, dir, source string) error {
	pages := []string{name, name + "-version"}
	if name == "muster" || name == "muster-agent" {
		pages = append(pages, "muster-agent", "muster-agent-check")
	}
	for _, d := range []string{"man1", "completions"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			return err
		}
	}
	for _, page := range pages {
		if err := os.WriteFile(filepath.Join(dir, "man1", page+".1"), []byte(".TH "+page+" 1 \"\" \""+source+"\"\n"), 0o644); err != nil {
			return err
		}
	}
	for _, shell := range []string{"bash", "zsh", "fish"} {
		if err := os.WriteFile(filepath.Join(dir, "completions", shell), []byte("# "+shell+" completion of "+name+"\n"), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// debFiles lists the files (not the directories) of the .deb at path.
func debFiles(t *testing.T, path string) []string {
	t.Helper()
	listing, err := exec.Command("dpkg-deb", "-c", path).Output()
	if err != nil {
		t.Fatalf("dpkg-deb -c %s: %v", path, err)
	}
	var held []string
	for _, line := range strings.Split(strings.TrimSpace(string(listing)), "\n") {
		fields := strings.Fields(line)
		if name := strings.TrimPrefix(fields[len(fields)-1], "."); !strings.HasSuffix(name, "/") {
			held = append(held, name)
		}
	}
	return held
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
		if err := run("..", bin, agentBin, arch, "v1.2.3", []string{"deb", "rpm"}, out, fakeDocs); err != nil {
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
	}

	// The lintian overrides are the .deb's only.
	if _, err := exec.LookPath("rpm"); err == nil {
		list, err := exec.Command("rpm", "-qlp", filepath.Join(out, "muster-agent-1.2.3-1.x86_64.rpm")).Output()
		if err != nil || !strings.Contains(string(list), "/usr/bin/muster-agent") || strings.Contains(string(list), "lintian") {
			t.Errorf("rpm -qlp of muster-agent's .rpm: %v\n%s", err, list)
		}
	}
	// Each package holds its copyright, lintian overrides, man pages and
	// completions at Debian's paths; muster leaves the pages of its agent command to
	// muster-agent, so that no file is in both.
	held := map[string]string{}
	for name, pages := range map[string][]string{
		"muster": {"/usr/share/man/man1/muster.1.gz", "/usr/share/man/man1/muster-version.1.gz"},
		"muster-agent": {"/usr/share/man/man1/muster-agent.1.gz", "/usr/share/man/man1/muster-agent-check.1.gz",
			"/usr/share/man/man1/muster-agent-version.1.gz"},
	} {
		got := debFiles(t, filepath.Join(out, name+"_1.2.3_amd64.deb"))
		for _, f := range got {
			if other, ok := held[f]; ok {
				t.Errorf("%s is in %s and %s", f, other, name)
			}
			held[f] = name
		}
		var docs []string
		for _, f := range got {
			if strings.HasPrefix(f, "/usr/share/") {
				docs = append(docs, f)
			}
		}
		wantDocs := append(pages, "/usr/share/doc/"+name+"/copyright", "/usr/share/lintian/overrides/"+name,
			"/usr/share/bash-completion/completions/"+name,
			"/usr/share/zsh/vendor-completions/_"+name,
			"/usr/share/fish/vendor_completions.d/"+name+".fish")
		if slices.Sort(docs); !slices.Equal(docs, slices.Sorted(slices.Values(wantDocs))) {
			t.Errorf("%s holds %q below /usr/share, want %q", name, docs, wantDocs)
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
		want := []string{binDir + "/" + p.name, unitDir + "/" + p.unit, etcDir + "/" + p.config, docDir + "/" + p.name + "/copyright",
			lintianDir + "/" + p.name} // the .deb's only
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
		docs                docsWriter
	}{
		"no binary":            {"", agentBin, "amd64", []string{"deb"}, fakeDocs},
		"no agent binary":      {bin, "", "amd64", []string{"deb"}, fakeDocs},
		"missing binary":       {bin + ".gone", agentBin, "amd64", []string{"deb"}, fakeDocs},
		"missing agent binary": {bin, agentBin + ".gone", "amd64", []string{"deb"}, fakeDocs},
		"unknown arch":         {bin, agentBin, "riscv64", []string{"deb"}, fakeDocs},
		"docs that fail": {bin, agentBin, "amd64", []string{"deb"}, func(string, string, string) error {
			return errors.New("no docs")
		}},
		"docs without pages": {bin, agentBin, "amd64", []string{"deb"}, func(string, string, string) error { return nil }},
		"unknown format":     {bin, agentBin, "amd64", []string{"msi"}, fakeDocs},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			if err := run("..", tc.bin, tc.agentBin, tc.arch, "v1.0.0", tc.formats, t.TempDir(), tc.docs); err == nil {
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
