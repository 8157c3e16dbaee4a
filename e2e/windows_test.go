package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/musterhq/muster/shared/action"
	"github.com/musterhq/muster/shared/client"
	"github.com/musterhq/muster/shared/limit"
	"github.com/musterhq/muster/shared/testwait"
	"github.com/musterhq/muster/shared/wire"
)

// Windows, freezes and later starts with real processes. Time is moved by
// windows of a few seconds (`@every 6s` open 2 s, anchored to the epoch,
// the same for the test and the core), which the core accepts only with
// its hidden --test-min-window flag; people keep the 1-minute minimum.

// windowFleet is a step fleet whose step kind is disruptive and whose
// cluster has the windows and freezes of clusterYAML.
func windowFleet(t *testing.T, nodes int, work, clusterYAML string) *stepFleet {
	t.Helper()
	return newStepFleetWith(t, work, fleetOptions{nodes: nodes, clusterYAML: clusterYAML,
		coreArgs:  []string{"--test-min-window", "1s", "--test-min-every", "1s"},
		coreExtra: "kinds:\n  - {kind: example.com/step, disruptive: true}\n"})
}

// calendar reads the cluster's calendar.
func (f *fleet) calendar(t *testing.T) *wire.Calendar {
	t.Helper()
	cl, err := f.admin.Cluster(ctxT(t), "e2e")
	if err != nil || cl.Calendar == nil {
		t.Fatalf("cluster: %+v, %v", cl, err)
	}
	return cl.Calendar
}

// agentRecord is the agent's own record of an action.
func (f *fleet) agentRecord(t *testing.T, node, id string) *action.Action {
	t.Helper()
	a, err := f.agentC[node].Get(ctxT(t), id)
	if err != nil || a.StartedTS == nil {
		t.Fatalf("agent record of %s: %+v, %v", id, a, err)
	}
	return a
}

// inWindow reports whether t is in a window of `@every period` open for
// open, with slack for the agent to start what was pushed at its end.
func inWindow(t time.Time, period, open, slack time.Duration) bool {
	return time.Duration(t.UnixNano()%int64(period)) < open+slack
}

// Issue 21, end-to-end 1: a disruptive action created outside the window
// waits in PENDING_SCHEDULE saying when the window opens, and its agent
// starts it once the window opened, not before; a non-disruptive action
// created with it runs at once.
func TestWindowHoldsADisruptiveActionUntilItOpens(t *testing.T) {
	t.Parallel()
	f := windowFleet(t, 1, "0.1", "    windows:\n      - {cron: \"@every 6s\", duration: 2s}\n")
	var next time.Time
	testwait.Within(t, 10*time.Second, "the window closed, opening in 2 s or more", func() bool {
		c := f.calendar(t)
		if c.InWindow || c.NextOpen == nil || time.Until(*c.NextOpen) < 2*time.Second {
			return false
		}
		next = *c.NextOpen
		return true
	})
	held := f.create("node-1", "example.com/step", `{}`)
	ping := f.create("node-1", "muster.io/debug.ping", `{}`)
	f.approve(held.ID)
	f.approve(ping.ID)
	want := "outside the maintenance window; next opens " + next.Format(time.RFC3339)
	testwait.Within(t, 5*time.Second, "the reason", func() bool {
		a, err := f.admin.Action(ctxT(t), held.ID)
		return err == nil && a.State == action.PendingSchedule && a.StateReason == want
	})
	f.waitCore(ping.ID, 10*time.Second, action.Done)
	if p := f.agentRecord(t, "node-1", ping.ID); !p.StartedTS.Before(next) {
		t.Fatalf("the non-disruptive action started at %s, not before the opening at %s", p.StartedTS, next)
	}
	if c := f.calendar(t); c.Waiting != 1 || c.Open {
		t.Fatalf("calendar while it waits: %+v", c)
	}
	f.waitCore(held.ID, 15*time.Second, action.Done)
	got := f.agentRecord(t, "node-1", held.ID)
	if got.StartedTS.Before(next) || got.StartedTS.After(next.Add(2*time.Second)) {
		t.Fatalf("the disruptive action started at %s; the window was open from %s for 2 s", got.StartedTS, next)
	}
}

