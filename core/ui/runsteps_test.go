package ui

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/musterhq/muster/core/ops"
	"github.com/musterhq/muster/core/runs"
	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/action"
	"github.com/musterhq/muster/shared/limit"
)

// storeRun stores run r and its children directly, as a run of the engine
// would have left them.
func (e *env) storeRun(r *store.Run, kids ...store.Record) {
	e.t.Helper()
	e.runChange(func(ctx context.Context, tx store.Tx) error {
		if err := tx.InsertRun(ctx, r); err != nil {
			return err
		}
		for i := range kids {
			if err := tx.InsertAction(ctx, &kids[i]); err != nil {
				return err
			}
		}
		return nil
	})
}

// procedureRun is a run of one stage of steps (drain → upgrade with 3
// attempts → undrain always; rollback downgrade) with canary 1 on nodes,
// asked by requester and approved by appr, in state and reason.
func procedureRun(requester, state, reason string, nodes ...string) *store.Run {
	now := time.Now().UTC().Add(-time.Minute)
	return &store.Run{ID: action.NewID(), ClusterID: "prod", State: state, StateReason: reason, Requester: requester,
		ApprovedBy: "appr", Digest: strings.Repeat("d", 64), CreatedTS: now, UpdatedTS: now,
		Stages: []store.RunStage{{Name: "upgrade", Target: store.Target{All: true}, Nodes: nodes,
			MaxConcurrency: limit.Limit{N: 1}, OnFailure: ops.RunOnFailurePause, DependsOn: []string{}, State: store.StageRunning,
			Canary: 1, Steps: []store.RunStep{
				{Name: "drain", Kind: "example.com/node.drain", Args: json.RawMessage(`{}`)},
				{Name: "upgrade", Kind: "example.com/pkg.upgrade", Args: json.RawMessage(`{"version":"{{ .params.version }}"}`),
					Retry: &store.Retry{Attempts: 3}},
				{Name: "undrain", Kind: "example.com/node.undrain", Args: json.RawMessage(`{}`), When: runs.WhenAlways}},
			Rollback: []store.RunStep{{Name: "downgrade", Kind: "example.com/pkg.upgrade",
				Args: json.RawMessage(`{"version":"{{ .steps.upgrade.outputs.previous }}"}`)}}}}}
}

// child is a child of run r on node, step and attempt, in state.
func child(r *store.Run, node, step string, attempt int, state action.State, args, outputs string) store.Record {
	now := time.Now().UTC()
	c := store.Record{Action: action.Action{ID: action.NewID(), ClusterID: "prod", NodeID: node, Kind: "example.com/" + step,
		Args: json.RawMessage(args), State: state, Origin: action.OriginCore, Requester: r.Requester, ApprovedBy: r.ApprovedBy,
		CreatedTS: now, UpdatedTS: now, RunID: r.ID, Stage: "upgrade", Step: step, Attempt: attempt, Wave: 1}}
	if outputs != "" {
		c.Outputs = json.RawMessage(outputs)
	}
	if state.Final() {
		c.FinishedTS = &now
	}
	if state == action.Failed {
		c.StateReason = "exit status 1"
	}
	return c
}

