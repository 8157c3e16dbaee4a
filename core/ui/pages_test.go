package ui

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/musterhq/muster/core/actions"
	"github.com/musterhq/muster/core/approval"
	"github.com/musterhq/muster/core/budget"
	corenodes "github.com/musterhq/muster/core/nodes"
	"github.com/musterhq/muster/core/schedule"
	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/action"
	"github.com/musterhq/muster/shared/limit"
	"github.com/musterhq/muster/shared/live"
	"github.com/musterhq/muster/shared/wire"
)

// withBudget gives cluster prod a disruption budget of one node, with
// every kind disruptive.
func withBudget(c *Config) {
	c.Budget = live.New(budget.Policy{MaxUnavailable: map[string]limit.Limit{"prod": limit.MustParse("1")},
		Kinds: []budget.KindRule{{Kind: "*", Disruptive: true}}})
}

func (e *env) node(id string) *store.Node {
	e.t.Helper()
	var n *store.Node
	if err := e.st.Read(context.Background(), func(rd store.Reader) error {
		var err error
		n, err = rd.Node(context.Background(), "prod", id)
		return err
	}); err != nil {
		e.t.Fatal(err)
	}
	return n
}

// The Node page shows a node's status and its cause, its labels, its last
// contact and its actions, everything escaped; the nodes list and the
// action page link to it.
func TestNodePageShowsStatusCauseAndActions(t *testing.T) {
	t.Parallel()
	e := setup(t, withBudget)
	a := e.create("op", `{"seconds":1}`)
	e.runChange(func(ctx context.Context, tx store.Tx) error {
		n, err := tx.Node(ctx, "prod", "db-1")
		if err != nil {
			return err
		}
		n.Labels = map[string]string{"zone": "<i>eu</i>"}
		if err := tx.PutNode(ctx, n); err != nil {
			return err
		}
		_, err = corenodes.Drain(ctx, tx, "prod", "db-1", "<b>disk</b>\x1b[31m", actions.Actor{Name: "op"})
		return err
	})
	b := e.browser().signIn("viewer")
	status, _, body := b.get("/ui/clusters/prod/nodes/db-1")
	if status != http.StatusOK {
		t.Fatalf("node page: %d\n%s", status, body)
	}
	for _, want := range []string{`health-drained">DRAINED`, "Drained by op: &lt;b&gt;disk&lt;/b&gt;\\x1b[31m",
		"zone=&lt;i&gt;eu&lt;/i&gt;", "Last contact", `<time datetime=`, `data-action="` + a.ID + `"`,
		`<code>` + a.ID[:8] + `</code>`, `data-copy="` + a.ID + `"`, "1 of 1</strong> nodes unavailable"} {
		if !strings.Contains(body, want) {
			t.Errorf("the node page lacks %q", want)
		}
	}
	if strings.Contains(body, "<b>disk") || strings.Contains(body, "<i>eu") {
		t.Fatal("something from a person or an agent is not escaped")
	}
	// A viewer is shown no drain button.
	if strings.Contains(body, "/drain\"") || strings.Contains(body, "/undrain\"") {
		t.Fatal("a viewer sees drain buttons")
	}
	for _, page := range []string{"/ui/clusters", "/ui/actions/" + a.ID, "/ui/dashboard", "/ui/actions", "/ui/approvals"} {
		_, _, body := b.get(page)
		if !strings.Contains(body, `href="/ui/clusters/prod/nodes/db-1"`) {
			t.Errorf("%s does not link to the node page", page)
		}
	}
	for page, want := range map[string]int{
		"/ui/clusters/prod/nodes/nope":    http.StatusNotFound,
		"/ui/clusters/nope/nodes/db-1":    http.StatusNotFound,
		"/ui/clusters/prod/nodes/..%2Fx":  http.StatusNotFound,
		"/ui/clusters/prod/nodes/-flag-x": http.StatusNotFound,
	} {
		if status, _, _ := b.get(page); status != want {
			t.Errorf("%s: %d, want %d", page, status, want)
		}
	}
}

