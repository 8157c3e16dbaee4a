package actions

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/musterhq/muster/core/approval"
	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/action"
)

const cluster = "c1"

func TestAdopt(t *testing.T) {
	t.Parallel()
	now := action.UTC(time.Now())
	later := now.Add(time.Second)
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
		}(), &base(action.New).Action, false, action.New, 0, nil, false, false},
		{"first seen on the agent", base(action.New), agent(action.New), true, action.New, 0, nil, true, false},
		{"one step", base(action.New), agent(action.Running), true, action.Running, 1, []string{store.EventActionStateChanged}, true, false},
		{"several steps", base(action.PendingSchedule), agent(action.Done), true, action.Done, 1, []string{store.EventActionStateChanged}, false, false},
		{"backwards: the agent wins, as a conflict", base(action.Running), agent(action.New), true, action.New, 1, []string{store.EventActionConflict}, true, false},
		{"over a final state: the agent wins, as a conflict", base(action.Lost), agent(action.Done), true, action.Done, 1, []string{store.EventActionConflict}, false, false},
		{"over a core cancel: the agent wins and the cancel stands", func() *store.Record {
			r := base(action.Cancelled)
			r.StateReason = ReasonRejected
			return r
		}(), agent(action.New), true, action.New, 1, []string{store.EventActionConflict}, true, true},
		{"other content", base(action.New), func() *action.Action {
			a := agent(action.New)
			a.Args = json.RawMessage(`{"x":2}`)
			return a
		}(), true, action.New, 1, []string{store.EventActionConflict}, true, false},
		{"final clears the cancel request", func() *store.Record {
			r := base(action.Running)
			r.CancelRequested = true
			return r
		}(), agent(action.Cancelled), true, action.Cancelled, 1, []string{store.EventActionStateChanged}, false, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ch := Adopt(c.cur, c.a, "n1", now)
			if (ch != nil) != c.changed {
				t.Fatalf("change %+v; want changed %v", ch, c.changed)
			}
			if ch == nil {
				return
			}
			if ch.Rec.State != c.state || len(ch.History) != c.history || ch.Rec.SeenOnAgent != c.seen || ch.Rec.CancelRequested != c.cancelReq {
				t.Fatalf("record %+v, history %+v", ch.Rec, ch.History)
			}
			if !ch.Rec.UpdatedTS.Equal(later) {
				t.Fatalf("updated_ts %v, want the agent's %v", ch.Rec.UpdatedTS, later)
			}
			var types []string
			for _, e := range ch.Events {
				types = append(types, e.Type)
			}
			if len(types) != len(c.events) || (len(types) > 0 && types[0] != c.events[0]) {
				t.Fatalf("events %v, want %v", types, c.events)
			}
		})
	}
}

// The core rejected an action that someone had pushed straight to the agent
// with other args, and the agent ran it: the core takes the agent's state,
// args and output, its history keeps what the core had decided, and the
// conflict event says both.
// Issue 17, hardening: a child the agent cancelled without the core asking
// (someone on the node did) says so in its state_reason and history; one
// the core asked to cancel keeps the agent's reason.
func TestACancelFromTheNodeSaysSo(t *testing.T) {
	t.Parallel()
	now := action.UTC(time.Now())
	for _, tc := range []struct {
		name        string
		cancelAsked bool
		agentReason string
		want        string
	}{
		{"from the node", false, action.ReasonCancelled, ReasonCancelledOnNode},
		{"from the node, with the agent's words", false, "timeout", ReasonCancelledOnNode + ": timeout"},
		{"asked by the core", true, action.ReasonCancelled, action.ReasonCancelled},
	} {
		cur := &store.Record{Action: action.Action{ID: "id", ClusterID: cluster, NodeID: "n1", Kind: "a/b",
			Args: json.RawMessage(`{}`), State: action.Running, Progress: json.RawMessage(`{}`), Origin: action.OriginCore,
			RunID: "run-1", CreatedTS: now, UpdatedTS: now}, CancelRequested: tc.cancelAsked}
		a := cur.Action
		a.State, a.StateReason, a.UpdatedTS = action.Cancelled, tc.agentReason, now.Add(time.Second)
		c := Adopt(cur, &a, "n1", now)
		if c == nil || c.Rec.State != action.Cancelled || c.Rec.StateReason != tc.want {
			t.Fatalf("%s: %+v, want CANCELLED (%s)", tc.name, c, tc.want)
		}
		if h := c.History[len(c.History)-1]; h.Reason != tc.want {
			t.Fatalf("%s: history %+v", tc.name, h)
		}
		// The agent's record pulled again (it changed once more after it
		// ended, or a second sync read it): the reason stays as told.
		again := a
		again.UpdatedTS = now.Add(2 * time.Second)
		if c2 := Adopt(&c.Rec, &again, "n1", now); c2 != nil && c2.Rec.StateReason != tc.want {
			t.Fatalf("%s: pulled again, the reason became %q, want %q", tc.name, c2.Rec.StateReason, tc.want)
		}
	}
}

