package api

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/action"
	"github.com/musterhq/muster/shared/wire"
)

func oneStageRun(kind string) wire.CreateRunRequest {
	return wire.CreateRunRequest{ClusterID: "prod", Stages: []wire.StageSpec{{
		Kind: kind, Target: wire.Target{Nodes: []string{"db-1"}},
	}}}
}

func (e *env) createRun(who string, req wire.CreateRunRequest) wire.Run {
	e.t.Helper()
	var r wire.Run
	e.call(http.MethodPost, "/api/v1/runs", who, req, http.StatusCreated, &r)
	return r
}

func (e *env) runChildren(id string) []store.Record {
	e.t.Helper()
	var out []store.Record
	ctx := context.Background()
	if err := e.st.Read(ctx, func(r store.Reader) error {
		var err error
		out, err = r.RunChildren(ctx, id)
		return err
	}); err != nil {
		e.t.Fatal(err)
	}
	return out
}

func TestRunNeedsOneApprovalFromAnotherPersonAndThenCreatesItsFirstWave(t *testing.T) {
	t.Parallel()
	e := setup(t)
	req := wire.CreateRunRequest{ClusterID: "prod", Stages: []wire.StageSpec{{
		Kind: kindPing, Target: wire.Target{All: true}, MaxConcurrency: nil,
	}}}
	run := e.createRun("self", req)
	if run.State != store.RunPendingApprove || run.Requester != "self" || run.Digest == "" {
		t.Fatalf("created run %+v, want PENDING_APPROVE by self with a digest", run)
	}
	if kids := e.runChildren(run.ID); len(kids) != 0 {
		t.Fatalf("%d children before approval, want none", len(kids))
	}
	e.call(http.MethodPost, "/api/v1/runs/"+run.ID+"/approve", "self", nil, http.StatusForbidden, nil)
	var got wire.Run
	e.call(http.MethodPost, "/api/v1/runs/"+run.ID[:8]+"/approve", "appr", nil, http.StatusOK, &got)
	if got.State != store.RunRunning || got.ApprovedBy != "appr" {
		t.Fatalf("approved run %+v, want RUNNING approved by appr", got)
	}
	kids := e.runChildren(run.ID)
	if len(kids) != 1 {
		t.Fatalf("%d children after approval with max_concurrency 1, want 1", len(kids))
	}
	k := kids[0]
	if k.NodeID != "db-1" || k.State != action.PendingSchedule || k.ApprovedBy != "appr" || k.Requester != "self" ||
		k.Stage != "main" || k.Wave != 1 || k.ApprovalDigest == "" {
		t.Fatalf("child %+v is not the approved first wave on db-1", k)
	}
	if e.nudges.Count("prod") == 0 {
		t.Fatal("approving a run did not nudge its cluster")
	}
	var shown wire.Run
	e.call(http.MethodGet, "/api/v1/runs/"+run.ID, "viewer", nil, http.StatusOK, &shown)
	if len(shown.Children) != 2 || shown.Children[0].ActionID != k.ID || shown.Children[1].State != "" {
		t.Fatalf("grid %+v: want db-1 with its child, db-2 still without one", shown.Children)
	}
	if c := shown.Stages[0].Counts; c["PENDING"] != 1 || c["PENDING_SCHEDULE"] != 1 {
		t.Fatalf("counts %v", c)
	}
	e.call(http.MethodPost, "/api/v1/runs/"+run.ID+"/approve", "appr", nil, http.StatusConflict, nil)
}

