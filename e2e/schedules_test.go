package e2e

import (
	"fmt"
	"testing"
	"time"

	"github.com/musterhq/muster/shared/client"
	"github.com/musterhq/muster/shared/testwait"
	"github.com/musterhq/muster/shared/wire"
)

// schedulePlaybook is a one-stage playbook of kind on every node; extra
// lands in its description, so that applying it again with another extra
// makes a new version.
func schedulePlaybook(name, kind, args, extra string) string {
	return fmt.Sprintf(`name: %s
description: scheduled %s
stages:
  - name: main
    kind: %s
    target: {all: true}
    args: %s
`, name, extra, kind, args)
}

func applyPlaybook(t *testing.T, c *client.Core, doc string) {
	t.Helper()
	if _, err := c.ApplyPlaybook(ctxT(t), doc); err != nil {
		t.Fatal(err)
	}
}

// occurrences returns the schedule.occurrence events' occurrence times, and
// how many times each was seen.
func occurrences(t *testing.T, c *client.Core) map[string]int {
	t.Helper()
	evs, err := c.Events(ctxT(t), 0, 1000, client.EventFilter{Types: []string{"schedule.occurrence"}})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, ev := range evs.Events {
		at, _ := ev.Data["occurrence"].(string)
		out[at]++
	}
	return out
}

func scheduleRuns(t *testing.T, c *client.Core, name string) []wire.ScheduleRun {
	t.Helper()
	sc, err := c.Schedule(ctxT(t), name)
	if err != nil {
		return nil
	}
	return sc.Runs
}

// Issue 21, item 5: a schedule approved once makes a run at each
// occurrence, already approved; two replicas on one database and a core
// killed with SIGKILL never make two runs for one occurrence; a new version
// of its playbook (version: latest) sends it back to approval and no run is
// made until it is approved again.
func TestScheduleMakesExactlyOneRunPerOccurrenceAcrossReplicasAndCrashes(t *testing.T) {
	t.Parallel()
	f := newFleetWith(t, fleetOptions{nodes: 1, replicas: 2, coreArgs: []string{"--test-min-every", "1s"}})
	applyPlaybook(t, f.alice, schedulePlaybook("tick", "example.com/append", "{}", "v1"))
	created, err := f.alice.ApplySchedule(ctxT(t), &wire.CreateScheduleRequest{Name: "ticker", Cluster: "e2e",
		Playbook: "tick", Cron: "@every 3s", Concurrency: "allow"})
	if err != nil || created.State != "PENDING_APPROVE" {
		t.Fatalf("create: %+v %v", created, err)
	}
	if _, err := f.alice.ApproveSchedule(ctxT(t), "ticker", created.Digest); err == nil {
		t.Fatal("its creator approved the schedule")
	}
	if _, err := f.bob.ApproveSchedule(ctxT(t), "ticker", created.Digest); err != nil {
		t.Fatal(err)
	}
	testwait.Within(t, 15*time.Second, "two runs of the schedule", func() bool { return len(scheduleRuns(t, f.admin, "ticker")) >= 2 })
	run, err := f.admin.Run(ctxT(t), scheduleRuns(t, f.admin, "ticker")[0].ID)
	if err != nil || run.ScheduleID != created.ID || run.ApprovedBy != "bob" || run.Requester != "alice" {
		t.Fatalf("a scheduled run: %+v %v", run, err)
	}
	// The first replica dies without a word; the second goes on alone,
	// then the first comes back beside it.
	f.use(1)
	f.cores[0].kill()
	before := len(scheduleRuns(t, f.admin, "ticker"))
	testwait.Within(t, 15*time.Second, "runs made by the second replica alone", func() bool {
		return len(scheduleRuns(t, f.admin, "ticker")) >= before+2
	})
	f.cores[0].restart()
	before = len(scheduleRuns(t, f.admin, "ticker"))
	testwait.Within(t, 15*time.Second, "runs made with both replicas up again", func() bool {
		return len(scheduleRuns(t, f.admin, "ticker")) >= before+2
	})
	// A new playbook version: back to approval, and no run until then.
	applyPlaybook(t, f.alice, schedulePlaybook("tick", "example.com/append", "{}", "v2"))
	testwait.Within(t, 10*time.Second, "the schedule back in PENDING_APPROVE", func() bool {
		sc, err := f.admin.Schedule(ctxT(t), "ticker")
		return err == nil && sc.State == "PENDING_APPROVE"
	})
	held := len(scheduleRuns(t, f.admin, "ticker"))
	for end := time.Now().Add(7 * time.Second); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
		// Two occurrences pass: neither makes a run.
		if n := len(scheduleRuns(t, f.admin, "ticker")); n != held {
			t.Fatalf("%d runs while the schedule waits for approval, want %d", n, held)
		}
	}
	shown, err := f.bob.Schedule(ctxT(t), "ticker")
	if err != nil || shown.PlaybookVersion != 2 {
		t.Fatalf("schedule waiting: %+v %v", shown, err)
	}
	if _, err := f.bob.ApproveSchedule(ctxT(t), "ticker", shown.Digest); err != nil {
		t.Fatal(err)
	}
	testwait.Within(t, 10*time.Second, "a run of playbook version 2", func() bool {
		runs := scheduleRuns(t, f.admin, "ticker")
		if len(runs) <= held {
			return false
		}
		r, err := f.admin.Run(ctxT(t), runs[0].ID)
		return err == nil && r.PlaybookVersion == 2
	})
	// Exactly one run per occurrence: every occurrence made one run, none
	// made two, and there are as many runs as occurrences.
	occ := occurrences(t, f.admin)
	for at, n := range occ {
		if n != 1 {
			t.Errorf("occurrence %s made %d runs", at, n)
		}
		if ts, err := time.Parse(time.RFC3339Nano, at); err != nil || ts.Unix()%3 != 0 {
			t.Errorf("occurrence %q is not a multiple of 3 s since the epoch", at)
		}
	}
	if runs := scheduleRuns(t, f.admin, "ticker"); len(runs) != len(occ) {
		t.Errorf("%d runs for %d occurrences", len(runs), len(occ))
	}
	t.Logf("%d occurrences, one run each", len(occ))
}

