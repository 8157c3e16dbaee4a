package api

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/musterhq/muster/core/budget"
	"github.com/musterhq/muster/core/runs/playbook"
	"github.com/musterhq/muster/shared/limit"
	"github.com/musterhq/muster/shared/live"
	"github.com/musterhq/muster/shared/wire"
)

// testPlaybook is a two-stage playbook over prod: a ping on db-1 with a
// message parameter, then on every node.
func testPlaybook(name, extra string) string {
	return fmt.Sprintf(`name: %s
description: a test playbook
params:
  - {name: msg, type: string, default: hello}
  - {name: n, type: int, default: 1}
stages:
  - name: first
    kind: muster.io/debug.ping
    args: {msg: "{{ .msg }}", n: "{{ .n }}"}
    target: {nodes: [db-1]}
  - name: second
    kind: muster.io/debug.ping
    target: {all: true}
    max_concurrency: 50%%
%s`, name, extra)
}

func TestPlaybookApplyIsVersionedAndIdempotent(t *testing.T) {
	t.Parallel()
	e := setup(t)
	var got wire.Playbook
	e.call(http.MethodPost, "/api/v1/playbooks", "op", wire.ApplyPlaybookRequest{Document: testPlaybook("pb", "")}, http.StatusCreated, &got)
	if got.Version != 1 || !got.Changed || got.CreatedBy != "op" {
		t.Fatalf("first apply: %+v", got.PlaybookVersion)
	}
	e.call(http.MethodPost, "/api/v1/playbooks", "op", wire.ApplyPlaybookRequest{Document: testPlaybook("pb", "")}, http.StatusOK, &got)
	if got.Version != 1 || got.Changed {
		t.Fatalf("unchanged apply made version %d (changed %v)", got.Version, got.Changed)
	}
	e.call(http.MethodPost, "/api/v1/playbooks", "op", wire.ApplyPlaybookRequest{Document: testPlaybook("pb", "# v2")}, http.StatusCreated, &got)
	if got.Version != 2 {
		t.Fatalf("changed apply: version %d, want 2", got.Version)
	}
	e.call(http.MethodGet, "/api/v1/playbooks/pb?version=1", "viewer", nil, http.StatusOK, &got)
	if got.Version != 1 || strings.Contains(got.Document, "# v2") || len(got.Versions) != 2 {
		t.Fatalf("show version 1: %+v", got)
	}
	var list wire.PlaybookList
	e.call(http.MethodGet, "/api/v1/playbooks", "viewer", nil, http.StatusOK, &list)
	if len(list.Playbooks) != 1 || list.Playbooks[0].Version != 2 {
		t.Fatalf("list: %+v", list)
	}
	e.call(http.MethodGet, "/api/v1/playbooks/pb?version=9", "viewer", nil, http.StatusNotFound, nil)
}

func TestPlaybookPlanIsWhatStartCreates(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.call(http.MethodPost, "/api/v1/playbooks", "op", wire.ApplyPlaybookRequest{Document: testPlaybook("pb", "")}, http.StatusCreated, nil)
	req := wire.PlanRequest{ClusterID: "prod", Params: map[string]string{"msg": "hi <b>", "n": "3"}}
	var plan wire.Plan
	e.call(http.MethodPost, "/api/v1/playbooks/pb/plan", "viewer", req, http.StatusOK, &plan)
	if plan.Version != 1 || len(plan.Children) != 3 || !sameJSON(plan.Children[0].Args, `{"msg":"hi <b>","n":3}`) {
		t.Fatalf("plan: %+v", plan)
	}
	waves := map[string]int{}
	for _, ch := range plan.Children {
		waves[ch.Stage+"/"+ch.NodeID] = ch.Wave
	}
	if waves["first/db-1"] != 1 || waves["second/db-1"] != 1 || waves["second/db-2"] != 2 {
		t.Fatalf("waves %v: 50%% of 2 nodes is one node a wave", waves)
	}
	var acts wire.ActionList
	e.call(http.MethodGet, "/api/v1/actions", "viewer", nil, http.StatusOK, &acts)
	var runsBefore wire.RunList
	e.call(http.MethodGet, "/api/v1/runs", "viewer", nil, http.StatusOK, &runsBefore)
	if len(acts.Actions) != 0 || len(runsBefore.Runs) != 0 {
		t.Fatalf("plan created %d actions and %d runs", len(acts.Actions), len(runsBefore.Runs))
	}
	var run wire.Run
	req.Digest = plan.Digest
	e.call(http.MethodPost, "/api/v1/playbooks/pb/runs", "op", req, http.StatusCreated, &run)
	if run.Playbook != "pb" || run.PlaybookVersion != 1 || run.Digest != plan.Digest {
		t.Fatalf("run %+v does not carry the plan (digest %s)", run, plan.Digest)
	}
	// A playbook changed after the run was created does not change it.
	e.call(http.MethodPost, "/api/v1/playbooks", "op", wire.ApplyPlaybookRequest{
		Document: strings.Replace(testPlaybook("pb", ""), "all: true", "nodes: [db-2]", 1)}, http.StatusCreated, nil)
	e.call(http.MethodPost, "/api/v1/runs/"+run.ID+"/approve", "appr", nil, http.StatusOK, nil)
	var shown wire.Run
	e.call(http.MethodGet, "/api/v1/runs/"+run.ID, "viewer", nil, http.StatusOK, &shown)
	if shown.Digest != plan.Digest || len(shown.Stages[1].Nodes) != 2 {
		t.Fatalf("the run changed with its playbook: %+v", shown.Stages)
	}
	kids := e.runChildren(run.ID)
	if len(kids) != 1 || kids[0].Stage != "first" || !sameJSON(kids[0].Args, `{"msg":"hi <b>","n":3}`) {
		t.Fatalf("first wave %+v is not the plan's", kids)
	}
}