// The Node page says which kinds are unusable on the node because the core
// refuses the args_schema it announced, and why, escaped (the reason
// quotes the schema, which the node wrote).
func TestNodePageShowsARefusedArgsSchema(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.runChange(func(ctx context.Context, tx store.Tx) error {
		n, err := tx.Node(ctx, "prod", "db-1")
		if err != nil {
			return err
		}
		n.Kinds = []string{"example.com/pkg.upgrade"}
		n.ArgsSchemas = map[string]json.RawMessage{n.Kinds[0]: json.RawMessage(`{"pattern":"(?:<b>x</b>){1,300}"}`)}
		return tx.PutNode(ctx, n)
	})
	b := e.browser().signIn("viewer")
	status, _, body := b.get("/ui/clusters/prod/nodes/db-1")
	if status != http.StatusOK {
		t.Fatalf("node page: %d\n%s", status, body)
	}
	for _, want := range []string{"is unusable on this node", "schema too costly", "&lt;b&gt;x&lt;/b&gt;"} {
		if !strings.Contains(body, want) {
			t.Errorf("the node page lacks %q", want)
		}
	}
	if strings.Contains(body, "<b>x") {
		t.Fatal("the node's schema is not escaped")
	}
}

// An operator drains a node from its page with a reason, then undrains it:
// the store, the events and the page follow; bad input changes nothing.
func TestDrainAndUndrainFromTheNodePage(t *testing.T) {
	t.Parallel()
	e := setup(t)
	page := "/ui/clusters/prod/nodes/db-1"
	op := e.browser().signIn("op")
	_, _, body := op.get(page)
	if !strings.Contains(body, `action="`+page+`/drain"`) || strings.Contains(body, `action="`+page+`/undrain"`) {
		t.Fatal("an operator on an undrained node does not see Drain (and only Drain)")
	}
	// Without the CSRF token, or with a reason holding control characters,
	// nothing changes.
	if status, _, _ := op.post(page+"/drain", url.Values{"reason": {"x"}}); status != http.StatusForbidden {
		t.Fatalf("drain without CSRF: %d, want 403", status)
	}
	if status, _, _ := op.post(page+"/drain", url.Values{"csrf": {op.csrf}, "reason": {"bad\x1b[31m"}}); status != http.StatusBadRequest {
		t.Fatalf("drain with a control character: %d, want 400", status)
	}
	if status, _, _ := op.post("/ui/clusters/prod/nodes/nope/drain", url.Values{"csrf": {op.csrf}}); status != http.StatusNotFound {
		t.Fatalf("drain of an unknown node: %d, want 404", status)
	}
	if e.node("db-1").Drained {
		t.Fatal("a refused drain drained the node")
	}
	status, loc, _ := op.post(page+"/drain", url.Values{"csrf": {op.csrf}, "reason": {"kernel update"}})
	if status != http.StatusSeeOther || loc != page+"?done=drained" {
		t.Fatalf("drain: %d %q", status, loc)
	}
	if n := e.nudges.List(); len(n) == 0 || n[len(n)-1] != "node:prod/db-1" {
		t.Fatalf("syncs after a drain: %v, want the node's last", n)
	}
	if n := e.node("db-1"); !n.Drained || n.DrainedBy != "op" || n.DrainReason != "kernel update" {
		t.Fatalf("after drain: %+v", n)
	}
	_, _, body = op.get(loc)
	for _, want := range []string{"Drained node db-1", "Drained by op: kernel update", `action="` + page + `/undrain"`} {
		if !strings.Contains(body, want) {
			t.Errorf("after drain the page lacks %q", want)
		}
	}
	var evs []store.Event
	if err := e.st.Read(context.Background(), func(rd store.Reader) error {
		var err error
		evs, err = rd.Events(context.Background(), 0, 1000)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, ev := range evs {
		if ev.Type == store.EventNodeDrained && ev.Actor == "op" && strings.Contains(ev.Message, "kernel update") {
			found = true
		}
	}
	if !found {
		t.Fatal("no node.drained event by op with the reason")
	}
	status, loc, _ = op.post(page+"/undrain", url.Values{"csrf": {op.csrf}})
	if status != http.StatusSeeOther || loc != page+"?done=undrained" {
		t.Fatalf("undrain: %d %q", status, loc)
	}
	if n := e.node("db-1"); n.Drained || n.DrainedBy != "" {
		t.Fatalf("after undrain: %+v", n)
	}
	if n := e.nudges.List(); len(n) == 0 || n[len(n)-1] != "prod" {
		t.Fatalf("no nudge after undrain: %v", n)
	}
}

// The Dashboard shows what waits for the visitor (not their own requests),
// what runs now, what failed in the last 24 hours (not before), the nodes
// down or drained and the budget in use.
func TestDashboardShowsWhatNeedsAttention(t *testing.T) {
	t.Parallel()
	e := setup(t, withBudget)
	e.addNodes("db-2")
	waiting := e.create("op", `{"seconds":1}`)
	running := e.create("op", `{"seconds":2}`)
	e.edit(running.ID, func(r *store.Record) { r.State, r.ApprovedBy = action.Running, "appr" })
	failed := e.create("op", `{"seconds":3}`)
	e.edit(failed.ID, func(r *store.Record) {
		r.State, r.StateReason, r.UpdatedTS = action.Failed, "exit status 3 <oops>", action.UTC(time.Now())
	})
	old := e.create("op", `{"seconds":4}`)
	e.edit(old.ID, func(r *store.Record) {
		r.State, r.UpdatedTS = action.Failed, action.UTC(time.Now().Add(-25*time.Hour))
	})
	e.runChange(func(ctx context.Context, tx store.Tx) error {
		_, err := corenodes.Drain(ctx, tx, "prod", "db-2", "disk", actions.Actor{Name: "op"})
		return err
	})

	appr := e.browser().signIn("appr")
	status, _, body := appr.get("/ui/dashboard")
	if status != http.StatusOK {
		t.Fatalf("dashboard: %d\n%s", status, body)
	}
	section := func(body, id string) string {
		i := strings.Index(body, `id="`+id+`"`)
		if i < 0 {
			t.Fatalf("the dashboard has no section %s", id)
		}
		j := strings.Index(body[i:], "</section>")
		return body[i : i+j]
	}
	checks := []struct{ section, want string }{
		{"dash-waiting", `data-action="` + waiting.ID + `"`},
		{"dash-running", `data-action="` + running.ID + `"`},
		{"dash-failed", `data-action="` + failed.ID + `"`},
		{"dash-failed", "exit status 3 &lt;oops&gt;"},
		{"dash-nodes", `href="/ui/clusters/prod/nodes/db-2"`},
		{"dash-nodes", "drained by op: disk"},
		{"dash-budgets", "2 of 1</span> unavailable"}, // db-2 drained, db-1 running a disruptive action
	}
	for _, c := range checks {
		if !strings.Contains(section(body, c.section), c.want) {
			t.Errorf("section %s lacks %q", c.section, c.want)
		}
	}
	if strings.Contains(body, old.ID) {
		t.Error("an action that failed 25 hours ago is on the dashboard")
	}
	if strings.Contains(section(body, "dash-waiting"), running.ID) {
		t.Error("a running action waits for approval")
	}
	// "Running now" lists running runs only; a paused run waits for a
	// person in a section of its own.
	runningRun := seedRuns(t, e.st, 1, 2, store.RunRunning, time.Now().UTC())[0]
	pausedRun := seedRuns(t, e.st, 1, 2, store.RunPaused, time.Now().UTC())[0]
	_, _, body = appr.get("/ui/dashboard")
	if s := section(body, "dash-running"); !strings.Contains(s, runningRun) || strings.Contains(s, pausedRun) {
		t.Errorf("Running now lists the running run %v and the paused one %v, want only the running one",
			strings.Contains(s, runningRun), strings.Contains(s, pausedRun))
	}
	if !strings.Contains(section(body, "dash-paused"), pausedRun) {
		t.Error("the paused run is not listed as waiting for a person")
	}
	// The requester is not asked to approve their own action.
	op := e.browser().signIn("op")
	_, _, body = op.get("/ui/dashboard")
	if strings.Contains(section(body, "dash-waiting"), waiting.ID) {
		t.Error("the dashboard asks op to approve op's own action")
	}
	// The live part alone, as the page's script asks for it.
	_, _, live := appr.get("/ui/dashboard?part=live")
	if strings.Contains(live, "<html") || !strings.Contains(live, running.ID) {
		t.Fatal("the live part is the whole page, or lacks the running action")
	}
}

// Issue 34, defect 4: a run's node that failed several attempts is one row
// of the Dashboard's failed list (its last attempt, with its reason),
// linked to its run; attempts are never rows of their own.
func TestDashboardShowsOneRowPerFailedRunNode(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.addNodes("db-2")
	run := "0b7e9a52-2c1f-4d7e-9d0a-3f6c1a2b4c5d"
	var attempts []string
	for i := 1; i <= 3; i++ {
		a := e.create("op", fmt.Sprintf(`{"seconds":%d}`, i))
		e.edit(a.ID, func(r *store.Record) {
			r.State, r.StateReason = action.Failed, fmt.Sprintf("exit status %d", i)
			r.RunID, r.Stage, r.Step, r.Attempt = run, "main", "upgrade", i
			r.UpdatedTS = action.UTC(time.Now().Add(time.Duration(i) * time.Second))
		})
		attempts = append(attempts, a.ID)
	}
	other := e.create("op", `{"seconds":9}`)
	e.edit(other.ID, func(r *store.Record) {
		r.State, r.NodeID, r.UpdatedTS = action.Failed, "db-2", action.UTC(time.Now())
		r.RunID, r.Stage, r.Step, r.Attempt = run, "main", "upgrade", 1
	})
	_, _, body := e.browser().signIn("viewer").get("/ui/dashboard")
	i := strings.Index(body, `id="dash-failed"`)
	failed := body[i : i+strings.Index(body[i:], "</section>")]
	if n := strings.Count(failed, "<tr data-action="); n != 2 {
		t.Fatalf("%d rows for two failed nodes of one run, want 2:\n%s", n, failed)
	}
	if !strings.Contains(failed, `data-action="`+attempts[2]+`"`) || strings.Contains(failed, attempts[0]) ||
		strings.Contains(failed, attempts[1]) {
		t.Fatalf("the node's row is not its last attempt:\n%s", failed)
	}
	if !strings.Contains(failed, "exit status 3") || !strings.Contains(failed, `href="/ui/runs/`+run+`"`) {
		t.Fatalf("the row lacks its reason or its run's link:\n%s", failed)
	}
}

// Each list of the Dashboard reads a bounded number of rows, however many
// the store holds, and links to the full list.
func TestDashboardListsAreBounded(t *testing.T) {
	t.Parallel()
	e := setup(t)
	for range dashRunning + 5 {
		a := e.create("op", `{"seconds":1}`)
		e.edit(a.ID, func(r *store.Record) { r.State = action.Running })
	}
	b := e.browser().signIn("viewer")
	_, _, body := b.get("/ui/dashboard")
	if n := strings.Count(body, `<tr data-action=`); n != dashRunning {
		t.Fatalf("%d running actions shown, want %d", n, dashRunning)
	}
	if !strings.Contains(body, `href="/ui/actions?state=RUNNING"`) {
		t.Fatal("no link to all running actions")
	}
}

// The Clusters page shows the budget in use and the drained nodes.
func TestClustersPageShowsBudgetAndDrainedNodes(t *testing.T) {
	t.Parallel()
	e := setup(t, withBudget)
	e.addNodes("db-2")
	e.runChange(func(ctx context.Context, tx store.Tx) error {
		_, err := corenodes.Drain(ctx, tx, "prod", "db-2", "rack move", actions.Actor{Name: "op"})
		return err
	})
	_, _, body := e.browser().signIn("viewer").get("/ui/clusters")
	for _, want := range []string{`budget-use">1 of 1</strong>`, "max_unavailable 1",
		`Drained: <a class="node-link" href="/ui/clusters/prod/nodes/db-2">db-2</a> (by op: rack move)`} {
		if !strings.Contains(body, want) {
			t.Errorf("the Clusters page lacks %q", want)
		}
	}
}

// An operator is not shown Resume on a run paused by errors past its
// max_errors (resuming forgives them, which takes an approver), and is told
// why; an approver other than the requester is shown it.
func TestResumeIsShownOnlyToWhoMayForgiveErrors(t *testing.T) {
	t.Parallel()
	e := setup(t)
	r := e.createRun("op", wire.StageSpec{Name: "check", Kind: "muster.io/debug.ping",
		Target: wire.Target{Nodes: []string{"db-1"}}, OnFailure: "pause"})
	e.approveRun(r.ID, "appr")
	kids := e.children(r.ID)
	if len(kids) != 1 {
		t.Fatalf("%d children", len(kids))
	}
	e.edit(kids[0].ID, func(rec *store.Record) { rec.State, rec.StateReason = action.Failed, "exit status 1" })
	e.runChange(func(ctx context.Context, tx store.Tx) error {
		_, err := e.engine.AdvanceNodes(ctx, tx, r.ID)
		return err
	})
	if got := e.run(r.ID); got.State != store.RunPaused {
		t.Fatalf("run is %s (%s), want PAUSED on errors", got.State, got.StateReason)
	}
	page := "/ui/runs/" + r.ID
	op := e.browser().signIn("op")
	_, _, body := op.get(page)
	if strings.Contains(body, "/resume\"") || !strings.Contains(body, `id="run-op-why"`) {
		t.Fatal("the operator is shown Resume on a run paused by errors, or not told why")
	}
	if !strings.Contains(body, `id="run-why"`) {
		t.Fatal("the paused run does not say why it stopped")
	}
	admin := e.browser().signIn("admin")
	_, _, body = admin.get(page)
	if !strings.Contains(body, `action="/ui/runs/`+r.ID+`/resume"`) {
		t.Fatal("an admin (approver, not the requester) is not shown Resume")
	}
}

// Ids are shown by their first 8 characters, with the full id on hover and
// in a copy button, on the lists and on the pages of an action and a run.
func TestIdsAreShortWithTheFullIdToCopy(t *testing.T) {
	t.Parallel()
	e := setup(t)
	a := e.create("op", `{"seconds":1}`)
	r := e.createRun("op")
	b := e.browser().signIn("viewer")
	for page, id := range map[string]string{"/ui/actions/" + a.ID: a.ID, "/ui/runs/" + r.ID: r.ID,
		"/ui/actions": a.ID, "/ui/runs": r.ID, "/ui/approvals": a.ID} {
		_, _, body := b.get(page)
		if !strings.Contains(body, `<code>`+id[:8]+`</code>`) && !strings.Contains(body, `<code title="`+id+`">`+id[:8]+`</code>`) {
			t.Errorf("%s does not show %s by its first 8 characters", page, id)
		}
		if !strings.Contains(body, `data-copy="`+id+`"`) {
			t.Errorf("%s has no copy button for %s", page, id)
		}
		if strings.Contains(body, `<code>`+id+`</code>`) {
			t.Errorf("%s shows the full id %s", page, id)
		}
	}
}

// The Clusters page shows a cluster's windows and freezes, whether it is
// open, frozen until when and why (escaped), and how many actions wait.
func TestClustersPageShowsTheCalendar(t *testing.T) {
	t.Parallel()
	now := time.Now()
	w, err := schedule.NewWindow("0 2 * * *", 4*time.Hour, "Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	cal := &schedule.Calendar{Windows: []schedule.Window{w},
		Freezes: []schedule.Freeze{{From: now.Add(-time.Hour), To: now.Add(time.Hour), Reason: "<b>year-end</b>"}}}
	e := setup(t, func(c *Config) { c.Calendars = live.New(schedule.Calendars{"prod": cal}) })
	a := e.create("op", `{"seconds":1}`)
	e.edit(a.ID, func(r *store.Record) {
		r.State, r.StateReason = action.PendingSchedule, "frozen until 2026-12-27T00:00:00Z: <b>year-end</b>"
	})
	status, _, body := e.browser().signIn("viewer").get("/ui/clusters")
	if status != http.StatusOK {
		t.Fatalf("clusters: %d\n%s", status, body)
	}
	for _, want := range []string{`class="calendar-frozen">frozen until <time`, ": &lt;b&gt;year-end&lt;/b&gt;",
		"window <code>0 2 * * *</code> for 4h0m0s (Europe/Berlin)", "1 action waiting"} {
		if !strings.Contains(body, want) {
			t.Errorf("the clusters page lacks %q", want)
		}
	}
	if strings.Contains(body, "<b>year-end") {
		t.Fatal("a freeze's reason is not escaped")
	}
}

// The action page shows a not_before and an urgent mark (escaped), and
// the approval window counted from the not_before.
func TestActionPageShowsNotBeforeAndUrgent(t *testing.T) {
	t.Parallel()
	e := setup(t)
	a := e.create("op", `{"seconds":1}`)
	nb := action.UTC(time.Now().Add(48 * time.Hour))
	e.edit(a.ID, func(r *store.Record) { r.NotBefore, r.Urgent = &nb, "<b>INC-1</b>" })
	status, _, body := e.browser().signIn("appr").get("/ui/actions/" + a.ID)
	if status != http.StatusOK {
		t.Fatalf("action: %d\n%s", status, body)
	}
	ends := nb.Add(approval.DefaultPolicy().TTL)
	for _, want := range []string{"<dt>Not before</dt>", "&lt;b&gt;INC-1&lt;/b&gt;", ends.UTC().Format("2006-01-02T15:04:05")} {
		if !strings.Contains(body, want) {
			t.Errorf("the action page lacks %q", want)
		}
	}
}
