// Package playbook reads playbooks: named, versioned YAML procedures whose
// stages become a run (docs/architecture.md, "Runs and playbooks"). Parse
// checks a document once, with errors that name the line and the field; Render
// fills in the parameters and returns the stages of a run request, which
// core/runs then checks, resolves against the cluster and plans.
//
// Templates: a string in a stage's args or target may use Go's text/template
// syntax over the parameters, as {{ .name }}, in the grammar of core/runs/tmpl
// (fields, if, and a few functions; no loop, no printf), a reference to an undefined parameter is an error
// when the playbook is applied, and a string that is exactly one reference
// to an int or bool parameter takes that parameter's type in the args.
package playbook

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"text/template"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/musterhq/muster/core/runs"
	"github.com/musterhq/muster/core/runs/tmpl"
	"github.com/musterhq/muster/shared/action"
	"github.com/musterhq/muster/shared/jsonbody"
	"github.com/musterhq/muster/shared/limit"
	"github.com/musterhq/muster/shared/wire"
)

// Bounds of a playbook document and of a parameter's value.
const (
	MaxSize       = 256 << 10
	MaxParamValue = 4 << 10
	MaxParams     = 100
)

// ErrInvalid is a document that is not a valid playbook, or parameters that
// do not fit it.
var ErrInvalid = errors.New("invalid playbook")

// Parameter types.
const (
	TypeString = "string"
	TypeInt    = "int"
	TypeBool   = "bool"
	TypeEnum   = "enum"
)

// Param is one parameter of a playbook.
type Param struct {
	Name        string   `yaml:"name" json:"name"`
	Type        string   `yaml:"type" json:"type"`
	Default     any      `yaml:"default" json:"default"`
	Values      []string `yaml:"values,omitempty" json:"values,omitempty"`
	Description string   `yaml:"description" json:"description"`
	// Required: no default, so every plan and start must give it.
	Required bool `yaml:"required,omitempty" json:"required,omitempty"`
}

// Target is a stage's target as written: strings may be templates.
type Target struct {
	Nodes  []string          `yaml:"nodes,omitempty"`
	Labels map[string]string `yaml:"labels,omitempty"`
	All    bool              `yaml:"all,omitempty"`
}

// Stage is one stage as written.
type Stage struct {
	Name           string         `yaml:"name"`
	Kind           string         `yaml:"kind"`
	Args           map[string]any `yaml:"args,omitempty"`
	Target         Target         `yaml:"target"`
	MaxConcurrency yaml.Node      `yaml:"max_concurrency,omitempty"`
	MaxErrors      yaml.Node      `yaml:"max_errors,omitempty"`
	OnFailure      string         `yaml:"on_failure,omitempty"`
	DependsOn      *[]string      `yaml:"depends_on,omitempty"`
	Timeout        string         `yaml:"timeout,omitempty"`
	// Steps, Rollback, Canary, Soak and Unavailable are a procedure
	// (docs/runs-and-playbooks.md, "Procedures: steps node by node").
	Steps       []Step `yaml:"steps,omitempty"`
	Rollback    []Step `yaml:"rollback,omitempty"`
	Canary      int    `yaml:"canary,omitempty"`
	Soak        string `yaml:"soak,omitempty"`
	Unavailable string `yaml:"unavailable,omitempty"`
	// IncludeFailed runs the stage on the nodes that failed an earlier
	// stage too (wire.StageSpec).
	IncludeFailed bool `yaml:"include_failed,omitempty"`
	// Follow adds the nodes that join with the target's labels while the
	// stage runs (wire.StageSpec).
	Follow bool `yaml:"follow,omitempty"`
	// Lock is a lock the stage takes while it runs (wire.StageSpec).
	Lock *Lock `yaml:"lock,omitempty"`
	// AutoPromoteAfterS and AbortOn are the run's (wire.StageSpec): a
	// canary that promotes itself once its gates held that long, and the
	// gates whose failure aborts the run.
	AutoPromoteAfterS int      `yaml:"auto_promote_after_s,omitempty"`
	AbortOn           []string `yaml:"abort_on,omitempty"`

	conc, errs *limit.Limit
	// concRef, errsRef name the int parameter a limit is ("{{ .name }}").
	concRef, errsRef string
	timeoutS, soakS  int
}