// Issue 17, item 8: a start names what its plan showed, the version or the
// plan's digest; a playbook applied again in between makes it a 409, not a
// run of the newer version recorded as the first person's request.
func TestPlaybookStartIsTiedToWhatWasPlanned(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.call(http.MethodPost, "/api/v1/playbooks", "op", wire.ApplyPlaybookRequest{Document: testPlaybook("pb", "")}, http.StatusCreated, nil)
	var plan wire.Plan
	e.call(http.MethodPost, "/api/v1/playbooks/pb/plan", "viewer", wire.PlanRequest{ClusterID: "prod"}, http.StatusOK, &plan)
	// Someone else applies version 2 in between.
	e.call(http.MethodPost, "/api/v1/playbooks", "admin", wire.ApplyPlaybookRequest{
		Document: strings.Replace(testPlaybook("pb", ""), "all: true", "nodes: [db-2]", 1)}, http.StatusCreated, nil)
	for name, tc := range map[string]struct {
		req    wire.PlanRequest
		status int
		want   string
	}{
		"neither":            {wire.PlanRequest{ClusterID: "prod"}, http.StatusBadRequest, "the version or the digest"},
		"the version moved":  {wire.PlanRequest{ClusterID: "prod", Version: plan.Version}, http.StatusConflict, "is at version 2 now"},
		"the digest changed": {wire.PlanRequest{ClusterID: "prod", Digest: plan.Digest}, http.StatusConflict, "the plan changed"},
		"a bad digest":       {wire.PlanRequest{ClusterID: "prod", Version: 2, Digest: "nope"}, http.StatusConflict, "the plan changed"},
		// The digest of a plan with other parameters: the playbook did not
		// move, and the message says what to give again.
		"other parameters": {wire.PlanRequest{ClusterID: "prod", Version: 1, Digest: plan.Digest, Params: map[string]string{"msg": "hi"}},
			http.StatusConflict, "with the same parameters"},
	} {
		var body wire.ErrorBody
		e.call(http.MethodPost, "/api/v1/playbooks/pb/runs", "op", tc.req, tc.status, &body)
		if !strings.Contains(body.Error.Message, tc.want) {
			t.Errorf("%s: %q does not say %q", name, body.Error.Message, tc.want)
		}
	}
	var runs wire.RunList
	e.call(http.MethodGet, "/api/v1/runs", "viewer", nil, http.StatusOK, &runs)
	if len(runs.Runs) != 0 {
		t.Fatalf("refused starts created %d runs", len(runs.Runs))
	}
	// What was planned starts: version 1 by its plan's digest, and the
	// newest by its version.
	var run wire.Run
	e.call(http.MethodPost, "/api/v1/playbooks/pb/runs", "op", wire.PlanRequest{ClusterID: "prod", Version: 1, Digest: plan.Digest}, http.StatusCreated, &run)
	if run.PlaybookVersion != 1 || run.Digest != plan.Digest {
		t.Fatalf("start of version 1 by digest: version %d, digest %s", run.PlaybookVersion, run.Digest)
	}
	e.call(http.MethodPost, "/api/v1/playbooks/pb/runs", "op", wire.PlanRequest{ClusterID: "prod", Version: 2}, http.StatusCreated, &run)
	if run.PlaybookVersion != 2 {
		t.Fatalf("start of version 2: version %d", run.PlaybookVersion)
	}
}

