package api

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/musterhq/muster/core/approval"
	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/action"
	"github.com/musterhq/muster/shared/live"
	"github.com/musterhq/muster/shared/wire"
)

func noApproval(c *Config)   { editPolicy(c, func(p *approval.Policy) { p.Default = approval.None }) }
func selfApproval(c *Config) { editPolicy(c, func(p *approval.Policy) { p.SelfApproval = true }) }

// editPolicy changes the approval policy the API starts with.
func editPolicy(c *Config, edit func(p *approval.Policy)) {
	p := c.Policy.Load()
	edit(&p)
	c.Policy = live.New(p)
}

func TestCreateNeedsApproval(t *testing.T) {
	t.Parallel()
	e := setup(t)
	a := e.create("op", wire.CreateActionRequest{Kind: kindSleep, Args: json.RawMessage(`{ "seconds": 3, "b": [1] }`), TimeoutS: 60})
	if a.State != action.PendingApprove || a.Requester != "op" || a.Origin != action.OriginCore ||
		a.ApprovedBy != "" || a.ScheduledTS != nil || !action.ValidID(a.ID) || a.TimeoutS != 60 {
		t.Fatalf("created %+v", a)
	}
	if string(a.Args) != `{"b":[1],"seconds":3}` {
		t.Fatalf("args %s, want the canonical form", a.Args)
	}
	rec := e.record(a.ID)
	if rec.State != action.PendingApprove || rec.Requester != "op" || string(rec.Args) != string(a.Args) {
		t.Fatalf("stored %+v", rec)
	}
	evs := e.eventsOf(a.ID, "action.created")
	if len(evs) != 1 || evs[0].Actor != "op" || evs[0].ClientAddr != "127.0.0.1" || evs[0].ClusterID != "prod" || evs[0].NodeID != "db-1" {
		t.Fatalf("action.created events %+v", evs)
	}
	var shown action.Action
	e.call(http.MethodGet, "/api/v1/actions/"+a.ID, "viewer", nil, http.StatusOK, &shown)
	if len(shown.History) != 1 || shown.History[0].To != action.PendingApprove || shown.History[0].Actor != "op" {
		t.Fatalf("history %+v", shown.History)
	}
	if e.nudges.Count("prod") != 0 {
		t.Fatal("an action waiting for approval nudged its cluster")
	}
}

// A required rule for example.com/** covers example.com/db/backup even with
// default: none (path.Match's "*" never crossed "/").
func TestRequiredDoubleStarRuleCoversNestedKinds(t *testing.T) {
	t.Parallel()
	e := setup(t, func(c *Config) {
		editPolicy(c, func(p *approval.Policy) {
			p.Default = approval.None
			p.Rules = []approval.Rule{{Kind: "example.com/**", Approval: approval.Required}}
		})
	})
	nested := e.create("op", wire.CreateActionRequest{ClusterID: "prod", NodeID: "db-2", Kind: "example.com/db/backup"})
	if nested.State != action.PendingApprove {
		t.Fatalf("example.com/db/backup is %s, want PENDING_APPROVE", nested.State)
	}
	other := e.create("op", wire.CreateActionRequest{ClusterID: "prod", NodeID: "db-2", Kind: "other.io/db/backup"})
	if other.State != action.PendingSchedule {
		t.Fatalf("other.io/db/backup is %s, want PENDING_SCHEDULE (default none)", other.State)
	}
}

func TestCreateWithoutApprovalIsScheduledAndNudges(t *testing.T) {
	t.Parallel()
	e := setup(t, noApproval)
	a := e.create("op", wire.CreateActionRequest{})
	if a.State != action.PendingSchedule || a.ScheduledTS == nil {
		t.Fatalf("created %+v, want PENDING_SCHEDULE with scheduled_ts", a)
	}
	if e.nudges.Count(db1Sync) != 1 || e.nudges.Count("prod") != 0 {
		t.Fatalf("node prod/db-1 synced %d times and prod %d, want the node once and not the cluster",
			e.nudges.Count(db1Sync), e.nudges.Count("prod"))
	}
}