// Step is one step of a stage's procedure as written. Its args and when may
// use the parameters, rendered when the run is made, or the run's own
// templates over .node and .steps, rendered node by node as it runs; one
// string does not mix both.
type Step struct {
	Name    string         `yaml:"name"`
	Kind    string         `yaml:"kind"`
	Args    map[string]any `yaml:"args,omitempty"`
	Timeout string         `yaml:"timeout,omitempty"`
	Retry   *Retry         `yaml:"retry,omitempty"`
	When    string         `yaml:"when,omitempty"`
	// Gate and Call, instead of a kind and args, are a check the core
	// makes and a request it sends (wire.Gate, wire.Call); Soak keeps a
	// gate under watch that long after it first passes.
	Gate map[string]any `yaml:"gate,omitempty"`
	Call map[string]any `yaml:"call,omitempty"`
	Soak string         `yaml:"soak,omitempty"`

	timeoutS int
	soakS    int
	retry    *wire.Retry
}

// Retry is a step's retry as written: durations like 5s and 1m.
type Retry struct {
	Attempts int     `yaml:"attempts"`
	Delay    string  `yaml:"delay,omitempty"`
	Backoff  float64 `yaml:"backoff,omitempty"`
	MaxDelay string  `yaml:"max_delay,omitempty"`
}

// Playbook is a parsed document.
type Playbook struct {
	Name        string  `yaml:"name"`
	Description string  `yaml:"description"`
	Params      []Param `yaml:"params,omitempty"`
	Stages      []Stage `yaml:"stages"`
	// Lock is a lock the run takes from its start to its end
	// (wire.CreateRunRequest).
	Lock *Lock `yaml:"lock,omitempty"`
}

// The expressions are compiled on first use, not when the program starts:
// the agent, which never reads a playbook, shares the binary
// (docs/performance.md, "Idle agent RSS").
var (
	nameRE  = lazyRegexp(`^[a-z0-9]([a-z0-9._-]{0,62}[a-z0-9])?$`)
	paramRE = lazyRegexp(`^[A-Za-z_][A-Za-z0-9_]{0,62}$`)
)

// lazyRegexp compiles expr once, at its first use.
func lazyRegexp(expr string) func() *regexp.Regexp {
	return sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(expr) })
}

// ValidName reports whether n can name a playbook.
func ValidName(n string) bool { return nameRE().MatchString(n) }

// posError is an error at a line of the document.
func posError(line int, field, format string, args ...any) error {
	msg := fmt.Sprintf(format, args...)
	if line > 0 {
		return fmt.Errorf("%w: line %d: %s: %s", ErrInvalid, line, field, msg)
	}
	return fmt.Errorf("%w: %s: %s", ErrInvalid, field, msg)
}

