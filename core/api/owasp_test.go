package api

// Negative tests named after the OWASP API Security Top 10 (2023). The
// others live beside the feature they guard:
//   API2 TestAPI2MissingMalformedUnknownRevokedTokens (roles_test.go)
//   API3 TestAPI3CreateRefusesCallerFieldsAndBadInput (actions_test.go)
//   API4 TestAPI4StreamCapPerToken (events_test.go)
//   API5 TestAPI5RoleTable (roles_test.go)
//   API6 TestAPI6SelfApprovalRefused (actions_test.go),
//        TestAPI6AnAgentConflictVoidsTheApproval (core/orchestrate)
//   API8 TestAPI8AgentAnswersOnlyTheCoreOverMutualTLS (agent),
//        TestPassOverMutualTLSChecksEachAgentsIdentity (core/orchestrate)

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/action"
	"github.com/musterhq/muster/shared/wire"
)

// API1 (broken object level authorization): ids that name objects outside
// the caller's reach find nothing and change nothing.
func TestAPI1ObjectsOutsideTheCallersScope(t *testing.T) {
	t.Parallel()
	e := setup(t)
	// A node id that exists, but in another cluster.
	e.fail(http.MethodPost, "/api/v1/actions", "op", wire.CreateActionRequest{ClusterID: "stage", NodeID: "db-1", Kind: kindPing}, http.StatusNotFound)
	e.fail(http.MethodPost, "/api/v1/actions", "op", wire.CreateActionRequest{ClusterID: "prod", NodeID: "s-1", Kind: kindPing}, http.StatusNotFound)
	// Ids of nothing, on every verb.
	ghost := action.NewID()
	for _, verb := range []string{"approve", "reject", "cancel", "retry"} {
		e.fail(http.MethodPost, "/api/v1/actions/"+ghost+"/"+verb, "admin", nil, http.StatusNotFound)
	}
	e.fail(http.MethodGet, "/api/v1/actions/"+ghost, "viewer", nil, http.StatusNotFound)
	e.fail(http.MethodGet, "/api/v1/clusters/nope", "viewer", nil, http.StatusNotFound)
	e.fail(http.MethodDelete, "/api/v1/tokens/nobody", "admin", nil, http.StatusNotFound)
	// A retry stays on its action's node, whatever the request carries.
	a := e.create("op", wire.CreateActionRequest{})
	e.call(http.MethodPost, "/api/v1/actions/"+a.ID+"/cancel", "op", nil, http.StatusOK, nil)
	var r action.Action
	e.call(http.MethodPost, "/api/v1/actions/"+a.ID+"/retry", "op", `{"cluster_id":"stage","node_id":"s-1"}`, http.StatusCreated, &r)
	if r.ClusterID != "prod" || r.NodeID != "db-1" {
		t.Fatalf("the retry moved to %s/%s", r.ClusterID, r.NodeID)
	}
	// Tokens are an admin's: other roles neither list nor revoke them.
	for _, who := range []string{"viewer", "op", "appr"} {
		e.fail(http.MethodGet, "/api/v1/tokens", who, nil, http.StatusForbidden)
		e.fail(http.MethodDelete, "/api/v1/tokens/admin", who, nil, http.StatusForbidden)
	}
	var list wire.ActionList
	e.call(http.MethodGet, "/api/v1/actions?cluster=stage", "viewer", nil, http.StatusOK, &list)
	if len(list.Actions) != 0 {
		t.Fatalf("refused calls created actions in stage: %+v", list.Actions)
	}
}