func TestCreateWithCallerID(t *testing.T) {
	t.Parallel()
	e := setup(t)
	id := action.NewID()
	a := e.create("op", wire.CreateActionRequest{ID: id})
	if a.ID != id {
		t.Fatalf("id %s, want %s", a.ID, id)
	}
	d := e.fail(http.MethodPost, "/api/v1/actions", "op", wire.CreateActionRequest{ID: id, ClusterID: "prod", NodeID: "db-1", Kind: kindPing}, http.StatusConflict)
	if d.Code != wire.CodeConflict {
		t.Fatalf("duplicate id: %+v", d)
	}
}

func TestAPI3CreateRefusesCallerFieldsAndBadInput(t *testing.T) {
	t.Parallel()
	e := setup(t)
	valid := `"cluster_id":"prod","node_id":"db-1","kind":"muster.io/debug.ping"`
	cases := []struct {
		name   string
		body   string
		status int
	}{
		{"state set by caller", `{` + valid + `,"state":"PENDING_SCHEDULE"}`, 400},
		{"requester set by caller", `{` + valid + `,"requester":"mallory"}`, 400},
		{"approved_by set by caller", `{` + valid + `,"approved_by":"mallory"}`, 400},
		{"created_ts set by caller", `{` + valid + `,"created_ts":"2020-01-01T00:00:00Z"}`, 400},
		{"origin set by caller", `{` + valid + `,"origin":"agent"}`, 400},
		{"retry_of set by caller", `{` + valid + `,"retry_of":"x"}`, 400},
		{"unknown field", `{` + valid + `,"colour":"red"}`, 400},
		{"malformed json", `{` + valid, 400},
		{"trailing data", `{` + valid + `} {}`, 400},
		{"empty body", ``, 400},
		{"array body", `[]`, 400},
		{"args not an object", `{` + valid + `,"args":[1]}`, 400},
		{"args a string", `{` + valid + `,"args":"x"}`, 400},
		{"a secret's name not plain", `{` + valid + `,"args":{"a":"{{ secret \"../etc/shadow\" }}"}}`, 400},
		{"args too large", `{` + valid + `,"args":{"a":"` + strings.Repeat("x", action.MaxArgs) + `"}}`, 400},
		{"bad kind", `{"cluster_id":"prod","node_id":"db-1","kind":"ping"}`, 400},
		{"missing node", `{"cluster_id":"prod","kind":"muster.io/debug.ping"}`, 400},
		{"bad id", `{` + valid + `,"id":"123"}`, 400},
		{"negative timeout", `{` + valid + `,"timeout_s":-1}`, 400},
		{"timeout wrong type", `{` + valid + `,"timeout_s":"1h"}`, 400},
		{"unknown cluster", `{"cluster_id":"nope","node_id":"db-1","kind":"muster.io/debug.ping"}`, 404},
		{"unknown node", `{"cluster_id":"prod","node_id":"nope","kind":"muster.io/debug.ping"}`, 404},
		{"node of another cluster", `{"cluster_id":"stage","node_id":"db-1","kind":"muster.io/debug.ping"}`, 404},
		{"kind unknown to the node", `{"cluster_id":"prod","node_id":"db-1","kind":"example.com/db.backup"}`, 422},
		{"body over 1 MiB", `{` + valid + `,"args":{"a":"` + strings.Repeat("x", MaxBody) + `"}}`, 413},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			d := e.fail(http.MethodPost, "/api/v1/actions", "op", c.body, c.status)
			if strings.Contains(d.Message, "internal") {
				t.Fatalf("message %q", d.Message)
			}
		})
	}
	// Runs once the parallel cases above have finished.
	t.Cleanup(func() {
		var list wire.ActionList
		e.call(http.MethodGet, "/api/v1/actions", "viewer", nil, http.StatusOK, &list)
		if len(list.Actions) != 0 {
			t.Errorf("refused creates stored %d actions", len(list.Actions))
		}
		for _, ev := range e.events() {
			if strings.HasPrefix(ev.Type, "action.") {
				t.Errorf("refused creates appended event %+v", ev)
			}
		}
	})
}