// Parse reads and checks a playbook document.
func Parse(doc []byte) (*Playbook, error) {
	if len(doc) > MaxSize {
		return nil, fmt.Errorf("%w: the document is %d bytes, over the limit of %d", ErrInvalid, len(doc), MaxSize)
	}
	var root yaml.Node
	if err := yaml.Unmarshal(doc, &root); err != nil {
		return nil, fmt.Errorf("%w: %s", ErrInvalid, yamlMessage(err))
	}
	if len(root.Content) == 0 || root.Content[0].Kind != yaml.MappingNode {
		return nil, fmt.Errorf("%w: the document is not a playbook (want a mapping with name and stages)", ErrInvalid)
	}
	// Refused before anything expands the document: a few aliases of one
	// anchor would make a small document a huge one.
	if err := checkNoAliases(&root); err != nil {
		return nil, err
	}
	dec := yaml.NewDecoder(bytes.NewReader(doc))
	dec.KnownFields(true)
	var p Playbook
	if err := dec.Decode(&p); err != nil {
		return nil, fmt.Errorf("%w: %s", ErrInvalid, yamlMessage(err))
	}
	at := func(path ...any) int { return lineOf(root.Content[0], path...) }
	if !ValidName(p.Name) {
		return nil, posError(at("name"), "name", "%q: lower-case letters, digits, '.', '_' and '-', at most 64", p.Name)
	}
	if len(p.Params) > MaxParams {
		return nil, posError(at("params"), "params", "at most %d parameters, not %d", MaxParams, len(p.Params))
	}
	params := map[string]*Param{}
	for i := range p.Params {
		pr := &p.Params[i]
		field := fmt.Sprintf("params[%d]", i)
		if err := checkParam(pr); err != nil {
			return nil, posError(at("params", i), field, "%v", err)
		}
		if params[pr.Name] != nil {
			return nil, posError(at("params", i, "name"), field+".name", "%q is declared twice", pr.Name)
		}
		params[pr.Name] = pr
	}
	if len(p.Stages) == 0 {
		return nil, posError(at("stages"), "stages", "a playbook needs at least one stage")
	}
	used := map[string]bool{} // the parameters some field uses
	for i := range p.Stages {
		st := &p.Stages[i]
		field := fmt.Sprintf("stages[%d]", i)
		if st.Name == "" {
			return nil, posError(at("stages", i), field+".name", "required")
		}
		if len(st.Steps) == 0 && !action.ValidKind(st.Kind) {
			return nil, posError(at("stages", i, "kind"), field+".kind", "%q is not of the form domain/name", st.Kind)
		}
		if !st.Target.All && len(st.Target.Nodes) == 0 && len(st.Target.Labels) == 0 {
			return nil, posError(at("stages", i, "target"), field+".target", `targets nothing: give "nodes", "labels" or "all"`)
		}
		for _, l := range []struct {
			n    *yaml.Node
			name string
			dst  **limit.Limit
			ref  *string
		}{{&st.MaxConcurrency, "max_concurrency", &st.conc, &st.concRef}, {&st.MaxErrors, "max_errors", &st.errs, &st.errsRef}} {
			if l.n.Kind == 0 {
				continue
			}
			if m := wholeRef().FindStringSubmatch(l.n.Value); m != nil && l.n.Kind == yaml.ScalarNode {
				if pr := params[m[1]]; pr == nil || pr.Type != TypeInt {
					return nil, posError(l.n.Line, field+"."+l.name, "%q: a limit may be an int parameter, and %q is not one", l.n.Value, m[1])
				}
				*l.ref = m[1]
				used[m[1]] = true
				continue
			}
			v, err := limit.Parse(l.n.Value)
			if err != nil || l.n.Kind != yaml.ScalarNode {
				return nil, posError(l.n.Line, field+"."+l.name, "%q is not a count or a percentage from 0 to 100%%", l.n.Value)
			}
			*l.dst = &v
		}
		if st.Timeout != "" {
			d, err := time.ParseDuration(st.Timeout)
			if err != nil || d < time.Second || d%time.Second != 0 || d > action.MaxTimeoutS*time.Second {
				return nil, posError(at("stages", i, "timeout"), field+".timeout", "%q is not a whole number of seconds up to 7 days, like 90s or 2h", st.Timeout)
			}
			st.timeoutS = int(d / time.Second)
		}
		if st.Soak != "" {
			d, err := time.ParseDuration(st.Soak)
			if err != nil || d < time.Second || d%time.Second != 0 {
				return nil, posError(at("stages", i, "soak"), field+".soak", "%q is not a whole number of seconds, like 60s or 5m", st.Soak)
			}
			st.soakS = int(d / time.Second)
		}
		for _, list := range []struct {
			name  string
			steps []Step
		}{{"steps", st.Steps}, {"rollback", st.Rollback}} {
			for j := range list.steps {
				if err := checkStep(&list.steps[j], params, used, func(path ...any) int {
					return at(append([]any{"stages", i, list.name, j}, path...)...)
				}, fmt.Sprintf("%s.%s[%d]", field, list.name, j)); err != nil {
					return nil, err
				}
			}
		}
		// The args are bounded before any template in them is parsed.
		if n := jsonbody.TextSize(st.Args); n > action.MaxArgs {
			return nil, posError(at("stages", i, "args"), field+".args", "larger than %d bytes", action.MaxArgs)
		}
		// Every template must parse and refer only to declared parameters.
		var err error
		walkStrings(st.Args, func(path string, s string) {
			if err == nil {
				err = checkTemplate(s, params, used)
				if err != nil {
					err = posError(at("stages", i, "args"), field+".args"+path, "%v", err)
				}
			}
		})
		if err != nil {
			return nil, err
		}
		for j, n := range st.Target.Nodes {
			if err := checkTemplate(n, params, used); err != nil {
				return nil, posError(at("stages", i, "target", "nodes", j), fmt.Sprintf("%s.target.nodes[%d]", field, j), "%v", err)
			}
		}
		for k, v := range st.Target.Labels {
			if err := checkTemplate(v, params, used); err != nil {
				return nil, posError(at("stages", i, "target", "labels", k), field+".target.labels."+k, "%v", err)
			}
		}
	}
	// A parameter that no field uses would change nothing but the digest.
	for i := range p.Params {
		if !used[p.Params[i].Name] {
			return nil, posError(at("params", i), fmt.Sprintf("params[%d]", i), "%q is used by no field of the playbook", p.Params[i].Name)
		}
	}
	// The stages must make a valid run: names, on_failure, dependencies
	// and cycles are checked by the same code as any run's.
	specs, err := p.stageSpecs(nil)
	if err != nil {
		return nil, err
	}
	if err := runs.Check(&wire.CreateRunRequest{ClusterID: "-", Stages: specs}); err != nil {
		return nil, posError(at("stages"), "stages", "%s", strings.TrimPrefix(err.Error(), runs.ErrInvalid.Error()+": "))
	}
	return &p, nil
}