func TestRunPauseResumeCancel(t *testing.T) {
	t.Parallel()
	e := setup(t)
	run := e.createRun("op", oneStageRun(kindPing))
	var body wire.ErrorBody
	e.call(http.MethodPost, "/api/v1/runs/"+run.ID+"/pause", "op", nil, http.StatusConflict, &body)
	if body.Error.State != store.RunPendingApprove {
		t.Fatalf("pause of a run waiting for approval: %+v, want 409 naming its state", body.Error)
	}
	e.call(http.MethodPost, "/api/v1/runs/"+run.ID+"/resume", "op", nil, http.StatusConflict, nil)
	e.call(http.MethodPost, "/api/v1/runs/"+run.ID+"/approve", "appr", nil, http.StatusOK, nil)
	var got wire.Run
	e.call(http.MethodPost, "/api/v1/runs/"+run.ID+"/pause", "op", nil, http.StatusOK, &got)
	if got.State != store.RunPaused {
		t.Fatalf("paused run is %s", got.State)
	}
	e.call(http.MethodPost, "/api/v1/runs/"+run.ID+"/resume", "op", nil, http.StatusOK, &got)
	if got.State != store.RunRunning {
		t.Fatalf("resumed run is %s", got.State)
	}
	e.call(http.MethodPost, "/api/v1/runs/"+run.ID+"/cancel", "op", wire.ReasonRequest{Reason: "wrong window"}, http.StatusOK, &got)
	if got.State != store.RunCancelled || !strings.Contains(got.StateReason, "wrong window") {
		t.Fatalf("cancelled run: %s %q", got.State, got.StateReason)
	}
	kids := e.runChildren(run.ID)
	if len(kids) != 1 || kids[0].State != action.Cancelled {
		t.Fatalf("children after cancel: %+v, want the one never pushed CANCELLED", kids)
	}
	e.call(http.MethodPost, "/api/v1/runs/"+run.ID+"/resume", "op", nil, http.StatusConflict, nil)
}

// TestRunStageShowsPausedWhileItsRunIsPaused: a RUNNING stage of a PAUSED
// run is shown PAUSED by the run's answer, its page and the run list, and
// RUNNING again once the run is resumed.
func TestRunStageShowsPausedWhileItsRunIsPaused(t *testing.T) {
	t.Parallel()
	e := setup(t)
	run := e.createRun("op", oneStageRun(kindPing))
	e.call(http.MethodPost, "/api/v1/runs/"+run.ID+"/approve", "appr", nil, http.StatusOK, nil)
	stageStates := func() []string {
		var one wire.Run
		e.call(http.MethodGet, "/api/v1/runs/"+run.ID, "viewer", nil, http.StatusOK, &one)
		var list wire.RunList
		e.call(http.MethodGet, "/api/v1/runs", "viewer", nil, http.StatusOK, &list)
		if len(list.Runs) != 1 {
			t.Fatalf("the list has %d runs, want 1", len(list.Runs))
		}
		return []string{one.Stages[0].State, list.Runs[0].Stages[0].State}
	}
	if got := stageStates(); got[0] != store.StageRunning || got[1] != store.StageRunning {
		t.Fatalf("stage of a running run: %v, want RUNNING in both", got)
	}
	var paused wire.Run
	e.call(http.MethodPost, "/api/v1/runs/"+run.ID+"/pause", "op", nil, http.StatusOK, &paused)
	if paused.Stages[0].State != store.StagePaused || paused.PausedFor != wire.PausedManual {
		t.Fatalf("pause answers the stage %s, paused_for %q; want PAUSED, manual", paused.Stages[0].State, paused.PausedFor)
	}
	if got := stageStates(); got[0] != store.StagePaused || got[1] != store.StagePaused {
		t.Fatalf("stage of a paused run: %v, want PAUSED in both", got)
	}
	e.call(http.MethodPost, "/api/v1/runs/"+run.ID+"/resume", "op", nil, http.StatusOK, nil)
	if got := stageStates(); got[0] != store.StageRunning || got[1] != store.StageRunning {
		t.Fatalf("stage of a resumed run: %v, want RUNNING in both", got)
	}
}

func TestRunRejectCancelsIt(t *testing.T) {
	t.Parallel()
	e := setup(t)
	run := e.createRun("op", oneStageRun(kindPing))
	var got wire.Run
	e.call(http.MethodPost, "/api/v1/runs/"+run.ID+"/reject", "appr", wire.ReasonRequest{Reason: "not today"}, http.StatusOK, &got)
	if got.State != store.RunCancelled || got.StateReason != "rejected: not today" {
		t.Fatalf("rejected run: %s %q", got.State, got.StateReason)
	}
	if kids := e.runChildren(run.ID); len(kids) != 0 {
		t.Fatalf("a rejected run has %d children", len(kids))
	}
}

