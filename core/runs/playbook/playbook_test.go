package playbook

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/musterhq/muster/core/runs"
	"github.com/musterhq/muster/shared/wire"
)

func TestExamplesParse(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("../../../configs/playbooks/*.yaml")
	if err != nil || len(files) != 5 {
		t.Fatalf("examples: %v, %v", files, err)
	}
	for _, f := range files {
		doc, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := Parse(doc); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
}

const good = `name: demo
description: d
params:
  - {name: service, type: string, default: web}
  - {name: seconds, type: int, default: 2}
  - {name: force, type: bool, default: false}
  - {name: mode, type: enum, values: [a, b], default: a}
stages:
  - name: one
    kind: example.com/x
    args:
      service: "{{ .service }}"
      seconds: "{{ .seconds }}"
      force: "{{ .force }}"
      label: "svc-{{ .service }}-{{ .seconds }}"
      nested: {list: ["{{ .mode }}", 3]}
    target: {labels: {role: "{{ .mode }}"}}
    max_concurrency: 25%
  - name: two
    kind: example.com/y
    target: {nodes: ["n-{{ .seconds }}"]}
`

func TestRenderFillsParametersWithTheirTypes(t *testing.T) {
	t.Parallel()
	p, err := Parse([]byte(good))
	if err != nil {
		t.Fatal(err)
	}
	vals, err := p.Values(map[string]string{"seconds": "5", "mode": "b"})
	if err != nil {
		t.Fatal(err)
	}
	specs, err := p.Render(vals)
	if err != nil {
		t.Fatal(err)
	}
	var args map[string]any
	if err := json.Unmarshal(specs[0].Args, &args); err != nil {
		t.Fatal(err)
	}
	want := `{"force":false,"label":"svc-web-5","nested":{"list":["b",3]},"seconds":5,"service":"web"}`
	if got, _ := json.Marshal(args); string(got) != want {
		t.Fatalf("args %s, want %s", got, want)
	}
	if specs[0].Target.Labels["role"] != "b" || specs[1].Target.Nodes[0] != "n-5" {
		t.Fatalf("targets %+v %+v", specs[0].Target, specs[1].Target)
	}
	if specs[0].MaxConcurrency.String() != "25%" || specs[1].DependsOn != nil {
		t.Fatalf("limits or dependencies changed: %+v", specs)
	}
}

func TestBadDocumentsAreRefusedWithLineAndField(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, doc, want string
	}{
		{"not a playbook", "- just\n- a list\n", "not a playbook"},
		{"not YAML", "name: [unclosed\n", "invalid playbook"},
		{"unknown field", "name: x\nstages:\n  - name: a\n    kind: example.com/x\n    target: {all: true}\n    retries: 3\n", "line 6: field retries not found"},
		{"undefined parameter", "name: x\nstages:\n  - name: a\n    kind: example.com/x\n    target: {all: true}\n    args: {v: \"{{ .nope }}\"}\n", `line 6: stages[0].args.v: template: .nope refers to an undefined parameter "nope"`},
		{"forbidden function", "name: x\nparams: [{name: a, type: string, default: b}]\nstages:\n  - name: a\n    kind: example.com/x\n    target: {all: true}\n    args: {v: \"{{ call .a }}\"}\n", `function "call" is not allowed`},
		{"target nothing", "name: x\nstages:\n  - name: a\n    kind: example.com/x\n    target: {}\n", "line 5: stages[0].target: targets nothing"},
		{"cycle", "name: x\nstages:\n  - {name: a, kind: example.com/x, target: {all: true}, depends_on: [b]}\n  - {name: b, kind: example.com/x, target: {all: true}}\n", "cycle: a → b → a"},
		{"bad default", "name: x\nparams: [{name: n, type: int, default: many}]\nstages:\n  - {name: a, kind: example.com/x, target: {all: true}}\n", `line 2: params[0]: n: default: "many" is not an int`},
		{"bad type", "name: x\nparams: [{name: n, type: float}]\nstages:\n  - {name: a, kind: example.com/x, target: {all: true}}\n", `type "float" is not string, int, bool or enum`},
		{"bad limit", "name: x\nstages:\n  - name: a\n    kind: example.com/x\n    target: {all: true}\n    max_concurrency: 150%\n", "line 6: stages[0].max_concurrency"},
		{"bad name", "name: Bad Name\nstages:\n  - {name: a, kind: example.com/x, target: {all: true}}\n", "line 1: name"},
		{"no stages", "name: x\n", "at least one stage"},
		{"include_failed first", "name: x\nstages:\n  - {name: a, kind: example.com/x, target: {all: true}, include_failed: true}\n", "stage a: include_failed: the first stage"},
		{"include_failed not a bool", "name: x\nstages:\n  - {name: a, kind: example.com/x, target: {all: true}}\n  - {name: b, kind: example.com/x, target: {all: true}, include_failed: maybe}\n", "line 4"},
		{"too many params", "name: x\nparams:\n" + strings.Repeat("  - {name: p, type: string, default: x}\n", MaxParams+1) + "stages:\n  - {name: a, kind: example.com/x, target: {all: true}}\n", "at most 100 parameters"},
		{"too large", "name: x\n#" + strings.Repeat("y", MaxSize) + "\n", "over the limit"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.doc))
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Parse = %v\nwant ErrInvalid containing %q", err, tc.want)
			}
		})
	}
}