// checkNoAliases refuses anchors, aliases and merge keys anywhere in the
// document tree: a playbook says everything once, and a reference would let
// a few bytes stand for megabytes once expanded.
func checkNoAliases(n *yaml.Node) error {
	switch {
	case n.Kind == yaml.AliasNode:
		return posError(n.Line, "document", "aliases (*%s) are not allowed", n.Value)
	case n.Anchor != "":
		return posError(n.Line, "document", "anchors (&%s) are not allowed", n.Anchor)
	case n.Kind == yaml.ScalarNode && n.Tag == "!!merge":
		return posError(n.Line, "document", "merge keys (<<) are not allowed")
	}
	for _, c := range n.Content {
		if err := checkNoAliases(c); err != nil {
			return err
		}
	}
	return nil
}

func yamlMessage(err error) string {
	msg := err.Error()
	msg = strings.TrimPrefix(msg, "yaml: unmarshal errors:\n")
	msg = strings.TrimPrefix(msg, "yaml: ")
	msg = strings.ReplaceAll(msg, "\n  ", "; ")
	return strings.TrimSpace(strings.ReplaceAll(msg, " in type playbook.", " in "))
}

func checkParam(p *Param) error {
	if !paramRE().MatchString(p.Name) {
		return fmt.Errorf("name %q: letters, digits and '_', not starting with a digit", p.Name)
	}
	switch p.Type {
	case TypeString, TypeInt, TypeBool:
		if len(p.Values) > 0 {
			return fmt.Errorf("%s: values is only for type enum", p.Name)
		}
	case TypeEnum:
		if len(p.Values) == 0 {
			return fmt.Errorf("%s: an enum needs values", p.Name)
		}
	default:
		return fmt.Errorf("%s: type %q is not string, int, bool or enum", p.Name, p.Type)
	}
	if p.Default == nil {
		p.Required = true
		return nil
	}
	v, err := convert(p, fmt.Sprint(p.Default))
	if err != nil {
		return fmt.Errorf("%s: default: %v", p.Name, err)
	}
	p.Default = v
	return nil
}

