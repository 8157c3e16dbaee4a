package store

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// Every Event constant of this package is in EventTypes, so that a new
// event type can be filtered on from the day it is added.
func TestEventTypesListsEveryConstant(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, name := range files {
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			vs, ok := n.(*ast.ValueSpec)
			if !ok {
				return true
			}
			for i, id := range vs.Names {
				if len(id.Name) <= 5 || id.Name[:5] != "Event" || i >= len(vs.Values) {
					continue
				}
				lit, ok := vs.Values[i].(*ast.BasicLit)
				if !ok || lit.Kind != token.STRING {
					continue
				}
				v, _ := strconv.Unquote(lit.Value)
				if !slices.Contains(EventTypes, v) {
					t.Errorf("%s: %s = %q is missing from EventTypes", name, id.Name, v)
				}
			}
			return true
		})
	}
}

func TestParseEventTypes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		want []string
		ok   bool
	}{
		{"", nil, true},
		{"node.down", []string{"node.down"}, true},
		{"node.*, action.lost", []string{"node.*", "action.lost"}, true},
		{"node.dwn", nil, false},
		{"nodes.*", nil, false},
		{"*", nil, false},
	} {
		got, err := ParseEventTypes(tc.in)
		if (err == nil) != tc.ok || !slices.Equal(got, tc.want) {
			t.Errorf("ParseEventTypes(%q) = %v, %v", tc.in, got, err)
		}
	}
	if !MatchEventType([]string{"node.*"}, "node.down") || MatchEventType([]string{"node.*"}, "nodes.x") ||
		!MatchEventType(nil, "x") || MatchEventType([]string{"node.up"}, "node.down") {
		t.Error("MatchEventType")
	}
}

// FuzzParseEventTypes: whatever a caller sends as ?type=, the parser either
// refuses it or returns only known types and families, and never panics.
func FuzzParseEventTypes(f *testing.F) {
	for _, s := range []string{"", "node.down", "node.*,action.lost", "node.dwn", "*", ",,", "run.*, run.finished", "a.b.c", "\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := ParseEventTypes(s)
		if err != nil {
			return
		}
		for _, typ := range got {
			fam, isFamily := strings.CutSuffix(typ, ".*")
			if !slices.Contains(EventTypes, typ) && !(isFamily && slices.Contains(EventTypeFamilies(), fam)) {
				t.Fatalf("ParseEventTypes(%q) accepted %q", s, typ)
			}
		}
	})
}
