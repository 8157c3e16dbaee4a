package runs_test

import (
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/musterhq/muster/core/runs"
	"github.com/musterhq/muster/shared/wire"
)

// The two bodies of issue 30: a when that loops 1.6 billion times, and args
// that build 300 MB with printf's width.
const (
	attackLoop   = `{{range 40000}}{{range 40000}}{{end}}{{end}}true`
	attackPrintf = `{{range 300}}{{printf "%01000000d" 0}}{{end}}`
)

// TestStepTemplatesRefuseWhatCouldFreezeOrExhaustTheCore: a step's when
// and args have the grammar of a playbook's parameters (fields, if, and
// eq ne lt le gt ge and or not lower upper); every other construct is
// refused when the run is checked, with the step and the construct named.
func TestStepTemplatesRefuseWhatCouldFreezeOrExhaustTheCore(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, tmpl, want string
	}{
		{"the issue's loop", attackLoop, "range"},
		{"the issue's printf", attackPrintf, "range"},
		{"printf", `{{printf "%01000000d" 0}}`, "printf"},
		{"range", `{{range .node.labels}}x{{end}}true`, "range"},
		{"with", `{{with .node.id}}true{{end}}`, "with"},
		{"define", `{{define "x"}}y{{end}}true`, "define"},
		{"template", `{{template "x"}}true`, "template"},
		{"block", `{{block "x" .}}true{{end}}`, "block"},
		{"index", `{{index .node.labels "role"}}`, "index"},
		{"len", `{{len .node.id}}`, "len"},
		{"slice", `{{slice .node.id 0 1}}`, "slice"},
		{"call", `{{call .node.id}}`, "call"},
		{"print", `{{print .node.id}}`, "print"},
		{"html", `{{html .node.id}}`, "html"},
		{"a variable", `{{$x := .node.id}}true`, "variable"},
		{"a variable's use", `{{$}}`, "variable"},
	} {
		for _, field := range []string{"when", "args"} {
			t.Run(tc.name+" in "+field, func(t *testing.T) {
				t.Parallel()
				step := wire.StepSpec{Name: "evil", Kind: "muster.io/debug.ping"}
				if field == "when" {
					step.When = tc.tmpl
				} else {
					step.Args = []byte(`{"v":` + strconv.Quote(tc.tmpl) + `}`)
				}
				req := &wire.CreateRunRequest{ClusterID: "c", Stages: []wire.StageSpec{{Name: "s",
					Target: wire.Target{All: true}, Steps: []wire.StepSpec{step}}}}
				err := runs.Check(req)
				if !errors.Is(err, runs.ErrInvalid) {
					t.Fatalf("Check(%s %q) = %v, want ErrInvalid", field, tc.tmpl, err)
				}
				if msg := err.Error(); !strings.Contains(msg, "step evil") || !strings.Contains(msg, tc.want) {
					t.Fatalf("Check(%s %q) = %q: want it to name step evil and %q", field, tc.tmpl, msg, tc.want)
				}
			})
		}
	}
}