func TestAdoptOverARejectionTellsWhatTheCoreDecidedAndWhatHappened(t *testing.T) {
	t.Parallel()
	now := action.UTC(time.Now())
	cur := &store.Record{Action: action.Action{ID: "id", ClusterID: cluster, NodeID: "n1", Kind: "a/b",
		Args: json.RawMessage(`{"x":1}`), State: action.Cancelled, StateReason: ReasonRejected,
		Origin: action.OriginCore, Requester: "alice", CreatedTS: now, UpdatedTS: now, FinishedTS: &now}}
	a := &action.Action{ID: "id", Kind: "a/b", Args: json.RawMessage(`{"x":2}`), State: action.Done,
		Output: "ran", Requester: "mallory", ApprovedBy: "bob", CreatedTS: now, UpdatedTS: now.Add(time.Second)}
	c := Adopt(cur, a, "n1", now)
	if c == nil {
		t.Fatal("no change")
	}
	if c.Rec.State != action.Done || string(c.Rec.Args) != `{"x":2}` || c.Rec.Output != "ran" {
		t.Fatalf("record %+v, want the agent's state, args and output", c.Rec)
	}
	if c.Rec.Requester != "alice" || c.Rec.ApprovedBy != "" {
		t.Fatalf("requester %q approved_by %q: taken from the agent", c.Rec.Requester, c.Rec.ApprovedBy)
	}
	if len(c.History) != 1 || c.History[0].From != action.Cancelled || c.History[0].To != action.Done ||
		!strings.Contains(c.History[0].Reason, `{"x":1}`) || !strings.Contains(c.History[0].Reason, "CANCELLED (rejected)") {
		t.Fatalf("history %+v does not keep the core's decision and old args", c.History)
	}
	if len(c.Events) != 1 || c.Events[0].Type != store.EventActionConflict {
		t.Fatalf("events %+v", c.Events)
	}
	d := c.Events[0].Data
	if d["core_state"] != "CANCELLED" || d["core_reason"] != ReasonRejected || d["state"] != "DONE" || d["old_args"] != `{"x":1}` {
		t.Fatalf("conflict data %v", d)
	}
}

func TestImportIsAnAgentActionWhateverItClaims(t *testing.T) {
	t.Parallel()
	now := action.UTC(time.Now())
	node := &store.Node{ClusterID: cluster, ID: "n1"}
	for _, c := range []struct{ requester, want string }{{"carol", "n1/carol"}, {"", "n1/unknown"}} {
		a := &action.Action{ID: "id", Kind: "a/b", Args: json.RawMessage(`{}`), State: action.New,
			Origin: action.OriginCore, Requester: c.requester, ApprovedBy: "bob\x1b[31mFORGED", RetryOf: "x", CreatedTS: now, UpdatedTS: now,
			RunID: action.NewID(), Stage: "roll", Step: "reboot", Wave: 2, Attempt: 3}
		ch := Import(a, node, now)
		if ch.Rec.Origin != action.OriginAgent || ch.Rec.Requester != c.want || ch.Rec.ApprovedBy != "" || ch.Rec.RetryOf != "" {
			t.Fatalf("imported origin %q requester %q approved_by %q retry_of %q; want agent, %q, none, none",
				ch.Rec.Origin, ch.Rec.Requester, ch.Rec.ApprovedBy, ch.Rec.RetryOf, c.want)
		}
		// Agents now keep a run child's place (issue 31, item 7): an
		// action the core never made is still the child of no run.
		if r := ch.Rec; r.RunID != "" || r.Stage != "" || r.Step != "" || r.Wave != 0 || r.Attempt != 0 {
			t.Fatalf("imported a place in a run: run %q stage %q step %q wave %d attempt %d", r.RunID, r.Stage, r.Step, r.Wave, r.Attempt)
		}
	}
}