// Issue 35: a plan's limit and not-before are in its digest, which the run
// started with the same ones is stored with; a start by the digest of
// another limit is a 409 and creates nothing; a limit that picks no node,
// or leaves a stage none, is a 422.
func TestPlaybookLimitAndNotBeforeAreInTheDigest(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.call(http.MethodPost, "/api/v1/playbooks", "op", wire.ApplyPlaybookRequest{Document: testPlaybook("pb", "")}, http.StatusCreated, nil)
	at := time.Now().Add(3 * time.Hour).UTC().Truncate(time.Second)
	plan := func(limit ...string) wire.Plan {
		t.Helper()
		var p wire.Plan
		e.call(http.MethodPost, "/api/v1/playbooks/pb/plan", "viewer", wire.PlanRequest{ClusterID: "prod", Limit: limit, NotBefore: &at}, http.StatusOK, &p)
		return p
	}
	one, both := plan("db-1"), plan("db-{1,2}")
	if one.Digest == both.Digest || len(one.Stages[1].Nodes) != 1 || one.NotBefore == nil || !one.NotBefore.Equal(at) ||
		len(one.Limit) != 1 {
		t.Fatalf("plans of two limits: %+v and %+v", one, both)
	}
	var body wire.ErrorBody
	e.call(http.MethodPost, "/api/v1/playbooks/pb/runs", "op", wire.PlanRequest{ClusterID: "prod", Digest: one.Digest, Limit: []string{"db-{1,2}"},
		NotBefore: &at}, http.StatusConflict, &body)
	if !strings.Contains(body.Error.Message, "the plan changed") {
		t.Fatalf("start by another limit's digest: %q", body.Error.Message)
	}
	for limit, want := range map[string]string{"nosuch": "no node of the cluster matches nosuch", "db-2": "stage first: the limit db-2 keeps none"} {
		e.call(http.MethodPost, "/api/v1/playbooks/pb/plan", "viewer", wire.PlanRequest{ClusterID: "prod", Limit: []string{limit}},
			http.StatusUnprocessableEntity, &body)
		if !strings.Contains(body.Error.Message, want) {
			t.Errorf("limit %s: %q does not say %q", limit, body.Error.Message, want)
		}
	}
	var runs wire.RunList
	e.call(http.MethodGet, "/api/v1/runs", "viewer", nil, http.StatusOK, &runs)
	if len(runs.Runs) != 0 {
		t.Fatalf("refused starts created %d runs", len(runs.Runs))
	}
	var run wire.Run
	e.call(http.MethodPost, "/api/v1/playbooks/pb/runs", "op", wire.PlanRequest{ClusterID: "prod", Digest: one.Digest, Limit: []string{"db-1"},
		NotBefore: &at}, http.StatusCreated, &run)
	if run.Digest != one.Digest || run.NotBefore == nil || !run.NotBefore.Equal(at) {
		t.Fatalf("the run is not the plan: digest %s (plan %s), not before %v", run.Digest, one.Digest, run.NotBefore)
	}
}

