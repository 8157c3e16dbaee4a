package ui

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/musterhq/muster/core/actions"
	"github.com/musterhq/muster/core/budget"
	"github.com/musterhq/muster/core/schedule"
	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/limit"
	"github.com/musterhq/muster/shared/live"
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
		out, _, err = e.schedules.Apply(ctx, tx, &wire.CreateScheduleRequest{Name: name, Cluster: "prod",
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
	if _, _, body := a.get("/ui/schedules/own"); strings.Contains(body, `id="schedule-approve"`) || !strings.Contains(body, "another approver must decide") {
		t.Errorf("the requester's own page offers approval:\n%s", body)
	}
}

// The Approvals page lists the schedules waiting for approval with approve
// and reject for an approver who neither created them nor applied their
// playbook version, a reason instead of buttons for the others; approving
// there makes the schedule ACTIVE. The Dashboard counts the ones the
// visitor may decide among what waits for them.
func TestApprovalsPageDecidesSchedulesForOtherApproversOnly(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.createSchedule("by-op", "op")
	e.createSchedule("by-admin", "admin")
	e.applyPlaybook(strings.Replace(schedulePlaybookDoc, "name: nightly", "name: weekly", 1), "appr")
	e.runChange(func(ctx context.Context, tx store.Tx) error {
		_, _, err := e.schedules.Apply(ctx, tx, &wire.CreateScheduleRequest{Name: "applied-by-appr", Cluster: "prod",
			Playbook: "weekly", Cron: "@daily"}, actions.Actor{Name: "op"})
		return err
	})
	card := func(body, name string) string {
		i := strings.Index(body, `data-schedule="`+name+`"`)
		if i < 0 {
			return ""
		}
		rest := body[i:]
		if j := strings.Index(rest, "</li>"); j >= 0 {
			rest = rest[:j]
		}
		return rest
	}
	for who, want := range map[string]map[string]string{
		"appr":  {"by-op": "button", "by-admin": "button", "applied-by-appr": "You applied the playbook version"},
		"admin": {"by-op": "button", "by-admin": "You asked for this schedule", "applied-by-appr": "button"},
		"op":    {"by-op": "You asked for this schedule", "by-admin": "do not include approving"},
	} {
		b := e.browser()
		b.signIn(who)
		status, _, body := b.get("/ui/approvals")
		if status != http.StatusOK {
			t.Fatalf("%s: approvals %d", who, status)
		}
		for name, w := range want {
			c := card(body, name)
			if c == "" {
				t.Errorf("%s: schedule %s not listed", who, name)
				continue
			}
			hasButton := strings.Contains(c, `class="approve"`)
			if (w == "button") != hasButton || (w != "button" && !strings.Contains(c, w)) {
				t.Errorf("%s: schedule %s: buttons %v, want %q:\n%s", who, name, hasButton, w, c)
			}
		}
		_, _, dash := b.get("/ui/dashboard")
		if got, wantIt := strings.Contains(dash, `data-schedule="by-op"`), who != "op"; got != wantIt {
			t.Errorf("%s: the Dashboard lists by-op as waiting = %v, want %v", who, got, wantIt)
		}
	}
	b := e.browser()
	b.signIn("appr")
	_, _, body := b.get("/ui/approvals")
	var sc *store.Schedule
	e.runChange(func(ctx context.Context, tx store.Tx) error {
		var err error
		sc, err = tx.Schedule(ctx, "by-op")
		return err
	})
	if !strings.Contains(card(body, "by-op"), sc.Digest) {
		t.Fatalf("the approve form lacks the digest %s", sc.Digest)
	}
	status, loc, _ := b.post("/ui/schedules/by-op/approve", map[string][]string{"csrf": {b.csrf}, "digest": {sc.Digest},
		"next": {"/ui/approvals"}})
	if status != http.StatusSeeOther || !strings.HasPrefix(loc, "/ui/approvals?") {
		t.Fatalf("approve: %d to %q", status, loc)
	}
	_, _, body = b.get(loc)
	if card(body, "by-op") != "" || !strings.Contains(body, "Schedule by-op approved.") {
		t.Errorf("after approval the page still lists by-op or says nothing:\n%s", body)
	}
	e.runChange(func(ctx context.Context, tx store.Tx) error {
		sc, err := tx.Schedule(ctx, "by-op")
		if err == nil && (sc.State != store.ScheduleActive || sc.ApprovedBy != "appr") {
			t.Errorf("by-op is %s approved by %q, want ACTIVE by appr", sc.State, sc.ApprovedBy)
		}
		return err
	})
}

// withWindow gives cluster prod a nightly maintenance window, and the
// budget of withBudget (every kind disruptive): a window could hold its work.
func withWindow(t testing.TB) func(*Config) {
	w, err := schedule.NewWindow("0 2 * * *", 4*time.Hour, "UTC")
	if err != nil {
		t.Fatal(err)
	}
	return func(c *Config) {
		withBudget(c)
		c.Calendars = live.New(schedule.Calendars{"prod": {Windows: []schedule.Window{w}}})
	}
}

// Urgent is offered only where a maintenance window could hold the work:
// an approver sees no urgent form on a cluster without windows, nor on an
// action of a kind no window holds (not disruptive).
func TestUrgentIsOfferedOnlyWhereAWindowCouldHold(t *testing.T) {
	t.Parallel()
	for name, opts := range map[string][]func(*Config){
		"no window":           nil,
		"a window, no budget": {func(c *Config) { withWindow(t)(c); c.Budget = nil }},
	} {
		e := setup(t, opts...)
		a := e.create("admin", `{"seconds":1}`)
		b := e.browser().signIn("appr")
		if _, _, body := b.get("/ui/actions/" + a.ID); strings.Contains(body, `id="action-urgent"`) {
			t.Errorf("%s: the action page offers urgent", name)
		}
		if name == "no window" {
			r := e.createRun("admin")
			if _, _, body := b.get("/ui/runs/" + r.ID); strings.Contains(body, `id="run-urgent"`) {
				t.Errorf("%s: the run page offers urgent", name)
			}
		}
	}
}

// Urgent on an action's and a run's page: shown to an approver other than
// the requester only, with a reason; posting it marks the action or run
// urgent through the rule the API applies; the requester who also holds
// approve reads why not, and no one else sees the form.
func TestUrgentIsOfferedToOtherApproversAndMarksThroughTheAPIsRule(t *testing.T) {
	t.Parallel()
	e := setup(t, withWindow(t))
	a := e.create("admin", `{"seconds":1}`)
	r := e.createRun("admin")
	pages := map[string]string{"/ui/actions/" + a.ID: `id="action-urgent"`, "/ui/runs/" + r.ID: `id="run-urgent"`}
	for who, want := range map[string]bool{"viewer": false, "op": false, "appr": true, "admin": false} {
		b := e.browser().signIn(who)
		for page, button := range pages {
			_, _, body := b.get(page)
			if got := strings.Contains(body, button); got != want {
				t.Errorf("%s on %s: urgent form shown = %v, want %v", who, page, got, want)
			}
			if who == "admin" && !strings.Contains(body, "another approver may mark it urgent") {
				t.Errorf("the requester's page %s does not say why there is no urgent form", page)
			}
		}
	}
	appr := e.browser().signIn("appr")
	appr.get("/ui/actions/" + a.ID)
	if status, _, _ := appr.post("/ui/actions/"+a.ID+"/urgent", map[string][]string{"csrf": {appr.csrf}}); status != http.StatusBadRequest {
		t.Errorf("urgent without a reason: %d, want 400", status)
	}
	status, loc, _ := appr.post("/ui/actions/"+a.ID+"/urgent", map[string][]string{"csrf": {appr.csrf}, "reason": {"outage <b>now</b>"},
		"next": {"/ui/actions/" + a.ID}})
	if status != http.StatusSeeOther {
		t.Fatalf("urgent action: %d", status)
	}
	if n := e.nudges.List(); len(n) == 0 || n[len(n)-1] != "node:prod/"+a.NodeID {
		t.Fatalf("syncs after marking an action urgent: %v, want its node's last", n)
	}
	_, _, body := appr.get(loc)
	if !strings.Contains(body, "Marked urgent: outage &lt;b&gt;now&lt;/b&gt;") {
		t.Errorf("the action page does not show the urgent reason escaped:\n%s", body)
	}
	status, _, _ = appr.post("/ui/runs/"+r.ID+"/urgent", map[string][]string{"csrf": {appr.csrf}, "reason": {"outage"}})
	if status != http.StatusSeeOther {
		t.Fatalf("urgent run: %d", status)
	}
	if got := e.run(r.ID); got.Urgent != "outage" {
		t.Errorf("run urgent %q, want outage", got.Urgent)
	}
	// The requester's forged POST is the engine's 403.
	adm := e.browser().signIn("admin")
	adm.get("/ui/runs/" + r.ID)
	if status, _, _ := adm.post("/ui/runs/"+r.ID+"/urgent", map[string][]string{"csrf": {adm.csrf}, "reason": {"mine"}}); status != http.StatusForbidden {
		t.Errorf("the requester marking their own run urgent: %d, want 403", status)
	}
}

// The Schedules list filters by cluster and state and pages by name; a bad
// filter is a 400 naming it.
func TestSchedulesListFiltersAndPages(t *testing.T) {
	t.Parallel()
	e := setup(t)
	for i := range schedulesPerPage + 1 {
		e.createSchedule(fmt.Sprintf("s-%03d", i), "op")
	}
	var sc *store.Schedule
	e.runChange(func(ctx context.Context, tx store.Tx) error {
		var err error
		if sc, err = tx.Schedule(ctx, "s-007"); err != nil {
			return err
		}
		_, err = e.schedules.Approve(ctx, tx, "s-007", sc.Digest, actions.Actor{Name: "appr"})
		return err
	})
	b := e.browser().signIn("viewer")
	_, _, body := b.get("/ui/schedules")
	if n := strings.Count(body, `<tr data-schedule=`); n != schedulesPerPage || !strings.Contains(body, `id="schedules-next"`) {
		t.Fatalf("first page: %d rows, want %d and a next link", n, schedulesPerPage)
	}
	_, _, body = b.get("/ui/schedules?marker=s-049")
	if n := strings.Count(body, `<tr data-schedule=`); n != 1 || !strings.Contains(body, `data-schedule="s-050"`) || strings.Contains(body, `id="schedules-next"`) {
		t.Errorf("second page: %d rows, want s-050 alone and no next link", n)
	}
	_, _, body = b.get("/ui/schedules?state=active&cluster=prod")
	if n := strings.Count(body, `<tr data-schedule=`); n != 1 || !strings.Contains(body, `data-schedule="s-007"`) {
		t.Errorf("state=active: %d rows, want s-007 alone", n)
	}
	if status, _, body := b.get("/ui/schedules?state=DONE"); status != http.StatusBadRequest || !strings.Contains(body, "state") {
		t.Errorf("state=DONE: %d, want 400 naming state", status)
	}
	if status, _, _ := b.get("/ui/schedules?marker=zz-none"); status != http.StatusBadRequest {
		t.Errorf("an unknown marker: %d, want 400", status)
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
	if !strings.Contains(body, `href="/ui/schedules/nightly-nap"`) || !strings.Contains(body, "1 schedule waiting, 1 for you to decide") ||
		strings.Contains(body, "Nothing waits for approval") {
		t.Fatalf("the approvals page does not list the schedule waiting:\n%s", body)
	}
}

// approveSchedule approves schedule name as appr, with its digest.
func (e *env) approveSchedule(name string) {
	e.t.Helper()
	e.runChange(func(ctx context.Context, tx store.Tx) error {
		sc, err := tx.Schedule(ctx, name)
		if err != nil {
			return err
		}
		_, err = e.schedules.Approve(ctx, tx, name, sc.Digest, actions.Actor{Name: "appr"})
		return err
	})
}

// scheduleState reads schedule name's state ("" when it is gone).
func (e *env) scheduleState(name string) string {
	e.t.Helper()
	state := ""
	e.runChange(func(ctx context.Context, tx store.Tx) error {
		sc, err := tx.Schedule(ctx, name)
		if err == nil {
			state = sc.State
		}
		if errors.Is(err, store.ErrNotFound) {
			return nil
		}
		return err
	})
	return state
}

// A schedule's page offers pause, resume and delete to those the API lets
// do them (pause and delete: cancel; resume: continue), and each does what
// it says: pausing makes it PAUSED, resuming ACTIVE again, and deleting
// needs the box ticked (without it: 400 and the schedule stays), then
// removes it and says so on the list.
func TestSchedulePageOffersPauseResumeDeleteByRole(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.createSchedule("op-nap", "op")
	e.approveSchedule("op-nap")
	buttons := func(b *browser, name string) string {
		_, _, body := b.get("/ui/schedules/" + name)
		var got []string
		for _, id := range []string{"schedule-pause", "schedule-resume", "schedule-delete"} {
			if strings.Contains(body, `id="`+id+`"`) {
				got = append(got, strings.TrimPrefix(id, "schedule-"))
			}
		}
		return strings.Join(got, ",")
	}
	active := map[string]string{"viewer": "", "op": "pause,delete", "appr": "", "admin": "pause,delete"}
	paused := map[string]string{"viewer": "", "op": "resume,delete", "appr": "resume", "admin": "resume,delete"}
	for who, want := range active {
		b := e.browser()
		b.signIn(who)
		if got := buttons(b, "op-nap"); got != want {
			t.Errorf("%s on an active schedule: buttons %q, want %q", who, got, want)
		}
	}
	op := e.browser()
	op.signIn("op")
	status, loc, _ := op.post("/ui/schedules/op-nap/pause", map[string][]string{"csrf": {op.csrf}})
	if status != http.StatusSeeOther || e.scheduleState("op-nap") != store.SchedulePaused {
		t.Fatalf("pause: %d %s, state %s", status, loc, e.scheduleState("op-nap"))
	}
	if _, _, body := op.get(loc); !strings.Contains(body, "Schedule op-nap paused.") {
		t.Errorf("no word of the pause after it:\n%s", body)
	}
	for who, want := range paused {
		b := e.browser()
		b.signIn(who)
		if got := buttons(b, "op-nap"); got != want {
			t.Errorf("%s on a paused schedule: buttons %q, want %q", who, got, want)
		}
	}
	appr := e.browser()
	appr.signIn("appr")
	if status, _, _ := appr.post("/ui/schedules/op-nap/resume", map[string][]string{"csrf": {appr.csrf}}); status != http.StatusSeeOther || e.scheduleState("op-nap") != store.ScheduleActive {
		t.Fatalf("resume: %d, state %s", status, e.scheduleState("op-nap"))
	}
	if status, _, body := op.post("/ui/schedules/op-nap/delete", map[string][]string{"csrf": {op.csrf}}); status != http.StatusBadRequest || !strings.Contains(body, "tick the box") || e.scheduleState("op-nap") != store.ScheduleActive {
		t.Fatalf("delete without the box: %d, state %s\n%s", status, e.scheduleState("op-nap"), body)
	}
	status, loc, _ = op.post("/ui/schedules/op-nap/delete", map[string][]string{"csrf": {op.csrf}, "confirm": {"yes"}})
	if status != http.StatusSeeOther || e.scheduleState("op-nap") != "" {
		t.Fatalf("delete: %d, state %q", status, e.scheduleState("op-nap"))
	}
	if _, _, body := op.get(loc); !strings.Contains(body, "Schedule op-nap deleted.") || strings.Contains(body, `href="/ui/schedules/op-nap"`) {
		t.Errorf("the list after the delete:\n%s", body)
	}
	// A deleted schedule is gone: pausing it is refused as not found.
	if status, _, _ := op.post("/ui/schedules/op-nap/pause", map[string][]string{"csrf": {op.csrf}}); status != http.StatusNotFound {
		t.Errorf("pause of a deleted schedule: %d, want 404", status)
	}
}

// pauseSchedule pauses schedule name as op.
func (e *env) pauseSchedule(name string) {
	e.t.Helper()
	e.runChange(func(ctx context.Context, tx store.Tx) error {
		_, err := e.schedules.Pause(ctx, tx, name, actions.Actor{Name: "op"})
		return err
	})
}

// The Schedules list says each cron in words and shows the schedule's last
// run with its result, linked; a schedule that never ran says so.
func TestSchedulesListShowsCronInWordsAndTheLastRun(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ran := e.createSchedule("ran", "op")
	e.createSchedule("fresh", "op")
	var older, newest string
	for i, state := range []string{store.RunDone, store.RunFailed} {
		id := seedRuns(t, e.st, 1, 1, store.RunRunning, time.Now().UTC().Add(time.Duration(i)*time.Minute))[0]
		e.runChange(func(ctx context.Context, tx store.Tx) error {
			r, err := tx.Run(ctx, id)
			if err != nil {
				return err
			}
			r.ScheduleID, r.State = ran.ID, state
			return tx.UpdateRun(ctx, r)
		})
		older, newest = newest, id
	}
	b := e.browser().signIn("viewer")
	_, _, body := b.get("/ui/schedules")
	row := func(name string) string {
		i := strings.Index(body, `data-schedule="`+name+`"`)
		if i < 0 {
			t.Fatalf("no row for %s:\n%s", name, body)
		}
		return body[i : i+strings.Index(body[i:], "</tr>")]
	}
	r := row("ran")
	if !strings.Contains(r, "at 02:00 every day") || !strings.Contains(r, `href="/ui/runs/`+newest+`"`) || !strings.Contains(r, "FAILED") ||
		strings.Contains(r, older) {
		t.Errorf("the row of a schedule that ran lacks its cron in words or its newest run (FAILED %s):\n%s", newest, r)
	}
	if r := row("fresh"); !strings.Contains(r, "none yet") {
		t.Errorf("the row of a schedule that never ran:\n%s", r)
	}
}

// A run's child is held by a window with its whole stage when the stage's
// kinds make a procedure, whatever its own kind (the push gate's rule,
// budget.Policy.WindowHolds): its page offers urgent too.
func TestUrgentIsOfferedOnAChildOfAProcedureStage(t *testing.T) {
	t.Parallel()
	e := setup(t, withWindow(t), func(c *Config) {
		c.Budget = live.New(budget.Policy{MaxUnavailable: map[string]limit.Limit{"prod": limit.MustParse("1")},
			Kinds: []budget.KindRule{{Kind: "muster.io/debug.sleep", Disruptive: true}}})
	})
	r := e.createRun("op", wire.StageSpec{Name: "proc", Target: wire.Target{Nodes: []string{"db-1"}}, Steps: []wire.StepSpec{
		{Name: "ping", Kind: "muster.io/debug.ping"},
		{Name: "nap", Kind: "muster.io/debug.sleep", Args: json.RawMessage(`{"seconds":1}`)}}})
	e.approveRun(r.ID, "appr")
	kids := e.children(r.ID)
	if len(kids) == 0 || kids[0].Kind != "muster.io/debug.ping" {
		t.Fatalf("children %+v, want the ping step's first", kids)
	}
	b := e.browser().signIn("admin")
	if _, _, body := b.get("/ui/actions/" + kids[0].ID); !strings.Contains(body, `id="action-urgent"`) {
		t.Fatalf("the ping child of a procedure stage (%s) offers no urgent", kids[0].State)
	}
}