// convert reads a parameter's value given as text.
func convert(p *Param, s string) (any, error) {
	switch p.Type {
	case TypeInt:
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil {
			return nil, fmt.Errorf("%q is not an int", s)
		}
		return n, nil
	case TypeBool:
		b, err := strconv.ParseBool(strings.TrimSpace(s))
		if err != nil {
			return nil, fmt.Errorf("%q is not a bool (true or false)", s)
		}
		return b, nil
	case TypeEnum:
		if !slices.Contains(p.Values, s) {
			return nil, fmt.Errorf("%q is not one of %s", s, strings.Join(p.Values, ", "))
		}
	}
	return s, nil
}

// newTemplate parses s in the grammar of every template of runs and
// playbooks (core/runs/tmpl); field may refuse a field it reads.
func newTemplate(s string, field func(ident []string) error) (*template.Template, error) {
	return tmpl.Parse(s, tmpl.MissingError, field)
}

// checkTemplate parses s and checks every name it uses, marking the
// parameters it uses in used.
func checkTemplate(s string, params map[string]*Param, used map[string]bool) error {
	if !strings.Contains(s, "{{") {
		return nil
	}
	_, err := newTemplate(s, func(ident []string) error {
		ref := "." + strings.Join(ident, ".")
		switch {
		case len(ident) != 1:
			return fmt.Errorf("%s: a parameter has no fields", ref)
		case params[ident[0]] == nil:
			return fmt.Errorf("%s refers to an undefined parameter %q", ref, ident[0])
		}
		used[ident[0]] = true
		return nil
	})
	return err
}

// walkStrings calls fn for every string in v (nested maps and lists).
func walkStrings(v any, fn func(path, s string)) {
	var walk func(path string, v any)
	walk = func(path string, v any) {
		switch x := v.(type) {
		case string:
			fn(path, x)
		case map[string]any:
			for k, e := range x {
				walk(path+"."+k, e)
			}
		case []any:
			for i, e := range x {
				walk(fmt.Sprintf("%s[%d]", path, i), e)
			}
		}
	}
	walk("", v)
}

// lineOf finds the line of a path of keys and indexes below n (0 when it is
// not there): the line of the deepest part found.
func lineOf(n *yaml.Node, path ...any) int {
	line := n.Line
	for _, p := range path {
		switch p := p.(type) {
		case string:
			if n.Kind != yaml.MappingNode {
				return line
			}
			found := false
			for i := 0; i+1 < len(n.Content); i += 2 {
				if n.Content[i].Value == p {
					n, line, found = n.Content[i+1], n.Content[i].Line, true
					break
				}
			}
			if !found {
				return line
			}
		case int:
			if n.Kind != yaml.SequenceNode || p >= len(n.Content) {
				return line
			}
			n = n.Content[p]
			line = n.Line
		}
	}
	return line
}