func TestParametersAreCheckedAgainstThePlaybook(t *testing.T) {
	t.Parallel()
	_, err := Parse([]byte(good + "params_extra: 1\n"))
	if err == nil {
		t.Fatal("an unknown top-level field was accepted")
	}
	p, err := Parse([]byte(strings.Replace(good, "default: web", "description: no default", 1)))
	if err != nil {
		t.Fatal(err)
	}
	for name, given := range map[string]map[string]string{
		"unknown parameter":  {"service": "x", "colour": "red"},
		"wrong type":         {"service": "x", "seconds": "soon"},
		"bad bool":           {"service": "x", "force": "perhaps"},
		"not in enum":        {"service": "x", "mode": "c"},
		"required not given": {},
	} {
		if _, err := p.Values(given); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: Values(%v) = %v, want ErrInvalid", name, given, err)
		}
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(good))
	for _, name := range []string{"rolling-restart", "backup-all", "drain-upgrade-verify", "upgrade-muster-agent"} {
		if b, err := os.ReadFile("../../../configs/playbooks/" + name + ".yaml"); err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte("name: x\nstages:\n  - {name: a, kind: example.com/x, target: {all: true}, depends_on: [a]}\n"))
	f.Add([]byte("name: x\nparams: [{name: a, type: enum, values: []}]\nstages: []\n"))
	f.Add([]byte("{{"))
	f.Add([]byte("name: x\nlock: db\nstages:\n  - {name: a, kind: example.com/x, target: {all: true}, lock: {name: lb, scope: global}}\n"))
	f.Add([]byte("name: x\nlock: {name: db, other: 1}\nstages:\n  - {name: a, kind: example.com/x, target: {all: true}, lock: [1]}\n"))
	f.Add([]byte(aliasBomb(50<<10, 2000)))
	f.Add([]byte("name: x\nstages:\n  - name: a\n    kind: example.com/x\n    target: {all: true}\n    args:\n      <<: {a: 1}\n"))
	f.Add([]byte("name: x\nparams: [{name: p, type: bool, default: true}]\nstages:\n  - {name: a, kind: example.com/x, target: {all: true}, args: {a: '{{ if .p }}x{{ end }}'}}\n"))
	f.Fuzz(func(t *testing.T, doc []byte) {
		p, err := Parse(doc)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("an error that is not ErrInvalid: %v", err)
			}
			return
		}
		vals := map[string]string{}
		for _, pr := range p.Params {
			if pr.Required {
				switch pr.Type {
				case TypeInt:
					vals[pr.Name] = "1"
				case TypeBool:
					vals[pr.Name] = "true"
				case TypeEnum:
					vals[pr.Name] = pr.Values[0]
				default:
					vals[pr.Name] = "v"
				}
			}
		}
		v, err := p.Values(vals)
		if err != nil {
			t.Fatalf("the defaults of an accepted playbook do not fit it: %v", err)
		}
		if _, err := p.Render(v); err != nil && !errors.Is(err, ErrInvalid) {
			t.Fatalf("render: %v", err)
		}
	})
}

