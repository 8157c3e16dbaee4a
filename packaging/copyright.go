package main

import (
	"bufio"
	"os"
	"path/filepath"
	"strings"
)

// homepage is muster's repository, named in each package and its
// copyright file.
const homepage = "https://github.com/musterhq/muster"

// copyrightYear is the year muster was first published, the year of its
// copyright notice (Debian's copyright files carry one: lintian's
// copyright-without-copyright-notice).
const copyrightYear = "2026"

// copyrightFile is /usr/share/doc/<package>/copyright in Debian's
// machine-readable format (copyright-format 1.0) for the repository at
// root: its LICENSE file's text when there is one; when there is none, it
// says that the repository states no license, and grants nothing.
func copyrightFile(root string) (string, error) {
	var b strings.Builder
	b.WriteString("Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/\n")
	b.WriteString("Upstream-Name: muster\n")
	b.WriteString("Source: " + homepage + "\n\n")
	b.WriteString("Files: *\n")
	b.WriteString("Copyright: " + copyrightYear + " the muster authors\n")
	text, err := os.ReadFile(filepath.Join(root, "LICENSE"))
	switch {
	case os.IsNotExist(err):
		b.WriteString("License: none\n")
		b.WriteString(" muster's repository holds no LICENSE file and names no license: this\n")
		b.WriteString(" package is distributed under none.\n")
		return b.String(), nil
	case err != nil:
		return "", err
	}
	b.WriteString("License: " + licenseName(string(text)) + "\n")
	sc := bufio.NewScanner(strings.NewReader(strings.TrimSpace(string(text))))
	for sc.Scan() {
		// Each line of the text is indented; an empty one is a dot.
		if line := strings.TrimRight(sc.Text(), " \t"); line == "" {
			b.WriteString(" .\n")
		} else {
			b.WriteString(" " + line + "\n")
		}
	}
	return b.String(), sc.Err()
}

// licenseName is the short name (as Debian's copyright format spells it)
// of the license text of a LICENSE file, from its first words; "other"
// when it is none of these.
func licenseName(text string) string {
	head := strings.Join(strings.Fields(text), " ")
	for prefix, name := range map[string]string{
		"MIT License":                        "Expat",
		"Apache License Version 2.0":         "Apache-2.0",
		"Apache License, Version 2.0":        "Apache-2.0",
		"Mozilla Public License Version 2.0": "MPL-2.0",
		"BSD 3-Clause License":               "BSD-3-Clause",
		"BSD 2-Clause License":               "BSD-2-Clause",
		"ISC License":                        "ISC",
	} {
		if strings.HasPrefix(head, prefix) {
			return name
		}
	}
	return "other"
}