// Values reads the parameters given as text (from --param k=v) against the
// playbook: an unknown name, a value of the wrong type or a missing required
// parameter is an error. Defaults fill the rest.
func (p *Playbook) Values(given map[string]string) (map[string]any, error) {
	out := map[string]any{}
	byName := map[string]*Param{}
	for i := range p.Params {
		byName[p.Params[i].Name] = &p.Params[i]
	}
	var unknown []string
	for k := range given {
		if byName[k] == nil {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		slices.Sort(unknown)
		return nil, fmt.Errorf("%w: unknown parameter(s) %s (playbook %s has %s)", ErrInvalid,
			strings.Join(unknown, ", "), p.Name, p.paramNames())
	}
	for i := range p.Params {
		pr := &p.Params[i]
		s, ok := given[pr.Name]
		if !ok {
			if pr.Required {
				return nil, fmt.Errorf("%w: parameter %s is required (%s)", ErrInvalid, pr.Name, pr.Type)
			}
			out[pr.Name] = pr.Default
			continue
		}
		if len(s) > MaxParamValue {
			return nil, fmt.Errorf("%w: parameter %s: longer than %d bytes", ErrInvalid, pr.Name, MaxParamValue)
		}
		v, err := convert(pr, s)
		if err != nil {
			return nil, fmt.Errorf("%w: parameter %s: %v", ErrInvalid, pr.Name, err)
		}
		out[pr.Name] = v
	}
	return out, nil
}

func (p *Playbook) paramNames() string {
	if len(p.Params) == 0 {
		return "no parameters"
	}
	var n []string
	for _, pr := range p.Params {
		n = append(n, pr.Name)
	}
	return "parameters " + strings.Join(n, ", ")
}

// MaxRendered bounds what rendering one playbook may produce, all strings
// together: a template cannot make the core build more than this.
const MaxRendered = 1 << 20

var wholeRef = lazyRegexp(`^\{\{\s*\.([A-Za-z_][A-Za-z0-9_]*)\s*\}\}$`)

// render fills one string's template. A string that is exactly one
// reference keeps its parameter's type (when typed is set).
func render(s string, values map[string]any, typed bool, b *tmpl.Budget) (any, error) {
	if !strings.Contains(s, "{{") || runTime(s) {
		return s, nil // no template, or the run's own (rendered as it goes)
	}
	t, err := newTemplate(s, nil)
	if err != nil {
		return nil, err
	}
	out, err := b.Render(t, values)
	if err != nil {
		return nil, err
	}
	if m := wholeRef().FindStringSubmatch(s); m != nil && typed {
		if v, ok := values[m[1]]; ok {
			return v, nil
		}
	}
	return out, nil
}

func renderValue(v any, values map[string]any, b *tmpl.Budget) (any, error) {
	switch x := v.(type) {
	case string:
		return render(x, values, true, b)
	case map[string]any:
		out := map[string]any{}
		for k, e := range x {
			r, err := renderValue(e, values, b)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", k, err)
			}
			out[k] = r
		}
		return out, nil
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			r, err := renderValue(e, values, b)
			if err != nil {
				return nil, err
			}
			out[i] = r
		}
		return out, nil
	}
	return v, nil
}

func renderText(s string, values map[string]any, b *tmpl.Budget) (string, error) {
	v, err := render(s, values, false, b)
	if err != nil {
		return "", err
	}
	return v.(string), nil
}

// Render fills in the parameters (from Values) and returns the stages of a
// run request. values nil renders nothing (for checks of the document).
func (p *Playbook) Render(values map[string]any) ([]wire.StageSpec, error) {
	return p.stageSpecs(values)
}

