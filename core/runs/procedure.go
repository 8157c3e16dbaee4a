package runs

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"text/template"

	"github.com/musterhq/muster/core/runs/tmpl"
	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/action"
	"github.com/musterhq/muster/shared/argschema"
	"github.com/musterhq/muster/shared/secret"
)

// Procedures (docs/architecture.md, "Runs and playbooks"): the templates of
// a step's when and args see the run's .params, the node (.node.id,
// .node.labels) and the earlier steps of the same node (.steps.NAME.state,
// .steps.NAME.outputs).

// WhenAlways runs a step even after its node failed.
const WhenAlways = "always"

// Step states in templates (.steps.NAME.state) besides the child states.
const (
	StepPending = "PENDING"
	StepSkipped = "SKIPPED"
)

// Bounds of a step's renders: a when renders true or false, and a step's
// args, all their strings together, must fit a child's args.
const (
	maxWhenRender = 1 << 10
	maxArgsRender = action.MaxArgs
)

// newStepTemplate parses a step's template in the grammar of every
// template of runs and playbooks (core/runs/tmpl). field, when not nil,
// may refuse a field it reads.
func newStepTemplate(s string, field func(ident []string) error) (*template.Template, error) {
	return tmpl.Parse(s, tmpl.MissingZero, field)
}

// stepRefs returns the step names a template refers to as .steps.NAME.
func stepRefs(t *template.Template) []string {
	var out []string
	tmpl.Fields(t, func(ident []string) {
		if len(ident) >= 2 && ident[0] == "steps" {
			out = append(out, ident[1])
		} else if len(ident) == 1 && ident[0] == "steps" {
			out = append(out, "")
		}
	})
	return out
}

// checkStepTemplate checks a template of a step (where names it): it
// parses, and refers only to the steps in before by name.
func checkStepTemplate(s, where string, before map[string]bool, all map[string]bool) error {
	if !strings.Contains(s, "{{") {
		return nil
	}
	_, err := newStepTemplate(s, func(ident []string) error {
		if ident[0] != "steps" {
			return nil
		}
		switch {
		case len(ident) < 2:
			return errors.New("refer to a step as .steps.NAME")
		case all[ident[1]] && !before[ident[1]]:
			return fmt.Errorf("step %s comes later: only earlier steps' state and outputs are known", ident[1])
		case !before[ident[1]]:
			return fmt.Errorf("names no step %q", ident[1])
		}
		return nil
	})
	if err != nil {
		return invalid("%s: %v", where, err)
	}
	return nil
}

// checkArgTemplates checks every string of args as a template.
func checkArgTemplates(args json.RawMessage, where string, before, all map[string]bool) error {
	if len(args) == 0 || !strings.Contains(string(args), "{{") {
		return nil
	}
	var v any
	if err := json.Unmarshal(args, &v); err != nil {
		return invalid("%s: args: %v", where, err)
	}
	var err error
	walkArgStrings(v, func(s string) string {
		if err == nil {
			err = checkStepTemplate(s, where+": args", before, all)
		}
		return s
	})
	return err
}

// walkArgStrings replaces every string of v (decoded JSON) by fn's result.
func walkArgStrings(v any, fn func(string) string) any {
	switch x := v.(type) {
	case string:
		return fn(x)
	case map[string]any:
		for k, e := range x {
			x[k] = walkArgStrings(e, fn)
		}
	case []any:
		for i, e := range x {
			x[i] = walkArgStrings(e, fn)
		}
	}
	return v
}

// hasTemplates reports whether a step of st has a when or args template.
func hasTemplates(st *store.RunStage) bool {
	for _, list := range [][]store.RunStep{st.Steps, st.Rollback} {
		for _, sp := range list {
			if strings.Contains(sp.When, "{{") || strings.Contains(string(sp.Args), "{{") {
				return true
			}
		}
	}
	return false
}

// nodeContext is what a node's templates see (nil when none has any).
type nodeContext map[string]any

func newNodeContext(params map[string]any, node string, labels map[string]string, steps []store.RunStep) nodeContext {
	if labels == nil {
		labels = map[string]string{}
	}
	if params == nil {
		params = map[string]any{}
	}
	st := map[string]any{}
	for _, sp := range steps {
		st[sp.Name] = map[string]any{"state": StepPending, "outputs": map[string]string{}}
	}
	return nodeContext{"params": params, "node": map[string]any{"id": node, "labels": labels}, "steps": st}
}