func TestRenderingIsBounded(t *testing.T) {
	t.Parallel()
	// printf's widths would turn a few bytes into megabytes: it is refused.
	if _, err := Parse([]byte("name: x\nstages:\n  - name: a\n    kind: example.com/x\n    target: {all: true}\n    args: {v: '{{ printf \"%01000000d\" 1 }}'}\n")); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), `function "printf" is not allowed`) {
		t.Fatalf("printf: %v", err)
	}
	// Many references to a long parameter stop at MaxRendered.
	var doc strings.Builder
	doc.WriteString("name: x\nparams: [{name: p, type: string, default: x}]\nstages:\n  - name: a\n    kind: example.com/x\n    target: {all: true}\n    args:\n")
	for i := range 400 {
		fmt.Fprintf(&doc, "      k%d: \"{{ .p }}{{ .p }}\"\n", i)
	}
	p, err := Parse([]byte(doc.String()))
	if err != nil {
		t.Fatal(err)
	}
	vals, err := p.Values(map[string]string{"p": strings.Repeat("y", MaxParamValue)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Render(vals); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("more than %d bytes", MaxRendered)) {
		t.Fatalf("a render of 400 × 8 KiB: %v, want it refused past %d bytes", err, MaxRendered)
	}
	if _, err := p.Values(map[string]string{"p": strings.Repeat("y", MaxParamValue+1)}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("a parameter over %d bytes: %v", MaxParamValue, err)
	}
}

func TestAnIfWithoutElseRenders(t *testing.T) {
	t.Parallel()
	p, err := Parse([]byte("name: x\nparams: [{name: p, type: bool, default: true}]\nstages:\n  - {name: a, kind: example.com/x, target: {all: true}, args: {a: '{{ if .p }}on{{ end }}'}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	v, _ := p.Values(nil)
	specs, err := p.Render(v)
	if err != nil || string(specs[0].Args) != `{"a":"on"}` {
		t.Fatalf("Render = %s, %v", specs[0].Args, err)
	}
}

// aliasBomb is one anchored string aliased n times: a small document that
// would expand to n × size bytes.
func aliasBomb(size, n int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "name: bomb\nstages:\n  - name: a\n    kind: example.com/x\n    target: {all: true}\n    args:\n      seed: &s %q\n", strings.Repeat("x", size))
	for i := range n {
		fmt.Fprintf(&b, "      k%d: *s\n", i)
	}
	return b.String()
}

// Issue 17, item 1: anchors, aliases and merge keys are refused before the
// document is expanded, so a small document cannot make the core build a
// large one (nor parse one template thousands of times).
func TestYAMLAliasBombIsRefused(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, doc, want string }{
		{"alias bomb", aliasBomb(50<<10, 2000), "line 7: document: anchors (&s) are not allowed"},
		{"template aliased", "name: x\nparams: [{name: p, type: string, default: v}]\nstages:\n  - name: a\n    kind: example.com/x\n    target: {all: true}\n    args:\n      t: &t '{{ .p }}{{ .p }}'\n      u: *t\n", "line 8: document: anchors (&t) are not allowed"},
		{"alias without anchor", "name: x\nstages:\n  - name: a\n    kind: example.com/x\n    target: {all: true}\n    args: {v: *nope}\n", "invalid playbook"},
		{"merge key", "name: x\nstages:\n  - name: a\n    kind: example.com/x\n    target: {all: true}\n    args:\n      <<: {a: 1}\n", "line 7: document: merge keys (<<) are not allowed"},
		{"anchor on a mapping", "name: x\nstages:\n  - &st {name: a, kind: example.com/x, target: {all: true}}\n", "line 3: document: anchors (&st) are not allowed"},
		{"args over the limit", "name: x\nstages:\n  - name: a\n    kind: example.com/x\n    target: {all: true}\n    args:\n" +
			argsLines(70), "stages[0].args: larger than"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.doc))
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Parse = %v\nwant ErrInvalid containing %q", err, tc.want)
			}
		})
	}
}

// argsLines is n args of 1,000 bytes each.
func argsLines(n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "      k%d: %q\n", i, strings.Repeat("y", 1000))
	}
	return b.String()
}

const procedureDoc = `name: proc
description: d
params:
  - {name: version, type: string}
  - {name: errors, type: int, default: 1}
stages:
  - name: up
    target: {all: true}
    max_errors: "{{ .errors }}"
    canary: 1
    soak: 1m
    unavailable: skip
    steps:
      - name: upgrade
        kind: example.com/node.upgrade
        args: {version: "{{ .version }}"}
        timeout: 2m
      - name: verify
        kind: example.com/node.verify
        retry: {attempts: 3, delay: 5s, backoff: 2, max_delay: 1m}
        when: '{{ eq .steps.upgrade.state "DONE" }}'
    rollback:
      - name: downgrade
        kind: example.com/node.upgrade
        args: {version: "{{ .steps.upgrade.outputs.previous }}"}
`

