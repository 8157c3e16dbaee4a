package ui

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/musterhq/muster/core/ops"
	"github.com/musterhq/muster/core/runs/playbook"
	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/core/target"
	"github.com/musterhq/muster/shared/limit"
	"github.com/musterhq/muster/shared/names"
)

// The New run page's form builder: a run's stages field by field, for
// people who do not write YAML. It only builds the document the YAML tab
// takes (playbook.Format): Plan and Start go through exactly the YAML
// path (ops.PlanDocument, ops.StartDocument), and "Show as YAML" shows
// that document.

// gateStep is the builder's kind for a gate: a check the core makes (the
// document's "gate:"), whose args are the check.
const gateStep = "gate"

// maxTargetField is the longest target the builder takes.
const maxTargetField = 1000

// builderStep is one step of a stage as typed.
type builderStep struct{ Name, Kind, Args string }

// builderStage is one stage as typed: its target as the New action form
// takes one (role=db, nodes=a,b or all, target.Parse).
type builderStage struct {
	Name, Target, MaxConcurrency, MaxErrors, Canary, AutoPromote string
	Steps                                                        []builderStep
}

// runBuilder is the form builder as typed, kept when it is shown again.
type runBuilder struct {
	Name   string
	Stages []builderStage
}

// emptyBuilder is the builder with one blank stage of one blank step.
func emptyBuilder() runBuilder {
	return runBuilder{Name: "adhoc", Stages: []builderStage{{Steps: []builderStep{{}}}}}
}

// builderField is the form name of a stage's field, or of a step's when
// step >= 0: s0.name, s0.p1.kind. Errors are kept under the same names.
func builderField(stage, step int, field string) string {
	if step < 0 {
		return fmt.Sprintf("s%d.%s", stage, field)
	}
	return fmt.Sprintf("s%d.p%d.%s", stage, step, field)
}

// rowCount reads a hidden row count, from 1 to max.
func rowCount(v url.Values, name string, max int) int {
	n, err := strconv.Atoi(v.Get(name))
	if err != nil || n < 1 {
		return 1
	}
	return min(n, max)
}

// decodeRunBuilder reads the form builder as typed. "Add stage"
// (do=add_stage) and "Add step" (do=add_step.N, for stage N) add one
// blank row. Each field refused as text (too long, control characters,
// not UTF-8) has its message in the returned fieldErrs, under its name,
// and is kept empty; what the fields mean is buildRunDocument's to check.
func decodeRunBuilder(v url.Values) (runBuilder, fieldErrs) {
	errs := fieldErrs{}
	var b runBuilder
	text := func(name string, max int) string {
		s, err := plainField(v, name, max)
		if err != nil {
			errs.set(name, formMessage(err))
		}
		return s
	}
	b.Name = text("run_name", maxFilter)
	n := rowCount(v, "stages", ops.MaxStages)
	for i := range n {
		st := builderStage{Name: text(builderField(i, -1, "name"), maxFilter),
			Target:         text(builderField(i, -1, "target"), maxTargetField),
			MaxConcurrency: text(builderField(i, -1, "max_concurrency"), maxFilter),
			MaxErrors:      text(builderField(i, -1, "max_errors"), maxFilter),
			Canary:         text(builderField(i, -1, "canary"), maxFilter),
			AutoPromote:    text(builderField(i, -1, "auto_promote_after_s"), maxFilter)}
		m := rowCount(v, builderField(i, -1, "steps"), ops.MaxSteps)
		for j := range m {
			sp := builderStep{Name: text(builderField(i, j, "name"), maxFilter), Kind: text(builderField(i, j, "kind"), maxFilter)}
			name := builderField(i, j, "args")
			sp.Args = strings.TrimSpace(strings.ReplaceAll(v.Get(name), "\r\n", "\n"))
			switch {
			case len(sp.Args) > maxArgsField:
				errs.set(name, "the args are longer than "+strconv.Itoa(maxArgsField)+" bytes")
				sp.Args = ""
			case !utf8.ValidString(sp.Args):
				errs.set(name, "the args are not valid UTF-8")
				sp.Args = ""
			}
			st.Steps = append(st.Steps, sp)
		}
		b.Stages = append(b.Stages, st)
	}
	do := v.Get("do")
	switch {
	case do == "add_stage":
		if len(b.Stages) >= ops.MaxStages {
			errs.set("stages", fmt.Sprintf("a run has at most %d stages", ops.MaxStages))
			break
		}
		b.Stages = append(b.Stages, builderStage{Steps: []builderStep{{}}})
	case strings.HasPrefix(do, "add_step."):
		i, err := strconv.Atoi(strings.TrimPrefix(do, "add_step."))
		if err != nil || i < 0 || i >= len(b.Stages) {
			errs.set("", "the form is damaged: load it again")
			break
		}
		if len(b.Stages[i].Steps) >= ops.MaxSteps {
			errs.set(builderField(i, -1, "steps"), fmt.Sprintf("a stage has at most %d steps", ops.MaxSteps))
			break
		}
		b.Stages[i].Steps = append(b.Stages[i].Steps, builderStep{})
	}
	return b, errs
}

