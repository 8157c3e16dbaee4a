package e2e

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/musterhq/muster/shared/action"
	"github.com/musterhq/muster/shared/client"
	"github.com/musterhq/muster/shared/testwait"
	"github.com/musterhq/muster/shared/wire"
)

// The agent wins even over a record the core thinks final. An action waits
// for approval; someone pushes the same id straight to the agent with other
// args (201); bob rejects it, so the core holds it CANCELLED "rejected"; the
// core is SIGKILLed before any pass sees the agent's copy; the agent runs it
// to DONE. Once the core is back, core and agent agree: DONE, with the
// agent's args, an action.conflict event saying what the core had decided,
// and the rejection kept in the history.
//
// The busy action pushed first (it keeps the agent's runner occupied until
// the core is dead) also claims a core identity: the core imports it as an
// agent-made action, requester "<node>/…", with no approval.
func TestCoreTakesTheAgentsRecordOverARejectionAfterASIGKILL(t *testing.T) {
	t.Parallel()
	var proxy *faultProxy
	f := newFleetWith(t, fleetOptions{nodes: 1, coreAddr: func(node, agentAddr string) string {
		proxy = newFaultProxy(t, agentAddr, 1)
		return proxy.Addr()
	}})
	ag := f.agentC["node-1"]
	mine := f.create("node-1", "muster.io/debug.sleep", `{"seconds":0.1}`)
	if mine.State != action.PendingApprove {
		t.Fatalf("created %s", mine.State)
	}

	// From here on no pass reaches the agent, so the core never sees the
	// direct pushes before it dies.
	proxy.Set(drop)
	forged := "bob\x1b[31mFORGED"
	busy, status, err := ag.Push(ctxT(t), &wire.PushRequest{ID: action.NewID(), Kind: "muster.io/debug.sleep",
		Args: json.RawMessage(`{"seconds":3}`), Origin: action.OriginCore, Requester: "mallory", ApprovedBy: forged})
	if err != nil || status != 201 {
		t.Fatalf("busy push: %d %v", status, err)
	}
	theirs, status, err := ag.Push(ctxT(t), &wire.PushRequest{ID: mine.ID, Kind: "muster.io/debug.sleep",
		Args: json.RawMessage(`{"seconds":0.2}`)})
	if err != nil || status != 201 {
		t.Fatalf("conflicting push: %d %v", status, err)
	}
	if _, err := f.bob.Reject(ctxT(t), mine.ID); err != nil {
		t.Fatalf("reject: %v", err)
	}
	f.waitCore(mine.ID, 5*time.Second, action.Cancelled)
	f.core.kill()

	var onAgent *action.Action
	testwait.Within(t, 20*time.Second, "the agent runs the rejected id to DONE", func() bool {
		a, err := ag.Get(ctxT(t), mine.ID)
		onAgent = a
		return err == nil && a.State == action.Done
	})
	proxy.Set(pass)
	f.core.restart()

	got := f.waitCore(mine.ID, 20*time.Second, action.Done)
	if string(got.Args) != string(theirs.Args) || got.Kind != onAgent.Kind {
		t.Fatalf("core holds %s %s, the agent %s %s", got.Kind, got.Args, onAgent.Kind, onAgent.Args)
	}
	testwait.Within(t, 10*time.Second, "an action.conflict event", func() bool { return f.hasEvent("action.conflict", mine.ID) })
	events, err := f.admin.Events(ctxT(t), 0, 500, client.EventFilter{ActionID: mine.ID})
	if err != nil {
		t.Fatal(err)
	}
	var said bool
	for _, e := range events.Events {
		if e.Type == "action.conflict" {
			said = e.Data["core_state"] == string(action.Cancelled) && e.Data["core_reason"] == "rejected" && e.Data["state"] == string(action.Done)
		}
	}
	if !said {
		t.Fatalf("the conflict event does not say what the core decided and what happened: %+v", events.Events)
	}
	var rejected bool
	for _, h := range got.History {
		rejected = rejected || (h.To == action.Cancelled && h.Reason == "rejected" && h.Actor == "bob")
	}
	if !rejected {
		t.Fatalf("the history lost the rejection: %+v", got.History)
	}
	again, err := ag.Get(ctxT(t), mine.ID)
	if err != nil || again.State != action.Done || string(again.Args) != string(got.Args) {
		t.Fatalf("core and agent disagree: core %s %s, agent %+v %v", got.State, got.Args, again, err)
	}

	imported := f.waitCore(busy.ID, 20*time.Second, action.Done)
	if imported.Origin != action.OriginAgent || imported.ApprovedBy != "" || !strings.HasPrefix(imported.Requester, "node-1/") {
		t.Fatalf("a direct push claiming a core identity was imported as origin %q requester %q approved_by %q",
			imported.Origin, imported.Requester, imported.ApprovedBy)
	}
}