func TestRunBadInputIsRefusedAndStoresNothing(t *testing.T) {
	t.Parallel()
	e := setup(t)
	stage := func(mut func(s *wire.StageSpec)) wire.CreateRunRequest {
		r := oneStageRun(kindSleep)
		mut(&r.Stages[0])
		return r
	}
	cases := []struct {
		name   string
		body   any
		status int
		want   string
	}{
		{"empty target", stage(func(s *wire.StageSpec) { s.Target = wire.Target{} }), 400, "target: empty"},
		{"unknown node", stage(func(s *wire.StageSpec) { s.Target.Nodes = []string{"db-9"} }), 422, "unknown node(s) db-9"},
		{"unknown label", stage(func(s *wire.StageSpec) { s.Target = wire.Target{Labels: map[string]string{"role": "x"}} }), 422, "no node has the labels role=x"},
		{"kind a node lacks", stage(func(s *wire.StageSpec) { s.Kind, s.Target.Nodes = "example.com/db.backup", []string{"db-1", "db-2"} }), 422, "unknown to node(s) db-1"},
		{"a secret a node lacks", stage(func(s *wire.StageSpec) {
			s.Kind, s.Args = kindPing, json.RawMessage(`{"pw":"{{ secret \"db-password\" }}"}`)
		}), 422, "node db-1 has no secret db-password"},
		{"a secret's name not plain", stage(func(s *wire.StageSpec) {
			s.Kind, s.Args = kindPing, json.RawMessage(`{"pw":"{{ secret \"../x\" }}"}`)
		}), 400, "not a plain name"},
		{"percentage over 100", json.RawMessage(`{"cluster_id":"prod","stages":[{"kind":"muster.io/debug.ping","target":{"all":true},"max_concurrency":"150%"}]}`), 400, "over 100%"},
		{"negative errors", json.RawMessage(`{"cluster_id":"prod","stages":[{"kind":"muster.io/debug.ping","target":{"all":true},"max_errors":-1}]}`), 400, "negative"},
		{"unknown dependency", stage(func(s *wire.StageSpec) { s.DependsOn = []string{"nope"} }), 400, `no stage "nope"`},
		{"cycle", wire.CreateRunRequest{ClusterID: "prod", Stages: []wire.StageSpec{
			{Name: "a", Kind: kindPing, Target: wire.Target{All: true}, DependsOn: []string{"b"}},
			{Name: "b", Kind: kindPing, Target: wire.Target{All: true}},
		}}, 400, "cycle: a → b → a"},
		{"unknown field", json.RawMessage(`{"cluster_id":"prod","stages":[],"force":true}`), 400, `field "force" may not be set`},
		{"unknown cluster", wire.CreateRunRequest{ClusterID: "nope", Stages: oneStageRun(kindPing).Stages}, 404, "not found"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var body wire.ErrorBody
			e.call(http.MethodPost, "/api/v1/runs", "op", tc.body, tc.status, &body)
			if !strings.Contains(body.Error.Message, tc.want) {
				t.Fatalf("message %q does not say %q", body.Error.Message, tc.want)
			}
		})
	}
	var list wire.RunList
	e.call(http.MethodGet, "/api/v1/runs", "viewer", nil, http.StatusOK, &list)
	var acts wire.ActionList
	e.call(http.MethodGet, "/api/v1/actions", "viewer", nil, http.StatusOK, &acts)
	var evs wire.EventList
	e.call(http.MethodGet, "/api/v1/events", "viewer", nil, http.StatusOK, &evs)
	for _, ev := range evs.Events {
		if strings.HasPrefix(ev.Type, "run.") || strings.HasPrefix(ev.Type, "action.") {
			t.Errorf("a refused run left the event %s", ev.Type)
		}
	}
	if len(list.Runs) != 0 || len(acts.Actions) != 0 {
		t.Fatalf("refused runs were stored: %d runs, %d actions", len(list.Runs), len(acts.Actions))
	}
}

func TestRunCallsRefuseWhatTheyDoNotTake(t *testing.T) {
	t.Parallel()
	e := setup(t)
	run := e.createRun("op", oneStageRun(kindPing))
	var body wire.ErrorBody
	e.call(http.MethodPost, "/api/v1/runs/"+run.ID+"/approve", "appr", wire.ApproveRunRequest{Digest: strings.Repeat("0", 64)}, http.StatusConflict, &body)
	if !strings.Contains(body.Error.Message, "is not the run's") {
		t.Fatalf("approve with another digest: %q", body.Error.Message)
	}
	e.call(http.MethodPost, "/api/v1/runs/"+run.ID+"/approve", "appr", wire.ReasonRequest{Reason: "x"}, http.StatusBadRequest, nil)
	e.call(http.MethodPost, "/api/v1/runs/"+run.ID+"/approve", "appr", wire.ApproveRunRequest{Digest: run.Digest}, http.StatusOK, nil)
	e.call(http.MethodPost, "/api/v1/runs/"+run.ID+"/pause", "op", wire.ReasonRequest{Reason: "x"}, http.StatusBadRequest, nil)
	e.call(http.MethodGet, "/api/v1/runs?marker=00000000-0000-4000-8000-000000000000", "viewer", nil, http.StatusBadRequest, nil)
	e.call(http.MethodPost, "/api/v1/runs/"+run.ID+"/cancel", "op", wire.ReasonRequest{Reason: strings.Repeat("r", wire.MaxReason+1)}, http.StatusBadRequest, nil)
}