func TestCreateOnNodeWithUnknownKinds(t *testing.T) {
	t.Parallel()
	e := setup(t)
	// db-2 has not reported its kinds: the agent decides at push time.
	a := e.create("op", wire.CreateActionRequest{ClusterID: "prod", NodeID: "db-2", Kind: "example.com/db.backup"})
	if a.NodeID != "db-2" || a.Kind != "example.com/db.backup" {
		t.Fatalf("created %+v", a)
	}
}

func TestApprove(t *testing.T) {
	t.Parallel()
	e := setup(t)
	a := e.create("op", wire.CreateActionRequest{Kind: kindSleep, Args: json.RawMessage(`{"seconds":1}`)})
	var got action.Action
	e.call(http.MethodPost, "/api/v1/actions/"+a.ID+"/approve", "appr", nil, http.StatusOK, &got)
	if got.State != action.PendingSchedule || got.ApprovedBy != "appr" || got.ScheduledTS == nil || got.Requester != "op" {
		t.Fatalf("approved %+v", got)
	}
	rec := e.record(a.ID)
	if rec.ApprovalDigest == "" || rec.ApprovalDigest != approval.Digest(&rec.Action) || rec.ApprovedBy != "appr" {
		t.Fatalf("stored digest %q approved_by %q", rec.ApprovalDigest, rec.ApprovedBy)
	}
	evs := e.eventsOf(a.ID, "action.approved")
	if len(evs) != 1 || evs[0].Actor != "appr" || evs[0].ClientAddr == "" {
		t.Fatalf("action.approved events %+v", evs)
	}
	if e.nudges.Count(db1Sync) != 1 || e.nudges.Count("prod") != 0 {
		t.Fatal("an approval did not sync the action's node alone")
	}
	var shown action.Action
	e.call(http.MethodGet, "/api/v1/actions/"+a.ID, "viewer", nil, http.StatusOK, &shown)
	if n := len(shown.History); n != 2 || shown.History[1].From != action.PendingApprove ||
		shown.History[1].To != action.PendingSchedule || shown.History[1].Actor != "appr" {
		t.Fatalf("history %+v", shown.History)
	}
	// Approving again is a wrong-state call.
	d := e.fail(http.MethodPost, "/api/v1/actions/"+a.ID+"/approve", "admin", nil, http.StatusConflict)
	if d.State != string(action.PendingSchedule) {
		t.Fatalf("409 envelope %+v, want state PENDING_SCHEDULE", d)
	}
}

func TestAPI6SelfApprovalRefused(t *testing.T) {
	t.Parallel()
	e := setup(t)
	a := e.create("self", wire.CreateActionRequest{})
	d := e.fail(http.MethodPost, "/api/v1/actions/"+a.ID+"/approve", "self", nil, http.StatusForbidden)
	if d.Code != wire.CodeForbidden {
		t.Fatalf("envelope %+v", d)
	}
	if rec := e.record(a.ID); rec.State != action.PendingApprove || rec.ApprovedBy != "" {
		t.Fatalf("refused self-approval changed the record: %+v", rec)
	}
	if len(e.eventsOf(a.ID, "action.approved")) != 0 {
		t.Fatal("refused self-approval appended an event")
	}
}

