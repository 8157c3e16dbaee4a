package doccheck

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The file rows of core/orchestrate in docs/architecture.md ("One loop per
// cluster") lie between these markers, generated from the package's calls.
const (
	fileRowsBegin = "<!-- calls: core/orchestrate file rows (make docs) -->"
	fileRowsEnd   = "<!-- end of file rows -->"
)

// TestOrchestrateFilesCallOnlyIntoLowerRows: within core/orchestrate, a
// file calls only functions and methods of files on lower rows (a file's
// row is one more than the highest row of a file it calls), so no call runs
// back up from a lower concern to a higher one; and the rows written in
// docs/architecture.md are these (make docs writes them).
func TestOrchestrateFilesCallOnlyIntoLowerRows(t *testing.T) {
	calls := fileCalls(t, filepath.Join(root, "core", "orchestrate"), "github.com/musterhq/muster/core/orchestrate")
	rows, cycle := fileRows(calls)
	if cycle != nil {
		t.Fatalf("core/orchestrate: these files call each other, round in a cycle: %s", strings.Join(cycle, " → "))
	}
	want := "```\n" + formatFileRows(rows) + "```\n"
	path := filepath.Join(root, "docs", "architecture.md")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	head, rest, ok1 := strings.Cut(doc, fileRowsBegin+"\n")
	got, tail, ok2 := strings.Cut(rest, fileRowsEnd)
	if !ok1 || !ok2 {
		t.Fatalf("docs/architecture.md has no %q ... %q block", fileRowsBegin, fileRowsEnd)
	}
	if got == want {
		return
	}
	if *update {
		if err := os.WriteFile(path, []byte(head+fileRowsBegin+"\n"+want+fileRowsEnd+tail), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Fatalf("the file rows of core/orchestrate in docs/architecture.md are not what its calls say; run make docs. Want:\n%s", want)
}

// exportData returns a lookup of the compiler's export data of every
// package the package in dir depends on, as `go list -export` builds it
// (from the build cache the tests' own build filled): type-checking the
// dependencies from source instead takes minutes on a small machine.
func exportData(t *testing.T, dir string) func(path string) (io.ReadCloser, error) {
	t.Helper()
	args := append([]string{"list", "-export", "-deps", "-json=ImportPath,Export"}, buildFlags...)
	cmd := exec.Command("go", append(args, ".")...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -export: %v: %s", err, stderr.String())
	}
	files := map[string]string{}
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p struct{ ImportPath, Export string }
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		files[p.ImportPath] = p.Export
	}
	return func(path string) (io.ReadCloser, error) {
		f, ok := files[path]
		if !ok || f == "" {
			return nil, fmt.Errorf("no export data for %s", path)
		}
		return os.Open(f)
	}
}

// fileCalls type-checks the package in dir (its non-test files) and
// returns, for each file, the other files whose package-level functions or
// methods it calls or names.
func fileCalls(t *testing.T, dir, path string) map[string]map[string]bool {
	t.Helper()
	fset := token.NewFileSet()
	names, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	var files []*ast.File
	for _, n := range names {
		if strings.HasSuffix(n, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, n, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	conf := types.Config{Importer: importer.ForCompiler(fset, "gc", exportData(t, dir))}
	info := &types.Info{Uses: map[*ast.Ident]types.Object{}}
	pkg, err := conf.Check(path, fset, files, info)
	if err != nil {
		t.Fatal(err)
	}
	calls := map[string]map[string]bool{}
	for _, f := range files {
		calls[filepath.Base(fset.Position(f.Pos()).Filename)] = map[string]bool{}
	}
	for id, obj := range info.Uses {
		fn, ok := obj.(*types.Func)
		if !ok || fn.Pkg() != pkg {
			continue
		}
		if fn.Type().(*types.Signature).Recv() == nil && fn.Parent() != pkg.Scope() {
			continue // a function literal's name, or a closure: not a package-level function
		}
		from := filepath.Base(fset.Position(id.Pos()).Filename)
		to := filepath.Base(fset.Position(fn.Pos()).Filename)
		if from != to && calls[to] != nil {
			calls[from][to] = true
		}
	}
	return calls
}

// fileRows puts each file on its row, or returns a cycle of calls.
func fileRows(calls map[string]map[string]bool) (map[string]int, []string) {
	rows := map[string]int{}
	const visiting = -1
	var path []string
	var visit func(f string) []string
	visit = func(f string) []string {
		switch r, ok := rows[f]; {
		case ok && r == visiting:
			i := slices.Index(path, f)
			return append(slices.Clone(path[i:]), f)
		case ok:
			return nil
		}
		rows[f] = visiting
		path = append(path, f)
		row := 0
		for _, to := range slices.Sorted(maps.Keys(calls[f])) {
			if cycle := visit(to); cycle != nil {
				return cycle
			}
			row = max(row, rows[to]+1)
		}
		path = path[:len(path)-1]
		rows[f] = row
		return nil
	}
	for _, f := range slices.Sorted(maps.Keys(calls)) {
		if cycle := visit(f); cycle != nil {
			return nil, cycle
		}
	}
	return rows, nil
}

// formatFileRows writes the rows, the highest first, wrapped at rowsWidth.
func formatFileRows(rows map[string]int) string {
	top := 0
	for _, r := range rows {
		top = max(top, r)
	}
	var b strings.Builder
	for r := top; r >= 0; r-- {
		var on []string
		for f, fr := range rows {
			if fr == r {
				on = append(on, f)
			}
		}
		slices.Sort(on)
		label := fmt.Sprintf(" row %-2d ", r)
		line := label
		for _, f := range on {
			if len(line)+len(f)+1 > rowsWidth && line != label {
				b.WriteString(strings.TrimRight(line, " ") + "\n")
				line = strings.Repeat(" ", len(label))
			}
			line += f + "  "
		}
		b.WriteString(strings.TrimRight(line, " ") + "\n")
	}
	return b.String()
}