func (st *builderStage) blank() bool {
	if st.Name != "" || st.Target != "" || st.MaxConcurrency != "" || st.MaxErrors != "" || st.Canary != "" || st.AutoPromote != "" {
		return false
	}
	for _, sp := range st.Steps {
		if !sp.blank() {
			return false
		}
	}
	return true
}

func (sp *builderStep) blank() bool { return sp.Name == "" && sp.Kind == "" && sp.Args == "" }

// buildRunDocument is the playbook document of the builder as typed, over
// the cluster's nodes: blank stages and steps are left out, a step without
// a name is called step-N, a step's kind must be one the nodes offer and
// its args must fit the args_schema each node of the stage's target
// announces for it (as the plan checks them, here to say it next to the
// field). Each refused field has its message in the returned fieldErrs (a
// run without a stage under "stages"); the document is usable only when
// it is empty.
func buildRunDocument(b runBuilder, nodes []store.Node) (string, fieldErrs) {
	errs := fieldErrs{}
	kinds := map[string]bool{}
	for _, n := range nodes {
		for _, k := range n.Kinds {
			kinds[k] = true
		}
	}
	pb := &playbook.Playbook{Name: b.Name}
	if !playbook.ValidName(b.Name) {
		errs.set("run_name", "a name is lower-case letters, digits, '.', '_' and '-', at most 64")
	}
	stageNames := map[string]bool{}
	for i := range b.Stages {
		st := &b.Stages[i]
		if st.blank() {
			continue
		}
		field := func(name string) string { return builderField(i, -1, name) }
		ps := playbook.Stage{Name: st.Name}
		var picked []*store.Node // the nodes of the target, when it picks some
		// kindSchemas: per kind, a node of the target for each schema it
		// announces, found once per stage (one pass over its nodes).
		kindSchemas := map[string][]*store.Node{}
		switch {
		case st.Name == "":
			errs.set(field("name"), "name the stage")
		case names.CheckStep(st.Name) != nil:
			errs.set(field("name"), names.CheckStep(st.Name).Error())
		case stageNames[st.Name]:
			errs.set(field("name"), "another stage has this name")
		}
		stageNames[st.Name] = true
		if st.Target == "" {
			errs.set(field("target"), "give the stage's nodes: labels such as role=db, nodes=a,b, or all")
		} else if t, err := target.Parse(st.Target); err != nil {
			errs.set(field("target"), strings.TrimPrefix(err.Error(), target.ErrInvalid.Error()+": "))
		} else {
			ps.Target = playbook.Target{Nodes: t.Nodes, Labels: t.Labels, All: t.All}
			ids, _ := target.Resolve(t, nodes)
			in := make(map[string]bool, len(ids))
			for _, id := range ids {
				in[id] = true
			}
			for i := range nodes {
				if in[nodes[i].ID] {
					picked = append(picked, &nodes[i])
				}
			}
		}
		for _, l := range []struct{ text, name string }{{st.MaxConcurrency, "max_concurrency"}, {st.MaxErrors, "max_errors"}} {
			if _, err := limit.Parse(l.text); l.text != "" && err != nil {
				errs.set(field(l.name), "a count such as 2, or a percentage such as 25%")
			}
		}
		ps.MaxConcurrency, ps.MaxErrors = playbook.Limit(st.MaxConcurrency), playbook.Limit(st.MaxErrors)
		for _, n := range []struct {
			text, name string
			dst        *int
		}{{st.Canary, "canary", &ps.Canary}, {st.AutoPromote, "auto_promote_after_s", &ps.AutoPromoteAfterS}} {
			if n.text == "" {
				continue
			}
			v, err := strconv.Atoi(n.text)
			if err != nil || v < 0 {
				errs.set(field(n.name), "a whole number, 0 or more")
				continue
			}
			*n.dst = v
		}
		stepNames := map[string]bool{}
		for j := range st.Steps {
			sp := &st.Steps[j]
			if sp.blank() {
				continue
			}
			field := func(name string) string { return builderField(i, j, name) }
			name := sp.Name
			if name == "" {
				name = fmt.Sprintf("step-%d", len(ps.Steps)+1)
			}
			switch {
			case names.CheckStep(name) != nil:
				errs.set(field("name"), names.CheckStep(name).Error())
			case stepNames[name]:
				errs.set(field("name"), "another step of this stage has this name")
			}
			stepNames[name] = true
			switch {
			case sp.Kind == "":
				errs.set(field("kind"), "choose a kind")
			case sp.Kind != gateStep && !kinds[sp.Kind]:
				errs.set(field("kind"), fmt.Sprintf("no node of the cluster offers the kind %q", sp.Kind))
			}
			schemas, ok := kindSchemas[sp.Kind] // a node of the target for each schema it announces
			if !ok {
				seen := map[string]bool{}
				for _, n := range picked {
					if raw, ok := n.ArgsSchemas[sp.Kind]; ok && !seen[string(raw)] {
						seen[string(raw)] = true
						schemas = append(schemas, n)
					}
				}
				kindSchemas[sp.Kind] = schemas
			}
			var schema []byte
			if len(schemas) > 0 {
				schema = schemas[0].ArgsSchemas[sp.Kind]
			}
			args, err := parseArgsText(sp.Args, schema)
			if err != nil {
				errs.set(field("args"), err.Error())
				continue
			}
			ps.Steps = append(ps.Steps, playbook.Step{Name: name, Kind: sp.Kind, Args: args})
			if sp.Kind == gateStep {
				if len(args) == 0 {
					errs.set(field("args"), `a gate's args are its check, such as {"http": {"url": "https://db-1/health"}}`)
				}
				ps.Steps[len(ps.Steps)-1] = playbook.Step{Name: name, Gate: args}
				continue
			}
			if hasTemplate(args) {
				continue
			}
			raw, _ := json.Marshal(args)
			for _, n := range schemas {
				if err := ops.CheckNodeArgs(n, sp.Kind, raw); err != nil {
					errs.set(field("args"), fmt.Sprintf("node %s's args_schema for %s: %v", n.ID, sp.Kind, err))
				}
			}
		}
		if len(ps.Steps) == 0 {
			errs.set(builderField(i, 0, "kind"), "choose a kind: a stage runs one step or more")
		}
		pb.Stages = append(pb.Stages, ps)
	}
	if len(pb.Stages) == 0 {
		errs.set("stages", "add a stage: its name, its target and a step")
	}
	if len(errs) > 0 {
		return "", errs
	}
	doc, err := playbook.Format(pb)
	switch {
	case err != nil:
		errs.set("stages", err.Error())
	case len(doc) > playbook.MaxSize:
		errs.set("stages", "the run's document is longer than 256 KiB")
	}
	return string(doc), errs
}