// Issue 21, end-to-end 2: a run spanning the end of a window. Each node's
// procedure (two steps of 2.2 s) outlasts the 2-s window: the node in
// flight when it closes finishes its steps, no new node starts while it is
// closed (the run says why), and the next node starts at the next
// opening; the run completes.
func TestRunSpanningTheEndOfAWindowStartsNoNewNode(t *testing.T) {
	t.Parallel()
	const period, open = 8 * time.Second, 2 * time.Second
	f := windowFleet(t, 2, "2.2", "    windows:\n      - {cron: \"@every 8s\", duration: 2s}\n")
	one := limit.MustParse("1")
	run, err := f.alice.CreateRun(ctxT(t), &wire.CreateRunRequest{ClusterID: "e2e", Stages: []wire.StageSpec{{
		Name: "patch", Target: wire.Target{All: true}, MaxConcurrency: &one,
		Steps: []wire.StepSpec{{Name: "a", Kind: "example.com/step"}, {Name: "b", Kind: "example.com/step"}},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.bob.RunVerb(ctxT(t), run.ID, "approve", ""); err != nil {
		t.Fatal(err)
	}
	said := false
	var r *wire.Run
	testwait.Within(t, 40*time.Second, "the run to end", func() bool {
		r, err = f.admin.Run(ctxT(t), run.ID)
		if err != nil {
			return false
		}
		if strings.Contains(r.StateReason, "held: outside the maintenance window; next opens ") {
			said = true
		}
		return r.State == "DONE" || r.State == "FAILED" || r.State == "CANCELLED" || r.State == "PARTIAL"
	})
	if r.State != "DONE" {
		t.Fatalf("run ended %s (%s)", r.State, r.StateReason)
	}
	if !said {
		t.Error("the run never said it waited for the window")
	}
	kids, err := f.admin.Actions(ctxT(t), client.ActionFilter{Run: run.ID, Limit: 100})
	if err != nil || len(kids.Actions) != 4 {
		t.Fatalf("children: %+v, %v", kids, err)
	}
	first := map[string]*action.Action{}
	second := map[string]*action.Action{}
	for i := range kids.Actions {
		k := &kids.Actions[i]
		rec := f.agentRecord(t, k.NodeID, k.ID)
		if k.Step == "a" {
			first[k.NodeID] = rec
		} else {
			second[k.NodeID] = rec
		}
	}
	for node, a := range first {
		if !inWindow(*a.StartedTS, period, open, 500*time.Millisecond) {
			t.Errorf("node %s started its procedure at %s, outside every window", node, a.StartedTS)
		}
		b := second[node]
		if b == nil || a.FinishedTS == nil {
			t.Fatalf("node %s: steps %+v %+v", node, a, b)
		}
		// Its second step went once the first was done, the window closed
		// or not: a node in flight finishes its steps.
		if inWindow(*b.StartedTS, period, open, 0) || b.StartedTS.Sub(*a.FinishedTS) > 3*time.Second {
			t.Errorf("node %s: step b started %s, after step a ended %s: it waited", node, b.StartedTS, a.FinishedTS)
		}
	}
	// The second node started only after the first was done, at an opening.
	a1, a2 := first["node-1"], first["node-2"]
	if a2.StartedTS.Before(*a1.StartedTS) {
		a1, a2 = a2, a1
	}
	if a2.StartedTS.Sub(*a1.StartedTS) < period-open {
		t.Errorf("the second node started %s after the first, in the same window", a2.StartedTS.Sub(*a1.StartedTS))
	}
}

// Issue 21, end-to-end 3: a freeze holds even an urgent action; once the
// freeze is gone (a SIGHUP reload), the urgent action passes the closed
// window while a plain one keeps waiting for it.
func TestFreezeHoldsUrgentAndUrgentPassesAClosedWindow(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	now := time.Now().UTC()
	freeze := fmt.Sprintf("    freezes:\n      - {from: %q, to: %q, reason: year-end}\n",
		now.Add(-time.Hour).Format(time.RFC3339), now.Add(time.Hour).Format(time.RFC3339))
	windows := "    windows:\n      - {cron: \"0 0 29 2 *\", duration: 1m}\n"
	f := newFleetWith(t, fleetOptions{nodes: 1, dir: dir, clusterYAML: windows + freeze,
		coreExtra: "kinds:\n  - {kind: example.com/append, disruptive: true}\n"})
	urgent := f.create("node-1", "example.com/append", `{}`)
	f.approve(urgent.ID)
	if _, err := f.alice.Decide(ctxT(t), urgent.ID, "urgent", "disk full"); err == nil {
		t.Fatal("the requester marked her own action urgent")
	}
	if _, err := f.bob.Decide(ctxT(t), urgent.ID, "urgent", "disk full"); err != nil {
		t.Fatal(err)
	}
	if !f.hasEvent("action.urgent", urgent.ID) {
		t.Fatal("no action.urgent event")
	}
	testwait.Within(t, 10*time.Second, "the urgent action frozen", func() bool {
		a, err := f.admin.Action(ctxT(t), urgent.ID)
		return err == nil && a.State == action.PendingSchedule && strings.HasPrefix(a.StateReason, "frozen until ") &&
			strings.HasSuffix(a.StateReason, ": year-end") && a.Urgent == "disk full"
	})
	// Passes go on; it stays held.
	passes := f.passes()
	testwait.Within(t, 10*time.Second, "two more passes", func() bool { return f.passes() >= passes+2 })
	if a, _ := f.admin.Action(ctxT(t), urgent.ID); a.State != action.PendingSchedule {
		t.Fatalf("the freeze let an urgent action go: %s", a.State)
	}
	out := muster(t, []string{"MUSTER_ADDR=http://" + f.core.Addr(), "MUSTER_TOKEN=" + f.secrets["admin"]}, "cluster", "show", "e2e")
	if !strings.Contains(out, "Schedule: frozen until") || !strings.Contains(out, "year-end") || !strings.Contains(out, "1 action(s) wait") {
		t.Fatalf("cluster show:\n%s", out)
	}

	// The freeze lifted by a reload: the urgent action passes the closed
	// window; a plain one waits for it.
	path := filepath.Join(dir, "core", "core.yaml")
	cfg, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(strings.Replace(string(cfg), freeze, "", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	f.core.signal(syscall.SIGHUP)
	if ev := f.coreEvent("core.config_reloaded", 0); !strings.Contains(ev.Message, "windows and freezes changed") {
		t.Fatalf("reload event %+v", ev)
	}
	f.waitCore(urgent.ID, 15*time.Second, action.Done)
	plain := f.create("node-1", "example.com/append", `{}`)
	f.approve(plain.ID)
	testwait.Within(t, 10*time.Second, "the plain action held by the window", func() bool {
		a, err := f.admin.Action(ctxT(t), plain.ID)
		return err == nil && a.State == action.PendingSchedule &&
			a.StateReason == "outside the maintenance window; next opens 2028-02-29T00:00:00Z"
	})
}

// Issue 21, end-to-end 4: an action approved now with a not_before a few
// seconds ahead waits, saying until when, across a SIGKILL and restart of
// the core, and its agent starts it no earlier than that.
func TestNotBeforeHoldsAcrossACoreRestart(t *testing.T) {
	t.Parallel()
	f := newFleetWith(t, fleetOptions{nodes: 1})
	nb := time.Now().Add(6 * time.Second).Truncate(time.Second)
	a, err := f.alice.CreateAction(ctxT(t), &wire.CreateActionRequest{ClusterID: "e2e", NodeID: "node-1",
		Kind: "example.com/append", NotBefore: &nb})
	if err != nil {
		t.Fatal(err)
	}
	f.approve(a.ID)
	want := "not before " + nb.UTC().Format(time.RFC3339)
	testwait.Within(t, 5*time.Second, "the action held until its not_before", func() bool {
		got, err := f.admin.Action(ctxT(t), a.ID)
		return err == nil && got.State == action.PendingSchedule && got.StateReason == want
	})
	f.core.kill()
	f.core.restart()
	testwait.Within(t, 10*time.Second, "the core back", func() bool { return f.admin.Health(ctxT(t)) == nil })
	if time.Now().Before(nb) {
		if got, err := f.admin.Action(ctxT(t), a.ID); err != nil || got.State != action.PendingSchedule || got.NotBefore == nil {
			t.Fatalf("after the restart: %+v, %v", got, err)
		}
	}
	f.waitCore(a.ID, 20*time.Second, action.Done)
	if got := f.agentRecord(t, "node-1", a.ID); got.StartedTS.Before(nb) {
		t.Fatalf("started at %s, before its not_before %s", got.StartedTS, nb)
	}
}

// Schedules and windows together: a run a schedule makes while its
// cluster's window is closed holds its disruptive stage, saying until when,
// and goes when the window opens.
func TestAScheduledRunWaitsForTheWindow(t *testing.T) {
	t.Parallel()
	f := windowFleet(t, 1, "0.1", "    windows:\n      - {cron: \"@every 10s\", duration: 2s}\n")
	applyPlaybook(t, f.alice, schedulePlaybook("patch", "example.com/step", "{}", "v1"))
	var next time.Time
	testwait.Within(t, 15*time.Second, "the window closed, opening in 5 s or more", func() bool {
		c := f.calendar(t)
		if c.InWindow || c.NextOpen == nil || time.Until(*c.NextOpen) < 5*time.Second {
			return false
		}
		next = *c.NextOpen
		return true
	})
	created, err := f.alice.ApplySchedule(ctxT(t), &wire.CreateScheduleRequest{Name: "patch", Cluster: "e2e",
		Playbook: "patch", Version: 1, Cron: "@every 1s"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.bob.ApproveSchedule(ctxT(t), "patch", created.Digest); err != nil {
		t.Fatal(err)
	}
	var runID string
	testwait.Within(t, 4*time.Second, "the schedule's first run", func() bool {
		if runs := scheduleRuns(t, f.admin, "patch"); len(runs) > 0 {
			runID = runs[len(runs)-1].ID
			return true
		}
		return false
	})
	if time.Until(next) < time.Second {
		t.Fatalf("the run came too late (the window opens at %s) to see it wait", next)
	}
	want := "outside the maintenance window; next opens " + next.Format(time.RFC3339)
	said := false
	var r *wire.Run
	testwait.Within(t, 20*time.Second, "the scheduled run to end", func() bool {
		r, err = f.admin.Run(ctxT(t), runID)
		if err != nil {
			return false
		}
		if time.Now().Before(next) && strings.Contains(r.StateReason, want) {
			said = true
		}
		return r.State == "DONE" || r.State == "FAILED" || r.State == "CANCELLED" || r.State == "PARTIAL"
	})
	if r.State != "DONE" || r.ScheduleID == "" {
		t.Fatalf("scheduled run ended %s (%s), schedule %q", r.State, r.StateReason, r.ScheduleID)
	}
	if !said {
		t.Errorf("the scheduled run never said %q while it waited", want)
	}
	kids, err := f.admin.Actions(ctxT(t), client.ActionFilter{Run: runID, Limit: 10})
	if err != nil || len(kids.Actions) != 1 {
		t.Fatalf("children: %+v, %v", kids, err)
	}
	got := f.agentRecord(t, "node-1", kids.Actions[0].ID)
	if got.StartedTS.Before(next) || got.StartedTS.After(next.Add(2500*time.Millisecond)) {
		t.Fatalf("the scheduled step started at %s; the window was open from %s for 2 s", got.StartedTS, next)
	}
}
