package tmpl

import (
	"strings"
	"testing"
	"text/template/parse"
)

// FuzzParse feeds templates to the grammar: nothing panics, and what it
// accepts holds no loop, definition, variable or function outside the
// allow-list, and renders within its budget.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		`{{range 40000}}{{range 40000}}{{end}}{{end}}true`,
		`{{range 300}}{{printf "%01000000d" 0}}{{end}}`,
		`{{ eq .steps.up.state "DONE" }}`, `{{ .steps.up.outputs.previous }}`,
		`{{ if and (eq .node.labels.role "db") (not .x) }}true{{ else }}false{{ end }}`,
		`{{ if .a }}x{{ end }}`, `{{ lower .a | upper }}`, `{{define "x"}}{{end}}`, `{{block "b" .}}{{end}}`, `{{$x := 1}}`,
		`{{with .a}}{{.}}{{end}}`, `{{index .a 1}}`, `{{ (.a).b }}`, `{{/* c */}}`, `{{template "x"}}`,
		`{{ slice .a 1 }}`, `{{ call .f }}`, `{{ len .a }}`, `{{ html .a }}`, `{{ break }}`, "{{ `raw` }}",
		`{{ 1e9 }}{{ 'a' }}{{ nil }}{{ true }}`, `{{- .a -}}`, `{{ . }}`,
		`{{ secret "db-password" }}`, `{{ secret "../x" }}`, `{{ upper (secret "a") }}`, `{{ secret .a }}`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		tp, err := Parse(s, MissingZero, nil)
		if err != nil {
			return
		}
		if len(tp.Templates()) > 1 {
			t.Fatalf("accepted a definition: %q", s)
		}
		var walk func(n parse.Node)
		walk = func(n parse.Node) {
			switch n := n.(type) {
			case *parse.ListNode:
				if n != nil {
					for _, c := range n.Nodes {
						walk(c)
					}
				}
			case *parse.ActionNode:
				walk(n.Pipe)
			case *parse.PipeNode:
				if n != nil {
					if len(n.Decl) > 0 {
						t.Fatalf("accepted a variable: %q", s)
					}
					for _, c := range n.Cmds {
						walk(c)
					}
				}
			case *parse.CommandNode:
				for _, a := range n.Args {
					walk(a)
				}
			case *parse.IfNode:
				walk(n.Pipe)
				walk(n.List)
				walk(n.ElseList)
			case *parse.IdentifierNode:
				if n.Ident == secretFunc {
					break // checked whole by secretCall, below
				}
				if !builtins[n.Ident] && funcs[n.Ident] == nil {
					t.Fatalf("accepted function %q: %q", n.Ident, s)
				}
			case *parse.RangeNode, *parse.WithNode, *parse.TemplateNode, *parse.VariableNode, *parse.ChainNode:
				t.Fatalf("accepted %s: %q", n, s)
			}
		}
		walk(tp.Tree.Root)
		for _, c := range tp.Tree.Root.Nodes {
			if a, ok := c.(*parse.ActionNode); ok {
				if _, err := secretCall(a); err != nil {
					t.Fatalf("accepted a bad secret: %q: %v", s, err)
				}
			}
		}
		data := map[string]any{"a": "x", "steps": map[string]any{}, "node": map[string]any{"id": "n"}}
		out, err := NewBudget(1<<16).Render(tp, data)
		if err == nil && len(out) > 1<<16 {
			t.Fatalf("rendered %d bytes past a budget of 64 KiB", len(out))
		}
		_ = strings.TrimSpace(out)
	})
}