// parseArgsText reads a step's args: a JSON object, or one key=value a
// line. A value is JSON when it reads as JSON (5, true, [1, 2], "text")
// unless the kind's args_schema says the field is a string, and text
// otherwise. Empty args are none.
func parseArgsText(s string, schema []byte) (map[string]any, error) {
	if s == "" {
		return nil, nil
	}
	if strings.HasPrefix(s, "{") {
		v, err := decodeJSONValue(s)
		obj, ok := v.(map[string]any)
		if err != nil || !ok {
			return nil, formError(`the args are a JSON object such as {"seconds": 5}, or key=value lines`)
		}
		return obj, nil
	}
	strs := stringFields(schema)
	out := map[string]any{}
	for i, line := range strings.Split(s, "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		if hasControl(line) {
			return nil, formError("line %d of the args contains control characters", i+1)
		}
		k, val, ok := strings.Cut(line, "=")
		k, val = strings.TrimSpace(k), strings.TrimSpace(val)
		if !ok || k == "" {
			return nil, formError("line %d of the args is not key=value (or write the args as a JSON object)", i+1)
		}
		if _, dup := out[k]; dup {
			return nil, formError("the args name %s twice", k)
		}
		out[k] = val
		if strs[k] {
			continue
		}
		if v, err := decodeJSONValue(val); err == nil {
			out[k] = v
		}
	}
	return out, nil
}

// decodeJSONValue decodes one JSON value, with whole numbers as int64.
func decodeJSONValue(s string) (any, error) {
	d := json.NewDecoder(strings.NewReader(s))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, err
	}
	if d.More() {
		return nil, formError("more than one JSON value")
	}
	return plainNumbers(v), nil
}

// plainNumbers replaces json.Number (which YAML would write as a string)
// by int64 or float64.
func plainNumbers(v any) any {
	switch t := v.(type) {
	case json.Number:
		if n, err := t.Int64(); err == nil {
			return n
		}
		f, _ := t.Float64()
		return f
	case map[string]any:
		for k, e := range t {
			t[k] = plainNumbers(e)
		}
	case []any:
		for i, e := range t {
			t[i] = plainNumbers(e)
		}
	}
	return v
}

// stringFields are the top-level fields a schema types as strings only.
func stringFields(schema []byte) map[string]bool {
	var s struct {
		Properties map[string]struct {
			Type json.RawMessage `json:"type"`
		} `json:"properties"`
	}
	if len(schema) == 0 || json.Unmarshal(schema, &s) != nil {
		return nil
	}
	out := map[string]bool{}
	for k, p := range s.Properties {
		if bytes.Equal(bytes.TrimSpace(p.Type), []byte(`"string"`)) {
			out[k] = true
		}
	}
	return out
}

// hasTemplate reports whether a string in v is a template ({{ … }}),
// whose value the plan knows and the builder does not.
func hasTemplate(v any) bool {
	switch t := v.(type) {
	case string:
		return strings.Contains(t, "{{")
	case map[string]any:
		for _, e := range t {
			if hasTemplate(e) {
				return true
			}
		}
	case []any:
		for _, e := range t {
			if hasTemplate(e) {
				return true
			}
		}
	}
	return false
}
