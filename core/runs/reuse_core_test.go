package runs

import (
	"testing"

	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/action"
)

// A retry from the failed step counts the core's gates and calls as the
// node's steps: a DONE gate is reused like a DONE child, and a rollback
// made of a call that ran means the node's DONE steps were undone.
func TestARetryFromTheFailedStepCountsTheCoresSteps(t *testing.T) {
	t.Parallel()
	st := &store.RunStage{Name: "up",
		Steps: []store.RunStep{{Name: "upgrade", Kind: "example.com/x"}, {Name: "healthy", Kind: KindGate},
			{Name: "verify", Kind: "example.com/x"}},
		Rollback: []store.RunStep{{Name: "lb-in", Kind: KindCall}},
		Core:     map[string][]store.CoreStep{"n1": {{Step: "healthy", Attempt: 1, State: string(action.Done)}}}}
	kids := []Child{{ID: "a1", Stage: "up", Node: "n1", Step: "upgrade", Attempt: 1, State: action.Done},
		{ID: "a2", Stage: "up", Node: "n1", Step: "verify", Attempt: 1, State: action.Failed}}
	got := reusable(st, "n1", kids)
	if len(got) != 2 || got[0].Step != "upgrade" || got[1].Step != "healthy" {
		t.Fatalf("reused %+v, want upgrade and healthy", got)
	}
	st.Core["n1"] = append(st.Core["n1"], store.CoreStep{Step: "lb-in", Attempt: 1, State: string(action.Done)})
	if got := reusable(st, "n1", kids); got != nil {
		t.Fatalf("after its rollback call ran, the node reuses %+v, want nothing", got)
	}
}