// TestFourEyesIsCaseInsensitive: names are compared ignoring case, so a
// token named Alice, made after alice's was revoked, cannot approve what
// alice requested.
func TestFourEyesIsCaseInsensitive(t *testing.T) {
	t.Parallel()
	e := setup(t)
	var tok wire.TokenSecret
	e.call(http.MethodPost, "/api/v1/tokens", "admin", wire.CreateTokenRequest{Name: "alice", Roles: []string{store.RoleOperator}}, http.StatusCreated, &tok)
	e.secrets["alice"] = tok.Token
	a := e.create("alice", wire.CreateActionRequest{})
	e.call(http.MethodDelete, "/api/v1/tokens/alice", "admin", nil, http.StatusNoContent, nil)
	e.call(http.MethodPost, "/api/v1/tokens", "admin", wire.CreateTokenRequest{Name: "Alice", Roles: []string{store.RoleApprover}}, http.StatusCreated, &tok)
	e.secrets["Alice"] = tok.Token

	d := e.fail(http.MethodPost, "/api/v1/actions/"+a.ID+"/approve", "Alice", nil, http.StatusForbidden)
	if d.Code != wire.CodeForbidden {
		t.Fatalf("envelope %+v", d)
	}
	if rec := e.record(a.ID); rec.State != action.PendingApprove || rec.ApprovedBy != "" {
		t.Fatalf("refused approval changed the record: %+v", rec)
	}
	// Another person still may.
	e.call(http.MethodPost, "/api/v1/actions/"+a.ID+"/approve", "appr", nil, http.StatusOK, nil)
}

func TestSelfApprovalAllowedByPolicy(t *testing.T) {
	t.Parallel()
	e := setup(t, selfApproval)
	a := e.create("self", wire.CreateActionRequest{})
	var got action.Action
	e.call(http.MethodPost, "/api/v1/actions/"+a.ID+"/approve", "self", nil, http.StatusOK, &got)
	if got.ApprovedBy != "self" || got.State != action.PendingSchedule {
		t.Fatalf("approved %+v", got)
	}
}

func TestApproveAfterTTLRefused(t *testing.T) {
	t.Parallel()
	e := setup(t)
	a := e.create("op", wire.CreateActionRequest{})
	ctx := context.Background()
	if err := e.st.Update(ctx, func(tx store.Tx) error {
		rec, err := tx.Action(ctx, a.ID)
		if err != nil {
			return err
		}
		rec.CreatedTS = rec.CreatedTS.Add(-25 * time.Hour)
		return tx.UpdateAction(ctx, rec)
	}); err != nil {
		t.Fatal(err)
	}
	d := e.fail(http.MethodPost, "/api/v1/actions/"+a.ID+"/approve", "appr", nil, http.StatusConflict)
	if d.State != string(action.PendingApprove) || !strings.Contains(d.Message, "approval window") {
		t.Fatalf("envelope %+v", d)
	}
}

func TestReject(t *testing.T) {
	t.Parallel()
	e := setup(t)
	a := e.create("op", wire.CreateActionRequest{})
	var got action.Action
	e.call(http.MethodPost, "/api/v1/actions/"+a.ID+"/reject", "appr", nil, http.StatusOK, &got)
	if got.State != action.Cancelled || got.StateReason != "rejected" || got.FinishedTS == nil {
		t.Fatalf("rejected %+v", got)
	}
	evs := e.eventsOf(a.ID, "action.rejected")
	if len(evs) != 1 || evs[0].Actor != "appr" {
		t.Fatalf("action.rejected events %+v", evs)
	}
	d := e.fail(http.MethodPost, "/api/v1/actions/"+a.ID+"/reject", "appr", nil, http.StatusConflict)
	if d.State != string(action.Cancelled) {
		t.Fatalf("409 envelope %+v", d)
	}
	d = e.fail(http.MethodPost, "/api/v1/actions/"+a.ID+"/approve", "appr", nil, http.StatusConflict)
	if d.State != string(action.Cancelled) {
		t.Fatalf("approve after reject: %+v", d)
	}
}

