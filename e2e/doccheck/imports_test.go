package doccheck

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// update rewrites the generated parts of the docs instead of checking them:
// go test ./e2e/doccheck -run TestArchitectureImportRowsAreWhatGoListSays -update
var update = flag.Bool("update", false, "rewrite the generated parts of docs/architecture.md")

// The import rows of docs/architecture.md ("Arrows") lie between these
// markers, generated from go list.
const (
	rowsBegin = "<!-- go list: import rows (make docs) -->"
	rowsEnd   = "<!-- end of import rows -->"
)

// module is the module path, cut from every package path shown.
const module = "github.com/musterhq/muster/"

// rowsWidth is where the rows' lines wrap.
const rowsWidth = 90

func TestArchitectureImportRowsAreWhatGoListSays(t *testing.T) {
	pkgs := goList(t)
	want := "```\n" + importRows(pkgs) + "```\n"
	path := filepath.Join(root, "docs", "architecture.md")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	head, rest, ok1 := strings.Cut(doc, rowsBegin+"\n")
	got, tail, ok2 := strings.Cut(rest, rowsEnd)
	if !ok1 || !ok2 {
		t.Fatalf("docs/architecture.md has no %q ... %q block", rowsBegin, rowsEnd)
	}
	if got == want {
		return
	}
	if *update {
		if err := os.WriteFile(path, []byte(head+rowsBegin+"\n"+want+rowsEnd+tail), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Fatalf("the import rows of docs/architecture.md are not what go list says; run make docs. Want:\n%s", want)
}

// The rows themselves, on a made-up tree: a row is one more than the
// highest row imported on the same side; a package only tests import is
// listed apart; a command lists what it imports.
func TestImportRowsCountFromTheSameSide(t *testing.T) {
	t.Parallel()
	pkgs := []goPackage{
		{ImportPath: module + "agent", Name: "agent", Imports: []string{module + "agent/api", module + "shared/wire"}},
		{ImportPath: module + "agent/api", Name: "api", Imports: []string{module + "agent/queue", "net/http"}},
		{ImportPath: module + "agent/queue", Name: "queue", Imports: []string{module + "shared/wire"}},
		{ImportPath: module + "agent/agenttest", Name: "agenttest", Imports: []string{module + "agent"}},
		{ImportPath: module + "shared/wire", Name: "wire", Imports: []string{module + "shared/action"}},
		{ImportPath: module + "shared/action", Name: "action"},
		{ImportPath: module + "cmd/x", Name: "main", Imports: []string{module + "agent", module + "shared/wire", "os"}},
	}
	want := ` agent/
   row 2  agent
   row 1  agent/api
   row 0  agent/queue
 shared/
   row 1  wire
   row 0  action
 imported by tests only: agent/agenttest
 cmd/x imports agent, shared/wire
`
	if got := importRows(pkgs); got != want {
		t.Fatalf("rows:\n%s\nwant:\n%s", got, want)
	}
}

type goPackage struct {
	ImportPath string
	Name       string
	Imports    []string
}

// goList lists the packages of agent/, core/, shared/ and cmd/ with their
// imports (tests' imports aside), as go list reports them.
func goList(t *testing.T) []goPackage {
	t.Helper()
	cmd := exec.Command("go", "list", "-json=ImportPath,Name,Imports", "./agent/...", "./core/...", "./shared/...", "./cmd/...")
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v: %s", err, stderr.String())
	}
	var pkgs []goPackage
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p goPackage
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		pkgs = append(pkgs, p)
	}
	return pkgs
}

// importRows renders the rows of docs/architecture.md, "Arrows": for each
// side (agent/, core/, shared/), each package's row is one more than the
// highest row it imports on its side (0 when it imports none); packages no
// other package imports but tests come apart, and each command says what
// of muster it imports.
func importRows(pkgs []goPackage) string {
	short := func(p string) string { return strings.TrimPrefix(p, module) }
	side := func(p string) string { s, _, _ := strings.Cut(short(p), "/"); return s }
	byPath := map[string]goPackage{}
	imported := map[string]bool{}
	for _, p := range pkgs {
		byPath[p.ImportPath] = p
	}
	for _, p := range pkgs {
		for _, q := range p.Imports {
			imported[q] = true
		}
	}
	testOnly := func(p goPackage) bool { return side(p.ImportPath) != "cmd" && !imported[p.ImportPath] }
	rows := map[string]int{}
	var row func(p string) int
	row = func(p string) int {
		if r, ok := rows[p]; ok {
			return r
		}
		r := 0
		for _, q := range byPath[p].Imports {
			if _, ours := byPath[q]; ours && side(q) == side(p) {
				r = max(r, row(q)+1)
			}
		}
		rows[p] = r
		return r
	}
	var b strings.Builder
	for _, s := range []string{"agent", "core", "shared"} {
		byRow := map[int][]string{}
		top := -1
		for _, p := range pkgs {
			if side(p.ImportPath) != s || testOnly(p) {
				continue
			}
			r := row(p.ImportPath)
			name := short(p.ImportPath)
			if s == "shared" {
				name = strings.TrimPrefix(name, "shared/")
			}
			byRow[r] = append(byRow[r], name)
			top = max(top, r)
		}
		if top < 0 {
			continue
		}
		fmt.Fprintf(&b, " %s/\n", s)
		for r := top; r >= 0; r-- {
			slices.Sort(byRow[r])
			wrap(&b, fmt.Sprintf("   row %d  ", r), byRow[r], "  ")
		}
	}
	var tests, cmds []string
	for _, p := range pkgs {
		if testOnly(p) {
			tests = append(tests, short(p.ImportPath))
		}
		if side(p.ImportPath) == "cmd" {
			cmds = append(cmds, p.ImportPath)
		}
	}
	slices.Sort(tests)
	if len(tests) > 0 {
		wrap(&b, " imported by tests only: ", tests, "  ")
	}
	slices.Sort(cmds)
	for _, c := range cmds {
		var ours []string
		for _, q := range byPath[c].Imports {
			if strings.HasPrefix(q, module) {
				ours = append(ours, short(q))
			}
		}
		slices.Sort(ours)
		wrap(&b, " "+short(c)+" imports ", ours, ", ")
	}
	return b.String()
}

// wrap writes lead and the words joined by sep, wrapping at rowsWidth with
// the continuation lines indented under the first word.
func wrap(b *strings.Builder, lead string, words []string, sep string) {
	line := lead
	indent := strings.Repeat(" ", len(lead))
	for i, w := range words {
		piece := w
		if i < len(words)-1 {
			piece += strings.TrimRight(sep, " ")
		}
		if line != lead && line != indent && len(line)+len(piece) > rowsWidth {
			b.WriteString(strings.TrimRight(line, " ") + "\n")
			line = indent
		}
		line += piece
		if i < len(words)-1 {
			line += sep[len(strings.TrimRight(sep, " ")):]
		}
	}
	b.WriteString(strings.TrimRight(line, " ") + "\n")
}