// A playbook's stage carries a procedure: its steps and rollback, retry,
// canary and soak reach the run; parameters are rendered when the run is
// made and the run's own templates (.steps) are left for it; a limit given
// as an int parameter takes its value.
func TestPlaybookProcedureRenders(t *testing.T) {
	t.Parallel()
	p, err := Parse([]byte(procedureDoc))
	if err != nil {
		t.Fatal(err)
	}
	vals, err := p.Values(map[string]string{"version": "2.0", "errors": "3"})
	if err != nil {
		t.Fatal(err)
	}
	specs, err := p.Render(vals)
	if err != nil {
		t.Fatal(err)
	}
	st := specs[0]
	if st.MaxErrors == nil || st.MaxErrors.String() != "3" || st.Canary != 1 || st.SoakS != 60 || st.Unavailable != "skip" {
		t.Fatalf("stage %+v", st)
	}
	if len(st.Steps) != 2 || string(st.Steps[0].Args) != `{"version":"2.0"}` || st.Steps[0].TimeoutS != 120 {
		t.Fatalf("steps %+v", st.Steps)
	}
	if r := st.Steps[1].Retry; r == nil || r.Attempts != 3 || r.DelayS != 5 || r.Backoff != 2 || r.MaxDelayS != 60 {
		t.Fatalf("retry %+v", r)
	}
	if st.Steps[1].When != `{{ eq .steps.upgrade.state "DONE" }}` {
		t.Fatalf("when %q", st.Steps[1].When)
	}
	if len(st.Rollback) != 1 || string(st.Rollback[0].Args) != `{"version":"{{ .steps.upgrade.outputs.previous }}"}` {
		t.Fatalf("rollback %+v", st.Rollback)
	}
	// The limit follows its parameter: another value, another plan.
	vals["errors"] = 0
	specs, err = p.Render(vals)
	if err != nil || specs[0].MaxErrors.String() != "0" {
		t.Fatalf("max_errors with errors=0: %v, %v", specs[0].MaxErrors, err)
	}
}

// A parameter no field uses, a limit from a parameter that is not an int,
// and a template mixing a parameter with .steps are refused with the line.
func TestPlaybookRefusesUnusedParametersWithTheLine(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct{ doc, want string }{
		"unused": {`name: x
description: d
params:
  - {name: service, type: string, default: web}
  - {name: max_errors, type: int, default: 0}
stages:
  - name: one
    kind: example.com/x
    args: {service: "{{ .service }}"}
    target: {all: true}
`, `line 5: params[1]: "max_errors" is used by no field`},
		"limit of a string": {`name: x
description: d
params:
  - {name: service, type: string, default: web}
stages:
  - name: one
    kind: example.com/x
    target: {all: true}
    max_errors: "{{ .service }}"
`, `line 9: stages[0].max_errors`},
		"mixed": {`name: x
description: d
params:
  - {name: version, type: string}
stages:
  - name: one
    target: {all: true}
    steps:
      - name: up
        kind: example.com/x
        args: {v: "{{ .version }}-{{ .steps.up.state }}"}
`, `mixes the parameter "version"`},
	} {
		_, err := Parse([]byte(tc.doc))
		if err == nil || !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", name, err, tc.want)
		}
	}
}

// A parameter named node (or steps) is a parameter: only .node.X and
// .steps.X are the run's own templates.
func TestAParameterNamedNodeIsRendered(t *testing.T) {
	t.Parallel()
	p, err := Parse([]byte(`name: x
description: d
params:
  - {name: node, type: string, default: db-2}
stages:
  - name: one
    kind: example.com/x
    target: {nodes: ["{{ .node }}"]}
`))
	if err != nil {
		t.Fatal(err)
	}
	vals, err := p.Values(nil)
	if err != nil {
		t.Fatal(err)
	}
	specs, err := p.Render(vals)
	if err != nil || specs[0].Target.Nodes[0] != "db-2" {
		t.Fatalf("target %+v, %v", specs, err)
	}
}