// TestRunPageShowsEachNodesStepsInOrder: per node, each step in order with
// its state and attempt (n of m), its rendered args and its outputs
// (escaped), the rollback that ran on the failed node only, the node's
// wave and its canary mark; the run says why it stopped and its stage
// shows PAUSED.
func TestRunPageShowsEachNodesStepsInOrder(t *testing.T) {
	t.Parallel()
	e := setup(t)
	r := procedureRun("op", store.RunPaused, fmt.Sprintf(runs.ReasonStageFailed, "upgrade", 1, "0"), "db-1", "db-2", "db-3")
	r.Stages[0].Failed = []string{"db-1"}
	e.storeRun(r,
		child(r, "db-1", "drain", 1, action.Done, `{}`, ""),
		child(r, "db-1", "upgrade", 1, action.Failed, `{"version":"2.0"}`, ""),
		child(r, "db-1", "upgrade", 2, action.Failed, `{"version":"2.0"}`, ""),
		child(r, "db-1", "upgrade", 3, action.Failed, `{"version":"2.0"}`, `{"previous":"1.9<script>x</script>\u001b[31m"}`),
		child(r, "db-1", "undrain", 1, action.Done, `{}`, ""),
		child(r, "db-1", "downgrade", 1, action.Done, `{"version":"1.9"}`, ""),
		child(r, "db-2", "drain", 1, action.Running, `{}`, ""))
	b := e.browser().signIn("viewer")
	status, _, body := b.get("/ui/runs/" + r.ID)
	if status != http.StatusOK {
		t.Fatalf("run page: %d\n%s", status, body)
	}
	// The steps of db-1, in order: drain, three attempts of upgrade,
	// undrain; then the rollback.
	steps := regexp.MustCompile(`(?s)<ol class="steps" data-stage="upgrade" data-node="db-1">(.*?)</ol>`).FindStringSubmatch(body)
	if steps == nil {
		t.Fatal("the page has no steps for db-1")
	}
	var order []string
	for _, m := range regexp.MustCompile(`data-step="([^"]+)" data-state="([^"]*)"`).FindAllStringSubmatch(steps[1], -1) {
		order = append(order, m[1]+":"+m[2])
	}
	if got, want := strings.Join(order, " "), "drain:DONE upgrade:FAILED upgrade:FAILED upgrade:FAILED undrain:DONE"; got != want {
		t.Fatalf("db-1's steps: %s, want %s", got, want)
	}
	for _, want := range []string{"attempt 1 of 3", "attempt 3 of 3", "&#34;version&#34;: &#34;2.0&#34;",
		`&lt;script&gt;x&lt;/script&gt;\u001b[31m`, `<p class="rollback-h">Rollback</p><ol class="steps rollback"><li class="step" data-step="downgrade" data-state="DONE">`} {
		if !strings.Contains(steps[0]+body[strings.Index(body, steps[0])+len(steps[0]):][:2000], want) {
			t.Errorf("db-1's cell lacks %q", want)
		}
	}
	if strings.Contains(body, "<script>x") || strings.Contains(body, "\x1b") {
		t.Fatal("the outputs are not escaped")
	}
	// db-2 is on its drain, its later steps waiting; db-3 has not started.
	db2 := regexp.MustCompile(`(?s)<ol class="steps" data-stage="upgrade" data-node="db-2">(.*?)</ol>`).FindStringSubmatch(body)
	if db2 == nil || !strings.Contains(db2[1], `data-step="drain" data-state="RUNNING"`) ||
		!strings.Contains(db2[1], `data-step="upgrade" data-state=""><span class="step-name">upgrade</span> <span class="state state-waiting">waiting`) {
		t.Errorf("db-2's steps: %v", db2)
	}
	// On the failed db-1 of another run, a step after the failure that
	// never ran says so, not "skipped".
	if !strings.Contains(steps[1], `data-step="undrain" data-state="DONE"`) {
		t.Error("db-1's undrain (when always) is not shown DONE")
	}
	if strings.Contains(body, `class="steps rollback"><li class="step" data-step="downgrade" data-state=""`) {
		t.Error("the page shows a rollback on a node where none ran")
	}
	// The canary is db-1, the stage's first node, alone; db-1 is FAILED.
	if n := strings.Count(body, `<span class="tag canary">canary</span>`); n != 1 ||
		!regexp.MustCompile(`data-node="db-1" data-state="DONE">.*?</span> <span class="tag canary">canary</span> <span class="node-ended state state-failed">node FAILED`).MatchString(body) {
		t.Errorf("the canary tags: %d, want one on db-1 with the node FAILED", n)
	}
	// Why it stopped, the stage PAUSED, the failed node named.
	for _, want := range []string{`class="why-stopped is-paused" id="run-why"`, "This run is paused: stage upgrade: 1 errors",
		`id="run-failed-nodes">Failed: upgrade/db-1`, `<tr data-stage="upgrade">`, `class="state state-paused">PAUSED`,
		"canary 1", "up to 3 attempts", "when always", "On a failed node, rollback:"} {
		if !strings.Contains(body, want) {
			t.Errorf("the run page lacks %q\n%s", want, body[strings.Index(body, "run-state"):][:1500])
		}
	}
}

