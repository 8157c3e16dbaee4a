package doccheck

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// namedRE finds the tests, benchmarks and fuzz tests the docs name: a
// TestX, BenchmarkX or FuzzX not part of a longer name or of a field
// (r.TestSignals).
var namedRE = regexp.MustCompile(`(?:^|[^A-Za-z0-9_.])((?:Test|Benchmark|Fuzz)[A-Z][A-Za-z0-9_]*)`)

// definedRE finds the top-level test functions of a _test.go file.
var definedRE = regexp.MustCompile(`(?m)^func ((?:Test|Benchmark|Fuzz)[A-Z][A-Za-z0-9_]*)\(`)

func TestEveryTestAndBenchmarkNamedInTheDocsExists(t *testing.T) {
	t.Parallel()
	defined := map[string]bool{}
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != root && strings.HasPrefix(d.Name(), ".") {
			return filepath.SkipDir
		}
		if !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range definedRE.FindAllStringSubmatch(string(b), -1) {
			defined[m[1]] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range append([]string{filepath.Join(root, "README.md")}, files...) {
		for _, n := range namedIn(t, f) {
			if !defined[n.name] {
				t.Errorf("%s:%d names %s, which no _test.go defines", rel(f), n.line, n.name)
			}
		}
	}
}

// The finder itself: names in text and code spans count, a field or a
// longer word does not.
func TestNamedFindsTestsBenchmarksAndFuzzTestsOnly(t *testing.T) {
	t.Parallel()
	f := filepath.Join(t.TempDir(), "a.md")
	write(t, f, "`TestA` (`x_test.go`), BenchmarkB/nodes=1 and FuzzC;\n`r.TestSignals.Init(t)`, MyTestD, Testing, TestE_f\n")
	var got []string
	for _, n := range namedIn(t, f) {
		got = append(got, n.name)
	}
	if want := []string{"TestA", "BenchmarkB", "FuzzC", "TestE_f"}; !slices.Equal(got, want) {
		t.Fatalf("named %v, want %v", got, want)
	}
}

type named struct {
	line int
	name string
}

func namedIn(t *testing.T, path string) []named {
	t.Helper()
	var out []named
	eachLine(t, path, func(n int, s string, _ bool) {
		for _, m := range namedRE.FindAllStringSubmatch(s, -1) {
			out = append(out, named{line: n, name: m[1]})
		}
	})
	return out
}