func (c nodeContext) set(step, state string, outputs json.RawMessage) {
	if c == nil {
		return
	}
	out := map[string]string{}
	if len(outputs) > 0 {
		_ = json.Unmarshal(outputs, &out)
	}
	for k, v := range out {
		// A command's output never names a secret in a later step's
		// args: only the run's author does (docs/runs-and-playbooks.md,
		// "Secrets").
		out[k] = secret.Defuse(v)
	}
	c["steps"].(map[string]any)[step] = map[string]any{"state": state, "outputs": out}
}

// stepTemplates holds the templates of a stage's steps, each parsed once
// and its args decoded once, for the nodes the planner goes through one
// after another.
type stepTemplates struct {
	parsed map[string]*template.Template
	errs   map[string]error
	args   map[string]any // a step's args, decoded
	// whens memoizes decided whens by the values of what they read
	// (whenKey): the nodes of a stage mostly share their labels, so a
	// when is rendered once for each distinct set of them.
	whens map[string]bool
	reads map[string]reads // by template, what it reads (tmpl.Reads)
}

type reads struct {
	fields [][]string
	whole  bool
}

func newStepTemplates() *stepTemplates {
	return &stepTemplates{parsed: map[string]*template.Template{}, errs: map[string]error{}, args: map[string]any{},
		whens: map[string]bool{}, reads: map[string]reads{}}
}

// whenKey is what decides when s renders for c: s and the value of every
// field it reads (tmpl.Reads). ok is false when that cannot be said (s
// reads its data whole, or a field through a value that is not a map).
func (ts *stepTemplates) whenKey(s string, t *template.Template, c nodeContext) (key string, ok bool) {
	r, ok := ts.reads[s]
	if !ok {
		r.fields, r.whole = tmpl.Reads(t)
		ts.reads[s] = r
	}
	if r.whole {
		return "", false
	}
	var b strings.Builder
	b.WriteString(s)
	for _, ident := range r.fields {
		var v any = map[string]any(c)
		for _, k := range ident {
			var found bool
			in := v
			switch m := v.(type) {
			case map[string]any:
				v, found = m[k]
			case map[string]string:
				v, found = m[k]
			default:
				return "", false
			}
			if !found {
				v = missingIn{fmt.Sprintf("%T", in)}
				break
			}
		}
		fmt.Fprintf(&b, "\x00%#v", v)
	}
	return b.String(), true
}

// missingIn stands, in a whenKey, for a field missing from a map of type
// In.
type missingIn struct{ In string }

// parse returns s's template, parsed once (nil for a string without one).
func (ts *stepTemplates) parse(s string) (*template.Template, error) {
	if !strings.Contains(s, "{{") {
		return nil, nil
	}
	if t, ok := ts.parsed[s]; ok {
		return t, ts.errs[s]
	}
	t, err := newStepTemplate(s, nil)
	ts.parsed[s], ts.errs[s] = t, err
	return t, err
}

// decoded returns a step's args as decoded JSON, decoded once; the caller
// does not change it.
func (ts *stepTemplates) decoded(args json.RawMessage) (any, error) {
	if v, ok := ts.args[string(args)]; ok {
		return v, nil
	}
	var v any
	if err := json.Unmarshal(args, &v); err != nil {
		return nil, err
	}
	ts.args[string(args)] = v
	return v, nil
}

// render renders s for a node within max bytes and tmpl.MaxTime.
func (ts *stepTemplates) render(s string, c nodeContext, max int) (string, error) {
	t, err := ts.parse(s)
	if err != nil || t == nil {
		return s, err
	}
	return tmpl.NewBudget(max).Render(t, map[string]any(c))
}

// evalWhen decides a step's when: run (true) or skip (false).
func (ts *stepTemplates) evalWhen(sp *store.RunStep, c nodeContext) (bool, error) {
	switch sp.When {
	case "", WhenAlways:
		return true, nil
	}
	t, err := ts.parse(sp.When)
	if err != nil || t == nil {
		return ts.decideWhen(sp, c)
	}
	key, ok := ts.whenKey(sp.When, t, c)
	if !ok {
		return ts.decideWhen(sp, c)
	}
	if run, hit := ts.whens[key]; hit {
		return run, nil
	}
	run, err := ts.decideWhen(sp, c)
	if err == nil { // an error (its time budget) is not kept
		ts.whens[key] = run
	}
	return run, err
}