// A PENDING_APPROVE action was never pushed: it is cancelled at once. A
// PENDING_SCHEDULE one may be on its way to the agent: the cancel is a
// request the next pass settles (see core/orchestrate).
func TestCancelPending(t *testing.T) {
	t.Parallel()
	e := setup(t) // approval required by default
	a := e.create("op", wire.CreateActionRequest{})
	var got action.Action
	e.call(http.MethodPost, "/api/v1/actions/"+a.ID+"/cancel", "op", nil, http.StatusOK, &got)
	if got.State != action.Cancelled || got.StateReason != action.ReasonCancelled || got.FinishedTS == nil {
		t.Fatalf("cancelled %+v", got)
	}
	evs := e.eventsOf(a.ID, "action.state_changed")
	if len(evs) != 1 || evs[0].Actor != "op" || evs[0].Data["to"] != "CANCELLED" {
		t.Fatalf("events %+v", evs)
	}
	d := e.fail(http.MethodPost, "/api/v1/actions/"+a.ID+"/cancel", "op", nil, http.StatusConflict)
	if d.State != string(action.Cancelled) {
		t.Fatalf("cancel of a final action: %+v", d)
	}

	// Scheduled but never pushed: cancelled at once too.
	e2 := setup(t, noApproval)
	fresh := e2.create("op", wire.CreateActionRequest{})
	e2.call(http.MethodPost, "/api/v1/actions/"+fresh.ID+"/cancel", "op", nil, http.StatusOK, &got)
	if got.State != action.Cancelled {
		t.Fatalf("cancel of a never-pushed PENDING_SCHEDULE action: %s", got.State)
	}
	// Once a push was attempted, only the agent knows: a request.
	b := e2.create("op", wire.CreateActionRequest{})
	e2.edit(b.ID, func(r *store.Record) { r.PushedStoreID = "agent-store-1" })
	before := e2.nudges.Count(db1Sync)
	e2.call(http.MethodPost, "/api/v1/actions/"+b.ID+"/cancel", "op", nil, http.StatusAccepted, &got)
	if got.State != action.PendingSchedule {
		t.Fatalf("state %s after cancelling a PENDING_SCHEDULE action, want it kept until the agent answers", got.State)
	}
	if rec := e2.record(b.ID); !rec.CancelRequested {
		t.Fatal("the cancel request was not stored")
	}
	if n := len(e2.eventsOf(b.ID, "action.cancel_requested")); n != 1 {
		t.Fatalf("%d cancel_requested events", n)
	}
	if e2.nudges.Count(db1Sync) <= before {
		t.Fatal("a cancel request did not sync the action's node")
	}
}

func TestCancelRunningIsRequested(t *testing.T) {
	t.Parallel()
	e := setup(t, noApproval)
	for _, s := range []action.State{action.New, action.Running} {
		t.Run(string(s), func(t *testing.T) {
			a := e.create("op", wire.CreateActionRequest{})
			e.setState(a.ID, s)
			before := e.nudges.Count(db1Sync)
			var got action.Action
			e.call(http.MethodPost, "/api/v1/actions/"+a.ID+"/cancel", "op", nil, http.StatusAccepted, &got)
			if got.State != s {
				t.Fatalf("state %s after a cancel request, want %s (the agent decides)", got.State, s)
			}
			if rec := e.record(a.ID); !rec.CancelRequested || rec.State != s {
				t.Fatalf("stored %+v", rec)
			}
			if n := len(e.eventsOf(a.ID, "action.cancel_requested")); n != 1 {
				t.Fatalf("%d cancel_requested events", n)
			}
			if e.nudges.Count(db1Sync) != before+1 {
				t.Fatal("a cancel request did not sync the action's node")
			}
			// Asking again changes nothing and records nothing.
			e.call(http.MethodPost, "/api/v1/actions/"+a.ID+"/cancel", "admin", nil, http.StatusAccepted, nil)
			if n := len(e.eventsOf(a.ID, "action.cancel_requested")); n != 1 {
				t.Fatalf("%d cancel_requested events after asking twice", n)
			}
		})
	}
}