func TestRunWithoutApprovalRuleStartsAtOnce(t *testing.T) {
	t.Parallel()
	e := setup(t, noApproval)
	run := e.createRun("op", wire.CreateRunRequest{ClusterID: "prod", Stages: []wire.StageSpec{{
		Kind: kindPing, Target: wire.Target{Nodes: []string{"db-1"}},
	}}})
	if run.State != store.RunRunning || len(e.runChildren(run.ID)) != 1 {
		t.Fatalf("run %s with %d children; want RUNNING with its first wave", run.State, len(e.runChildren(run.ID)))
	}
}

// A run's child says which run, stage and wave it belongs to, in the list
// and in show; ?run=ID lists exactly a run's children; a misspelt filter
// (?run_id=) is a 400 naming it, never the whole list.
func TestRunChildrenAreListedByRunAndSayWhereTheyBelong(t *testing.T) {
	t.Parallel()
	e := setup(t)
	r := e.createRun("op", oneStageRun(kindPing))
	e.call(http.MethodPost, "/api/v1/runs/"+r.ID+"/approve", "appr", nil, http.StatusOK, nil)
	own := e.create("op", wire.CreateActionRequest{ClusterID: "prod", NodeID: "db-1", Kind: kindPing})
	var list wire.ActionList
	e.call(http.MethodGet, "/api/v1/actions?run="+r.ID, "viewer", nil, http.StatusOK, &list)
	if len(list.Actions) != 1 {
		t.Fatalf("?run= listed %d actions, want the run's one child", len(list.Actions))
	}
	kid := list.Actions[0]
	if kid.RunID != r.ID || kid.Stage != r.Stages[0].Name || kid.Wave != 1 || kid.ID == own.ID {
		t.Fatalf("child %+v", kid)
	}
	var shown action.Action
	e.call(http.MethodGet, "/api/v1/actions/"+kid.ID, "viewer", nil, http.StatusOK, &shown)
	if shown.RunID != r.ID || shown.Stage != kid.Stage || shown.Wave != 1 {
		t.Fatalf("shown child %+v", shown)
	}
	_, b := e.do(http.MethodGet, "/api/v1/actions/"+own.ID, "viewer", nil)
	if strings.Contains(string(b), `"run_id"`) {
		t.Fatalf("an action of its own carries run fields: %s", b)
	}
	// A run is named by its id or a unique prefix, as everywhere else.
	var byPrefix wire.ActionList
	e.call(http.MethodGet, "/api/v1/actions?run="+r.ID[:8], "viewer", nil, http.StatusOK, &byPrefix)
	if len(byPrefix.Actions) != 1 || byPrefix.Actions[0].ID != kid.ID {
		t.Fatalf("?run=%s (a prefix) listed %d actions, want the run's one child", r.ID[:8], len(byPrefix.Actions))
	}
	e.call(http.MethodGet, "/api/v1/actions?run=nope", "viewer", nil, http.StatusOK, &list)
	if len(list.Actions) != 0 {
		t.Fatalf("?run= of no run listed %d", len(list.Actions))
	}
	for _, path := range []string{
		"/api/v1/actions?run_id=" + r.ID, "/api/v1/runs?clster=prod", "/api/v1/nodes?node=db-1",
		"/api/v1/clusters?x=1", "/api/v1/events?run=" + r.ID, "/api/v1/tokens?all=1", "/api/v1/runs/" + r.ID + "?grid=1",
	} {
		who := "viewer"
		if strings.HasPrefix(path, "/api/v1/tokens") {
			who = "admin"
		}
		d := e.fail(http.MethodGet, path, who, nil, http.StatusBadRequest)
		name, _, _ := strings.Cut(path[strings.Index(path, "?")+1:], "=")
		if d.Code != wire.CodeBadRequest || !strings.Contains(d.Message, `unknown query parameter "`+name+`"`) {
			t.Fatalf("%s: %+v", path, d)
		}
	}
}