// decideWhen renders a step's when for c: true or false.
func (ts *stepTemplates) decideWhen(sp *store.RunStep, c nodeContext) (bool, error) {
	s, err := ts.render(sp.When, c, maxWhenRender)
	if err != nil {
		return false, fmt.Errorf("step %s: when: %v", sp.Name, err)
	}
	switch strings.TrimSpace(s) {
	case "true":
		return true, nil
	case "false":
		return false, nil
	}
	return false, fmt.Errorf("step %s: when renders %q, not true or false", sp.Name, s)
}

// tryArgs tells whether renderArgs would succeed, keeping nothing: the
// planner tries the args of every node it could start, and renders those
// of the children it creates. The bound holds for the args encoded, and
// encoding can grow a rendered byte to six ("<" is \u003c): args that
// could pass it so are rendered and encoded here, and dropped, so that a
// step whose args cannot fit fails its node rather than never starting.
func (ts *stepTemplates) tryArgs(sp *store.RunStep, c nodeContext) error {
	if len(sp.Args) == 0 || !strings.Contains(string(sp.Args), "{{") {
		return nil
	}
	v, err := ts.decoded(sp.Args)
	if err != nil {
		return err
	}
	b := tmpl.NewBudget(maxArgsRender)
	var try func(v any) error
	try = func(v any) error {
		switch x := v.(type) {
		case string:
			t, err := ts.parse(x)
			if err != nil || t == nil {
				return err
			}
			return b.Try(t, map[string]any(c))
		case map[string]any:
			for _, e := range x {
				if err := try(e); err != nil {
					return err
				}
			}
		case []any:
			for _, e := range x {
				if err := try(e); err != nil {
					return err
				}
			}
		}
		return nil
	}
	if err := try(v); err != nil {
		return fmt.Errorf("step %s: args: %v", sp.Name, err)
	}
	if len(sp.Args)+maxEscape*b.Used() <= maxArgsRender {
		return nil
	}
	_, err = ts.renderArgs(sp, c)
	return err
}

// maxEscape is the most bytes JSON encodes one byte of a string into.
const maxEscape = len(`\u003c`)

// renderArgs renders the templates in a step's args for a node, all
// within maxArgsRender bytes.
func (ts *stepTemplates) renderArgs(sp *store.RunStep, c nodeContext) (json.RawMessage, error) {
	if len(sp.Args) == 0 || !strings.Contains(string(sp.Args), "{{") {
		return sp.Args, nil
	}
	v, err := ts.decoded(sp.Args)
	if err != nil {
		return nil, err
	}
	b := tmpl.NewBudget(maxArgsRender)
	var render func(v any) (any, error)
	render = func(v any) (any, error) {
		switch x := v.(type) {
		case string:
			t, err := ts.parse(x)
			if err != nil || t == nil {
				return x, err
			}
			return b.Render(t, map[string]any(c))
		case map[string]any:
			out := make(map[string]any, len(x))
			for k, e := range x {
				r, err := render(e)
				if err != nil {
					return nil, err
				}
				out[k] = r
			}
			return out, nil
		case []any:
			out := make([]any, len(x))
			for i, e := range x {
				r, err := render(e)
				if err != nil {
					return nil, err
				}
				out[i] = r
			}
			return out, nil
		}
		return v, nil
	}
	if v, err = render(v); err != nil {
		return nil, fmt.Errorf("step %s: args: %v", sp.Name, err)
	}
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	out, err := action.NormalizeArgs(raw)
	if err != nil {
		return nil, fmt.Errorf("step %s: args: %w", sp.Name, err)
	}
	if err := sameSecrets(sp, out, c); err != nil {
		return nil, err
	}
	return out, nil
}

// sameSecrets refuses rendered args that reference a secret neither the
// step's own args nor the run's params name: pieces of steps' outputs put
// side by side can spell a reference no one approved (Defuse breaks only
// one whole in a single output).
func sameSecrets(sp *store.RunStep, out json.RawMessage, c nodeContext) error {
	if !strings.Contains(string(out), "secret") {
		return nil
	}
	got, err := secret.FindArgs(out)
	if err != nil || len(got) == 0 {
		return err
	}
	written, _ := secret.FindArgs(sp.Args)
	if p, err := json.Marshal(map[string]any{"p": c["params"]}); err == nil {
		fromParams, _ := secret.FindArgs(p)
		written = append(written, fromParams...)
	}
	for _, n := range got {
		if !slices.Contains(written, n) {
			return fmt.Errorf("step %s: args: they reference secret %s, which neither the step's args nor the run's params write (put together from what steps output?)", sp.Name, n)
		}
	}
	return nil
}

