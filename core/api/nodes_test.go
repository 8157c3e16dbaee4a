package api

import (
	"net/http"
	"strings"
	"testing"

	"github.com/musterhq/muster/core/actions"
	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/action"
	"github.com/musterhq/muster/shared/wire"
)

func (e *env) nodeOf(id string) (wire.Node, bool) {
	e.t.Helper()
	var list wire.NodeList
	e.call(http.MethodGet, "/api/v1/nodes?cluster=prod", "viewer", nil, http.StatusOK, &list)
	for _, n := range list.Nodes {
		if n.ID == id {
			return n, true
		}
	}
	return wire.Node{}, false
}

func (e *env) nodeEvents(typ string) []store.Event {
	var out []store.Event
	for _, ev := range e.events() {
		if ev.Type == typ {
			out = append(out, ev)
		}
	}
	return out
}

func TestDrainAndUndrain(t *testing.T) {
	t.Parallel()
	e := setup(t)
	var n wire.Node
	e.call(http.MethodPost, "/api/v1/clusters/prod/nodes/db-1/drain", "op", nil, http.StatusOK, &n)
	if n.Status != wire.NodeDrained || !n.Drained {
		t.Fatalf("drained node shows %s drained %v", n.Status, n.Drained)
	}
	if got, _ := e.nodeOf("db-1"); got.Status != wire.NodeDrained {
		t.Fatalf("listed as %s", got.Status)
	}
	e.call(http.MethodPost, "/api/v1/clusters/prod/nodes/db-1/drain", "op", nil, http.StatusOK, nil)
	if evs := e.nodeEvents(store.EventNodeDrained); len(evs) != 1 || evs[0].Actor != "op" {
		t.Fatalf("node.drained events %+v, want one by op (draining twice records nothing)", evs)
	}
	// A DOWN node shows DOWN even when drained.
	e.call(http.MethodPost, "/api/v1/clusters/prod/nodes/db-2/drain", "op", nil, http.StatusOK, &n)
	if n.Status != store.NodeDown || !n.Drained {
		t.Fatalf("drained DOWN node shows %s", n.Status)
	}
	before := e.nudges.Count("prod")
	e.call(http.MethodPost, "/api/v1/clusters/prod/nodes/db-1/undrain", "op", nil, http.StatusOK, &n)
	if n.Status != store.NodeUp || n.Drained {
		t.Fatalf("undrained node shows %s drained %v", n.Status, n.Drained)
	}
	if len(e.nodeEvents(store.EventNodeUndrained)) != 1 || e.nudges.Count("prod") <= before {
		t.Fatal("undrain recorded no event or nudged no pass")
	}
	e.fail(http.MethodPost, "/api/v1/clusters/prod/nodes/nope/drain", "op", nil, http.StatusNotFound)
	e.fail(http.MethodPost, "/api/v1/clusters/nope/nodes/db-1/drain", "op", nil, http.StatusNotFound)
}

// TestDrainNudgesASyncOfTheNode: a drain asks for a sync of the node, so
// that its waiting actions say at once that the drain holds them.
func TestDrainNudgesASyncOfTheNode(t *testing.T) {
	t.Parallel()
	e := setup(t)
	node, cluster := e.nudges.Count(db1Sync), e.nudges.Count("prod")
	e.call(http.MethodPost, "/api/v1/clusters/prod/nodes/db-1/drain", "op", nil, http.StatusOK, nil)
	if e.nudges.Count(db1Sync) != node+1 || e.nudges.Count("prod") != cluster {
		t.Fatalf("the drain made %d syncs of the node and %d of the cluster, want one of the node",
			e.nudges.Count(db1Sync)-node, e.nudges.Count("prod")-cluster)
	}
}

func TestForgetEndsTheNodesOpenActions(t *testing.T) {
	t.Parallel()
	e := setup(t, noApproval)
	waiting := e.create("op", wire.CreateActionRequest{ClusterID: "prod", NodeID: "db-2", Kind: kindPing})
	e.setState(waiting.ID, action.PendingApprove)
	scheduled := e.create("op", wire.CreateActionRequest{ClusterID: "prod", NodeID: "db-2", Kind: kindPing})
	running := e.create("op", wire.CreateActionRequest{ClusterID: "prod", NodeID: "db-2", Kind: kindPing})
	e.setState(running.ID, action.Running)
	done := e.create("op", wire.CreateActionRequest{ClusterID: "prod", NodeID: "db-2", Kind: kindPing})
	e.setState(done.ID, action.Done)
	other := e.create("op", wire.CreateActionRequest{})

	var res wire.ForgetResult
	e.call(http.MethodPost, "/api/v1/clusters/prod/nodes/db-2/forget", "admin", nil, http.StatusOK, &res)
	if res.ActionsEnded != 3 {
		t.Fatalf("ended %d, want 3", res.ActionsEnded)
	}
	for id, want := range map[string]action.State{waiting.ID: action.Cancelled, scheduled.ID: action.Lost,
		running.ID: action.Lost, done.ID: action.Done, other.ID: action.PendingSchedule} {
		rec := e.record(id)
		if rec.State != want {
			t.Fatalf("%s is %s, want %s", id, rec.State, want)
		}
		if want != action.Done && want != action.PendingSchedule && (rec.StateReason != actions.ReasonNodeForgotten || rec.FinishedTS == nil) {
			t.Fatalf("%s: reason %q", id, rec.StateReason)
		}
	}
	if _, ok := e.nodeOf("db-2"); ok {
		t.Fatal("a forgotten node is still listed")
	}
	if evs := e.nodeEvents(store.EventNodeForgotten); len(evs) != 1 || evs[0].Actor != "admin" || evs[0].NodeID != "db-2" {
		t.Fatalf("node.forgotten events %+v", evs)
	}
	if lost := e.eventsOf(running.ID, store.EventActionLost); len(lost) != 1 {
		t.Fatalf("action.lost events %+v", lost)
	}
	e.fail(http.MethodPost, "/api/v1/clusters/prod/nodes/db-2/forget", "admin", nil, http.StatusNotFound)
}