// API3 (broken object property level authorization): the fields the core
// sets (state, requester, approved_by, the token's secret) cannot be set
// by a caller, on any route that takes a body.
func TestAPI3MassAssignmentIsRefusedOrIgnored(t *testing.T) {
	t.Parallel()
	e := setup(t)
	for _, body := range []string{
		`{"name":"x","roles":["viewer"],"token":"mst_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"}`,
		`{"name":"x","roles":["viewer"],"hash":"00"}`,
		`{"name":"x","roles":["viewer"],"created_by":"mallory"}`,
		`{"name":"x","roles":["viewer"],"created_ts":"2020-01-01T00:00:00Z"}`,
	} {
		e.fail(http.MethodPost, "/api/v1/tokens", "admin", body, http.StatusBadRequest)
	}
	// Approve takes only a reason: a body with anything else is refused
	// and changes nothing.
	a := e.create("op", wire.CreateActionRequest{})
	e.fail(http.MethodPost, "/api/v1/actions/"+a.ID+"/approve", "appr",
		`{"approved_by":"mallory","requester":"mallory","state":"DONE","kind":"x.io/evil"}`, http.StatusBadRequest)
	if rec := e.record(a.ID); rec.State != action.PendingApprove || rec.ApprovedBy != "" {
		t.Fatalf("a refused approve changed the action: %+v", rec.Action)
	}
	var got action.Action
	e.call(http.MethodPost, "/api/v1/actions/"+a.ID+"/approve", "appr", `{"reason":"ok"}`, http.StatusOK, &got)
	rec := e.record(a.ID)
	if rec.ApprovedBy != "appr" || rec.Requester != "op" || rec.State != action.PendingSchedule || rec.Kind != kindPing {
		t.Fatalf("approve with a body: %+v", rec.Action)
	}
	evs := e.eventsOf(a.ID, store.EventActionApproved)
	if len(evs) != 1 || evs[0].Actor != "appr" {
		t.Fatalf("approved events %+v", evs)
	}
}

// Issue 17, hardening: a body with a key twice, or a key that names a field
// only when case is ignored, is a 400 that creates nothing, on every route
// that decodes a body (they share one decoder).
func TestAPI3DuplicateAndCaseFoldedKeysAreRefused(t *testing.T) {
	t.Parallel()
	e := setup(t)
	for path, body := range map[string]string{
		"/api/v1/actions": `{"cluster_id":"prod","node_id":"db-1","kind":"` + kindPing + `","node_id":"db-2"}`,
		"/api/v1/runs":    `{"Cluster_ID":"prod","stages":[{"kind":"` + kindPing + `","target":{"all":true}}]}`,
		"/api/v1/tokens":  `{"name":"x","roles":["viewer"],"Roles":["admin"]}`,
	} {
		if st, b := e.do(http.MethodPost, path, "admin", body); st != http.StatusBadRequest || !strings.Contains(string(b), "key") {
			t.Errorf("POST %s %s: %d %s, want a 400 naming the key", path, body, st, b)
		}
	}
	var list wire.ActionList
	e.call(http.MethodGet, "/api/v1/actions", "viewer", nil, http.StatusOK, &list)
	if len(list.Actions) != 0 {
		t.Fatalf("refused bodies created actions: %+v", list.Actions)
	}
}

// API4 (unrestricted resource consumption): every limit answers its own
// clear 4xx and stores nothing.
func TestAPI4LimitsAnswerAClear4xx(t *testing.T) {
	t.Parallel()
	e := setup(t)
	valid := `"cluster_id":"prod","node_id":"db-1","kind":"muster.io/debug.ping"`
	cases := []struct {
		name, method, path, who string
		body                    any
		status                  int
		says                    string
	}{
		{"body over 1 MiB", http.MethodPost, "/api/v1/actions", "op",
			`{` + valid + `,"args":{"a":"` + strings.Repeat("x", MaxBody) + `"}}`, http.StatusRequestEntityTooLarge, ""},
		{"token body over 1 MiB", http.MethodPost, "/api/v1/tokens", "admin",
			`{"name":"` + strings.Repeat("x", MaxBody) + `"}`, http.StatusRequestEntityTooLarge, ""},
		{"args over 64 KiB", http.MethodPost, "/api/v1/actions", "op",
			`{` + valid + `,"args":{"a":"` + strings.Repeat("x", action.MaxArgs) + `"}}`, http.StatusBadRequest, "args"},
		{"list limit over 500", http.MethodGet, "/api/v1/actions?limit=501", "viewer", nil, http.StatusBadRequest, "limit"},
		{"event limit over 1000", http.MethodGet, "/api/v1/events?limit=1001", "viewer", nil, http.StatusBadRequest, "limit"},
		{"event tail over 1000", http.MethodGet, "/api/v1/events?tail=1001", "viewer", nil, http.StatusBadRequest, "tail"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			d := e.fail(c.method, c.path, c.who, c.body, c.status)
			if !strings.Contains(d.Message, c.says) {
				t.Fatalf("message %q does not name %q", d.Message, c.says)
			}
		})
	}
	t.Cleanup(func() {
		var list wire.ActionList
		e.call(http.MethodGet, "/api/v1/actions?limit=500", "viewer", nil, http.StatusOK, &list)
		if len(list.Actions) != 0 {
			t.Errorf("refused calls stored %d actions", len(list.Actions))
		}
	})
}