// Issue 21, item 6: with concurrency forbid, an occurrence while the
// schedule's previous run is still open makes no run, and an event says so.
func TestScheduleForbidSkipsAnOccurrenceWhileThePreviousRunIsOpen(t *testing.T) {
	t.Parallel()
	f := newFleetWith(t, fleetOptions{nodes: 1, coreArgs: []string{"--test-min-every", "1s"}})
	applyPlaybook(t, f.alice, schedulePlaybook("slow", "muster.io/debug.sleep", "{seconds: 8}", "v1"))
	created, err := f.alice.ApplySchedule(ctxT(t), &wire.CreateScheduleRequest{Name: "slow", Cluster: "e2e",
		Playbook: "slow", Version: 1, Cron: "@every 3s"})
	if err != nil || created.Concurrency != "forbid" {
		t.Fatalf("create: %+v %v", created, err)
	}
	if _, err := f.bob.ApproveSchedule(ctxT(t), "slow", created.Digest); err != nil {
		t.Fatal(err)
	}
	testwait.Within(t, 10*time.Second, "the first run", func() bool { return len(scheduleRuns(t, f.admin, "slow")) == 1 })
	var skipped wire.Event
	testwait.Within(t, 10*time.Second, "a skipped occurrence", func() bool {
		evs, err := f.admin.Events(ctxT(t), 0, 100, client.EventFilter{Types: []string{"schedule.skipped"}})
		if err != nil || len(evs.Events) == 0 {
			return false
		}
		skipped = evs.Events[0]
		return true
	})
	runs := scheduleRuns(t, f.admin, "slow")
	if len(runs) != 1 || skipped.Data["reason"] != "previous run open" || skipped.Data["run_id"] != runs[0].ID {
		t.Fatalf("runs %v, skipped %+v: want one run and an event naming it", runs, skipped)
	}
	t.Logf("skipped: %s", skipped.Message)
	// Once the run is done, a later occurrence makes the next one.
	testwait.Within(t, 20*time.Second, "a second run after the first finished", func() bool {
		return len(scheduleRuns(t, f.admin, "slow")) == 2
	})
}