func TestAPIRetryRunMakesARunOverTheNodesNotCarriedThrough(t *testing.T) {
	t.Parallel()
	e := setup(t)
	r := e.createRun("op", oneStageRun(kindPing))
	// A run not finished has nothing to retry yet: 409, nothing stored.
	if d := e.fail(http.MethodPost, "/api/v1/runs/"+r.ID+"/retry", "op", nil, http.StatusConflict); !strings.Contains(d.Message, "retry") {
		t.Fatalf("retry of a waiting run: %+v", d)
	}
	e.call(http.MethodPost, "/api/v1/runs/"+r.ID+"/cancel", "op", nil, http.StatusOK, nil)
	var again wire.Run
	e.call(http.MethodPost, "/api/v1/runs/"+r.ID+"/retry", "op", nil, http.StatusCreated, &again)
	if again.RetryOf != r.ID || again.State != "PENDING_APPROVE" || again.ID == r.ID ||
		len(again.Stages) != 1 || strings.Join(again.Stages[0].Nodes, ",") != "db-1" {
		t.Fatalf("retry run %+v", again)
	}
	e.fail(http.MethodPost, "/api/v1/runs/"+r.ID+"/retry", "op", map[string]string{"x": "y"}, http.StatusBadRequest)
}

// available undrains node prod/id in the store: a run finds it available
// at its turn.
func (e *env) available(id string) {
	e.t.Helper()
	ctx := context.Background()
	if err := e.st.Update(ctx, func(tx store.Tx) error {
		n, err := tx.Node(ctx, "prod", id)
		if err != nil {
			return err
		}
		n.Drained, n.DrainedBy, n.DrainReason = false, "", ""
		return tx.PutNode(ctx, n)
	}); err != nil {
		e.t.Fatal(err)
	}
}

// finishRunChildren ends the run's unfinished children DONE, as their
// agents would report it, and moves the run on.
func (e *env) finishRunChildren(id string) {
	e.t.Helper()
	ctx := context.Background()
	if err := e.st.Update(ctx, func(tx store.Tx) error {
		kids, err := tx.RunChildren(ctx, id)
		if err != nil {
			return err
		}
		for i := range kids {
			k := &kids[i]
			if !k.State.Final() {
				now := time.Now().UTC()
				k.State, k.FinishedTS, k.PushedStoreID = action.Done, &now, "store-1"
				if err := tx.UpdateAction(ctx, k); err != nil {
					return err
				}
			}
		}
		_, err = e.engine.AdvanceNodes(ctx, tx, id)
		return err
	}); err != nil {
		e.t.Fatal(err)
	}
}

func TestAPIPromoteTakesAnApproverOtherThanTheRequester(t *testing.T) {
	t.Parallel()
	e := setup(t)
	req := oneStageRun(kindPing)
	req.Stages[0].Target = wire.Target{All: true}
	req.Stages[0].Canary = 1
	req.Stages[0].Unavailable = "skip" // db-2 is DOWN
	r := e.createRun("self", req)
	e.call(http.MethodPost, "/api/v1/runs/"+r.ID+"/approve", "appr", nil, http.StatusOK, nil)
	if n := len(e.runChildren(r.ID)); n != 1 {
		t.Fatalf("%d children with canary 1", n)
	}
	e.finishRunChildren(r.ID)
	var paused wire.Run
	e.call(http.MethodGet, "/api/v1/runs/"+r.ID, "viewer", nil, http.StatusOK, &paused)
	if paused.State != "PAUSED" || !strings.HasPrefix(paused.StateReason, "canary") {
		t.Fatalf("run %s (%s), want PAUSED on its canary", paused.State, paused.StateReason)
	}
	// The requester holds the approver role too, but may not promote.
	e.fail(http.MethodPost, "/api/v1/runs/"+r.ID+"/promote", "self", nil, http.StatusForbidden)
	e.fail(http.MethodPost, "/api/v1/runs/"+r.ID+"/resume", "self", nil, http.StatusConflict)
	// Promoted, the run goes on to db-2, which is DOWN at its turn:
	// skipped at once, and the run ends PARTIAL naming it.
	var promoted wire.Run
	e.fail(http.MethodPost, "/api/v1/runs/"+r.ID+"/promote", "appr", nil, http.StatusUnprocessableEntity)
	e.call(http.MethodPost, "/api/v1/runs/"+r.ID+"/promote", "appr", wire.ReasonRequest{Reason: "p99 flat"}, http.StatusOK, &promoted)
	if promoted.State != "PARTIAL" || len(e.runChildren(r.ID)) != 1 || promoted.Summary == nil ||
		len(promoted.Summary.Skipped) != 1 || promoted.Summary.Skipped[0].NodeID != "db-2" {
		t.Fatalf("promoted run %s (%s) with %d children, summary %+v: want PARTIAL skipping db-2", promoted.State,
			promoted.StateReason, len(e.runChildren(r.ID)), promoted.Summary)
	}
	// A canary as large as the stage is refused, nothing stored.
	req.Stages[0].Canary = 2
	d := e.fail(http.MethodPost, "/api/v1/runs", "op", req, http.StatusBadRequest)
	if !strings.Contains(d.Message, "canary") {
		t.Fatalf("canary of every node: %+v", d)
	}
}

