package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// highestGlibc is the highest GLIBC_ version objdump (binutils, which the
// C compiler cgo needs brings) lists among the dynamic symbols of path:
// another reader of the same ELF tables than debug/elf.
func highestGlibc(t *testing.T, path string) string {
	t.Helper()
	out, err := exec.Command("objdump", "-T", path).Output()
	if err != nil {
		t.Fatalf("objdump -T %s: %v", path, err)
	}
	highest := ""
	for _, m := range regexp.MustCompile(`GLIBC_([0-9.]+)\b`).FindAllStringSubmatch(string(out), -1) {
		if v, _ := glibcVersion("GLIBC_" + m[1]); highest == "" || slices.Compare(v, mustVersion(t, highest)) > 0 {
			highest = m[1]
		}
	}
	if highest == "" {
		t.Fatalf("objdump lists no GLIBC_ version in %s:\n%s", path, out)
	}
	return highest
}

func mustVersion(t *testing.T, s string) []int {
	t.Helper()
	v, ok := glibcVersion("GLIBC_" + s)
	if !ok {
		t.Fatalf("%q is no version", s)
	}
	return v
}

// TestDependsOfARealBinary: /bin/true, dynamically linked against glibc,
// makes the .deb depend on libc6 at least at the highest GLIBC_ version
// objdump finds in it, and the .rpm require libc.so.6 at that version.
func TestDependsOfARealBinary(t *testing.T) {
	t.Parallel()
	l, err := readLinkage("/bin/true")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(l.libraries, "libc.so.6") {
		t.Fatalf("/bin/true links %q, not libc.so.6", l.libraries)
	}
	want := highestGlibc(t, "/bin/true")
	deb, err := debDepends(l)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(deb, []string{"libc6 (>= " + want + ")"}) {
		t.Errorf("Depends: %q, want libc6 (>= %s)", deb, want)
	}
	rpm, err := rpmRequires(l)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(rpm, "libc.so.6()(64bit)") || !slices.Contains(rpm, "libc.so.6(GLIBC_"+want+")(64bit)") {
		t.Errorf("Requires: %q, want libc.so.6()(64bit) and libc.so.6(GLIBC_%s)(64bit)", rpm, want)
	}
}

// TestDependsOfAStaticBinary: a binary that links nothing depends on
// nothing.
func TestDependsOfAStaticBinary(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	src := filepath.Join(dir, "main.go")
	if err := os.WriteFile(src, []byte("package main\n\nfunc main() {}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "static")
	build := exec.Command("go", "build", "-o", bin, src)
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	l, err := readLinkage(bin)
	if err != nil {
		t.Fatal(err)
	}
	deb, err := debDepends(l)
	if err != nil || deb != nil {
		t.Errorf("Depends: %q (%v), want none", deb, err)
	}
	rpm, err := rpmRequires(l)
	if err != nil || rpm != nil {
		t.Errorf("Requires: %q (%v), want none", rpm, err)
	}
}

// TestDependsRefusesWhatItCannotName: a library outside glibc, or a file
// that is no ELF binary, stops the build rather than make a package with
// a dependency missing.
func TestDependsRefusesWhatItCannotName(t *testing.T) {
	t.Parallel()
	l := linkage{libraries: []string{"libc.so.6", "libssl.so.3"}}
	if deps, err := debDepends(l); err == nil || !strings.Contains(err.Error(), "libssl.so.3") {
		t.Errorf("debDepends: %q, %v; want an error naming libssl.so.3", deps, err)
	}
	if deps, err := rpmRequires(l); err == nil {
		t.Errorf("rpmRequires: %q, no error", deps)
	}
	script := filepath.Join(t.TempDir(), "script")
	if err := os.WriteFile(script, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := readLinkage(script); err == nil {
		t.Error("readLinkage of a shell script: no error")
	}
}

func TestGlibcVersion(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"GLIBC_2.34": "2.34", "GLIBC_2.2.5": "2.2.5", "GLIBC_PRIVATE": "", "GLIBC_ABI_DT_RELR": "", "GCC_3.0": "", "": "",
	} {
		v, ok := glibcVersion(in)
		if got := dotted(v); ok != (want != "") || got != want {
			t.Errorf("glibcVersion(%q) = %q, %v; want %q", in, got, ok, want)
		}
	}
}

// TestFormatInfoPerFormat: the .deb and the .rpm of one binary differ in
// their dependencies' spelling and zsh's directory, nothing else.
func TestFormatInfoPerFormat(t *testing.T) {
	t.Parallel()
	dir, bin, agentBin := standIns(t)
	staging := filepath.Join(dir, "staging")
	pkgs := packages(bin, agentBin)
	if err := writeDocs(staging, pkgs, fakeDocs, "v1.2.3"); err != nil {
		t.Fatal(err)
	}
	glibc := highestGlibc(t, "/bin/true")
	for format, want := range map[string]struct {
		depends []string
		zsh     string
	}{
		"deb": {[]string{"libc6 (>= " + glibc + ")"}, "/usr/share/zsh/vendor-completions/_muster-agent"},
		"rpm": {[]string{"libc.so.6()(64bit)", "libc.so.6(GLIBC_" + glibc + ")(64bit)"}, "/usr/share/zsh/site-functions/_muster-agent"},
	} {
		info, err := formatInfo("..", pkgs[1], "amd64", "v1.2.3", staging, format)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(info.Depends, want.depends) {
			t.Errorf("%s: depends %q, want %q", format, info.Depends, want.depends)
		}
		var zsh []string
		for _, c := range info.Contents {
			if strings.Contains(c.Destination, "/zsh/") {
				zsh = append(zsh, c.Destination)
			}
		}
		if !slices.Equal(zsh, []string{want.zsh}) {
			t.Errorf("%s: zsh completion at %q, want %s", format, zsh, want.zsh)
		}
	}
}