func TestRetry(t *testing.T) {
	t.Parallel()
	e := setup(t)
	a := e.create("op", wire.CreateActionRequest{Kind: kindSleep, Args: json.RawMessage(`{"seconds":2}`), TimeoutS: 30})
	d := e.fail(http.MethodPost, "/api/v1/actions/"+a.ID+"/retry", "op", nil, http.StatusConflict)
	if d.State != string(action.PendingApprove) {
		t.Fatalf("retry of an open action: %+v", d)
	}
	e.setState(a.ID, action.Failed)
	var r action.Action
	e.call(http.MethodPost, "/api/v1/actions/"+a.ID+"/retry", "admin", nil, http.StatusCreated, &r)
	if r.ID == a.ID || r.RetryOf != a.ID || r.Kind != a.Kind || string(r.Args) != string(a.Args) ||
		r.NodeID != a.NodeID || r.ClusterID != a.ClusterID || r.TimeoutS != 30 {
		t.Fatalf("retry %+v of %+v", r, a)
	}
	if r.State != action.PendingApprove || r.Requester != "admin" || r.ApprovedBy != "" {
		t.Fatalf("a retry must go through approval again: %+v", r)
	}
	if rec := e.record(r.ID); rec.RetryOf != a.ID {
		t.Fatalf("stored retry_of %q", rec.RetryOf)
	}
	evs := e.eventsOf(r.ID, "action.created")
	if len(evs) != 1 || evs[0].Data["retry_of"] != a.ID || evs[0].Actor != "admin" {
		t.Fatalf("events %+v", evs)
	}
}

func TestShowByPrefix(t *testing.T) {
	t.Parallel()
	e := setup(t)
	a := e.create("op", wire.CreateActionRequest{ID: "abcdef01-0000-4000-8000-000000000001"})
	e.create("op", wire.CreateActionRequest{ID: "abcdef01-0000-4000-8000-000000000002"})
	u := e.create("op", wire.CreateActionRequest{ID: "12345678-0000-4000-8000-000000000003"})

	var got action.Action
	e.call(http.MethodGet, "/api/v1/actions/"+a.ID, "viewer", nil, http.StatusOK, &got)
	if got.ID != a.ID {
		t.Fatalf("full id gave %s", got.ID)
	}
	e.call(http.MethodGet, "/api/v1/actions/12345678", "viewer", nil, http.StatusOK, &got)
	if got.ID != u.ID || len(got.History) == 0 {
		t.Fatalf("unique prefix gave %+v", got)
	}
	d := e.fail(http.MethodGet, "/api/v1/actions/abcdef01", "viewer", nil, http.StatusConflict)
	if !slices.Equal(d.Matches, []string{"abcdef01-0000-4000-8000-000000000001", "abcdef01-0000-4000-8000-000000000002"}) {
		t.Fatalf("ambiguous prefix: matches %v", d.Matches)
	}
	e.fail(http.MethodGet, "/api/v1/actions/1234567", "viewer", nil, http.StatusBadRequest)
	e.fail(http.MethodGet, "/api/v1/actions/99999999", "viewer", nil, http.StatusNotFound)
	e.fail(http.MethodGet, "/api/v1/actions/zzzzzzzzzz", "viewer", nil, http.StatusNotFound)
	e.fail(http.MethodGet, "/api/v1/actions/"+action.NewID(), "viewer", nil, http.StatusNotFound)
	// Changing calls take prefixes too, and refuse ambiguous ones.
	e.fail(http.MethodPost, "/api/v1/actions/abcdef01/approve", "appr", nil, http.StatusConflict)
	e.call(http.MethodPost, "/api/v1/actions/12345678/approve", "appr", nil, http.StatusOK, &got)
	if got.ID != u.ID || got.State != action.PendingSchedule {
		t.Fatalf("approve by prefix: %+v", got)
	}
}

