package orchestrate

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/musterhq/muster/core/approval"
	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/action"
)

func TestAdoptAgent(t *testing.T) {
	t.Parallel()
	now := action.UTC(time.Now())
	later := now.Add(time.Second)
	node := &store.Node{ClusterID: cluster, ID: "n1"}
	base := func(s action.State) *store.Record {
		return &store.Record{Action: action.Action{ID: "id", ClusterID: cluster, NodeID: "n1",
			Kind: "a/b", Args: json.RawMessage(`{"x":1}`), State: s, Progress: json.RawMessage(`{}`),
			Origin: action.OriginCore, CreatedTS: now, UpdatedTS: now}}
	}
	agent := func(s action.State) *action.Action {
		a := base(s).Action
		a.UpdatedTS = later
		return &a
	}
	cases := []struct {
		name      string
		cur       *store.Record
		a         *action.Action
		changed   bool
		ok        bool
		state     action.State
		history   int
		events    []string
		seen      bool
		cancelReq bool
	}{
		{"same record", func() *store.Record {
			r := base(action.New)
			r.SeenOnAgent = true
			return r
		}(), &base(action.New).Action, false, true, action.New, 0, nil, false, false},
		{"first seen on the agent", base(action.New), agent(action.New), true, true, action.New, 0, nil, true, false},
		{"one step", base(action.New), agent(action.Running), true, true, action.Running, 1, []string{store.EventActionStateChanged}, true, false},
		{"several steps", base(action.PendingSchedule), agent(action.Done), true, true, action.Done, 1, []string{store.EventActionStateChanged}, false, false},
		{"backwards is refused", base(action.Running), agent(action.New), false, false, action.Running, 0, nil, false, false},
		{"core final never changes", base(action.Cancelled), agent(action.Done), false, true, action.Cancelled, 0, nil, false, false},
		{"other content", base(action.New), func() *action.Action {
			a := agent(action.New)
			a.Args = json.RawMessage(`{"x":2}`)
			return a
		}(), true, true, action.New, 1, []string{store.EventActionConflict}, true, false},
		{"final clears the cancel request", func() *store.Record {
			r := base(action.Running)
			r.CancelRequested = true
			return r
		}(), agent(action.Cancelled), true, true, action.Cancelled, 1, []string{store.EventActionStateChanged}, false, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ch, ok := adoptAgent(c.cur, c.a, node, now)
			if ok != c.ok || (ch != nil) != c.changed {
				t.Fatalf("change %v, ok %v; want changed %v, ok %v", ch, ok, c.changed, c.ok)
			}
			if ch == nil {
				return
			}
			if ch.rec.State != c.state || len(ch.history) != c.history || ch.rec.SeenOnAgent != c.seen || ch.rec.CancelRequested != c.cancelReq {
				t.Fatalf("record %+v, history %+v", ch.rec, ch.history)
			}
			if !ch.rec.UpdatedTS.Equal(later) {
				t.Fatalf("updated_ts %v, want the agent's %v", ch.rec.UpdatedTS, later)
			}
			var types []string
			for _, e := range ch.events {
				types = append(types, e.Type)
			}
			if len(types) != len(c.events) || (len(types) > 0 && types[0] != c.events[0]) {
				t.Fatalf("events %v, want %v", types, c.events)
			}
		})
	}
}

func TestApprovalHolds(t *testing.T) {
	t.Parallel()
	r := &store.Record{Action: action.Action{Kind: "a/b", Args: json.RawMessage(`{"x":1}`), ClusterID: "c", NodeID: "n"}}
	if !approvalHolds(r) {
		t.Fatal("an action that needed no approval does not hold")
	}
	r.ApprovedBy, r.ApprovalDigest = "bob", approval.Digest(&r.Action)
	if !approvalHolds(r) {
		t.Fatal("a matching approval does not hold")
	}
	r.Args = json.RawMessage(`{ "x" : 1 }`) // same content, other spelling
	if !approvalHolds(r) {
		t.Fatal("args spelt differently break the approval")
	}
	for name, edit := range map[string]func(r *store.Record){
		"args":      func(r *store.Record) { r.Args = json.RawMessage(`{"x":2}`) },
		"kind":      func(r *store.Record) { r.Kind = "a/c" },
		"node":      func(r *store.Record) { r.NodeID = "m" },
		"no digest": func(r *store.Record) { r.ApprovalDigest = "" },
	} {
		c := *r
		edit(&c)
		if approvalHolds(&c) {
			t.Errorf("approval still holds after changing %s", name)
		}
	}
}