// A body sent without Content-Length (chunked) is cut by the limit while it
// is read: still a 413, and nothing stored.
func TestAPI4ChunkedBodyOverTheLimit(t *testing.T) {
	t.Parallel()
	e := setup(t)
	body := io.MultiReader(
		strings.NewReader(`{"cluster_id":"prod","node_id":"db-1","kind":"muster.io/debug.ping","args":{"a":"`),
		strings.NewReader(strings.Repeat("x", MaxBody)), strings.NewReader(`"}}`))
	req, err := http.NewRequest(http.MethodPost, e.ts.URL+"/api/v1/actions", body)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+e.secrets["op"])
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var env wire.ErrorBody
	if err := json.NewDecoder(resp.Body).Decode(&env); err != nil || resp.StatusCode != http.StatusRequestEntityTooLarge ||
		env.Error.Code != wire.CodeTooLarge {
		t.Fatalf("chunked body over the limit: %d %+v %v", resp.StatusCode, env, err)
	}
	var list wire.ActionList
	e.call(http.MethodGet, "/api/v1/actions", "viewer", nil, http.StatusOK, &list)
	if len(list.Actions) != 0 {
		t.Fatalf("a refused body stored %d actions", len(list.Actions))
	}
}

// Secrets never leave the core after the one answer that creates them: not
// in events, not in the token list, not in error answers.
func TestSecretsAppearOnlyInTheCreateAnswer(t *testing.T) {
	t.Parallel()
	e := setup(t)
	var created wire.TokenSecret
	e.call(http.MethodPost, "/api/v1/tokens", "admin", wire.CreateTokenRequest{Name: "erin", Roles: []string{"viewer"}}, http.StatusCreated, &created)
	if !strings.HasPrefix(created.Token, "mst_") {
		t.Fatalf("created %+v", created)
	}
	e.call(http.MethodDelete, "/api/v1/tokens/erin", "admin", nil, http.StatusNoContent, nil)
	_, listed := e.do(http.MethodGet, "/api/v1/tokens", "admin", nil)
	_, evs := e.do(http.MethodGet, "/api/v1/events?limit=1000", "admin", nil)
	stored, _ := json.Marshal(e.events())
	_, refused := e.do(http.MethodGet, "/api/v1/actions", "", nil)
	for what, b := range map[string][]byte{"token list": listed, "events answer": evs, "stored events": stored, "401 answer": refused} {
		s := string(b)
		if strings.Contains(s, "mst_") || strings.Contains(s, created.Token) {
			t.Errorf("the %s carries a secret: %s", what, s)
		}
		for name, secret := range e.secrets {
			if strings.Contains(s, secret) {
				t.Errorf("the %s carries the secret of %s", what, name)
			}
		}
	}
}

