package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/musterhq/muster/shared/wire"
)

func TestRunShowListsGatesWithTheirValuesEscaped(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	r := &wire.Run{ID: "r1", State: "DONE", Stages: []wire.Stage{{Name: "roll", State: "DONE",
		PromotedBy: "promoted by the rule auto_promote_after_s: its gates held 30s (healthy on n1: 0.002)",
		CoreSteps: []wire.CoreStep{
			{Node: "n1", Step: "healthy", Attempt: 1, State: "DONE", Value: "0.002", At: &at, Checks: 3, Reason: "0.002 < 0.01"},
			{Node: "n2", Step: "healthy", Attempt: 2, State: "FAILED", Value: "\x1b[31m0.5", At: &at, Checks: 1, Reason: "0.5 is not < 0.01"},
		}}}}
	var b bytes.Buffer
	if err := printRun(&b, r); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{"Gates and calls (run by the core):", "promoted by the rule auto_promote_after_s",
		"n1", "0.002 < 0.01", "0.5 is not < 0.01", "FAILED"} {
		if !strings.Contains(out, want) {
			t.Fatalf("run show lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "\x1b") {
		t.Fatalf("run show printed an escape sequence:\n%q", out)
	}
}
