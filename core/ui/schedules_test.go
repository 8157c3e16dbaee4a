package ui

import (
	"context"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/musterhq/muster/core/actions"
	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/wire"
)

var scheduleSeq atomic.Int64

// schedulePlaybookDoc is a playbook applied by "someone", so that neither
// appr nor admin applied it (they may approve its schedules).
const schedulePlaybookDoc = `name: nightly
description: a nightly <b>nap</b>
params:
  - {name: note, type: string, default: "x"}
stages:
  - name: sleep
    kind: muster.io/debug.sleep
    args: {seconds: 1, note: "{{ .note }}"}
    target: {nodes: [db-1]}
`

// createSchedule stores a schedule of playbook nightly, as `muster schedule
// create` does, requested by who.
func (e *env) createSchedule(name, who string) *store.Schedule {
	e.t.Helper()
	e.applyPlaybook(schedulePlaybookDoc, "someone") // unchanged after the first: no new version
	var out *store.Schedule
	e.runChange(func(ctx context.Context, tx store.Tx) error {
		var err error
		out, _, err = e.ui.cfg.Schedules.Apply(ctx, tx, &wire.CreateScheduleRequest{Name: name, Cluster: "prod",
			Playbook: "nightly", Cron: "0 2 * * *", Timezone: "Europe/Berlin",
			Params: map[string]string{"note": "<script>alert(1)</script>\x1b[31m"}}, actions.Actor{Name: who})
		return err
	})
	return out
}

// The Schedules pages: the list links each schedule; a schedule's page shows
// its next occurrences in its time zone, escapes what its requester wrote,
// and offers approve and reject to an approver other than its requester
// only; approving through the page makes it ACTIVE.
func TestSchedulePagesShowNextOccurrencesAndDecideForApproversOnly(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.createSchedule("nightly-nap", "op")
	for _, who := range []string{"viewer", "op", "appr"} {
		b := e.browser()
		b.signIn(who)
		status, _, body := b.get("/ui/schedules")
		if status != http.StatusOK || !strings.Contains(body, `href="/ui/schedules/nightly-nap"`) {
			t.Fatalf("%s: list %d\n%s", who, status, body)
		}
		status, _, body = b.get("/ui/schedules/nightly-nap")
		if status != http.StatusOK {
			t.Fatalf("%s: page %d", who, status)
		}
		if strings.Contains(body, "<script>alert") || strings.Contains(body, "\x1b") || !strings.Contains(body, `&lt;script&gt;`) {
			t.Errorf("%s: a parameter is shown unescaped", who)
		}
		hasButton := strings.Contains(body, `id="schedule-approve"`)
		if hasButton != (who == "appr") {
			t.Errorf("%s: approve button shown = %v", who, hasButton)
		}
	}
	b := e.browser()
	b.signIn("appr")
	_, _, body := b.get("/ui/schedules/nightly-nap")
	if !strings.Contains(body, "None while the schedule is PENDING APPROVE") {
		t.Errorf("a pending schedule lists next occurrences:\n%s", body)
	}
	var sc *store.Schedule
	e.runChange(func(ctx context.Context, tx store.Tx) error {
		var err error
		sc, err = tx.Schedule(ctx, "nightly-nap")
		return err
	})
	status, _, _ := b.post("/ui/schedules/nightly-nap/approve", map[string][]string{"csrf": {b.csrf}, "digest": {sc.Digest}})
	if status != http.StatusSeeOther {
		t.Fatalf("approve: %d", status)
	}
	_, _, body = b.get("/ui/schedules/nightly-nap?done=approved")
	if !strings.Contains(body, "ACTIVE") || !strings.Contains(body, "02:00 CET") || strings.Contains(body, `id="schedule-approve"`) {
		t.Errorf("after approval:\n%s", body)
	}
	// Its requester, holding the approver role too, is told another approves.
	e.createSchedule("own", "admin")
	a := e.browser()
	a.signIn("admin")
	if _, _, body := a.get("/ui/schedules/own"); strings.Contains(body, `id="schedule-approve"`) || !strings.Contains(body, "another approver approves it") {
		t.Errorf("the requester's own page offers approval:\n%s", body)
	}
}

// TestApprovalsPageListsSchedulesWaiting: a schedule waiting for an
// approver is on the Approvals page, beside actions and runs, with a link
// to its page where it is decided (approval.waiting points people there).
func TestApprovalsPageListsSchedulesWaiting(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.createSchedule("nightly-nap", "op")
	appr := e.browser().signIn("appr")
	status, _, body := appr.get("/ui/approvals")
	if status != http.StatusOK {
		t.Fatalf("approvals: %d\n%s", status, body)
	}
	if !strings.Contains(body, `href="/ui/schedules/nightly-nap"`) || !strings.Contains(body, "1 schedules waiting, 1 for you to decide") ||
		strings.Contains(body, "Nothing waits for approval") {
		t.Fatalf("the approvals page does not list the schedule waiting:\n%s", body)
	}
}