func (p *Playbook) stageSpecs(values map[string]any) ([]wire.StageSpec, error) {
	var out []wire.StageSpec
	b := tmpl.NewBudget(MaxRendered)
	for i := range p.Stages {
		st := &p.Stages[i]
		sp := wire.StageSpec{Name: st.Name, Kind: st.Kind, MaxConcurrency: st.conc, MaxErrors: st.errs,
			OnFailure: st.OnFailure, TimeoutS: st.timeoutS, Canary: st.Canary, SoakS: st.soakS, Unavailable: st.Unavailable,
			IncludeFailed: st.IncludeFailed, Follow: st.Follow, Lock: st.Lock.wire(), AutoPromoteAfterS: st.AutoPromoteAfterS, AbortOn: st.AbortOn}
		var err error
		if st.concRef != "" && values != nil {
			if sp.MaxConcurrency, err = limitOf(st.Name, "max_concurrency", st.concRef, values); err != nil {
				return nil, err
			}
		}
		if st.errsRef != "" && values != nil {
			if sp.MaxErrors, err = limitOf(st.Name, "max_errors", st.errsRef, values); err != nil {
				return nil, err
			}
		}
		if sp.Steps, err = stepSpecs(st.Name, st.Steps, values, b); err != nil {
			return nil, err
		}
		if sp.Rollback, err = stepSpecs(st.Name, st.Rollback, values, b); err != nil {
			return nil, err
		}
		if st.DependsOn != nil {
			sp.DependsOn = append([]string{}, *st.DependsOn...)
		}
		sp.Target = wire.Target{All: st.Target.All}
		args := any(st.Args)
		if values != nil {
			var err error
			if args, err = renderValue(args, values, b); err != nil {
				return nil, fmt.Errorf("%w: stage %s: args: %v", ErrInvalid, st.Name, err)
			}
			for _, n := range st.Target.Nodes {
				r, err := renderText(n, values, b)
				if err != nil {
					return nil, fmt.Errorf("%w: stage %s: target: %v", ErrInvalid, st.Name, err)
				}
				sp.Target.Nodes = append(sp.Target.Nodes, r)
			}
			if len(st.Target.Labels) > 0 {
				sp.Target.Labels = map[string]string{}
				for k, v := range st.Target.Labels {
					r, err := renderText(v, values, b)
					if err != nil {
						return nil, fmt.Errorf("%w: stage %s: target: %v", ErrInvalid, st.Name, err)
					}
					sp.Target.Labels[k] = r
				}
			}
		} else {
			sp.Target.Nodes, sp.Target.Labels = st.Target.Nodes, st.Target.Labels
		}
		if st.Args != nil {
			b, err := json.Marshal(args)
			if err != nil {
				return nil, fmt.Errorf("%w: stage %s: args: %v", ErrInvalid, st.Name, err)
			}
			sp.Args = b
		}
		out = append(out, sp)
	}
	return out, nil
}

// runTimeRef finds a run-time reference (.steps.NAME, .node.id or
// .node.labels) in a template; a parameter has no fields, so .node alone
// is a parameter.
var runTimeRef = lazyRegexp(`\.(steps|node)\.`)

// paramRef finds the names a template refers to (.name).
var paramRef = lazyRegexp(`(?:^|[\s({])\.([A-Za-z_][A-Za-z0-9_]*)`)

// runTime reports whether s is one of the run's own templates (over .node
// and .steps), rendered node by node as the run goes, not when it is made.
func runTime(s string) bool {
	return strings.Contains(s, "{{") && runTimeRef().MatchString(s)
}

// checkRunTime refuses a run-time template that also names a parameter:
// it would render empty, as the run does not know the parameters.
func checkRunTime(s string, params map[string]*Param) error {
	for _, m := range paramRef().FindAllStringSubmatch(s, -1) {
		if params[m[1]] != nil {
			return fmt.Errorf("template: mixes the parameter %q with .steps or .node: give them in separate fields", m[1])
		}
	}
	return nil
}

