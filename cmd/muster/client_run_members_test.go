package main

import (
	"strings"
	"testing"

	"github.com/musterhq/muster/shared/wire"
)

// "not in this run" lists every node matching the stage's target that is
// not among its nodes, those left out at the plan (DOWN, beyond a limit,
// without its kinds) as well as those that joined later: its words must
// not claim they all joined after the plan.
func TestRunShowNotInRunSaysWhatItLists(t *testing.T) {
	var b strings.Builder
	printStageMembers(&b, &wire.Stage{NotInRun: []string{"web-5"}})
	out := b.String()
	if !strings.Contains(out, "not in this run: web-5") || !strings.Contains(out, "left out when it was planned") ||
		strings.Contains(out, "(match its target, joined after it was planned)") {
		t.Fatalf("run show says %q", out)
	}
}
