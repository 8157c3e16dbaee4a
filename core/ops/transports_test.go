package ops_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// transports are the packages that serve people: they decode, call the
// operations and render.
var transports = []string{"../api", "../ui"}

// writers are the packages that change the store for a user verb: only
// the operations call them.
var writers = []string{
	"github.com/musterhq/muster/core/actions",
	"github.com/musterhq/muster/core/runs",
	"github.com/musterhq/muster/core/schedule/recur",
}

// writerFuncs are the functions of the domain packages the transports may
// import that change the store for a user verb, by package name.
var writerFuncs = map[string][]string{
	"auth":      {"CreateToken", "CreateTokenWith", "RevokeToken", "RevokeTokenTx", "Bootstrap"},
	"nodes":     {"Drain", "Undrain", "Forget", "Remove", "Save", "Update"},
	"corenodes": {"Drain", "Undrain", "Forget", "Remove", "Save", "Update"},
	"playbook":  {"Apply", "StartIn"},
}

// TestTransportsOpenNoWriteTransaction: neither the API nor the web UI
// opens a write transaction (Update, InTx), names a transaction
// (store.Tx), hands the store to a function outside core/store (a domain
// service that would write it), calls a domain function that writes, or
// imports a package that changes the store for a user verb (core/actions,
// core/runs, core/schedule/recur):
// every change goes through the operations layer, so the two cannot drift.
func TestTransportsOpenNoWriteTransaction(t *testing.T) {
	t.Parallel()
	for _, dir := range transports {
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil || len(files) == 0 {
			t.Fatalf("%s: no Go files (%v)", dir, err)
		}
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			for _, bad := range writeSites(t, f) {
				t.Errorf("%s", bad)
			}
		}
	}
}

// writeSites lists where file opens a write transaction, names one, or
// imports a writer.
func writeSites(t *testing.T, file string) []string {
	t.Helper()
	src, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, file, src, 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, imp := range f.Imports {
		path, _ := strconv.Unquote(imp.Path.Value)
		for _, w := range writers {
			if path == w {
				out = append(out, fset.Position(imp.Pos()).String()+": imports "+w)
			}
		}
	}
	ast.Inspect(f, func(n ast.Node) bool {
		if call, ok := n.(*ast.CallExpr); ok {
			out = append(out, storeHandedOut(fset, call)...)
		}
		sel, ok := n.(*ast.SelectorExpr)
		if !ok {
			return true
		}
		if x, ok := sel.X.(*ast.Ident); ok && slices.Contains(writerFuncs[x.Name], sel.Sel.Name) {
			out = append(out, fset.Position(sel.Pos()).String()+": calls "+x.Name+"."+sel.Sel.Name+" (a writer)")
		}
		switch name := sel.Sel.Name; {
		case name == "Update" || name == "InTx":
			if _, call := callOf(f, sel); call {
				out = append(out, fset.Position(sel.Pos()).String()+": calls ."+name+" (a write transaction)")
			}
		case name == "Tx":
			if x, ok := sel.X.(*ast.Ident); ok && x.Name == "store" {
				out = append(out, fset.Position(sel.Pos()).String()+": names store.Tx")
			}
		}
		return true
	})
	return out
}

// storeHandedOut lists the server's store (its field st) passed to a
// function that is neither core/store's nor the operations'.
func storeHandedOut(fset *token.FileSet, call *ast.CallExpr) []string {
	if sel, ok := call.Fun.(*ast.SelectorExpr); ok {
		if x, ok := sel.X.(*ast.Ident); ok && (x.Name == "store" || x.Name == "ops") {
			return nil // core/store's helpers read through the interface
		}
	}
	var out []string
	for _, arg := range call.Args {
		if a, ok := arg.(*ast.SelectorExpr); ok && a.Sel.Name == "st" {
			out = append(out, fset.Position(arg.Pos()).String()+": hands the store to a function outside core/store")
		}
	}
	return out
}

// callOf reports whether sel is the function of a call in f.
func callOf(f *ast.File, sel *ast.SelectorExpr) (*ast.CallExpr, bool) {
	var found *ast.CallExpr
	ast.Inspect(f, func(n ast.Node) bool {
		if c, ok := n.(*ast.CallExpr); ok && c.Fun == sel {
			found = c
			return false
		}
		return found == nil
	})
	return found, found != nil
}

// TestWriteSitesFindsAWriteTransaction: the check above finds a transport
// that opens one (so that it cannot pass by finding nothing).
func TestWriteSitesFindsAWriteTransaction(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "bad.go")
	src := `package api

import (
	"context"

	"github.com/musterhq/muster/core/actions"
	"github.com/musterhq/muster/core/store"
)

func approve(ctx context.Context, st store.Store, r *actions.Rules) error {
	return st.Update(ctx, func(tx store.Tx) error { _, err := r.Approve(ctx, tx, "x", actions.Actor{}); return err })
}

func token(ctx context.Context, s *Server) error {
	_, _, err := auth.CreateTokenWith(ctx, s.st, "x", nil, auth.Options{}, "", "")
	return err
}
`
	if err := os.WriteFile(file, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	got := strings.Join(writeSites(t, file), "\n")
	for _, want := range []string{"imports github.com/musterhq/muster/core/actions", "calls .Update", "names store.Tx",
		"calls auth.CreateTokenWith (a writer)", "hands the store to a function outside core/store"} {
		if !strings.Contains(got, want) {
			t.Errorf("the check missed %q in:\n%s", want, got)
		}
	}
}
