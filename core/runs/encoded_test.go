package runs_test

import (
	"strings"
	"testing"

	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/action"
	"github.com/musterhq/muster/shared/limit"
	"github.com/musterhq/muster/shared/wire"
)

// TestArgsTooLargeOnceEncodedFailTheNode: a step whose args render within
// the bound but pass it once encoded as JSON (escaping grows "<" sixfold)
// fails its node, rather than being dropped at every advance and leaving
// the node waiting forever.
func TestArgsTooLargeOnceEncodedFailTheNode(t *testing.T) {
	t.Parallel()
	env := setupEngine(t)
	c, e := limit.MustParse("1"), limit.MustParse("0")
	k := "muster.io/debug.ping"
	r := env.startReq(&wire.CreateRunRequest{ClusterID: "c", Stages: []wire.StageSpec{{
		Name: "roll", Target: wire.Target{All: true}, MaxConcurrency: &c, MaxErrors: &e,
		Steps: []wire.StepSpec{
			{Name: "read", Kind: k},
			{Name: "write", Kind: k, Args: []byte(`{"v":"{{ .steps.read.outputs.v }}{{ .steps.read.outputs.v }}"}`)},
		},
	}}})
	// 2 × 12 KB rendered, within the 64 KB bound; 144 KB once encoded.
	out := `{"v":"` + strings.Repeat(`\u003c`, 12<<10) + `"}`
	env.finishWith(env.open(r.ID).ID, action.Done, out)
	r = env.advance(r.ID)
	if r.State != store.RunFailed || len(r.Stages[0].Failed) != 1 || r.Stages[0].Failed[0] != "n1" {
		t.Fatalf("run %s (%s), failed %v: want FAILED with n1 failed by its args", r.State, r.StateReason, r.Stages[0].Failed)
	}
}