// The audit trail: every state-changing call appends an event naming the
// token and the client's address.
func TestEveryStateChangeIsAuditedWithTokenAndAddress(t *testing.T) {
	t.Parallel()
	e := setup(t)
	approved := e.create("op", wire.CreateActionRequest{})
	e.call(http.MethodPost, "/api/v1/actions/"+approved.ID+"/approve", "appr", nil, http.StatusOK, nil)
	rejected := e.create("op", wire.CreateActionRequest{})
	e.call(http.MethodPost, "/api/v1/actions/"+rejected.ID+"/reject", "appr", nil, http.StatusOK, nil)
	e.edit(approved.ID, func(r *store.Record) { r.PushedStoreID = "agent-store-1" }) // as a pass would
	e.call(http.MethodPost, "/api/v1/actions/"+approved.ID+"/cancel", "op", nil, http.StatusAccepted, nil)
	cancelled := e.create("op", wire.CreateActionRequest{})
	e.call(http.MethodPost, "/api/v1/actions/"+cancelled.ID+"/cancel", "admin", nil, http.StatusOK, nil)
	var retry action.Action
	e.call(http.MethodPost, "/api/v1/actions/"+rejected.ID+"/retry", "admin", nil, http.StatusCreated, &retry)
	e.call(http.MethodPost, "/api/v1/tokens", "admin", wire.CreateTokenRequest{Name: "erin", Roles: []string{"viewer"}}, http.StatusCreated, nil)
	e.call(http.MethodDelete, "/api/v1/tokens/erin", "admin", nil, http.StatusNoContent, nil)

	// subject is the action's id, or the token's name.
	want := []struct{ typ, subject, actor string }{
		{store.EventActionCreated, approved.ID, "op"},
		{store.EventActionApproved, approved.ID, "appr"},
		{store.EventActionCreated, rejected.ID, "op"},
		{store.EventActionRejected, rejected.ID, "appr"},
		{store.EventActionCancelRequested, approved.ID, "op"},
		{store.EventActionStateChanged, cancelled.ID, "admin"},
		{store.EventActionCreated, retry.ID, "admin"},
		{store.EventTokenCreated, "erin", "admin"},
		{store.EventTokenRevoked, "erin", "admin"},
	}
	evs := e.events()
	for _, w := range want {
		found := false
		for _, ev := range evs {
			subject := ev.ActionID
			if strings.HasPrefix(ev.Type, "token.") {
				subject, _ = ev.Data["name"].(string)
			}
			if ev.Type == w.typ && subject == w.subject {
				found = true
				if ev.Actor != w.actor || ev.ClientAddr != "127.0.0.1" {
					t.Errorf("%s %s: actor %q client %q, want %q 127.0.0.1", w.typ, w.subject, ev.Actor, ev.ClientAddr, w.actor)
				}
			}
		}
		if !found {
			t.Errorf("no %s event for %q: %+v", w.typ, w.subject, evs)
		}
	}
}

// API6: an approval is never replayed onto other content. After an agent
// conflict replaced an approved action's content (the agent wins, and the
// orchestrator voids the approval), retrying it makes a new action that
// waits for a new approval, and is not scheduled.
func TestAPI6RetryAfterAConflictNeedsAFreshApproval(t *testing.T) {
	t.Parallel()
	e := setup(t)
	a := e.create("op", wire.CreateActionRequest{Kind: kindSleep, Args: json.RawMessage(`{"seconds":1}`)})
	e.call(http.MethodPost, "/api/v1/actions/"+a.ID+"/approve", "appr", nil, http.StatusOK, nil)
	// What a pass writes when the agent holds other content for this id.
	ctx := t.Context()
	if err := e.st.Update(ctx, func(tx store.Tx) error {
		rec, err := tx.Action(ctx, a.ID)
		if err != nil {
			return err
		}
		rec.Kind, rec.Args, rec.State = kindPing, json.RawMessage(`{"evil":true}`), action.Done
		rec.ApprovedBy, rec.ApprovalDigest = "", ""
		return tx.UpdateAction(ctx, rec)
	}); err != nil {
		t.Fatal(err)
	}
	nudged := e.nudges.Count("prod")
	var r action.Action
	e.call(http.MethodPost, "/api/v1/actions/"+a.ID+"/retry", "op", nil, http.StatusCreated, &r)
	if r.State != action.PendingApprove || r.ApprovedBy != "" || string(r.Args) != `{"evil":true}` {
		t.Fatalf("retry %+v, want PENDING_APPROVE without approval", r)
	}
	if rec := e.record(r.ID); rec.ApprovalDigest != "" {
		t.Fatalf("the retry carries a digest %q", rec.ApprovalDigest)
	}
	if e.nudges.Count("prod") != nudged {
		t.Fatal("a retry waiting for approval nudged its cluster")
	}
	e.fail(http.MethodPost, "/api/v1/actions/"+r.ID+"/approve", "op", nil, http.StatusForbidden)
}