// checkStep checks one step as written and converts its durations; at
// gives the line of a path below the step.
func checkStep(sp *Step, params map[string]*Param, used map[string]bool, at func(path ...any) int, field string) error {
	if sp.Gate != nil || sp.Call != nil {
		// Stored as a step of the core's kind whose args are the gate or
		// the call: its templates are checked and rendered as args are.
		if sp.Kind != "" || sp.Args != nil || (sp.Gate != nil && sp.Call != nil) {
			return posError(at(), field, "a step is a kind with its args, a gate, or a call: one of them")
		}
		sp.Kind, sp.Args = runs.KindGate, sp.Gate
		if sp.Call != nil {
			sp.Kind, sp.Args = runs.KindCall, sp.Call
		}
		sp.Gate, sp.Call = nil, nil
	}
	if sp.Soak != "" {
		d, err := time.ParseDuration(sp.Soak)
		if err != nil || d < time.Second || d%time.Second != 0 {
			return posError(at("soak"), field+".soak", "%q is not a whole number of seconds, like 60s or 5m", sp.Soak)
		}
		sp.soakS = int(d / time.Second)
	}
	if sp.Timeout != "" {
		d, err := time.ParseDuration(sp.Timeout)
		if err != nil || d < time.Second || d%time.Second != 0 || d > action.MaxTimeoutS*time.Second {
			return posError(at("timeout"), field+".timeout", "%q is not a whole number of seconds up to 7 days, like 90s or 2h", sp.Timeout)
		}
		sp.timeoutS = int(d / time.Second)
	}
	if r := sp.Retry; r != nil {
		wr := &wire.Retry{Attempts: r.Attempts, Backoff: r.Backoff}
		for _, d := range []struct {
			s, name string
			dst     *int
		}{{r.Delay, "delay", &wr.DelayS}, {r.MaxDelay, "max_delay", &wr.MaxDelayS}} {
			if d.s == "" {
				continue
			}
			v, err := time.ParseDuration(d.s)
			if err != nil || v < 0 || v%time.Second != 0 {
				return posError(at("retry", d.name), field+".retry."+d.name, "%q is not a whole number of seconds, like 5s or 1m", d.s)
			}
			*d.dst = int(v / time.Second)
		}
		sp.retry = wr
	}
	if n := jsonbody.TextSize(sp.Args); n > action.MaxArgs {
		return posError(at("args"), field+".args", "larger than %d bytes", action.MaxArgs)
	}
	check := func(s string) error {
		if runTime(s) {
			return checkRunTime(s, params)
		}
		return checkTemplate(s, params, used)
	}
	var err error
	walkStrings(sp.Args, func(path string, s string) {
		if err == nil {
			if err = check(s); err != nil {
				err = posError(at("args"), field+".args"+path, "%v", err)
			}
		}
	})
	if err != nil {
		return err
	}
	if err := check(sp.When); err != nil {
		return posError(at("when"), field+".when", "%v", err)
	}
	return nil
}

// stepSpecs renders steps as written into a run's (values nil: as written).
func stepSpecs(stage string, steps []Step, values map[string]any, b *tmpl.Budget) ([]wire.StepSpec, error) {
	var out []wire.StepSpec
	for i := range steps {
		sp := &steps[i]
		ws := wire.StepSpec{Name: sp.Name, Kind: sp.Kind, TimeoutS: sp.timeoutS, Retry: sp.retry, When: sp.When, SoakS: sp.soakS}
		args := any(sp.Args)
		if values != nil {
			var err error
			if args, err = renderValue(args, values, b); err != nil {
				return nil, fmt.Errorf("%w: stage %s: step %s: args: %v", ErrInvalid, stage, sp.Name, err)
			}
			if ws.When, err = renderText(sp.When, values, b); err != nil {
				return nil, fmt.Errorf("%w: stage %s: step %s: when: %v", ErrInvalid, stage, sp.Name, err)
			}
		}
		if sp.Args != nil {
			raw, err := json.Marshal(args)
			if err != nil {
				return nil, fmt.Errorf("%w: stage %s: step %s: args: %v", ErrInvalid, stage, sp.Name, err)
			}
			ws.Args = raw
		}
		out = append(out, ws)
	}
	return out, nil
}

// limitOf is a limit given as an int parameter's value.
func limitOf(stage, field, name string, values map[string]any) (*limit.Limit, error) {
	v, ok := values[name]
	if !ok {
		return nil, nil
	}
	l, err := limit.Parse(fmt.Sprint(v))
	if err != nil {
		return nil, fmt.Errorf("%w: stage %s: %s: the parameter %s is %v, not a count from 0", ErrInvalid, stage, field, name, v)
	}
	return &l, nil
}
