package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// paragraphs parses a file in Debian's control syntax (deb822): each
// paragraph's fields, in order; a line that is neither a field nor its
// continuation fails the test.
func paragraphs(t *testing.T, text string) []map[string]string {
	t.Helper()
	var ps []map[string]string
	var cur map[string]string
	last := ""
	for i, line := range strings.Split(strings.TrimRight(text, "\n"), "\n") {
		switch {
		case line == "":
			cur = nil
		case strings.HasPrefix(line, " "):
			if cur == nil || last == "" {
				t.Fatalf("line %d continues no field: %q", i+1, line)
			}
			cur[last] += "\n" + line
		default:
			name, value, ok := strings.Cut(line, ":")
			if !ok || strings.ContainsAny(name, " \t") {
				t.Fatalf("line %d is no field: %q", i+1, line)
			}
			if cur == nil {
				cur = map[string]string{}
				ps = append(ps, cur)
			}
			cur[name], last = strings.TrimSpace(value), name
		}
	}
	return ps
}

// TestCopyrightWithoutLicense: the repository has no LICENSE file; the
// copyright file is in Debian's machine-readable format and says so,
// granting nothing.
func TestCopyrightWithoutLicense(t *testing.T) {
	t.Parallel()
	if _, err := os.Stat("../LICENSE"); !os.IsNotExist(err) {
		t.Fatalf("the repository has a LICENSE now (%v): this test's case is TestCopyrightOfALicense", err)
	}
	text, err := copyrightFile("..")
	if err != nil {
		t.Fatal(err)
	}
	ps := paragraphs(t, text)
	if len(ps) != 2 {
		t.Fatalf("%d paragraphs, want a header and one Files paragraph:\n%s", len(ps), text)
	}
	if ps[0]["Format"] != "https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/" || ps[0]["Upstream-Name"] != "muster" || ps[0]["Source"] != homepage {
		t.Errorf("header %q", ps[0])
	}
	if ps[1]["Files"] != "*" || ps[1]["Copyright"] != copyrightYear+" the muster authors" || !strings.HasPrefix(ps[1]["License"], "none\n") || !strings.Contains(ps[1]["License"], "no LICENSE file") {
		t.Errorf("files paragraph %q", ps[1])
	}
}

// TestCopyrightOfALicense: with a LICENSE file, its text is the license's,
// line by line, an empty line as " .", under its short name.
func TestCopyrightOfALicense(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	license := "MIT License\n\nCopyright (c) 2026 someone\n\nPermission is hereby granted.\n"
	if err := os.WriteFile(filepath.Join(root, "LICENSE"), []byte(license), 0o644); err != nil {
		t.Fatal(err)
	}
	text, err := copyrightFile(root)
	if err != nil {
		t.Fatal(err)
	}
	ps := paragraphs(t, text)
	want := "Expat\n MIT License\n .\n Copyright (c) 2026 someone\n .\n Permission is hereby granted."
	if len(ps) != 2 || ps[1]["License"] != want {
		t.Errorf("License: %q, want %q:\n%s", ps[len(ps)-1]["License"], want, text)
	}
	if got := licenseName("Some licence of our own\n"); got != "other" {
		t.Errorf("licenseName of an unknown text: %q, want other", got)
	}
}
