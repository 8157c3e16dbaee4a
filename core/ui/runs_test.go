package ui

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/musterhq/muster/core/actions"
	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/action"
	"github.com/musterhq/muster/shared/limit"
	"github.com/musterhq/muster/shared/wire"
)

// addNodes adds nodes to cluster prod.
func (e *env) addNodes(ids ...string) {
	e.t.Helper()
	ctx := context.Background()
	now := time.Now().UTC()
	if err := e.st.Update(ctx, func(tx store.Tx) error {
		for _, id := range ids {
			if err := tx.PutNode(ctx, &store.Node{ClusterID: "prod", ID: id, Addr: "127.0.0.1:1", Source: store.SourceStatic,
				Status: store.NodeUp, UpdatedTS: now, LastContact: &now}); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		e.t.Fatal(err)
	}
}

// createRun stores a run on prod asked by requester, through the engine the
// UI uses: one stage per spec (default: a sleep on db-1).
func (e *env) createRun(requester string, stages ...wire.StageSpec) *store.Run {
	e.t.Helper()
	if len(stages) == 0 {
		stages = []wire.StageSpec{{Name: "sleep", Kind: "muster.io/debug.sleep", Args: json.RawMessage(`{"seconds":1}`),
			Target: wire.Target{Nodes: []string{"db-1"}}}}
	}
	var r *store.Run
	e.runChange(func(ctx context.Context, tx store.Tx) (err error) {
		r, err = e.engine.Create(ctx, tx, &wire.CreateRunRequest{ClusterID: "prod", Stages: stages},
			actions.Actor{Name: requester})
		return err
	})
	return r
}

// runChange runs fn in one transaction and fails the test on an error.
func (e *env) runChange(fn func(ctx context.Context, tx store.Tx) error) {
	e.t.Helper()
	ctx := context.Background()
	if err := e.st.Update(ctx, func(tx store.Tx) error { return fn(ctx, tx) }); err != nil {
		e.t.Fatal(err)
	}
}

// approveRun approves run id as who through the engine.
func (e *env) approveRun(id, who string) {
	e.t.Helper()
	e.runChange(func(ctx context.Context, tx store.Tx) error {
		_, err := e.engine.Approve(ctx, tx, id, "", actions.Actor{Name: who})
		return err
	})
}

// pauseRun pauses run id as an operator through the engine.
func (e *env) pauseRun(id string) {
	e.t.Helper()
	e.runChange(func(ctx context.Context, tx store.Tx) error {
		_, err := e.engine.Pause(ctx, tx, id, actions.Actor{Name: "op"})
		return err
	})
}

// run reads a run.
func (e *env) run(id string) *store.Run {
	e.t.Helper()
	var r *store.Run
	if err := e.st.Read(context.Background(), func(rd store.Reader) error {
		var err error
		r, err = rd.Run(context.Background(), id)
		return err
	}); err != nil {
		e.t.Fatal(err)
	}
	return r
}

// rowOf returns the list row of run id.
func rowOf(t *testing.T, body, id string) string {
	t.Helper()
	m := regexp.MustCompile(`(?s)<tr data-run="` + id + `">.*?</tr>`).FindString(body)
	if m == "" {
		t.Fatalf("the list has no row for run %s:\n%s", id, body)
	}
	return m
}

func TestRunsListShowsRunsNewestFirstWithProgressAndFilters(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.addNodes("db-2")
	older := e.createRun("op", wire.StageSpec{Name: "restart", Kind: "muster.io/debug.sleep",
		Args: json.RawMessage(`{"seconds":1}`), Target: wire.Target{Nodes: []string{"db-1", "db-2"}}})
	e.approveRun(older.ID, "appr")
	newer := e.createRun("admin")
	b := e.browser().signIn("viewer")
	status, _, body := b.get("/ui/runs")
	if status != http.StatusOK {
		t.Fatalf("runs: %d\n%s", status, body)
	}
	if i, j := strings.Index(body, `data-run="`+newer.ID), strings.Index(body, `data-run="`+older.ID); i < 0 || j < 0 || i > j {
		t.Fatalf("runs not newest first (newer at %d, older at %d)", i, j)
	}
	row := rowOf(t, body, older.ID)
	for _, want := range []string{"prod", "RUNNING", ">op<", ">appr<", "restart", "in flight 1", "waiting 1",
		`max="2" value="0"`, `href="/ui/runs/` + older.ID} {
		if !strings.Contains(row, want) {
			t.Errorf("the running run's row lacks %q:\n%s", want, row)
		}
	}
	if row := rowOf(t, body, newer.ID); !strings.Contains(row, "PENDING APPROVE") || !strings.Contains(row, ">admin<") {
		t.Errorf("the waiting run's row:\n%s", row)
	}
	_, _, body = b.get("/ui/runs?state=RUNNING")
	if !strings.Contains(body, older.ID) || strings.Contains(body, `data-run="`+newer.ID) {
		t.Fatal("the state filter does not keep only RUNNING runs")
	}
	if !strings.Contains(body, `<option value="RUNNING" selected>`) {
		t.Fatal("the state filter is not shown as chosen")
	}
	_, _, body = b.get("/ui/runs?cluster=elsewhere")
	if strings.Contains(body, `data-run=`) || !strings.Contains(body, "No run matches") {
		t.Fatal("the cluster filter keeps runs of another cluster")
	}
	for _, bad := range []string{"/ui/runs?state=BOGUS", "/ui/runs?marker=nope", "/ui/runs?marker=" + action.NewID()} {
		if status, _, _ := b.get(bad); status != http.StatusBadRequest {
			t.Errorf("%s: %d, want 400", bad, status)
		}
	}
	// The live part is the list alone.
	_, _, live := b.get("/ui/runs?part=live")
	if strings.Contains(live, "<html") || !strings.Contains(live, older.ID) {
		t.Fatal("the live part of the list is not the list alone")
	}
}

func TestRunDetailShowsStagesWavesGridAndDigest(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.addNodes("db-2", "db-3")
	two := limit.MustParse("2")
	r := e.createRun("op",
		wire.StageSpec{Name: "drain", Kind: "muster.io/debug.sleep", Args: json.RawMessage(`{"seconds":1,"note":"<script>alert(1)</script>\u001b[31m"}`),
			Target: wire.Target{Nodes: []string{"db-1", "db-2", "db-3"}}, MaxConcurrency: &two},
		wire.StageSpec{Name: "check", Kind: "muster.io/debug.ping", Target: wire.Target{Labels: map[string]string{}, Nodes: []string{"db-1"}},
			OnFailure: "pause"})
	e.approveRun(r.ID, "appr")
	b := e.browser().signIn("viewer")
	status, _, body := b.get("/ui/runs/" + r.ID)
	if status != http.StatusOK {
		t.Fatalf("run: %d\n%s", status, body)
	}
	for _, want := range []string{
		r.Digest, "drain", "check", "muster.io/debug.ping", "max_concurrency 2", "max_errors 0", "on_failure pause",
		"on_failure abort", "db-3", "RUNNING", "appr",
		// Args are text: the script and the escape sequence are shown, not run.
		`&lt;script&gt;alert(1)&lt;/script&gt;\u001b[31m`,
		// Waves of two: db-1 and db-2 first, then db-3.
		"wave 1: db-1, db-2; wave 2: db-3",
	} {
		if !strings.Contains(strings.ReplaceAll(body, "<wbr>", ""), want) {
			t.Errorf("the run's page lacks %q", want)
		}
	}
	if strings.Contains(body, "<script>alert") || strings.Contains(body, "\x1b") {
		t.Fatal("the args are not escaped")
	}
	// The grid: a cell per stage and node; the first wave's children link
	// to their actions, the second wave's wait.
	kids := e.children(r.ID)
	if len(kids) != 2 {
		t.Fatalf("%d children after approval, want the first wave of 2", len(kids))
	}
	for _, k := range kids {
		cell := regexp.MustCompile(`(?s)<span class="cell" data-stage="drain" data-node="` + k.NodeID + `"[^>]*>.*?</span></a>`).FindString(body)
		if !strings.Contains(cell, `href="/ui/actions/`+k.ID+`"`) || !strings.Contains(cell, "w1") {
			t.Errorf("the grid cell of %s: %q", k.NodeID, cell)
		}
	}
	if !regexp.MustCompile(`data-stage="drain" data-node="db-3" data-state="">w2 <span class="state state-waiting">not started`).MatchString(body) {
		t.Error("the grid does not show db-3 waiting for wave 2")
	}
	if !regexp.MustCompile(`data-stage="check" data-node="db-1" data-state="">w1 `).MatchString(body) {
		t.Error("the grid does not show the check stage's cell on db-1")
	}
	// The run's events, from its page's link.
	if !strings.Contains(body, `href="/ui/events?run=`+r.ID+`"`) {
		t.Error("the run's page does not link its events")
	}
	other := e.createRun("op")
	_, _, evs := b.get("/ui/events?run=" + r.ID)
	if !strings.Contains(evs, "run.approved") || !strings.Contains(evs, `href="/ui/runs/`+r.ID+`"`) || strings.Contains(evs, other.ID) {
		t.Error("the Events page filtered on the run does not show its events alone")
	}
	for page, want := range map[string]int{"/ui/runs/not-an-id": http.StatusNotFound, "/ui/runs/" + action.NewID(): http.StatusNotFound} {
		if status, _, _ := b.get(page); status != want {
			t.Errorf("%s: %d, want %d", page, status, want)
		}
	}
}

// children lists the child actions of run id.
func (e *env) children(id string) []store.Record {
	e.t.Helper()
	var out []store.Record
	if err := e.st.Read(context.Background(), func(rd store.Reader) error {
		var err error
		out, err = rd.RunChildren(context.Background(), id)
		return err
	}); err != nil {
		e.t.Fatal(err)
	}
	return out
}

func TestRunButtonsFollowRolesAndTheEnginesAnswers(t *testing.T) {
	t.Parallel()
	e := setup(t)
	r := e.createRun("op")
	e.approveRun(r.ID, "appr")
	page := "/ui/runs/" + r.ID
	for _, who := range []string{"viewer", "appr"} {
		b := e.browser().signIn(who)
		_, _, body := b.get(page)
		if strings.Contains(body, "/pause\"") || strings.Contains(body, "/cancel\"") || strings.Contains(body, ">Pause<") {
			t.Fatalf("%s sees run buttons", who)
		}
		if !strings.Contains(body, "do not include pausing") {
			t.Fatalf("%s is not told why there are no buttons", who)
		}
		for _, c := range []string{"pause", "cancel"} {
			status, _, _ := b.post(page+"/"+c, url.Values{"csrf": {b.csrf}, "confirm": {"yes"}})
			if status != http.StatusForbidden {
				t.Fatalf("%s forging %s: %d, want 403", who, c, status)
			}
		}
	}
	if got := e.run(r.ID); got.State != store.RunRunning {
		t.Fatalf("forged posts changed the run to %s", got.State)
	}

	op := e.browser().signIn("op")
	_, _, body := op.get(page)
	if !strings.Contains(body, `action="/ui/runs/`+r.ID+`/pause"`) || strings.Contains(body, "/resume\"") {
		t.Fatal("the operator does not see Pause (and only Pause) on a running run")
	}
	// Without the CSRF token nothing happens.
	if status, _, _ := op.post(page+"/pause", url.Values{}); status != http.StatusForbidden {
		t.Fatalf("pause without the CSRF token: %d, want 403", status)
	}
	status, loc, _ := op.post(page+"/pause", url.Values{"csrf": {op.csrf}})
	if status != http.StatusSeeOther || !strings.HasPrefix(loc, page+"?") {
		t.Fatalf("pause: %d %q", status, loc)
	}
	if got := e.run(r.ID); got.State != store.RunPaused {
		t.Fatalf("after pause: %s", got.State)
	}
	if n := e.nudges.List(); len(n) == 0 || n[len(n)-1] != "prod" {
		t.Fatalf("nudges after a pause: %v", n)
	}
	_, _, body = op.get(loc)
	if !strings.Contains(body, "Paused run "+r.ID) || !strings.Contains(body, `action="/ui/runs/`+r.ID+`/resume"`) ||
		strings.Contains(body, "/pause\"") {
		t.Fatal("after pausing: no confirmation, or not Resume instead of Pause")
	}
	// The engine's refusals keep their status: pausing a paused run is a
	// conflict.
	status, _, body = op.post(page+"/pause", url.Values{"csrf": {op.csrf}})
	if status != http.StatusConflict || !strings.Contains(body, "PAUSED") {
		t.Fatalf("pause a paused run: %d\n%s", status, body)
	}
	if status, _, _ := op.post(page+"/resume", url.Values{"csrf": {op.csrf}}); status != http.StatusSeeOther {
		t.Fatalf("resume: %d", status)
	}
	if got := e.run(r.ID); got.State != store.RunRunning || !strings.Contains(got.StateReason, "resumed by op") {
		t.Fatalf("after resume: %s (%s)", got.State, got.StateReason)
	}
	// Cancel needs the confirmation box.
	status, _, body = op.post(page+"/cancel", url.Values{"csrf": {op.csrf}, "reason": {"wrong window"}})
	if status != http.StatusBadRequest || !strings.Contains(body, "confirm") {
		t.Fatalf("cancel without confirming: %d", status)
	}
	if got := e.run(r.ID); got.State != store.RunRunning {
		t.Fatalf("an unconfirmed cancel changed the run to %s", got.State)
	}
	status, _, _ = op.post(page+"/cancel", url.Values{"csrf": {op.csrf}, "reason": {"wrong window"}, "confirm": {"yes"}})
	if status != http.StatusSeeOther {
		t.Fatalf("cancel: %d", status)
	}
	if got := e.run(r.ID); got.State != store.RunCancelled || got.StateReason != "cancelled by op: wrong window" {
		t.Fatalf("after cancel: %s (%s)", got.State, got.StateReason)
	}
	for _, k := range e.children(r.ID) {
		if !k.State.Final() && k.State != action.Running {
			t.Fatalf("child %s is %s after the run's cancel", k.ID, k.State)
		}
	}
	_, _, body = op.get(page)
	if strings.Contains(body, "/cancel\"") || strings.Contains(body, "/resume\"") {
		t.Fatal("a cancelled run still has buttons")
	}
	if status, _, _ := op.post(page+"/resume", url.Values{"csrf": {op.csrf}}); status != http.StatusConflict {
		t.Fatalf("resume a cancelled run: %d, want 409", status)
	}
	if status, _, _ := op.post("/ui/runs/"+action.NewID()+"/pause", url.Values{"csrf": {op.csrf}}); status != http.StatusNotFound {
		t.Fatalf("pause an unknown run: %d, want 404", status)
	}
}

func TestRunsWaitInApprovalsAndAreApprovedAsShown(t *testing.T) {
	t.Parallel()
	e := setup(t)
	r := e.createRun("op", wire.StageSpec{Name: "sleep", Kind: "muster.io/debug.sleep",
		Args: json.RawMessage(`{"seconds":1,"note":"<b>bold</b>"}`), Target: wire.Target{Nodes: []string{"db-1"}}})
	appr := e.browser().signIn("appr")
	_, _, body := appr.get("/ui/approvals")
	card := regexp.MustCompile(`(?s)<li class="card approval run" data-run="` + r.ID + `">.*?</li>`).FindString(body)
	for _, want := range []string{r.Digest, ">op<", "muster.io/debug.sleep", `&lt;b&gt;bold&lt;/b&gt;`, "db-1",
		"max_concurrency 1", "Expires", `action="/ui/runs/` + r.ID + `/approve"`, `name="digest" value="` + r.Digest + `"`} {
		if !strings.Contains(strings.ReplaceAll(card, "<wbr>", ""), want) {
			t.Errorf("the run's approval card lacks %q:\n%s", want, card)
		}
	}
	// The requester and a viewer see it without buttons.
	for who, why := range map[string]string{"op": "another approver must decide", "viewer": "do not include approving"} {
		b := e.browser().signIn(who)
		_, _, body := b.get("/ui/approvals")
		if !strings.Contains(body, `data-run="`+r.ID+`"`) || !strings.Contains(body, why) || strings.Contains(body, "/ui/runs/"+r.ID+"/approve") {
			t.Errorf("%s: the run is not shown without buttons and with %q", who, why)
		}
		_, _, body = b.get("/ui/runs/" + r.ID)
		if strings.Contains(body, "/ui/runs/"+r.ID+"/approve") || !strings.Contains(body, why) {
			t.Errorf("%s: the run's page has an approve button or no %q", who, why)
		}
		status, _, _ := b.post("/ui/runs/"+r.ID+"/approve", url.Values{"csrf": {b.csrf}, "digest": {r.Digest}})
		if status != http.StatusForbidden {
			t.Errorf("%s forging an approval: %d, want 403", who, status)
		}
	}
	// An approver who is also the requester is refused by the engine.
	own := e.createRun("admin")
	admin := e.browser().signIn("admin")
	status, _, body := admin.post("/ui/runs/"+own.ID+"/approve", url.Values{"csrf": {admin.csrf}, "digest": {own.Digest}})
	if status != http.StatusForbidden || !strings.Contains(body, "may not approve it too") {
		t.Fatalf("approving one's own run: %d\n%s", status, body)
	}
	// A digest other than the run's (the approver saw something else) is a
	// conflict; none at all is a bad form.
	status, _, body = appr.post("/ui/runs/"+r.ID+"/approve", url.Values{"csrf": {appr.csrf}, "digest": {strings.Repeat("0", 64)}})
	if status != http.StatusConflict || !strings.Contains(body, "look at the run again") {
		t.Fatalf("approve with another digest: %d\n%s", status, body)
	}
	if status, _, _ := appr.post("/ui/runs/"+r.ID+"/approve", url.Values{"csrf": {appr.csrf}}); status != http.StatusBadRequest {
		t.Fatalf("approve without a digest: %d, want 400", status)
	}
	if got := e.run(r.ID); got.State != store.RunPendingApprove {
		t.Fatalf("refused approvals changed the run to %s", got.State)
	}
	status, loc, _ := appr.post("/ui/runs/"+r.ID+"/approve", url.Values{"csrf": {appr.csrf}, "digest": {r.Digest},
		"next": {"/ui/approvals"}})
	if status != http.StatusSeeOther || !strings.HasPrefix(loc, "/ui/approvals?") {
		t.Fatalf("approve: %d %q", status, loc)
	}
	if got := e.run(r.ID); got.State != store.RunRunning || got.ApprovedBy != "appr" {
		t.Fatalf("after approve: %s by %q", got.State, got.ApprovedBy)
	}
	_, _, body = appr.get(loc)
	if !strings.Contains(body, "Approved run "+r.ID) || !strings.Contains(body, `href="/ui/runs/`+r.ID+`"`) ||
		strings.Contains(body, `data-run="`+r.ID+`"`) {
		t.Fatal("after approving: no confirmation linking the run, or the run still waits")
	}
	// Reject needs a reason, and keeps it.
	rej := e.createRun("op")
	if status, _, _ := appr.post("/ui/runs/"+rej.ID+"/reject", url.Values{"csrf": {appr.csrf}}); status != http.StatusBadRequest {
		t.Fatalf("reject without a reason: %d, want 400", status)
	}
	if status, _, _ := appr.post("/ui/runs/"+rej.ID+"/reject", url.Values{"csrf": {appr.csrf}, "reason": {"not tonight"}}); status != http.StatusSeeOther {
		t.Fatalf("reject: %d", status)
	}
	if got := e.run(rej.ID); got.State != store.RunCancelled || got.StateReason != "rejected: not tonight" {
		t.Fatalf("after reject: %s (%s)", got.State, got.StateReason)
	}
}

func TestStreamFiltersOnRuns(t *testing.T) {
	t.Parallel()
	e := setup(t)
	r := e.createRun("op")
	other := e.createRun("op")
	b := e.browser().signIn("viewer")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, e.ts.URL+"/ui/stream?run="+r.ID, nil)
	resp, err := b.c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("stream: %d", resp.StatusCode)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Scan() // ": stream open"
	e.approveRun(other.ID, "appr")
	e.approveRun(r.ID, "appr")
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "data: ") {
			if !strings.Contains(line, fmt.Sprintf(`"run_id":"%s"`, r.ID)) {
				t.Fatalf("the stream filtered on run %s sent %s", r.ID, line)
			}
			return
		}
	}
	t.Fatalf("no event on the stream: %v", sc.Err())
}