// TestPlaybookTemplatesRefuseLoopsDefinitionsAndPrintf: a parameter's
// template and a step's run-time template in a playbook have one grammar,
// and the two bodies are refused in either, with the line and the
// field.
func TestPlaybookTemplatesRefuseLoopsDefinitionsAndPrintf(t *testing.T) {
	t.Parallel()
	const head = "name: x\nparams: [{name: p, type: string, default: v}]\nstages:\n  - name: a\n    target: {all: true}\n    steps:\n      - name: s\n        kind: example.com/x\n"
	for _, tc := range []struct{ name, field, want string }{
		{"the issue's loop as a parameter's", `when: '{{range 40000}}{{range 40000}}{{end}}{{end}}{{ .p }}'`, "range is not allowed"},
		{"the issue's loop as the run's", `when: '{{range 40000}}{{range 40000}}{{end}}{{end}}{{ .node.id }}'`, "range is not allowed"},
		{"the issue's printf as the run's", `args: {v: '{{range 300}}{{printf "%01000000d" 0}}{{end}}{{ .node.id }}'}`, "range is not allowed"},
		{"printf as a parameter's", `args: {v: '{{ printf "%01000000d" .p }}'}`, `function "printf" is not allowed`},
		{"printf as the run's", `args: {v: '{{ printf "%01000000d" .node.id }}'}`, `function "printf" is not allowed`},
		{"with", `args: {v: '{{ with .p }}{{ end }}'}`, "with is not allowed"},
		{"define", `args: {v: '{{ define "t" }}{{ end }}{{ .p }}'}`, "define and block are not allowed"},
		{"template", `args: {v: '{{ template "t" }}{{ .p }}'}`, "template and block are not allowed"},
		{"index", `args: {v: '{{ index .node.labels "a" }}'}`, `function "index" is not allowed`},
		{"len", `args: {v: '{{ len .p }}'}`, `function "len" is not allowed`},
		{"a variable", `args: {v: '{{ $x := .node.id }}'}`, "variables are not allowed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := Parse([]byte(head + "        " + tc.field + "\n      - {name: t, kind: example.com/x, args: {u: '{{ .p }}'}}\n"))
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "step") {
				t.Fatalf("Parse = %v\nwant ErrInvalid naming the step and %q", err, tc.want)
			}
		})
	}
}

func TestIncludeFailedReachesTheRun(t *testing.T) {
	t.Parallel()
	p, err := Parse([]byte("name: x\nstages:\n  - {name: a, kind: example.com/x, target: {all: true}}\n" +
		"  - {name: b, kind: example.com/x, target: {all: true}, include_failed: true}\n"))
	if err != nil {
		t.Fatal(err)
	}
	specs, err := p.Render(map[string]any{})
	if err != nil {
		t.Fatal(err)
	}
	if specs[0].IncludeFailed || !specs[1].IncludeFailed {
		t.Fatalf("include_failed %t %t, want false true", specs[0].IncludeFailed, specs[1].IncludeFailed)
	}
}