// Plan time (docs/runs-and-playbooks.md, "What is checked before a run"):
// a step's when and args are rendered for every node of its stage with
// what is known before the run starts, the node's id and labels. The
// steps a template names have not run yet: they are taken as DONE, and
// every output a template reads as "true". A when must then render true or
// false; args are checked against the kind's args_schema, except the values
// that read a step (known only when the node runs; the agent checks them).

// planner renders a stage's templates at plan time, for one node after
// another: each template is parsed once, and the outputs the templates read
// are found once.
type planner struct {
	steps   []store.RunStep
	ts      *stepTemplates
	outputs map[string][]string // step → the output keys templates read
}

func newPlanner(steps []store.RunStep) *planner {
	p := &planner{steps: steps, ts: newStepTemplates(), outputs: map[string][]string{}}
	known := map[string]bool{}
	for _, sp := range steps {
		known[sp.Name] = true
	}
	read := func(s string) {
		t, err := p.ts.parse(s)
		if err != nil || t == nil {
			return
		}
		tmpl.Fields(t, func(ident []string) {
			if len(ident) >= 4 && ident[0] == "steps" && ident[2] == "outputs" && known[ident[1]] &&
				!slices.Contains(p.outputs[ident[1]], ident[3]) {
				p.outputs[ident[1]] = append(p.outputs[ident[1]], ident[3])
			}
		})
	}
	for _, sp := range steps {
		read(sp.When)
		if strings.Contains(string(sp.Args), "{{") {
			var v any
			if json.Unmarshal(sp.Args, &v) == nil {
				walkArgStrings(v, func(s string) string { read(s); return s })
			}
		}
	}
	return p
}

// context is node's template context at plan time.
func (p *planner) context(node string, labels map[string]string) nodeContext {
	c := newNodeContext(nil, node, labels, p.steps)
	st := c["steps"].(map[string]any)
	for _, sp := range p.steps {
		out := map[string]string{}
		for _, k := range p.outputs[sp.Name] {
			out[k] = "true"
		}
		st[sp.Name] = map[string]any{"state": string(action.Done), "outputs": out}
	}
	return c
}

// when renders a step's when at plan time: nil when it is true or false
// (or none, or always).
func (p *planner) when(sp *store.RunStep, c nodeContext) error {
	if sp.When == "" || sp.When == WhenAlways {
		return nil
	}
	s, err := p.ts.render(sp.When, c, maxWhenRender)
	if err != nil {
		return fmt.Errorf("step %s: when: %v", sp.Name, err)
	}
	switch strings.TrimSpace(s) {
	case "true", "false":
		return nil
	}
	return fmt.Errorf("step %s: when renders %q, not true or false", sp.Name, s)
}

// args renders a step's args at plan time, and names the fields whose
// values read a step's state or outputs (not known until the node runs).
func (p *planner) args(sp *store.RunStep, c nodeContext) (json.RawMessage, map[string]bool, error) {
	if len(sp.Args) == 0 || !strings.Contains(string(sp.Args), "{{") {
		return sp.Args, nil, nil
	}
	var v any
	if err := json.Unmarshal(sp.Args, &v); err != nil {
		return nil, nil, err
	}
	later := map[string]bool{}
	var rerr error
	budget := tmpl.NewBudget(maxArgsRender)
	var walk func(v any, path []string) any
	walk = func(v any, path []string) any {
		switch x := v.(type) {
		case string:
			t, err := p.ts.parse(x)
			if t == nil && err == nil {
				return x
			}
			if t != nil && len(stepRefs(t)) > 0 {
				later[argschema.FieldOf(path)] = true
			}
			out := x
			if err == nil {
				out, err = budget.Render(t, map[string]any(c))
			}
			if err != nil {
				if !later[argschema.FieldOf(path)] && rerr == nil {
					rerr = fmt.Errorf("step %s: args: %v", displayStep(sp.Name), err)
				}
				return x
			}
			return out
		case map[string]any:
			for k, e := range x {
				x[k] = walk(e, append(slices.Clone(path), k))
			}
		case []any:
			for i, e := range x {
				x[i] = walk(e, append(slices.Clone(path), strconv.Itoa(i)))
			}
		}
		return v
	}
	v = walk(v, nil)
	if rerr != nil {
		return nil, nil, rerr
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, nil, err
	}
	return b, later, nil
}
