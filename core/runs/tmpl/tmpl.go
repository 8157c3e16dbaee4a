// Package tmpl is the one grammar of the templates of runs and playbooks
// (docs/runs-and-playbooks.md, "Templates"): a playbook's parameters and a
// step's when and args are Go text/template with fields, if/else, comments
// and the functions eq ne lt le gt ge and or not lower upper, nothing else.
// No loop, no variable, no definition, no printf: a template's work is then
// linear in its length, and Parse refuses anything else by walking the parse
// tree, naming the construct.
//
// Rendering writes into a Budget: a bounded writer that stops the render at
// the first write past its bytes or past MaxTime, rather than measuring
// the output once it is built.
package tmpl

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"text/template"
	"text/template/parse"
	"time"
)

// Bounds of one template.
const (
	// MaxNodes bounds the actions, ifs, fields, functions and literals of
	// one template ({{ .a }} is two, an action and a field): a template
	// does at most this much work besides copying its text.
	MaxNodes = 64
	// MaxTime bounds one render. The grammar keeps the worst render under
	// a millisecond (docs/security.md); the budget, checked at every write, is the
	// last guard should a construct slip past it, and is set far above so
	// that a loaded machine never refuses a good template.
	MaxTime = time.Second
)

// Allowed lists what a template may call, for messages.
const Allowed = "fields, if/else and eq ne lt le gt ge and or not lower upper secret"

// builtins are text/template's own functions a template may call.
var builtins = map[string]bool{"eq": true, "ne": true, "lt": true, "le": true, "gt": true, "ge": true,
	"and": true, "or": true, "not": true}

// funcs are the functions a template may call besides the comparison and
// logic built-ins, read by Parse and by the grammar's walk alike; never
// written (template.Funcs copies it). printf is not one: its widths let a
// few bytes build megabytes.
var funcs = template.FuncMap{"lower": strings.ToLower, "upper": strings.ToUpper, "secret": SecretRef}

// SecretRef is what {{ secret "name" }} renders: the reference itself,
// never a value. Whoever runs the step (the agent, or the core for a
// core-side step) resolves it when it runs (docs/runs-and-playbooks.md,
// "Core-side steps").
func SecretRef(name string) string { return "{{ secret " + strconv.Quote(name) + " }}" }

// Missing keys: what a field absent from the data renders as.
const (
	MissingZero  = "missingkey=zero"
	MissingError = "missingkey=error"
)

// Parse parses s and checks it against the grammar. field, when not nil,
// is called with every field the template reads (.a.b gives [a b]) and
// may refuse it. missing is MissingZero or MissingError. Errors start with
// "template: ".
func Parse(s, missing string, field func(ident []string) error) (*template.Template, error) {
	t, err := template.New("").Funcs(funcs).Option(missing).Parse(s)
	if err != nil {
		return nil, fmt.Errorf("template: %s", strings.TrimPrefix(err.Error(), "template: :"))
	}
	if err := Check(t, field); err != nil {
		return nil, err
	}
	return t, nil
}

// Check walks t's parse tree and refuses every construct outside the
// grammar (see Parse).
func Check(t *template.Template, field func(ident []string) error) error { return check(t, field, nil) }