func TestPlaybookBadInputIsRefusedAndStoresNothing(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.call(http.MethodPost, "/api/v1/playbooks", "op", wire.ApplyPlaybookRequest{Document: testPlaybook("pb", "")}, http.StatusCreated, nil)
	for name, tc := range map[string]struct {
		path string
		body any
		want string
	}{
		"not a playbook":               {"/api/v1/playbooks", wire.ApplyPlaybookRequest{Document: "hello: world\n"}, "field hello not found"},
		"unknown field":                {"/api/v1/playbooks", wire.ApplyPlaybookRequest{Document: testPlaybook("pb2", "    retries: 2\n")}, "field retries not found"},
		"undefined param":              {"/api/v1/playbooks", wire.ApplyPlaybookRequest{Document: strings.Replace(testPlaybook("pb3", ""), ".msg", ".mesage", 1)}, `undefined parameter "mesage"`},
		"too large":                    {"/api/v1/playbooks", wire.ApplyPlaybookRequest{Document: testPlaybook("pb4", "#"+strings.Repeat("x", 300<<10)+"\n")}, "over the limit"},
		"wrong param type":             {"/api/v1/playbooks/pb/plan", wire.PlanRequest{ClusterID: "prod", Params: map[string]string{"n": "three"}}, `"three" is not an int`},
		"unknown param":                {"/api/v1/playbooks/pb/runs", wire.PlanRequest{ClusterID: "prod", Version: 1, Params: map[string]string{"colour": "red"}}, "unknown parameter(s) colour"},
		"document on start, no digest": {"/api/v1/playbooks/pb/runs", wire.PlanRequest{ClusterID: "prod", Document: testPlaybook("pb", "")}, "give the digest that the plan showed"},
	} {
		t.Run(name, func(t *testing.T) {
			var body wire.ErrorBody
			e.call(http.MethodPost, tc.path, "op", tc.body, http.StatusBadRequest, &body)
			if !strings.Contains(body.Error.Message, tc.want) {
				t.Fatalf("message %q does not say %q", body.Error.Message, tc.want)
			}
		})
	}
	var list wire.PlaybookList
	e.call(http.MethodGet, "/api/v1/playbooks", "viewer", nil, http.StatusOK, &list)
	var runs wire.RunList
	e.call(http.MethodGet, "/api/v1/runs", "viewer", nil, http.StatusOK, &runs)
	if len(list.Playbooks) != 1 || len(runs.Runs) != 0 {
		b, _ := json.Marshal(list)
		t.Fatalf("refused input was stored: %s, %d runs", b, len(runs.Runs))
	}
}

func sameJSON(a []byte, b string) bool {
	var x, y any
	return json.Unmarshal(a, &x) == nil && json.Unmarshal([]byte(b), &y) == nil && fmt.Sprint(x) == fmt.Sprint(y)
}

// FuzzPlaybookBodies decodes arbitrary bodies as the playbook and run calls
// do: every refusal is a 400, never a 5xx or a panic.
func FuzzPlaybookBodies(f *testing.F) {
	for _, s := range []string{
		`{"cluster_id":"prod"}`, `{"cluster_id":"prod","params":{"n":"2","msg":"x"}}`,
		`{"cluster_id":"prod","version":1}`, `{"cluster_id":"prod","document":"name: pb\nstages: []\n"}`,
		`{"cluster_id":"prod","params":{"n":1}}`, `{"reason":"x"}`, `{"document":"name: x"}`, `{}`, `[]`, ``,
		`{"cluster_id":"prod","limit":["db-*","web-1"],"not_before":"2030-01-01T02:00:00Z"}`, `{"cluster_id":"prod","limit":"db-1"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		check := func(err error) {
			if err == nil {
				return
			}
			if st, _ := classify(err); st != http.StatusBadRequest {
				t.Fatalf("error %v answers %d, not 400", err, st)
			}
		}
		var plan wire.PlanRequest
		check(decodeStrict(body, &plan))
		var apply wire.ApplyPlaybookRequest
		if err := decodeStrict(body, &apply); err == nil {
			_, err := playbook.Parse([]byte(apply.Document))
			check(err)
		} else {
			check(err)
		}
		var reason wire.ReasonRequest
		check(decodeStrict(body, &reason))
	})
}

func TestPlaybookPlanShowsWhatTheBudgetHoldsBack(t *testing.T) {
	t.Parallel()
	e := setup(t, func(c *Config) {
		c.Budget = live.New(budget.Policy{MaxUnavailable: map[string]limit.Limit{"prod": limit.MustParse("1")},
			Kinds: []budget.KindRule{{Kind: "muster.io/debug.ping", Disruptive: true}}})
	})
	// Both nodes at once: the budget of one unavailable node lets one go.
	doc := strings.Replace(testPlaybook("pb", ""), "max_concurrency: 50%", "max_concurrency: 100%", 1)
	e.call(http.MethodPost, "/api/v1/playbooks", "op", wire.ApplyPlaybookRequest{Document: doc}, http.StatusCreated, nil)
	var plan wire.Plan
	e.call(http.MethodPost, "/api/v1/playbooks/pb/plan", "viewer", wire.PlanRequest{ClusterID: "prod"}, http.StatusOK, &plan)
	held := map[string]string{}
	for _, ch := range plan.Children {
		held[ch.Stage+"/"+ch.NodeID] = ch.Held
	}
	// db-2 is DOWN in the fixture: the budget's one slot is taken by it.
	if !strings.Contains(held["second/db-2"], "the node is down") || !strings.Contains(held["second/db-1"], "1 of 1 unavailable") {
		t.Fatalf("held %q", held)
	}
}