// TestRunPageReadsOnePageOfNodes: a run's page shows its nodes 50 at a
// time with a link to the next ones (its live part too), reads only the
// children of those nodes, and refuses a marker that names none of its
// nodes.
func TestRunPageReadsOnePageOfNodes(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ids := seedRuns(t, e.st, 1, 120, store.RunRunning, time.Now().UTC().Add(-time.Minute))
	b := e.browser().signIn("viewer")
	rows := regexp.MustCompile(`<tr data-node="([^"]+)">`)
	next := regexp.MustCompile(`href="([^"]+)" id="nodes-next"`)
	var seen []string
	path := "/ui/runs/" + ids[0]
	for page := 0; path != ""; page++ {
		status, _, body := b.get(path)
		if status != http.StatusOK {
			t.Fatalf("%s: %d", path, status)
		}
		var nodes []string
		for _, m := range rows.FindAllStringSubmatch(body, -1) {
			nodes = append(nodes, m[1])
		}
		if want := min(120-page*nodesPerPage, nodesPerPage); len(nodes) != want {
			t.Fatalf("page %d shows %d nodes, want %d", page, len(nodes), want)
		}
		// Every node of the page with its child; none of another page.
		if n := strings.Count(body, `<span class="cell" data-stage="main"`); n != len(nodes) {
			t.Fatalf("page %d has %d cells, want %d", page, n, len(nodes))
		}
		if want := fmt.Sprintf("Nodes %d–%d of 120", page*nodesPerPage+1, page*nodesPerPage+len(nodes)); !strings.Contains(body, want) {
			t.Errorf("page %d lacks %q", page, want)
		}
		seen = append(seen, nodes...)
		m := next.FindStringSubmatch(body)
		path = ""
		if m != nil {
			path = strings.ReplaceAll(m[1], "&amp;", "&")
			_, _, live := b.get(path + "&part=live")
			if strings.Contains(live, "<html") || !strings.Contains(live, `<tr data-node="`+fmt.Sprintf("node-%05d.prod.example.com", (page+1)*nodesPerPage)) {
				t.Fatalf("the live part of %s is not that page's nodes", path)
			}
		}
	}
	if len(seen) != 120 || seen[0] != "node-00000.prod.example.com" || seen[119] != "node-00119.prod.example.com" {
		t.Fatalf("the pages showed %d nodes, %s to %s", len(seen), seen[0], seen[len(seen)-1])
	}
	// The counts are the whole run's: 90 DONE and 30 FAILED of 120.
	_, _, body := b.get("/ui/runs/" + ids[0])
	if !strings.Contains(body, "120 of 120 finished") {
		t.Error("the stage's progress is not the whole run's")
	}
	for _, bad := range []string{"?marker=nope", "?marker=" + url.QueryEscape("node-99999.prod.example.com")} {
		if status, _, _ := b.get("/ui/runs/" + ids[0] + bad); status != http.StatusBadRequest {
			t.Errorf("%s: %d, want 400", bad, status)
		}
	}
}