func TestApprovalHolds(t *testing.T) {
	t.Parallel()
	r := &store.Record{Action: action.Action{Kind: "a/b", Args: json.RawMessage(`{"x":1}`), ClusterID: "c", NodeID: "n"}}
	if !ApprovalHolds(r) {
		t.Fatal("an action that needed no approval does not hold")
	}
	r.ApprovedBy, r.ApprovalDigest = "bob", approval.Digest(&r.Action)
	if !ApprovalHolds(r) {
		t.Fatal("a matching approval does not hold")
	}
	r.Args = json.RawMessage(`{ "x" : 1 }`) // same content, other spelling
	if !ApprovalHolds(r) {
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
		if ApprovalHolds(&c) {
			t.Errorf("approval still holds after changing %s", name)
		}
	}
}

func TestReapproveVoidsTheUrgentMarkWithTheApproval(t *testing.T) {
	t.Parallel()
	now := action.UTC(time.Now())
	r := &store.Record{Action: action.Action{ID: "id", ClusterID: cluster, NodeID: "n1", Kind: "a/b",
		Args: json.RawMessage(`{"x":1}`), State: action.PendingSchedule, Progress: json.RawMessage(`{}`),
		Origin: action.OriginCore, CreatedTS: now, UpdatedTS: now, ApprovedBy: "bob", Urgent: "disk full"}}
	r.ApprovalDigest = approval.Digest(&r.Action)
	if c := Reapprove(r, now); c != nil {
		t.Fatal("an action whose approval holds was sent back")
	}
	r.Args = json.RawMessage(`{"x":2}`) // the content changed after the approval
	c := Reapprove(r, now.Add(time.Second))
	if c == nil || c.Rec.State != action.PendingApprove {
		t.Fatalf("changed content not sent back to approval: %+v", c)
	}
	if c.Rec.Urgent != "" || c.Rec.ApprovedBy != "" {
		t.Fatalf("urgent %q and approver %q kept after the approval was voided", c.Rec.Urgent, c.Rec.ApprovedBy)
	}
}

// Issue 31, item 7: agents now show a run child's place in its run. It is
// not content: an agent record with the same kind and args but another
// place, or none (an agent of an earlier release), is no conflict, and the
// core keeps its own place.
func TestAdoptKeepsTheCoresPlaceInARun(t *testing.T) {
	t.Parallel()
	now := action.UTC(time.Now())
	run := action.NewID()
	cur := &store.Record{Action: action.Action{ID: "id", ClusterID: cluster, NodeID: "n1", Kind: "a/b",
		Args: json.RawMessage(`{"x":1}`), State: action.New, Progress: json.RawMessage(`{}`), Origin: action.OriginCore,
		CreatedTS: now, UpdatedTS: now, RunID: run, Stage: "roll", Step: "reboot", Wave: 2, Attempt: 1}, SeenOnAgent: true}
	for name, place := range map[string]func(a *action.Action){
		"none":    func(a *action.Action) { a.RunID, a.Stage, a.Step, a.Wave, a.Attempt = "", "", "", 0, 0 },
		"another": func(a *action.Action) { a.RunID, a.Stage, a.Step, a.Wave, a.Attempt = action.NewID(), "x", "y", 9, 9 },
	} {
		a := cur.Action
		place(&a)
		a.State, a.StartedTS = action.Running, &now
		c := Adopt(cur, &a, "n1", now)
		if c == nil {
			t.Fatalf("%s: the agent's RUNNING was not adopted", name)
		}
		for _, ev := range c.Events {
			if ev.Type == store.EventActionConflict {
				t.Fatalf("%s: a place in a run made a conflict: %s", name, ev.Message)
			}
		}
		if r := c.Rec; r.RunID != run || r.Stage != "roll" || r.Step != "reboot" || r.Wave != 2 || r.Attempt != 1 {
			t.Fatalf("%s: the core took the agent's place: run %q stage %q step %q wave %d attempt %d", name, r.RunID, r.Stage, r.Step, r.Wave, r.Attempt)
		}
	}
}