func TestListFiltersSortAndPaging(t *testing.T) {
	t.Parallel()
	e := setup(t)
	var all []action.Action
	for i := range 7 {
		req := wire.CreateActionRequest{}
		switch i % 3 {
		case 1:
			req = wire.CreateActionRequest{ClusterID: "prod", NodeID: "db-2", Kind: kindSleep}
		case 2:
			req = wire.CreateActionRequest{ClusterID: "stage", NodeID: "s-1", Kind: kindSleep}
		}
		all = append(all, e.create("op", req))
	}
	e.setState(all[0].ID, action.Running)
	e.setState(all[3].ID, action.Done)

	list := func(q string) []action.Action {
		t.Helper()
		var l wire.ActionList
		e.call(http.MethodGet, "/api/v1/actions?"+q, "viewer", nil, http.StatusOK, &l)
		return l.Actions
	}
	ids := func(as []action.Action) []string {
		out := make([]string, len(as))
		for i, a := range as {
			out[i] = a.ID
		}
		slices.Sort(out)
		return out
	}
	want := func(idx ...int) []string {
		out := []string{}
		for _, i := range idx {
			out = append(out, all[i].ID)
		}
		slices.Sort(out)
		return out
	}
	for _, c := range []struct {
		q    string
		want []string
	}{
		{"", want(0, 1, 2, 3, 4, 5, 6)},
		{"cluster=stage", want(2, 5)},
		{"cluster=prod&node=db-2", want(1, 4)},
		{"state=RUNNING,DONE", want(0, 3)},
		{"state=PENDING_APPROVE&cluster=prod", want(1, 4, 6)},
		{"kind=" + kindPing, want(0, 3, 6)},
		{"kind=" + kindPing + "," + kindSleep + "&state=DONE", want(3)},
		{"cluster=nope", want()},
	} {
		if got := ids(list(c.q)); !slices.Equal(got, c.want) {
			t.Errorf("list?%s = %v, want %v", c.q, got, c.want)
		}
	}

	// Sorting: by created_ts ascending, ties broken by id descending.
	sorted := list("sort=created_ts:asc,id:desc")
	for i := 1; i < len(sorted); i++ {
		p, c := sorted[i-1], sorted[i]
		if c.CreatedTS.Before(p.CreatedTS) || (c.CreatedTS.Equal(p.CreatedTS) && c.ID > p.ID) {
			t.Fatalf("sort=created_ts:asc,id:desc out of order at %d", i)
		}
	}
	byKind := list("sort=kind:desc,id:asc")
	for i := 1; i < len(byKind); i++ {
		if byKind[i].Kind > byKind[i-1].Kind {
			t.Fatalf("sort=kind:desc out of order at %d", i)
		}
	}

	// Paging: pages of 3 in the default order give every action once, in
	// the order of one big page, with no marker after the last one.
	full := list("limit=500")
	var paged []action.Action
	marker := ""
	for pages := 0; ; pages++ {
		if pages > 5 {
			t.Fatal("paging does not end")
		}
		var l wire.ActionList
		e.call(http.MethodGet, "/api/v1/actions?limit=3&marker="+marker, "viewer", nil, http.StatusOK, &l)
		if len(l.Actions) > 3 {
			t.Fatalf("page of %d, want at most 3", len(l.Actions))
		}
		paged = append(paged, l.Actions...)
		if l.NextMarker == "" {
			break
		}
		marker = l.NextMarker
	}
	if len(paged) != 7 || len(full) != 7 {
		t.Fatalf("paged %d, full %d, want 7", len(paged), len(full))
	}
	for i := range full {
		if paged[i].ID != full[i].ID {
			t.Fatalf("page order differs from one big page at %d", i)
		}
	}
	// A default list is newest first.
	if full[0].CreatedTS.Before(full[len(full)-1].CreatedTS) {
		t.Fatal("default order is not newest first")
	}

	for _, bad := range []string{"state=BOGUS", "sort=colour:asc", "sort=id:sideways", "sort=id,id", "limit=0", "limit=x", "marker=nope", "marker=" + action.NewID()} {
		e.fail(http.MethodGet, "/api/v1/actions?"+bad, "viewer", nil, http.StatusBadRequest)
	}
}