// canaryPaused creates a canary run (db-1 then db-2) by who, approved,
// its canary through: PAUSED for its promote.
func (e *env) canaryPaused(who string) wire.Run {
	e.t.Helper()
	e.available("db-1")
	req := oneStageRun(kindPing)
	req.Stages[0].Target = wire.Target{All: true}
	req.Stages[0].Canary = 1
	req.Stages[0].Unavailable = "skip"
	r := e.createRun(who, req)
	e.call(http.MethodPost, "/api/v1/runs/"+r.ID+"/approve", "appr", nil, http.StatusOK, nil)
	e.finishRunChildren(r.ID)
	return r
}

func TestAPIAbortIsForAnApproverOrTheRequester(t *testing.T) {
	t.Parallel()
	e := setup(t)
	r := e.canaryPaused("self")
	// An operator other than the requester may not abort: cancel is theirs.
	e.fail(http.MethodPost, "/api/v1/runs/"+r.ID+"/abort", "op", nil, http.StatusForbidden)
	e.fail(http.MethodPost, "/api/v1/runs/"+r.ID+"/abort", "appr", wire.CancelRunRequest{Rollback: true}, http.StatusBadRequest)
	var out wire.Run
	e.call(http.MethodPost, "/api/v1/runs/"+r.ID+"/abort", "appr", wire.ReasonRequest{Reason: "p99 doubled"}, http.StatusOK, &out)
	// A one-step stage has no rollback: the canary node stays as it is.
	if out.State != "ABORTED" || out.StateReason != "aborted by appr: p99 doubled" || len(e.runChildren(r.ID)) != 1 {
		t.Fatalf("run %s (%s), want ABORTED", out.State, out.StateReason)
	}
	e.fail(http.MethodPost, "/api/v1/runs/"+r.ID+"/abort", "appr", nil, http.StatusConflict)
	var l wire.RunList
	e.call(http.MethodGet, "/api/v1/runs?state=aborted", "viewer", nil, http.StatusOK, &l)
	if len(l.Runs) != 1 || l.Runs[0].ID != r.ID {
		t.Fatalf("runs ABORTED: %+v", l.Runs)
	}
	var evs wire.EventList
	e.call(http.MethodGet, "/api/v1/events?run_id="+r.ID, "viewer", nil, http.StatusOK, &evs)
	found := false
	for _, ev := range evs.Events {
		found = found || (ev.Type == "run.aborted" && ev.Actor == "appr")
	}
	if !found {
		t.Fatalf("no run.aborted event by appr: %+v", evs.Events)
	}
}

func TestAPICancelWithRollbackEndsTheRunAborted(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.available("db-1")
	r := e.createRun("self", oneStageRun(kindPing))
	e.call(http.MethodPost, "/api/v1/runs/"+r.ID+"/approve", "appr", nil, http.StatusOK, nil)
	// A running run without canary is not the approver's to abort.
	e.fail(http.MethodPost, "/api/v1/runs/"+r.ID+"/abort", "appr", nil, http.StatusConflict)
	e.fail(http.MethodPost, "/api/v1/runs/"+r.ID+"/cancel", "op", map[string]any{"rollback": "yes"}, http.StatusBadRequest)
	var out wire.Run
	e.call(http.MethodPost, "/api/v1/runs/"+r.ID+"/cancel", "op", wire.CancelRunRequest{Reason: "wrong", Rollback: true}, http.StatusOK, &out)
	if out.State != "ABORTED" {
		t.Fatalf("run %s (%s), want ABORTED", out.State, out.StateReason)
	}
}