// Resuming from the web UI follows the API's rule (core/runs'
// Engine.MayResume): a run paused by its errors is an approver's to resume,
// a manual pause an operator's; each sees the Resume button only when they
// may, and a forged post changes nothing.
func TestRunResumeFollowsTheAPIsRule(t *testing.T) {
	t.Parallel()
	e := setup(t)
	resumable := func(b *browser, id string) bool {
		_, _, body := b.get("/ui/runs/" + id)
		return strings.Contains(body, `action="/ui/runs/`+id+`/resume"`)
	}
	op, appr := e.browser().signIn("op"), e.browser().signIn("appr")

	// Paused by its errors: the only node of an on_failure: pause stage failed.
	r := e.createRun("someone", wire.StageSpec{Name: "sleep", Kind: "muster.io/debug.sleep", Args: json.RawMessage(`{"seconds":1}`),
		Target: wire.Target{Nodes: []string{"db-1"}}, OnFailure: "pause"})
	e.approveRun(r.ID, "appr")
	kids := e.children(r.ID)
	if len(kids) != 1 {
		t.Fatalf("%d children, want 1", len(kids))
	}
	e.edit(kids[0].ID, func(rec *store.Record) { rec.State = action.Failed })
	e.runChange(func(ctx context.Context, tx store.Tx) error {
		_, err := e.engine.AdvanceNodes(ctx, tx, r.ID)
		return err
	})
	if got := e.run(r.ID); got.State != store.RunPaused {
		t.Fatalf("run %s (%s), want PAUSED by its errors", got.State, got.StateReason)
	}
	if resumable(op, r.ID) {
		t.Fatal("an operator is offered to resume a run paused by its errors")
	}
	if status, _, _ := op.post("/ui/runs/"+r.ID+"/resume", url.Values{"csrf": {op.csrf}}); status != http.StatusForbidden {
		t.Fatalf("an operator's resume of a run paused by its errors: %d, want 403", status)
	}
	if got := e.run(r.ID); got.State != store.RunPaused {
		t.Fatalf("a refused resume changed the run to %s", got.State)
	}
	if !resumable(appr, r.ID) {
		t.Fatal("the approver is not offered to resume a run paused by its errors")
	}
	// Forgiving takes a reason: without one, nothing changes.
	if status, _, _ := appr.post("/ui/runs/"+r.ID+"/resume", url.Values{"csrf": {appr.csrf}}); status != http.StatusUnprocessableEntity {
		t.Fatalf("the approver's resume without a reason: %d, want 422", status)
	}
	if status, _, body := appr.post("/ui/runs/"+r.ID+"/resume", url.Values{"csrf": {appr.csrf}, "reason": {"a known flake"}}); status != http.StatusSeeOther {
		t.Fatalf("the approver's resume: %d\n%s", status, body)
	}
	if got := e.run(r.ID); got.State == store.RunPaused || got.Stages[0].Forgiven != 1 ||
		got.Stages[0].ForgivenBy[0] != "forgiven by appr: a known flake" {
		t.Fatalf("after the approver's resume: %s (%s), forgiven %d", got.State, got.StateReason, got.Stages[0].Forgiven)
	}

	// Paused by hand: an operator's to resume, not an approver's.
	m := e.createRun("someone")
	e.approveRun(m.ID, "appr")
	e.pauseRun(m.ID)
	if resumable(appr, m.ID) {
		t.Fatal("an approver is offered to resume a manual pause")
	}
	if status, _, _ := appr.post("/ui/runs/"+m.ID+"/resume", url.Values{"csrf": {appr.csrf}}); status != http.StatusForbidden {
		t.Fatalf("an approver's resume of a manual pause: %d, want 403", status)
	}
	if !resumable(op, m.ID) {
		t.Fatal("the operator is not offered to resume a manual pause")
	}
	if status, _, _ := op.post("/ui/runs/"+m.ID+"/resume", url.Values{"csrf": {op.csrf}}); status != http.StatusSeeOther {
		t.Fatalf("the operator's resume: %d", status)
	}
	if got := e.run(m.ID); got.State != store.RunRunning {
		t.Fatalf("after the operator's resume: %s", got.State)
	}
}