// TestApprovalsShowWhatResumeAndPromoteContinue: a run paused by its errors
// and a canary waiting for promote are listed on Approvals with what
// approving continues; a manual pause is not. Each visitor sees the
// Resume or Promote button only when the engine lets them, and every
// button shown works (never a Forbidden); the others read why.
func TestApprovalsShowWhatResumeAndPromoteContinue(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.addNodes("db-2", "db-3", "db-4")
	canary := procedureRun("op", store.RunPaused, fmt.Sprintf(runs.ReasonCanary, "upgrade", 1, 0), "db-1", "db-2", "db-3")
	e.storeRun(canary,
		child(canary, "db-1", "drain", 1, action.Done, `{}`, ""),
		child(canary, "db-1", "upgrade", 1, action.Done, `{"version":"2.0"}`, `{"previous":"1.9"}`),
		child(canary, "db-1", "undrain", 1, action.Done, `{}`, ""))
	errs := procedureRun("op", store.RunPaused, fmt.Sprintf(runs.ReasonStageFailed, "upgrade", 1, "0"), "db-1", "db-2", "db-3", "db-4")
	errs.Stages[0].Canary, errs.Stages[0].Failed = 0, []string{"db-1"}
	e.storeRun(errs,
		child(errs, "db-1", "drain", 1, action.Done, `{}`, ""),
		child(errs, "db-1", "upgrade", 1, action.Failed, `{}`, ""),
		child(errs, "db-1", "upgrade", 2, action.Failed, `{}`, ""),
		child(errs, "db-1", "upgrade", 3, action.Failed, `{}`, ""),
		child(errs, "db-1", "undrain", 1, action.Done, `{}`, ""),
		child(errs, "db-1", "downgrade", 1, action.Done, `{}`, ""))
	manual := procedureRun("op", store.RunPaused, runs.ReasonPaused+" by op", "db-1")
	e.storeRun(manual)

	card := func(body, id string) string {
		return regexp.MustCompile(`(?s)<li class="card approval run paused[^"]*" data-paused-run="` + id + `">.*?\n</li>`).FindString(body)
	}
	appr := e.browser().signIn("appr")
	_, _, body := appr.get("/ui/approvals")
	if strings.Contains(body, `data-paused-run="`+manual.ID+`"`) {
		t.Error("Approvals lists a run paused by hand")
	}
	c := card(body, canary.ID)
	for _, want := range []string{"canary waits for promote", "Promoting lets stage upgrade go on past its canary: 2 of its 3 nodes remain.",
		"The canary: 1 node done, 0 failed.", `action="/ui/runs/` + canary.ID + `/promote"`} {
		if !strings.Contains(c, want) {
			t.Errorf("the canary's card lacks %q:\n%s", want, c)
		}
	}
	c = card(body, errs.ID)
	for _, want := range []string{"paused by its errors", "Resuming forgives the 1 error of stage upgrade (max_errors 0) and goes on: 3 of its 4 nodes remain.",
		`action="/ui/runs/` + errs.ID + `/resume"`} {
		if !strings.Contains(c, want) {
			t.Errorf("the paused run's card lacks %q:\n%s", want, c)
		}
	}
	// The requester (an operator) and a viewer get no Promote or Resume
	// button, and why; the requester may abort her own run.
	for who, want := range map[string][2]string{
		"op":     {"You may not promote this run: your roles (operator) do not include approving.", "takes an approver other than op"},
		"viewer": {"You may not promote this run: your roles (viewer) do not include approving.", "You may not resume this run: your roles (viewer) do not include resuming runs."},
	} {
		b := e.browser().signIn(who)
		_, _, body := b.get("/ui/approvals")
		for i, id := range []string{canary.ID, errs.ID} {
			c := card(body, id)
			if c == "" || strings.Contains(c, `/promote"`) || strings.Contains(c, `/resume"`) || !strings.Contains(c, want[i]) {
				t.Errorf("%s's card of %s: want no button and %q:\n%s", who, id, want[i], c)
			}
			if abort := strings.Contains(c, `action="/ui/runs/`+id+`/abort"`); abort != (who == "op") {
				t.Errorf("%s's card of %s offers Abort: %t", who, id, abort)
			}
		}
	}
	// The canary's own page: Promote for the approver alone.
	if _, _, page := appr.get("/ui/runs/" + canary.ID); !strings.Contains(page, `id="run-promote"`) || strings.Contains(page, `id="run-resume"`) {
		t.Error("the approver's page of the canary lacks Promote, or offers Resume")
	}
	if _, _, page := e.browser().signIn("op").get("/ui/runs/" + canary.ID); strings.Contains(page, `id="run-promote"`) ||
		!strings.Contains(page, "You may not promote this run&#39;s canary") {
		t.Error("the requester's page of the canary offers Promote, or does not say why not")
	}
	// The Dashboard's "Waiting for you" lists both for the approver, none
	// for their requester, and never the run paused by hand.
	_, _, dash := appr.get("/ui/dashboard")
	dash = dash[:max(0, strings.Index(dash, `id="dash-running"`))]
	if !strings.Contains(dash, `data-run="`+canary.ID+`"`) || !strings.Contains(dash, `data-run="`+errs.ID+`"`) {
		t.Error("the approver's Dashboard does not list the runs paused for an approver")
	}
	if _, _, dash := e.browser().signIn("op").get("/ui/dashboard"); strings.Contains(dash[:max(0, strings.Index(dash, `id="dash-running"`))], `data-run="`+errs.ID+`"`) {
		t.Error("the requester's Dashboard lists their own paused run as waiting for them")
	}
	// Every button shown works: the approver promotes and resumes from
	// Approvals and comes back to it.
	for _, id := range []string{canary.ID, errs.ID} {
		m := regexp.MustCompile(`action="(/ui/runs/` + id + `/(?:promote|resume))"`).FindStringSubmatch(card(body, id))
		status, loc, _ := appr.post(m[1], url.Values{"csrf": {appr.csrf}, "next": {"/ui/approvals"}, "reason": {"looked at it"}})
		if status != http.StatusSeeOther || !strings.HasPrefix(loc, "/ui/approvals?") {
			t.Fatalf("%s: %d to %q, want 303 back to Approvals", m[1], status, loc)
		}
		if r := e.run(id); r.State != store.RunRunning {
			t.Errorf("run %s after %s: %s (%s), want RUNNING", id, m[1], r.State, r.StateReason)
		}
	}
	if r := e.run(canary.ID); !r.Stages[0].Promoted {
		t.Error("the canary was not promoted")
	}
}

