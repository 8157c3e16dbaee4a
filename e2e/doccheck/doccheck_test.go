package doccheck

import (
	"bufio"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// root is the repository's root, seen from this package.
const root = "../.."

// readmeMaxLines is the README's length limit: what muster is, the two
// commands, Try it, the concepts, production in five steps, the dependencies
// and links. The manual lives in docs/.
const readmeMaxLines = 250

func TestREADMEIsAtMost250Lines(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(b), "\n"); n > readmeMaxLines {
		t.Fatalf("README.md has %d lines, more than %d: move the detail into docs/", n, readmeMaxLines)
	}
}

func TestRelativeLinksInREADMEAndDocsResolve(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	files = append([]string{filepath.Join(root, "README.md")}, files...)
	anchors := map[string]map[string]bool{} // by cleaned path
	for _, f := range files {
		for _, l := range links(t, f) {
			if problem := resolve(f, l.target, anchors); problem != "" {
				t.Errorf("%s:%d: link %q: %s", rel(f), l.line, l.target, problem)
			}
		}
	}
}

// The checker itself: each kind of broken link is reported, good ones are not.
func TestResolveReportsMissingFilesAndAnchors(t *testing.T) {
	dir := t.TempDir()
	a := filepath.Join(dir, "a.md")
	write(t, a, "# Title\n\n## Runs: one `approved` operation\n\n## Runs: one `approved` operation\n\n```sh\n# not a heading\n```\n")
	write(t, filepath.Join(dir, "pic.png"), "")
	anchors := map[string]map[string]bool{}
	for target, want := range map[string]string{
		"a.md":                           "",
		"a.md#title":                     "",
		"#runs-one-approved-operation":   "",
		"#runs-one-approved-operation-1": "",
		"pic.png":                        "",
		"https://example.com/missing.md": "",
		"missing.md":                     "no such file",
		"a.md#missing":                   "no heading",
		"#not-a-heading":                 "no heading",
		"#runs-one-approved-operation-2": "no heading",
		"pic.png#x":                      "anchor into a file that is not Markdown",
		"sub/../a.md#runs-one-approved-operation": "",
	} {
		got := resolve(a, target, anchors)
		if (want == "") != (got == "") || !strings.Contains(got, want) {
			t.Errorf("resolve(%q) = %q, want %q", target, got, want)
		}
	}
	write(t, filepath.Join(dir, "b.md"), "see [a](a.md#missing) and `[code](nowhere.md)` and [ok](a.md)\n")
	ls := links(t, filepath.Join(dir, "b.md"))
	if len(ls) != 2 || ls[0].target != "a.md#missing" || ls[1].target != "a.md" {
		t.Errorf("links = %+v, want a.md#missing and a.md (code spans are not links)", ls)
	}
}

type link struct {
	line   int
	target string
}

var (
	linkRE     = regexp.MustCompile(`\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)
	codeSpanRE = regexp.MustCompile("`[^`]*`")
	headingRE  = regexp.MustCompile(`^#{1,6}\s+(.*?)\s*#*\s*$`)
	inlineLink = regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`)
)

// links returns the inline links of a Markdown file, outside code blocks and
// code spans.
func links(t *testing.T, path string) []link {
	t.Helper()
	var out []link
	eachLine(t, path, func(n int, s string, fenced bool) {
		if fenced {
			return
		}
		for _, m := range linkRE.FindAllStringSubmatch(codeSpanRE.ReplaceAllString(s, ""), -1) {
			out = append(out, link{line: n, target: m[1]})
		}
	})
	return out
}

// resolve says what is wrong with a link from file from, or "" when it leads
// somewhere. anchors caches each Markdown file's heading anchors.
func resolve(from, target string, anchors map[string]map[string]bool) string {
	if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
		return ""
	}
	path, anchor, _ := strings.Cut(target, "#")
	file := from
	if path != "" {
		file = filepath.Clean(filepath.Join(filepath.Dir(from), path))
		if _, err := os.Stat(file); err != nil {
			return "no such file " + rel(file)
		}
	}
	if anchor == "" {
		return ""
	}
	if !strings.HasSuffix(file, ".md") {
		return "an anchor into a file that is not Markdown"
	}
	if anchors[file] == nil {
		a, err := headingAnchors(file)
		if err != nil {
			return err.Error()
		}
		anchors[file] = a
	}
	if !anchors[file][anchor] {
		return "no heading with the anchor #" + anchor + " in " + rel(file)
	}
	return ""
}

// headingAnchors returns the anchors GitHub gives the headings of a Markdown
// file: the heading's text in lower case, without punctuation, spaces made
// hyphens; a repeated one gets -1, -2, ...
func headingAnchors(path string) (map[string]bool, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[string]bool{}
	seen := map[string]int{}
	fenced := false
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		s := sc.Text()
		if strings.HasPrefix(strings.TrimSpace(s), "```") {
			fenced = !fenced
			continue
		}
		m := headingRE.FindStringSubmatch(s)
		if fenced || m == nil {
			continue
		}
		slug := slugify(inlineLink.ReplaceAllString(m[1], "$1"))
		if n := seen[slug]; n > 0 {
			out[slug+"-"+strconv.Itoa(n)] = true
		} else {
			out[slug] = true
		}
		seen[slug]++
	}
	return out, sc.Err()
}

func slugify(s string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(s) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

func eachLine(t *testing.T, path string, fn func(n int, s string, fenced bool)) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	fenced := false
	for n := 1; sc.Scan(); n++ {
		s := sc.Text()
		if strings.HasPrefix(strings.TrimSpace(s), "```") {
			fenced = !fenced
			continue
		}
		fn(n, s, fenced)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
}

func rel(path string) string {
	if r, err := filepath.Rel(root, path); err == nil && !strings.HasPrefix(r, "..") {
		return r
	}
	return path
}

func write(t *testing.T, path, s string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
		t.Fatal(err)
	}
}
