package playbook

import (
	"strings"
	"testing"

	"github.com/musterhq/muster/core/runs"
)

// TestFormatIsReadBackAsWritten: a playbook built in code (as the web UI's
// New run form builds one) is written as a document that Parse reads back
// to the same stages, steps, target and limits, without the empty fields.
func TestFormatIsReadBackAsWritten(t *testing.T) {
	pb := &Playbook{Name: "adhoc", Stages: []Stage{
		{Name: "drain", Target: Target{Nodes: []string{"node-1"}}, MaxConcurrency: Limit("1"),
			Steps: []Step{{Name: "talk", Kind: "example.com/talk", Args: map[string]any{"say": "<b>hi</b>", "n": 2}}}},
		{Name: "upgrade", Target: Target{Labels: map[string]string{"role": "db"}}, MaxConcurrency: Limit("50%"),
			MaxErrors: Limit("0"), Canary: 1, AutoPromoteAfterS: 60,
			Steps: []Step{{Name: "up", Kind: "example.com/up"}, {Name: "check", Gate: map[string]any{"http": map[string]any{"url": "http://x/"}}}}},
	}}
	doc, err := Format(pb)
	if err != nil {
		t.Fatal(err)
	}
	for _, gone := range []string{"description", `""`, "kind: \"\"", "args: {}"} {
		if strings.Contains(string(doc), gone) {
			t.Errorf("the document has %q:\n%s", gone, doc)
		}
	}
	back, err := Parse(doc)
	if err != nil {
		t.Fatalf("Parse(Format): %v\n%s", err, doc)
	}
	if len(back.Stages) != 2 || back.Stages[0].Target.Nodes[0] != "node-1" || back.Stages[1].Target.Labels["role"] != "db" ||
		back.Stages[1].MaxConcurrency.Value != "50%" || back.Stages[0].MaxConcurrency.Value != "1" || back.Stages[1].MaxErrors.Value != "0" ||
		back.Stages[1].Canary != 1 || back.Stages[1].AutoPromoteAfterS != 60 || back.Stages[0].Steps[0].Args["say"] != "<b>hi</b>" ||
		back.Stages[0].Steps[0].Args["n"] != 2 || back.Stages[1].Steps[1].Kind != runs.KindGate {
		t.Fatalf("read back %+v\n%s", back, doc)
	}
	specs, err := back.Render(nil)
	if err != nil || len(specs) != 2 || specs[1].MaxConcurrency.String() != "50%" {
		t.Fatalf("rendered %+v %v\n%s", specs, err, doc)
	}
}
