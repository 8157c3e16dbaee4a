package e2e

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/musterhq/muster/shared/limit"
	"github.com/musterhq/muster/shared/testwait"
	"github.com/musterhq/muster/shared/wire"
)

// TestTwoRunsOfOneLockNeverInterleave is issue 34's scenario 4: two runs
// taking lock db over the same nodes. The first holds it (its canary
// pauses it, so it holds it as long as the test needs); the second is
// approved and waits, its reason naming the lock and the holder in the
// API and in `muster run show`; once the first ends, the second runs.
// The agents' own log proves no step of the second started before every
// step of the first ended.
func TestTwoRunsOfOneLockNeverInterleave(t *testing.T) {
	t.Parallel()
	twoLockedRuns(t, newProcFleet(t, 3), nil)
}

// TestTwoRunsOfOneLockNeverInterleaveOnReplicas is scenario 4 on two core
// replicas sharing PostgreSQL: the second run is created and approved
// through the replica that does not hold the cluster's lease, so its
// approval's first advance takes the lock there, in PostgreSQL, while the
// other replica advances the holder.
func TestTwoRunsOfOneLockNeverInterleaveOnReplicas(t *testing.T) {
	t.Parallel()
	f := newProcFleetWith(t, 3, fleetOptions{replicas: 2})
	twoLockedRuns(t, f, func() {
		h := -1
		testwait.Within(t, 60*time.Second, "a replica holding the cluster", func() bool {
			h = f.holder()
			return h >= 0
		})
		f.use(1 - h)
	})
}

// twoLockedRuns runs scenario 4 on f; beforeSecond, when set, runs before
// the second run is created.
func twoLockedRuns(t *testing.T, f *procFleet, beforeSecond func()) {
	t.Helper()
	locked := func(canary int) *wire.CreateRunRequest {
		req := procRun("100%", nil)
		req.Lock = &wire.Lock{Name: "db"}
		req.Stages[0].Canary = canary
		return req
	}
	first := f.start(t, locked(1))
	f.waitRun(t, first.ID, 90*time.Second, "PAUSED")
	if beforeSecond != nil {
		beforeSecond()
	}
	second := f.start(t, locked(0))
	want := "waiting for lock db held by run " + first.ID
	testwait.Within(t, 60*time.Second, "the second run waiting for the lock", func() bool {
		r, err := f.admin.Run(ctxT(t), second.ID)
		return err == nil && r.State == "RUNNING" && strings.Contains(r.StateReason, want)
	})
	env := []string{"MUSTER_ADDR=http://" + f.core.Addr(), "MUSTER_TOKEN=" + f.secrets["admin"]}
	if out := muster(t, env, "run", "show", second.ID); !strings.Contains(out, want) || !strings.Contains(out, "Lock") {
		t.Fatalf("run show of the waiting run does not say why:\n%s", out)
	}
	if kids := f.children(t, second.ID); len(kids) != 0 {
		t.Fatalf("the waiting run made %d children", len(kids))
	}
	if _, err := f.bob.RunVerb(ctxT(t), first.ID, "promote", "the canary is healthy"); err != nil {
		t.Fatal(err)
	}
	if r := f.waitRun(t, first.ID, 90*time.Second, "DONE", "FAILED", "PARTIAL"); r.State != "DONE" {
		t.Fatalf("the holder ended %s (%s)", r.State, r.StateReason)
	}
	if r := f.waitRun(t, second.ID, 90*time.Second, "DONE", "FAILED", "PARTIAL"); r.State != "DONE" ||
		strings.Contains(r.StateReason, "lock") {
		t.Fatalf("the waiter ended %s (%s)", r.State, r.StateReason)
	}
	ofRun := map[string]string{}
	for _, id := range []string{first.ID, second.ID} {
		for _, k := range f.children(t, id) {
			ofRun[k.ID] = id
		}
	}
	var lastOfFirst, firstOfSecond int64
	n := map[string]int{}
	for _, e := range f.executions(t) {
		switch ofRun[e.id] {
		case first.ID:
			lastOfFirst = max(lastOfFirst, e.end)
		case second.ID:
			if firstOfSecond == 0 || e.start < firstOfSecond {
				firstOfSecond = e.start
			}
		}
		n[ofRun[e.id]]++
	}
	if n[first.ID] != 12 || n[second.ID] != 12 {
		t.Fatalf("executions: %d of the first run, %d of the second; want 12 each (3 nodes × 4 steps)", n[first.ID], n[second.ID])
	}
	if lastOfFirst == 0 || firstOfSecond <= lastOfFirst {
		t.Fatalf("the runs interleave: the second's first step started at %d, the first's last step ended at %d",
			firstOfSecond, lastOfFirst)
	}
}

// TestRetryFromTheFailedStepRunsOnlyVerifyAndUndrain is issue 34's
// scenario 6: verify fails on node-2; `muster run retry --from failed`
// makes a run that, approved, runs only verify and undrain on node-2.
func TestRetryFromTheFailedStepRunsOnlyVerifyAndUndrain(t *testing.T) {
	t.Parallel()
	f := newProcFleet(t, 3)
	f.failTimes(t, "verify", "node-2", 1)
	req := procRun("1", nil)
	e := limit.MustParse("1")
	req.Stages[0].MaxErrors, req.Stages[0].OnFailure = &e, "continue"
	req.Stages[0].Steps[3].When = "always"
	r := f.start(t, req)
	if end := f.waitRun(t, r.ID, 90*time.Second, "DONE", "FAILED", "PARTIAL", "PAUSED"); end.State != "PARTIAL" {
		t.Fatalf("the run ended %s (%s), want PARTIAL", end.State, end.StateReason)
	}
	before := len(f.executions(t))
	env := []string{"MUSTER_ADDR=http://" + f.core.Addr(), "MUSTER_TOKEN=" + f.secrets["alice"]}
	out := muster(t, env, "run", "retry", r.ID, "--from", "failed")
	m := regexp.MustCompile(`Run (\S+) retries run`).FindStringSubmatch(out)
	if m == nil || !strings.Contains(out, "node node-2 starts at verify (reuses drain, upgrade)") {
		t.Fatalf("muster run retry --from failed said:\n%s", out)
	}
	if _, err := f.bob.RunVerb(ctxT(t), m[1], "approve", ""); err != nil {
		t.Fatal(err)
	}
	if end := f.waitRun(t, m[1], 90*time.Second, "DONE", "FAILED", "PARTIAL", "PAUSED"); end.State != "DONE" {
		t.Fatalf("the retry ended %s (%s), want DONE", end.State, end.StateReason)
	}
	var ran []string
	for _, x := range f.executions(t)[before:] {
		ran = append(ran, x.node+":"+x.step)
	}
	if strings.Join(ran, " ") != "node-2:verify node-2:undrain" {
		t.Fatalf("the retry ran %v, want node-2:verify node-2:undrain", ran)
	}
}