// check is Check, calling dot (when not nil) for every {{.}}.
func check(t *template.Template, field func(ident []string) error, dot func()) error {
	if len(t.Templates()) > 1 {
		return errors.New("template: define and block are not allowed (" + Allowed + ")")
	}
	if t.Tree == nil || t.Tree.Root == nil {
		return nil
	}
	nodes := 0
	var walk func(n parse.Node) error
	walk = func(n parse.Node) error {
		if l, ok := n.(*parse.ListNode); n == nil || ok && l == nil { // an if without an else
			return nil
		}
		switch n.Type() {
		case parse.NodeText, parse.NodeList, parse.NodePipe, parse.NodeCommand, parse.NodeComment:
		default:
			if nodes++; nodes > MaxNodes {
				return fmt.Errorf("template: more than %d actions, fields and values", MaxNodes)
			}
		}
		switch n := n.(type) {
		case *parse.ListNode:
			for _, c := range n.Nodes {
				if err := walk(c); err != nil {
					return err
				}
			}
		case *parse.ActionNode:
			return walk(n.Pipe)
		case *parse.PipeNode:
			if n == nil {
				return nil
			}
			if len(n.Decl) > 0 {
				return errors.New("template: variables are not allowed (" + Allowed + ")")
			}
			for _, c := range n.Cmds {
				if err := walk(c); err != nil {
					return err
				}
			}
		case *parse.CommandNode:
			for _, a := range n.Args {
				if err := walk(a); err != nil {
					return err
				}
			}
		case *parse.FieldNode:
			if field != nil {
				if err := field(n.Ident); err != nil {
					return fmt.Errorf("template: %w", err)
				}
			}
		case *parse.IdentifierNode:
			if !builtins[n.Ident] && funcs[n.Ident] == nil {
				return fmt.Errorf("template: function %q is not allowed (%s)", n.Ident, Allowed)
			}
		case *parse.IfNode:
			for _, c := range []parse.Node{n.Pipe, n.List, n.ElseList} {
				if err := walk(c); err != nil {
					return err
				}
			}
		case *parse.RangeNode:
			return errors.New("template: range is not allowed (" + Allowed + ")")
		case *parse.WithNode:
			return errors.New("template: with is not allowed (" + Allowed + ")")
		case *parse.TemplateNode:
			return errors.New("template: template and block are not allowed (" + Allowed + ")")
		case *parse.VariableNode:
			return errors.New("template: variables are not allowed (" + Allowed + ")")
		case *parse.DotNode:
			if dot != nil {
				dot()
			}
		case *parse.StringNode, *parse.NumberNode, *parse.BoolNode, *parse.TextNode,
			*parse.NilNode, *parse.CommentNode:
		default:
			return fmt.Errorf("template: %s is not allowed (%s)", n, Allowed)
		}
		return nil
	}
	return walk(t.Tree.Root)
}

// Fields calls fn with the identifiers of every field t reads, in order.
func Fields(t *template.Template, fn func(ident []string)) {
	_ = Check(t, func(ident []string) error { fn(ident); return nil })
}

// Reads returns what a template of the grammar reads of its data: the
// fields, each once, and whether it reads the data whole ({{.}}). What t
// renders depends on nothing else (its functions are pure), so equal
// values of those give equal renders.
func Reads(t *template.Template) (fields [][]string, whole bool) {
	seen := map[string]bool{}
	_ = check(t, func(ident []string) error {
		if k := strings.Join(ident, "."); !seen[k] {
			seen[k] = true
			fields = append(fields, ident)
		}
		return nil
	}, func() { whole = true })
	return fields, whole
}

// ErrBound is a render stopped by its budget (bytes or time).
var ErrBound = errors.New("template render stopped")

// Budget is what renders may still write: bytes, shared by the renders
// that use it, and MaxTime for each.
type Budget struct {
	size     int
	left     int
	deadline time.Time
	now      func() time.Time
}

// NewBudget is a budget of n bytes.
func NewBudget(n int) *Budget { return &Budget{size: n, left: n, now: time.Now} }

// writer is one render's bounded writer: a nil sink only counts.
type writer struct {
	b    *Budget
	sink *strings.Builder
}

func (w *writer) Write(p []byte) (int, error) {
	if len(p) > w.b.left {
		w.b.left = 0
		return 0, fmt.Errorf("%w: renders more than %d bytes", ErrBound, w.b.size)
	}
	if w.b.now().After(w.b.deadline) {
		return 0, fmt.Errorf("%w: took longer than %s", ErrBound, MaxTime)
	}
	w.b.left -= len(p)
	if w.sink != nil {
		w.sink.Write(p)
	}
	return len(p), nil
}

// Used is how many bytes the renders of the budget wrote.
func (b *Budget) Used() int { return b.size - b.left }

// Render executes t on data within the budget.
func (b *Budget) Render(t *template.Template, data any) (string, error) {
	var sb strings.Builder
	if err := b.exec(t, data, &sb); err != nil {
		return "", err
	}
	return sb.String(), nil
}

// Try executes t on data within the budget and keeps nothing: it tells
// whether Render would succeed, at the cost of no memory.
func (b *Budget) Try(t *template.Template, data any) error { return b.exec(t, data, nil) }

func (b *Budget) exec(t *template.Template, data any, sink *strings.Builder) error {
	b.deadline = b.now().Add(MaxTime)
	// A write error stops Execute at once and comes back as it is.
	if err := t.Execute(&writer{b: b, sink: sink}, data); err != nil {
		return err
	}
	if b.now().After(b.deadline) {
		return fmt.Errorf("%w: took longer than %s", ErrBound, MaxTime)
	}
	return nil
}