// A reason given with approve or reject is kept in the history line and
// the event; a bad one is a 400 that changes nothing.
func TestApproveRejectReason(t *testing.T) {
	t.Parallel()
	e := setup(t)
	a := e.create("op", wire.CreateActionRequest{})
	e.fail(http.MethodPost, "/api/v1/actions/"+a.ID+"/approve", "appr", map[string]string{"reason": "ok\x1b[2J"}, http.StatusBadRequest)
	e.fail(http.MethodPost, "/api/v1/actions/"+a.ID+"/approve", "appr", map[string]any{"reason": "ok", "extra": 1}, http.StatusBadRequest)
	var got action.Action
	e.call(http.MethodGet, "/api/v1/actions/"+a.ID, "appr", nil, http.StatusOK, &got)
	if got.State != action.PendingApprove {
		t.Fatalf("a refused approval changed the action: %s", got.State)
	}
	e.call(http.MethodPost, "/api/v1/actions/"+a.ID+"/approve", "appr", map[string]string{"reason": "change CHG-42"}, http.StatusOK, &got)
	e.call(http.MethodGet, "/api/v1/actions/"+a.ID, "appr", nil, http.StatusOK, &got)
	last := got.History[len(got.History)-1]
	if got.State != action.PendingSchedule || !strings.HasSuffix(last.Reason, ": change CHG-42") {
		t.Fatalf("approved with a reason: %s, history %+v", got.State, last)
	}
	if evs := e.eventsOf(a.ID, "action.approved"); len(evs) != 1 || evs[0].Data["note"] != "change CHG-42" {
		t.Fatalf("action.approved events %+v", evs)
	}

	b := e.create("op", wire.CreateActionRequest{})
	e.call(http.MethodPost, "/api/v1/actions/"+b.ID+"/reject", "appr", map[string]string{"reason": "not in the window"}, http.StatusOK, &got)
	e.call(http.MethodGet, "/api/v1/actions/"+b.ID, "appr", nil, http.StatusOK, &got)
	if last := got.History[len(got.History)-1]; !strings.HasSuffix(last.Reason, ": not in the window") {
		t.Fatalf("rejected with a reason: history %+v", last)
	}
}

// TestInvalidQueryAnswers400: a list query the store refuses (an unknown sort
// field, one given twice) answers 400 through the one error mapping, with the
// store's reason, and the API does not check the sort fields itself.
func TestInvalidQueryAnswers400(t *testing.T) {
	t.Parallel()
	err := fmt.Errorf("list actions: %w: cannot sort by %q", store.ErrInvalidQuery, "colour")
	if p := describe(err); p.Status != http.StatusBadRequest || p.Code != wire.CodeBadRequest || p.Message != err.Error() {
		t.Fatalf("ErrInvalidQuery answers %d %s %q, want 400 %s with the store's reason", p.Status, p.Code, p.Message, wire.CodeBadRequest)
	}
	e := setup(t)
	for _, bad := range []string{"sort=colour:asc", "sort=state,state:desc", "sort=id,id"} {
		body := e.fail(http.MethodGet, "/api/v1/actions?"+bad, "viewer", nil, http.StatusBadRequest)
		if !strings.Contains(body.Message, "invalid query") {
			t.Fatalf("%s: message %q does not carry the store's reason", bad, body.Message)
		}
	}
}

// TestForbiddenNamesTheRolesThatWould: a 403 for a missing permission says
// which roles grant it, so an operator refused `run promote` or `action
// urgent` ("may not approve") learns that it takes an approver, and a
// client reads them from the envelope's allowed_roles.
func TestForbiddenNamesTheRolesThatWould(t *testing.T) {
	t.Parallel()
	e := setup(t)
	a := e.create("op", wire.CreateActionRequest{})
	d := e.fail(http.MethodPost, "/api/v1/actions/"+a.ID+"/urgent", "op", map[string]string{"reason": "x"}, http.StatusForbidden)
	if want := "token op (roles operator) may not approve: that takes the approver or admin role"; !strings.Contains(d.Message, want) {
		t.Fatalf("403 message %q, want it to say %q", d.Message, want)
	}
	if !slices.Equal(d.AllowedRoles, []string{store.RoleApprover, store.RoleAdmin}) {
		t.Fatalf("403 allowed_roles %v, want approver and admin", d.AllowedRoles)
	}
	d = e.fail(http.MethodPost, "/api/v1/tokens", "appr", map[string]any{"name": "x", "roles": []string{"viewer"}}, http.StatusForbidden)
	if want := "may not manage tokens: that takes the admin role"; !strings.Contains(d.Message, want) {
		t.Fatalf("403 message %q, want it to say %q", d.Message, want)
	}
}
