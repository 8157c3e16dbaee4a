package main

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestEveryArchitectureAndFormat builds the four packages `make package`
// makes, around a stand-in binary: the arm64 and rpm paths run in
// `make test` too, where only the amd64 .deb is installed.
func TestEveryArchitectureAndFormat(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	bin := filepath.Join(dir, "muster")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\necho muster\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "dist")
	for _, arch := range []string{"amd64", "arm64"} {
		if err := run("..", bin, arch, "v1.2.3", []string{"deb", "rpm"}, out); err != nil {
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
	want := []string{"muster-1.2.3-1.aarch64.rpm", "muster-1.2.3-1.x86_64.rpm", "muster_1.2.3_amd64.deb", "muster_1.2.3_arm64.deb"}
	if !slices.Equal(got, want) {
		t.Fatalf("packages %q, want %q", got, want)
	}
}

func TestRunRefusesBadInput(t *testing.T) {
	t.Parallel()
	bin := filepath.Join(t.TempDir(), "muster")
	os.WriteFile(bin, []byte("x"), 0o755)
	for name, tc := range map[string]struct {
		bin, arch string
		formats   []string
	}{
		"no binary":      {"", "amd64", []string{"deb"}},
		"missing binary": {bin + ".gone", "amd64", []string{"deb"}},
		"unknown arch":   {bin, "riscv64", []string{"deb"}},
		"unknown format": {bin, "amd64", []string{"msi"}},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			if err := run("..", tc.bin, tc.arch, "v1.0.0", tc.formats, t.TempDir()); err == nil {
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