// A drain says who and why; a bad body changes nothing; an undrain takes no
// body; the cluster counts a drained node as drained, not up.
func TestDrainRecordsWhoAndWhyAndCountsDrained(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.fail(http.MethodPost, "/api/v1/clusters/prod/nodes/db-1/drain", "op", `{"reason":"x","extra":1}`, http.StatusBadRequest)
	e.fail(http.MethodPost, "/api/v1/clusters/prod/nodes/db-1/drain", "op",
		wire.ReasonRequest{Reason: strings.Repeat("x", wire.MaxReason+1)}, http.StatusBadRequest)
	e.fail(http.MethodPost, "/api/v1/clusters/prod/nodes/db-1/undrain", "op", wire.ReasonRequest{Reason: "x"}, http.StatusBadRequest)
	if n, _ := e.nodeOf("db-1"); n.Drained || len(e.nodeEvents(store.EventNodeDrained)) != 0 {
		t.Fatal("a refused drain changed the node")
	}
	var n wire.Node
	e.call(http.MethodPost, "/api/v1/clusters/prod/nodes/db-1/drain", "op", wire.ReasonRequest{Reason: "kernel <b>update</b>"}, http.StatusOK, &n)
	if n.Status != wire.NodeDrained || n.DrainedBy != "op" || n.DrainReason != "kernel <b>update</b>" {
		t.Fatalf("drained node %+v", n)
	}
	if evs := e.nodeEvents(store.EventNodeDrained); len(evs) != 1 || evs[0].Data["reason"] != "kernel <b>update</b>" {
		t.Fatalf("node.drained events %+v", evs)
	}
	var cl wire.Cluster
	e.call(http.MethodGet, "/api/v1/clusters/prod", "viewer", nil, http.StatusOK, &cl)
	if c := cl.NodeCounts; c.Drained != 1 || c.Up != 0 || c.Total != 2 {
		t.Fatalf("counts with db-1 drained: %+v", c)
	}
	var list wire.ClusterList
	e.call(http.MethodGet, "/api/v1/clusters", "viewer", nil, http.StatusOK, &list)
	for _, c := range list.Clusters {
		if c.ID == "prod" && (c.NodeCounts.Drained != 1 || c.NodeCounts.Up != 0) {
			t.Fatalf("listed counts %+v", c.NodeCounts)
		}
	}
	var un wire.Node
	e.call(http.MethodPost, "/api/v1/clusters/prod/nodes/db-1/undrain", "op", nil, http.StatusOK, &un)
	if un.Drained || un.DrainedBy != "" || un.DrainReason != "" {
		t.Fatalf("undrained node still says %q %q", un.DrainedBy, un.DrainReason)
	}
}

// A node of the core's configuration (static) is not forgotten: 409 with
// the envelope saying to remove it from the configuration; nothing changes.
func TestForgetOfAConfiguredNodeIsRefused(t *testing.T) {
	t.Parallel()
	e := setup(t)
	a := e.create("op", wire.CreateActionRequest{ClusterID: "prod", NodeID: "db-1", Kind: kindPing})
	d := e.fail(http.MethodPost, "/api/v1/clusters/prod/nodes/db-1/forget", "admin", nil, http.StatusConflict)
	if d.Code != wire.CodeConflict || !strings.Contains(d.Message, "remove it from there (core.yaml)") {
		t.Fatalf("refusal %+v", d)
	}
	if _, ok := e.nodeOf("db-1"); !ok {
		t.Fatal("the refused forget removed the node")
	}
	if rec := e.record(a.ID); rec.State.Final() || len(e.nodeEvents(store.EventNodeForgotten)) != 0 {
		t.Fatalf("the refused forget ended %s or recorded an event", rec.State)
	}
}