// TestRunPageSaysWhichStepsOfAFailedNodeDidNotRun: on a node whose upgrade
// failed, verify (after it, no child) is "not run" though undrain (when
// always) ran after it; a step before the failure without a child (its
// when was false) is "skipped".
func TestRunPageSaysWhichStepsOfAFailedNodeDidNotRun(t *testing.T) {
	t.Parallel()
	e := setup(t)
	r := procedureRun("op", store.RunPaused, fmt.Sprintf(runs.ReasonStageFailed, "upgrade", 1, "0"), "db-1")
	st := &r.Stages[0]
	st.Steps = append([]store.RunStep{{Name: "backup", Kind: "example.com/backup", Args: json.RawMessage(`{}`), When: "{{ false }}"}}, st.Steps...)
	st.Steps = append(st.Steps[:3], append([]store.RunStep{{Name: "verify", Kind: "example.com/verify", Args: json.RawMessage(`{}`)}}, st.Steps[3:]...)...)
	e.storeRun(r,
		child(r, "db-1", "drain", 1, action.Done, `{}`, ""),
		child(r, "db-1", "upgrade", 1, action.Failed, `{}`, ""),
		child(r, "db-1", "upgrade", 2, action.Failed, `{}`, ""),
		child(r, "db-1", "upgrade", 3, action.Failed, `{}`, ""),
		child(r, "db-1", "undrain", 1, action.Done, `{}`, ""))
	_, _, body := e.browser().signIn("viewer").get("/ui/runs/" + r.ID)
	for step, want := range map[string]string{"backup": "skipped", "verify": "not run"} {
		if !strings.Contains(body, `data-step="`+step+`" data-state=""><span class="step-name">`+step+`</span> <span class="state state-waiting">`+want+`</span>`) {
			t.Errorf("%s is not shown %q", step, want)
		}
	}
}

// TestRunPageSaysWhyANodeWasSkipped: a node that failed stage a and was
// skipped by stage b is listed skipped with the stage it failed.
func TestRunPageSaysWhyANodeWasSkipped(t *testing.T) {
	t.Parallel()
	e := setup(t)
	r := procedureRun("op", store.RunPartial, "every stage is done", "db-1", "db-2")
	b2 := r.Stages[0]
	b2.Name, b2.Canary, b2.State, b2.Skipped = "later", 0, store.StageDone, []string{"db-1"}
	r.Stages[0].State, r.Stages[0].Failed, r.Stages[0].Canary = store.StageDone, []string{"db-1"}, 0
	r.Stages = append(r.Stages, b2)
	e.storeRun(r)
	status, _, body := e.browser().signIn("viewer").get("/ui/runs/" + r.ID)
	if status != http.StatusOK || !strings.Contains(body, `id="run-skipped-nodes">Skipped: later/db-1 (failed stage upgrade)`) {
		t.Fatalf("run page: %d, want later/db-1 skipped for failing stage upgrade\n%s", status, body)
	}
}

