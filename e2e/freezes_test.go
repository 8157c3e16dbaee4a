package e2e

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/musterhq/muster/shared/client"
	"github.com/musterhq/muster/shared/limit"
	"github.com/musterhq/muster/shared/testwait"
	"github.com/musterhq/muster/shared/wire"
)

// Issue 33, scenario 1 (docs/policy.md): two replicas on PostgreSQL. An
// operator freezes c1 from the CLI through the replica that does not hold
// its lease; the holder learns it from the store, without SIGHUP, and a
// run approved there starts no node, saying why; an approver lifts the
// freeze from the CLI through the other replica, and the run goes on.
func TestFreezeFromTheCLIHoldsARunOnTheOtherReplica(t *testing.T) {
	t.Parallel()
	f := newHAFleet(t, 2, 1, "kinds:\n  - {kind: example.com/append, disruptive: true}\n")
	holder := -1
	testwait.Within(t, 20*time.Second, "a replica holds c1", func() bool {
		who, _, ok := f.holders(0)
		h, has := who["c1"]
		holder = h
		return ok && has
	})
	other := 1 - holder
	env := func(i int, who string) []string {
		return []string{"MUSTER_ADDR=http://" + f.cores[i].Addr(), "MUSTER_TOKEN=" + f.secrets[who]}
	}
	out := muster(t, env(other, "alice"), "freeze", "create", "c1", "--for", "1h", "--reason", "incident 4711")
	if !strings.HasPrefix(out, "Created freeze ") {
		t.Fatalf("freeze create: %s", out)
	}
	id := strings.Fields(out)[2]
	testwait.Within(t, 10*time.Second, "the holder frozen by the store", func() bool {
		cl, err := f.client(holder, "alice").Cluster(ctxT(t), "c1")
		return err == nil && cl.Calendar != nil && cl.Calendar.Frozen != nil && cl.Calendar.Frozen.Reason == "incident 4711"
	})

	one, none := limit.MustParse("1"), limit.MustParse("0")
	run, err := f.client(holder, "alice").CreateRun(ctxT(t), &wire.CreateRunRequest{ClusterID: "c1", Stages: []wire.StageSpec{{
		Name: "up", Target: wire.Target{All: true}, MaxConcurrency: &one, MaxErrors: &none,
		Steps: []wire.StepSpec{{Name: "append", Kind: "example.com/append", Args: json.RawMessage(`{}`)}}}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.client(holder, "bob").ApproveRun(ctxT(t), run.ID, ""); err != nil {
		t.Fatal(err)
	}
	testwait.Within(t, 15*time.Second, "the run held by the freeze", func() bool {
		r, err := f.client(holder, "alice").Run(ctxT(t), run.ID)
		return err == nil && strings.Contains(r.StateReason, "frozen") && strings.Contains(r.StateReason, "incident 4711")
	})
	// Syncs go on (a nudge through each replica); nothing runs.
	for i := range f.cores {
		if err := f.client(i, "alice").Orchestrate(ctxT(t), "c1"); err != nil {
			t.Fatal(err)
		}
	}
	testwait.Within(t, 10*time.Second, "the run still held after the nudges", func() bool {
		r, err := f.client(other, "alice").Run(ctxT(t), run.ID)
		return err == nil && strings.Contains(r.StateReason, "incident 4711")
	})
	if got := lines(f.log); len(got) != 0 {
		t.Fatalf("a node ran while frozen: %v", got)
	}
	out = muster(t, env(other, "alice"), "freeze", "list")
	if !strings.Contains(out, id) || !strings.Contains(out, "alice") {
		t.Fatalf("freeze list:\n%s", out)
	}

	out = muster(t, env(other, "bob"), "freeze", "lift", id, "--reason", "incident closed")
	if !strings.HasPrefix(out, "Lifted freeze "+id) {
		t.Fatalf("freeze lift: %s", out)
	}
	testwait.Within(t, 20*time.Second, "the run DONE after the lift", func() bool {
		r, err := f.client(holder, "alice").Run(ctxT(t), run.ID)
		return err == nil && r.State == "DONE"
	})
	if got := lines(f.log); len(got) != 1 {
		t.Fatalf("executions after the lift: %v, want one", got)
	}
	list, err := f.client(other, "admin").Events(ctxT(t), 0, 100, client.EventFilter{Types: []string{"freeze.*"}})
	if err != nil {
		t.Fatal(err)
	}
	evs := list.Events
	if len(evs) != 2 || evs[0].Actor != "alice" || evs[1].Actor != "bob" || !strings.Contains(evs[1].Message, "incident closed") {
		t.Fatalf("freeze events: %+v", evs)
	}
}
