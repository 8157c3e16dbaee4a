package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestRootRegistersEveryCommandInOnePlace: the root command carries every
// command of muster, and no file registers one from init (newRootCmd is the
// one place to read them).
func TestRootRegistersEveryCommandInOnePlace(t *testing.T) {
	t.Parallel()
	var got []string
	for _, c := range newRootCmd().Commands() {
		got = append(got, c.Name())
	}
	want := []string{"action", "agent", "cluster", "core", "dev", "events", "gossip", "node", "playbook", "run",
		"tls", "token", "version"}
	for _, name := range want {
		if !slices.Contains(got, name) {
			t.Errorf("muster %s is not registered (commands: %s)", name, strings.Join(got, ", "))
		}
	}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			if fn, ok := d.(*ast.FuncDecl); ok && fn.Recv == nil && fn.Name.Name == "init" {
				t.Errorf("%s has an init function: register commands in newRootCmd", name)
			}
		}
	}
}