// TestAbortFromTheUIRollsBackThePausedCanary: an approver sees Abort on
// the paused canary's card in Approvals and on its page; aborting it
// rolls the canary node back (downgrade to the version its upgrade
// reported), and the requester's operator colleague is offered nothing.
func TestAbortFromTheUIRollsBackThePausedCanary(t *testing.T) {
	t.Parallel()
	e := setup(t)
	r := procedureRun("someone", store.RunPaused, fmt.Sprintf(runs.ReasonCanary, "upgrade", 1, 0), "db-1", "db-2")
	e.storeRun(r,
		child(r, "db-1", "drain", 1, action.Done, `{}`, ""),
		child(r, "db-1", "upgrade", 1, action.Done, `{"version":"2.0"}`, `{"previous":"1.9"}`),
		child(r, "db-1", "undrain", 1, action.Done, `{}`, ""))
	op := e.browser().signIn("op")
	if _, _, body := op.get("/ui/runs/" + r.ID); strings.Contains(body, `action="/ui/runs/`+r.ID+`/abort"`) {
		t.Fatal("an operator who is not the requester is offered Abort")
	}
	appr := e.browser().signIn("appr")
	_, _, approvals := appr.get("/ui/approvals")
	if !strings.Contains(approvals, `data-abort-run="`+r.ID+`"`) {
		t.Fatal("the paused canary's card in Approvals has no Abort button")
	}
	_, _, page := appr.get("/ui/runs/" + r.ID)
	if !strings.Contains(page, `action="/ui/runs/`+r.ID+`/abort"`) {
		t.Fatal("the run page offers the approver no Abort")
	}
	// Without the confirmation, nothing happens.
	if status, _, _ := appr.post("/ui/runs/"+r.ID+"/abort", url.Values{"csrf": {appr.csrf}}); status != http.StatusBadRequest {
		t.Fatalf("abort without confirm: %d, want 400", status)
	}
	status, loc, _ := appr.post("/ui/runs/"+r.ID+"/abort", url.Values{"csrf": {appr.csrf}, "confirm": {"yes"},
		"reason": {"p99 doubled"}, "next": {"/ui/approvals"}})
	if status != http.StatusSeeOther || !strings.Contains(loc, "done=aborted") {
		t.Fatalf("abort: %d to %s", status, loc)
	}
	var down *store.Record
	for _, k := range e.children(r.ID) {
		if k.Step == "downgrade" {
			down = &k
		}
		if k.NodeID == "db-2" {
			t.Fatalf("the abort started %s on db-2", k.Step)
		}
	}
	if down == nil || down.NodeID != "db-1" || string(down.Args) != `{"version":"1.9"}` {
		t.Fatalf("rollback %+v, want db-1's downgrade to 1.9", down)
	}
	got := e.run(r.ID)
	if got.State != store.RunRunning || !strings.HasPrefix(got.StateReason, "aborted by appr: p99 doubled") {
		t.Fatalf("run %s (%s), want RUNNING while db-1 rolls back", got.State, got.StateReason)
	}
	if _, _, page := appr.get("/ui/runs/" + r.ID); !strings.Contains(page, "This run was aborted and rolls back the nodes it started") {
		t.Fatal("the run page does not say the run rolls back")
	}
}

// TestRunPageAndApprovalsSayWhyANodeFailed: the run page and the paused
// run's card in Approvals show a failed node's reason and the last lines
// of its output, escaped, with a link to the child that failed it.
func TestRunPageAndApprovalsSayWhyANodeFailed(t *testing.T) {
	t.Parallel()
	e := setup(t)
	r := procedureRun("op", store.RunPaused, fmt.Sprintf(runs.ReasonStageFailed, "upgrade", 1, "0"), "db-1", "db-2")
	up := child(r, "db-1", "upgrade", 3, action.Failed, `{}`, "")
	r.Stages[0].Failed = []string{"db-1"}
	r.Stages[0].Why = map[string]store.NodeFailure{"db-1": {Reason: "step upgrade FAILED (attempt 3 of 3): run exited with status 3",
		ActionID: up.ID, Output: "unpacking\nE: disk <full> on /var\x1b]0;x"}}
	e.storeRun(r, up)
	b := e.browser().signIn("appr")
	_, _, page := b.get("/ui/runs/" + r.ID)
	_, _, approvals := b.get("/ui/approvals")
	for name, body := range map[string]string{"run page": page, "approvals": approvals} {
		for _, want := range []string{`<li data-failed-node="db-1"><strong>upgrade/db-1</strong>: step upgrade FAILED (attempt 3 of 3): run exited with status 3`,
			`<a href="/ui/actions/` + up.ID + `">action</a>`, "<pre class=\"output\">unpacking\nE: disk &lt;full&gt; on /var\\x1b]0;x</pre>"} {
			if !strings.Contains(body, want) {
				t.Errorf("the %s lacks %q", name, want)
			}
		}
		if strings.Contains(body, "\x1b") || strings.Contains(body, "<full>") {
			t.Errorf("the %s does not escape the output", name)
		}
	}
}