func TestPlaybookLocksRenderAsTheRunRequestsThem(t *testing.T) {
	t.Parallel()
	p, err := Parse([]byte("name: x\nlock: db\nstages:\n  - {name: a, kind: example.com/x, target: {all: true}, lock: {name: db}}\n" +
		"  - {name: b, kind: example.com/x, target: {all: true}, lock: db}\n"))
	if err != nil {
		t.Fatal(err)
	}
	run, _, err := p.request(&wire.PlanRequest{ClusterID: "c"})
	if err != nil {
		t.Fatal(err)
	}
	if run.Lock == nil || *run.Lock != (wire.Lock{Name: "db", Scope: wire.LockCluster}) ||
		run.Stages[0].Lock == nil || *run.Stages[0].Lock != (wire.Lock{Name: "db", Scope: wire.LockCluster}) {
		t.Fatalf("locks: run %+v, stage %+v", run.Lock, run.Stages[0].Lock)
	}
	p, err = Parse([]byte("name: x\nstages:\n  - {name: a, kind: example.com/x, target: {all: true}, lock: {name: lb, scope: global}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if run, _, err = p.request(&wire.PlanRequest{ClusterID: "c"}); err != nil || run.Lock != nil ||
		run.Stages[0].Lock == nil || *run.Stages[0].Lock != (wire.Lock{Name: "lb", Scope: wire.LockGlobal}) {
		t.Fatalf("a stage's global lock: %v, run %+v, stage %+v", err, run.Lock, run.Stages[0].Lock)
	}
	for _, doc := range []string{
		"name: x\nlock: {name: db, other: 1}\nstages:\n  - {name: a, kind: example.com/x, target: {all: true}}\n",
		"name: x\nstages:\n  - {name: a, kind: example.com/x, target: {all: true}, lock: [db]}\n",
		"name: x\nstages:\n  - {name: a, kind: example.com/x, target: {all: true}, lock: {name: db, scope: everywhere}}\n",
	} {
		if _, err := Parse([]byte(doc)); !errors.Is(err, ErrInvalid) {
			t.Errorf("Parse(%q) = %v, want ErrInvalid", doc, err)
		}
	}
}

// A secret's reference passes through a playbook's parameters unchanged,
// beside a parameter and beside a run-time field; a bad one is refused
// with its line.
func TestASecretReferenceSurvivesThePlaybook(t *testing.T) {
	t.Parallel()
	p, err := Parse([]byte("name: x\nparams: [{name: db, type: string, default: app}]\nstages:\n  - name: a\n    target: {all: true}\n    steps:\n" +
		"      - {name: m, kind: example.com/x, args: {dsn: 'pg://{{ .db }}:{{ secret \"db-password\" }}@h', n: '{{ secret \"tok\" }}@{{ .node.id }}'}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	v, _ := p.Values(nil)
	specs, err := p.Render(v)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"dsn":"pg://app:{{ secret \"db-password\" }}@h","n":"{{ secret \"tok\" }}@{{ .node.id }}"}`
	if got := string(specs[0].Steps[0].Args); got != want {
		t.Fatalf("Render = %s, want %s", got, want)
	}
	_, err = Parse([]byte("name: x\nstages:\n  - name: a\n    kind: example.com/x\n    target: {all: true}\n    args: {a: '{{ secret \"Bad/Name\" }}'}\n"))
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "not a plain name") || !strings.Contains(err.Error(), "line 6") {
		t.Fatalf("Parse of a bad name = %v; want ErrInvalid at line 6, not a plain name", err)
	}
}

// gated is a playbook whose procedure has a call, a gate with a soak, an
// automatic promote and abort_on.
const gated = `name: gated
params:
  - {name: version, type: string, required: true, description: the version}
stages:
  - name: roll
    target: {all: true}
    canary: 1
    auto_promote_after_s: 20
    abort_on: [healthy]
    steps:
      - name: lb-out
        call:
          http:
            method: POST
            url: "https://lb.example/pools/web/{{ .node.id }}/out"
            headers: {Authorization: 'Bearer {{ secret "lb-token" }}'}
      - name: upgrade
        kind: example.com/upgrade
        args: {version: "{{ .version }}"}
      - name: healthy
        soak: 10s
        timeout: 5s
        retry: {attempts: 3, delay: 2s}
        gate:
          prometheus:
            url: http://prometheus.example:9090
            query: 'error_ratio{node="{{ .node.id }}"}'
            expect: "< 0.01"
`

func TestPlaybookGatesAndCallsBecomeCoreSteps(t *testing.T) {
	t.Parallel()
	p, err := Parse([]byte(gated))
	if err != nil {
		t.Fatal(err)
	}
	v, err := p.Values(map[string]string{"version": "2.0"})
	if err != nil {
		t.Fatal(err)
	}
	specs, err := p.Render(v)
	if err != nil {
		t.Fatal(err)
	}
	req := &wire.CreateRunRequest{ClusterID: "c", Stages: specs}
	if err := runs.Check(req); err != nil {
		t.Fatal(err)
	}
	st := req.Stages[0]
	if st.AutoPromoteAfterS != 20 || len(st.AbortOn) != 1 {
		t.Fatalf("stage %+v", st)
	}
	call, gate := st.Steps[0], st.Steps[2]
	if call.Kind != runs.KindCall || !strings.Contains(string(call.Args), `{{ secret \"lb-token\" }}`) ||
		!strings.Contains(string(call.Args), "{{ .node.id }}") {
		t.Fatalf("lb-out: %s %s", call.Kind, call.Args)
	}
	if gate.Kind != runs.KindGate || gate.SoakS != 10 || gate.TimeoutS != 5 || gate.Retry.Attempts != 3 ||
		!strings.Contains(string(gate.Args), `"expect":"\u003c 0.01"`) && !strings.Contains(string(gate.Args), `"expect":"< 0.01"`) {
		t.Fatalf("healthy: %+v %s", gate, gate.Args)
	}
	for _, bad := range []string{
		strings.Replace(gated, "abort_on: [healthy]", "abort_on: [upgrade]", 1),
		strings.Replace(gated, "expect: \"< 0.01\"", "expect: \"small\"", 1),
		strings.Replace(gated, "      - name: healthy\n", "      - name: healthy\n        kind: example.com/x\n", 1),
		strings.Replace(gated, "soak: 10s", "soak: soon", 1),
	} {
		if _, err := Parse([]byte(bad)); !errors.Is(err, ErrInvalid) {
			t.Fatalf("Parse: %v, want invalid:\n%s", err, bad)
		}
	}
}