// TestListValuesAreCapped (API4): a comma list of 40,000 kinds used to reach
// SQLite and answer 500 ("too many SQL variables"). Every list parameter
// takes at most MaxListValues values, a query string at most MaxQueryParams
// parameters; beyond, a 400 envelope names the parameter and the cap.
func TestListValuesAreCapped(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.create("op", wire.CreateActionRequest{})
	many := func(n int, v func(i int) string) string {
		vs := make([]string, n)
		for i := range vs {
			vs[i] = v(i)
		}
		return strings.Join(vs, ",")
	}
	kinds := func(n int) string { return many(n, func(i int) string { return fmt.Sprintf("x.io/k%d", i) }) }
	states := func(n int) string {
		return many(n, func(i int) string { return string(action.States[i%len(action.States)]) })
	}
	repeated := func(name string, n int) string {
		return many(n, func(i int) string { return fmt.Sprintf("%s=x.io/k%d", name, i) })
	}
	cases := []struct {
		name, path string
		says       []string
	}{
		{"40,000 kinds", "/api/v1/actions?kind=" + kinds(40000), []string{"kind", "40000", strconv.Itoa(MaxListValues)}},
		{"one kind over the cap", "/api/v1/actions?kind=" + kinds(MaxListValues+1), []string{"kind", strconv.Itoa(MaxListValues)}},
		{"states over the cap", "/api/v1/actions?state=" + states(MaxListValues+1), []string{"state", strconv.Itoa(MaxListValues)}},
		{"run states over the cap", "/api/v1/runs?state=" + many(MaxListValues+1, func(int) string { return "DONE" }), []string{"state", strconv.Itoa(MaxListValues)}},
		{"40,000 run states", "/api/v1/runs?state=" + many(40000, func(int) string { return "DONE" }), []string{"state", "40000", strconv.Itoa(MaxListValues)}},
		{"sort keys over the cap", "/api/v1/actions?sort=" + many(MaxListValues+1, func(int) string { return "id" }), []string{"sort", strconv.Itoa(MaxListValues)}},
		{"repeated kind= over the cap", "/api/v1/actions?" + strings.ReplaceAll(repeated("kind", MaxListValues+1), ",", "&"),
			[]string{"parameters", strconv.Itoa(MaxQueryParams)}},
		{"too many parameters", "/api/v1/events?" + strings.ReplaceAll(repeated("x", MaxQueryParams+1), ",", "&"),
			[]string{"parameters", strconv.Itoa(MaxQueryParams)}},
		{"too many parameters on nodes", "/api/v1/nodes?" + strings.ReplaceAll(repeated("cluster", MaxQueryParams+1), ",", "&"),
			[]string{"parameters", strconv.Itoa(MaxQueryParams)}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			d := e.fail(http.MethodGet, c.path, "viewer", nil, http.StatusBadRequest)
			for _, s := range c.says {
				if !strings.Contains(d.Message, s) {
					t.Errorf("message %q does not name %q", d.Message, s)
				}
			}
		})
	}
	// At the cap, lists work, and a repeated list parameter adds to the list.
	var l wire.ActionList
	e.call(http.MethodGet, "/api/v1/actions?kind="+kinds(MaxListValues-1)+","+kindPing, "viewer", nil, http.StatusOK, &l)
	if len(l.Actions) != 1 {
		t.Fatalf("kinds at the cap: %d actions, want 1", len(l.Actions))
	}
	e.call(http.MethodGet, "/api/v1/actions?kind=x.io/none&kind="+kindPing, "viewer", nil, http.StatusOK, &l)
	if len(l.Actions) != 1 {
		t.Fatalf("kind=x.io/none&kind=ping: %d actions, want 1", len(l.Actions))
	}
	e.fail(http.MethodGet, "/api/v1/actions?kind="+kinds(MaxListValues/2+1)+"&kind="+kinds(MaxListValues/2+1), "viewer", nil, http.StatusBadRequest)
}
