package e2e

import (
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/musterhq/muster/shared/client"
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
	twoLockedRuns(t, newProcFleet(t, 3), &wire.Lock{Name: "db"}, "Lock", nil)
}

// TestTwoRunsOfAKindDeclaringALockNeverInterleave is scenario 4 with the
// lock declared by a kind in the core's kinds: configuration, not by the
// runs: their stage runs example.com/upgrade, which takes lock db.
func TestTwoRunsOfAKindDeclaringALockNeverInterleave(t *testing.T) {
	t.Parallel()
	f := newProcFleetWith(t, 3, fleetOptions{coreExtra: "kinds:\n  - {kind: example.com/upgrade, lock: db}\n"})
	twoLockedRuns(t, f, nil, "lock: db (held while the stage runs: kind example.com/upgrade declares it)", nil)
}

// TestTwoRunsOfOneLockNeverInterleaveOnReplicas is scenario 4 on two core
// replicas sharing PostgreSQL: the second run is created and approved
// through the replica that does not hold the cluster's lease, so its
// approval's first advance takes the lock there, in PostgreSQL, while the
// other replica advances the holder.
func TestTwoRunsOfOneLockNeverInterleaveOnReplicas(t *testing.T) {
	t.Parallel()
	f := newProcFleetWith(t, 3, fleetOptions{replicas: 2})
	twoLockedRuns(t, f, &wire.Lock{Name: "db"}, "Lock", func() {
		h := -1
		testwait.Within(t, 60*time.Second, "a replica holding the cluster", func() bool {
			h = f.holder()
			return h >= 0
		})
		f.use(1 - h)
	})
}

// twoLockedRuns runs scenario 4 on f, both runs taking lock (nil: the
// lock db comes from elsewhere, a kind), `muster run show` of the waiter
// saying show; beforeSecond, when set, runs before the second run is
// created.
func twoLockedRuns(t *testing.T, f *procFleet, lock *wire.Lock, show string, beforeSecond func()) {
	t.Helper()
	locked := func(canary int) *wire.CreateRunRequest {
		req := procRun("100%", nil)
		req.Lock = lock
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
	if out := muster(t, env, "run", "show", second.ID); !strings.Contains(out, want) || !strings.Contains(out, show) {
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

// TestAKindsLockReloadedShowsInThePlanAndItsDigest: a reload of the core's
// configuration that makes example.com/upgrade take lock db changes the
// plan of a playbook running it: the plan (API and `muster playbook plan`)
// shows the lock, its digest changes, and a start with the digest shown
// before the reload is refused; started with the new digest, the run's
// stage holds the lock.
func TestAKindsLockReloadedShowsInThePlanAndItsDigest(t *testing.T) {
	t.Parallel()
	f := newProcFleet(t, 1)
	doc := "name: locked-upgrade\nstages:\n  - name: upgrade\n    target: {all: true}\n    steps:\n" +
		"      - {name: drain, kind: example.com/drain}\n      - {name: upgrade, kind: example.com/upgrade}\n"
	if _, err := f.alice.ApplyPlaybook(ctxT(t), doc); err != nil {
		t.Fatal(err)
	}
	req := &wire.PlanRequest{ClusterID: "e2e"}
	before, err := f.alice.PlanPlaybook(ctxT(t), "locked-upgrade", req)
	if err != nil || len(before.Stages) != 1 || len(before.Stages[0].KindLocks) != 0 {
		t.Fatalf("the plan before the reload: %+v %v", before, err)
	}
	last, err := f.admin.Events(ctxT(t), -1, 1, client.EventFilter{})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(f.dir, "fleet", "core", "core.yaml")
	orig, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	next := string(orig) + "kinds:\n  - {kind: example.com/upgrade, lock: db}\n"
	if err := os.WriteFile(path, []byte(next), 0o600); err != nil {
		t.Fatal(err)
	}
	f.core.signal(syscall.SIGHUP)
	if ev := f.coreEvent("core.config_reloaded", last.Next); !strings.Contains(ev.Message, "kinds") {
		t.Fatalf("reload event %+v, want kinds changed", ev)
	}
	after, err := f.alice.PlanPlaybook(ctxT(t), "locked-upgrade", req)
	want := []wire.KindLock{{Name: "db", Scope: wire.LockCluster, Kinds: []string{"example.com/upgrade"}}}
	if err != nil || len(after.Stages) != 1 || !reflect.DeepEqual(after.Stages[0].KindLocks, want) {
		t.Fatalf("the plan after the reload: %+v %v, want its stage taking %+v", after.Stages, err, want)
	}
	if after.Digest == before.Digest {
		t.Fatalf("the reload left the plan's digest %s as it was", after.Digest)
	}
	env := []string{"MUSTER_ADDR=http://" + f.core.Addr(), "MUSTER_TOKEN=" + f.secrets["alice"]}
	if out := muster(t, env, "playbook", "plan", "locked-upgrade", "--cluster", "e2e"); !strings.Contains(out,
		"lock: db (held while the stage runs: kind example.com/upgrade declares it)") || !strings.Contains(out, after.Digest) {
		t.Fatalf("muster playbook plan after the reload:\n%s", out)
	}
	_, err = f.alice.StartPlaybook(ctxT(t), "locked-upgrade", &wire.PlanRequest{ClusterID: "e2e", Digest: before.Digest})
	if err == nil || !strings.Contains(err.Error(), "the plan changed") {
		t.Fatalf("a start with the digest shown before the reload: %v, want it refused", err)
	}
	run, err := f.alice.StartPlaybook(ctxT(t), "locked-upgrade", &wire.PlanRequest{ClusterID: "e2e", Digest: after.Digest})
	if err != nil {
		t.Fatal(err)
	}
	if run.Digest != after.Digest || !reflect.DeepEqual(run.Stages[0].KindLocks, want) {
		t.Fatalf("the run started: digest %s, kind locks %+v; want %s, %+v", run.Digest, run.Stages[0].KindLocks, after.Digest, want)
	}
}
