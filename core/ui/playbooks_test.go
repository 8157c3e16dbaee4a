package ui

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/musterhq/muster/core/ops"
	"github.com/musterhq/muster/core/runs/playbook"
	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/wire"
)

// sleepPlaybook has one parameter of each type; the sleep's seconds and
// the target come from them (the note and loud ride along in the args).
const sleepPlaybook = `name: nap
description: sleeps on the chosen nodes <b>
params:
  - {name: seconds, type: int, default: 1, description: how long}
  - {name: node, type: enum, values: [db-1, db-2]}
  - {name: note, type: string, default: "x"}
  - {name: loud, type: bool, default: false}
stages:
  - name: sleep
    kind: muster.io/debug.sleep
    args: {seconds: "{{ .seconds }}", note: "{{ .note }}", loud: "{{ .loud }}"}
    target: {nodes: ["{{ .node }}"]}
`

// applyPlaybook stores doc as a new version, as `muster playbook apply` does.
func (e *env) applyPlaybook(doc, who string) *store.Playbook {
	e.t.Helper()
	p, err := playbook.Parse([]byte(doc))
	if err != nil {
		e.t.Fatal(err)
	}
	var out *store.Playbook
	e.runChange(func(ctx context.Context, tx store.Tx) error {
		out, _, err = playbook.Apply(ctx, tx, doc, p, who)
		return err
	})
	return out
}

// planDigest is the digest of the plan of the newest version of name.
func (e *env) planDigest(name string, params map[string]string) (int, string) {
	e.t.Helper()
	req := &wire.PlanRequest{ClusterID: "prod", Params: params}
	pb, version, err := playbook.Load(context.Background(), e.st, name, req)
	if err != nil {
		e.t.Fatal(err)
	}
	p, err := e.ui.plan(context.Background(), ops.Caller{Name: "viewer", Roles: []string{store.RoleViewer}}, pb, version, req)
	if err != nil {
		e.t.Fatal(err)
	}
	return version, p.Digest
}

// The Playbooks page lists the playbooks; a playbook's page lists its
// versions and shows the diff between two, escaped.
func TestPlaybooksPageListsVersionsAndDiffs(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.applyPlaybook(sleepPlaybook, "op")
	e.applyPlaybook(strings.Replace(sleepPlaybook, "default: 1,", "default: 5,", 1), "admin")
	b := e.browser().signIn("viewer")
	_, _, body := b.get("/ui/playbooks")
	if !strings.Contains(body, `<a href="/ui/playbooks/nap">nap</a>`) || !strings.Contains(body, "v2") {
		t.Fatalf("the list lacks playbook nap v2:\n%s", body)
	}
	status, _, body := b.get("/ui/playbooks/nap?version=2&diff=1")
	if status != http.StatusOK {
		t.Fatalf("playbook page: %d\n%s", status, body)
	}
	for _, want := range []string{`data-version="1"`, `data-version="2"`, "--- version 1", "&#43;&#43;&#43; version 2",
		"-  - {name: seconds, type: int, default: 1,", "&#43;  - {name: seconds, type: int, default: 5,",
		"sleeps on the chosen nodes &lt;b&gt;"} {
		if !strings.Contains(body, want) {
			t.Errorf("the playbook page lacks %q", want)
		}
	}
	// The plan form follows the parameters' types.
	for _, want := range []string{`type="number" step="1" id="param-seconds" name="p.seconds" value="5"`,
		`<select id="param-node" name="p.node" required>`, `type="checkbox" id="param-loud" name="p.loud" value="true"`,
		`type="text" id="param-note" name="p.note" value="x"`} {
		if !strings.Contains(body, want) {
			t.Errorf("the plan form lacks %q", want)
		}
	}
	for page, want := range map[string]int{
		"/ui/playbooks/nope":           http.StatusNotFound,
		"/ui/playbooks/NAP!":           http.StatusNotFound,
		"/ui/playbooks/nap?version=9":  http.StatusNotFound,
		"/ui/playbooks/nap?version=-1": http.StatusBadRequest,
		"/ui/playbooks/nap?diff=x":     http.StatusBadRequest,
		"/ui/playbooks/nap?plan=1":     http.StatusBadRequest,
		"/ui/playbooks/nap?plan=1&cluster=prod&p.seconds=abc&p.node=db-1": http.StatusBadRequest,
		"/ui/playbooks/nap?plan=1&cluster=prod&p.bogus=1&p.node=db-1":     http.StatusBadRequest,
	} {
		if status, _, _ := b.get(page); status != want {
			t.Errorf("%s: %d, want %d", page, status, want)
		}
	}
}

// A plan from the typed form shows its actions and digest; an operator
// starts it (the digest carried to the start), a viewer sees no Start; a
// start whose plan moved is refused with 409 and starts nothing.
func TestPlanAndStartFromThePlaybookPage(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.addNodes("db-2")
	e.applyPlaybook(sleepPlaybook, "admin")
	planURL := "/ui/playbooks/nap?" + url.Values{"plan": {"1"}, "version": {"1"}, "cluster": {"prod"},
		"p.seconds": {"3"}, "p.node": {"db-2"}, "p.note": {"<i>hi</i>"}}.Encode()
	viewer := e.browser().signIn("viewer")
	status, _, body := viewer.get(planURL)
	if status != http.StatusOK {
		t.Fatalf("plan: %d\n%s", status, body)
	}
	_, digest := e.planDigest("nap", map[string]string{"seconds": "3", "node": "db-2", "note": "<i>hi</i>", "loud": "false"})
	if !strings.Contains(body, `data-copy="`+digest+`"`) || !strings.Contains(body, `&#34;seconds&#34;: 3`) && !strings.Contains(body, `"seconds": 3`) {
		t.Fatalf("the plan lacks its digest %s or the typed seconds:\n%s", digest, body)
	}
	if strings.Contains(body, "/start\"") {
		t.Fatal("a viewer sees Start")
	}
	op := e.browser().signIn("op")
	_, _, body = op.get(planURL)
	if !strings.Contains(body, `name="digest" value="`+digest+`"`) || !strings.Contains(body, `name="p.note" value="&lt;i&gt;hi&lt;/i&gt;"`) {
		t.Fatalf("the start form does not carry the digest and the parameters:\n%s", body)
	}
	form := url.Values{"csrf": {op.csrf}, "cluster": {"prod"}, "version": {"1"}, "digest": {digest},
		"p.seconds": {"3"}, "p.node": {"db-2"}, "p.note": {"<i>hi</i>"}, "p.loud": {"false"}}
	// A digest that is not the plan's starts nothing.
	bad := url.Values{}
	for k, v := range form {
		bad[k] = v
	}
	bad.Set("digest", strings.Repeat("0", len(digest)))
	if status, _, _ := op.post("/ui/playbooks/nap/start", bad); status != http.StatusConflict {
		t.Fatalf("start with a stale digest: %d, want 409", status)
	}
	bad.Del("digest")
	if status, _, _ := op.post("/ui/playbooks/nap/start", bad); status != http.StatusBadRequest {
		t.Fatalf("start without a digest: %d, want 400", status)
	}
	if n := e.runCount(); n != 0 {
		t.Fatalf("%d runs after refused starts", n)
	}
	status, loc, _ := op.post("/ui/playbooks/nap/start", form)
	if status != http.StatusSeeOther || !strings.HasPrefix(loc, "/ui/runs/") {
		t.Fatalf("start: %d %q", status, loc)
	}
	id := strings.TrimPrefix(strings.SplitN(loc, "?", 2)[0], "/ui/runs/")
	r := e.run(id)
	if r.Playbook != "nap" || r.PlaybookVersion != 1 || r.Digest != digest || r.Requester != "op" ||
		len(r.Stages) != 1 || r.Stages[0].Nodes[0] != "db-2" {
		t.Fatalf("the run started: %+v", r)
	}
	_, _, body = op.get(loc)
	if !strings.Contains(body, "Started run "+id) {
		t.Fatal("no confirmation after the start")
	}
}

func (e *env) runCount() int {
	e.t.Helper()
	var n int
	if err := e.st.Read(context.Background(), func(rd store.Reader) error {
		list, err := rd.ListRuns(context.Background(), store.RunQuery{Limit: 1000, Brief: true})
		n = len(list)
		return err
	}); err != nil {
		e.t.Fatal(err)
	}
	return n
}

// The plan page shows each node's steps, then that node's rollback, the
// canary nodes and the canary pause after them, escaped.
func TestPlanPageShowsEachNodesRollbackAndTheCanaryPause(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.addNodes("db-2")
	e.applyPlaybook(`name: roll
description: upgrade with a rollback
stages:
  - name: up
    target: {all: true}
    max_concurrency: 1
    canary: 1
    steps:
      - {name: upgrade, kind: muster.io/debug.ping}
    rollback:
      - {name: undo-it, kind: muster.io/debug.ping, when: '{{ eq .steps.upgrade.state "DONE" }}', args: {note: "<b>back</b>"}}
`, "admin")
	viewer := e.browser().signIn("viewer")
	status, _, body := viewer.get("/ui/playbooks/roll?" + url.Values{"plan": {"1"}, "version": {"1"}, "cluster": {"prod"}}.Encode())
	if status != http.StatusOK {
		t.Fatalf("plan: %d\n%s", status, body)
	}
	if n := strings.Count(body, "rollback, if the node fails"); n != 2 {
		t.Fatalf("%d rollback rows, want one per node (2):\n%s", n, body)
	}
	if strings.Count(body, "Canary pause:") != 1 || strings.Count(body, `<span class="tag">canary</span>`) != 2 {
		t.Fatalf("the canary node and its pause are not shown once:\n%s", body)
	}
	pause, rollback2 := strings.Index(body, "Canary pause:"), strings.LastIndex(body, "undo-it")
	if pause < 0 || pause > rollback2 || pause < strings.Index(body, "undo-it") {
		t.Fatal("the canary pause is not between the first node's rollback and the second node's")
	}
	if strings.Contains(body, "<b>back</b>") || !strings.Contains(body, "eq .steps.upgrade.state &#34;DONE&#34;") {
		t.Fatalf("args or when not escaped:\n%s", body)
	}
}

// TestPlanPageCountsRollbackStepsApart: the plan's summary counts the
// actions a start makes and, apart, the rollback steps made only on a node
// that fails, as muster playbook plan does (it once counted them together).
func TestPlanPageCountsRollbackStepsApart(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.addNodes("db-2")
	e.applyPlaybook(`name: roll
stages:
  - name: up
    target: {all: true}
    steps:
      - {name: upgrade, kind: muster.io/debug.ping}
      - {name: verify, kind: muster.io/debug.ping}
    rollback:
      - {name: undo, kind: muster.io/debug.ping}
`, "admin")
	viewer := e.browser().signIn("viewer")
	status, _, body := viewer.get("/ui/playbooks/roll?" + url.Values{"plan": {"1"}, "version": {"1"}, "cluster": {"prod"}}.Encode())
	if status != http.StatusOK {
		t.Fatalf("plan: %d\n%s", status, body)
	}
	if want := "1 stage, 4 actions, and 2 rollback steps made only on a node that fails"; !strings.Contains(body, want) {
		t.Fatalf("plan page does not say %q:\n%s", want, body)
	}
}

// allPlaybook sleeps on every node of the cluster.
const allPlaybook = `name: all
description: sleeps everywhere
stages:
  - name: sleep
    kind: muster.io/debug.sleep
    args: {seconds: 1}
    target: {all: true}
`

// The plan form takes a node subset and a not-before; the plan shows only
// those nodes, its digest is the one a start with the same limit and time
// is approved under, and the start form carries both: a start whose limit
// differs from the plan's starts nothing (409).
func TestPlanAndStartALimitAndANotBeforeFromThePlaybookPage(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.addNodes("db-2", "web-1")
	e.applyPlaybook(allPlaybook, "admin")
	notBefore := time.Now().UTC().Add(2 * time.Hour).Truncate(time.Minute)
	typed := notBefore.Format("2006-01-02T15:04")
	op := e.browser().signIn("op")
	status, _, body := op.get("/ui/playbooks/all?" + url.Values{"plan": {"1"}, "version": {"1"}, "cluster": {"prod"},
		"limit": {"db-*"}, "not_before": {typed}}.Encode())
	if status != http.StatusOK {
		t.Fatalf("plan: %d\n%s", status, body)
	}
	req := &wire.PlanRequest{ClusterID: "prod", Limit: []string{"db-*"}, NotBefore: &notBefore}
	pb, version, err := playbook.Load(context.Background(), e.st, "all", req)
	if err != nil {
		t.Fatal(err)
	}
	p, err := e.ui.plan(context.Background(), ops.Caller{Name: "viewer", Roles: []string{store.RoleViewer}}, pb, version, req)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`name="digest" value="` + p.Digest + `"`, `name="limit" value="db-*"`,
		`name="not_before" value="` + notBefore.Format(time.RFC3339) + `"`, `value="` + typed + `"`} {
		if !strings.Contains(body, want) {
			t.Errorf("the plan page lacks %s", want)
		}
	}
	if !strings.Contains(body, ">db-2<") || strings.Contains(body, ">web-1<") {
		t.Error("the plan limited to db-* lacks db-2 or shows web-1")
	}
	form := url.Values{"csrf": {op.csrf}, "cluster": {"prod"}, "version": {"1"}, "digest": {p.Digest},
		"limit": {"db-*"}, "not_before": {notBefore.Format(time.RFC3339)}}
	other := url.Values{}
	for k, v := range form {
		other[k] = v
	}
	other.Set("limit", "*")
	if status, _, _ := op.post("/ui/playbooks/all/start", other); status != http.StatusConflict {
		t.Fatalf("a start with another limit than the plan's: %d, want 409", status)
	}
	other.Set("limit", "db-1,,db-2")
	if status, _, _ := op.post("/ui/playbooks/all/start", other); status != http.StatusBadRequest {
		t.Fatalf("a start with an empty pattern in its limit: %d, want 400", status)
	}
	if n := e.runCount(); n != 0 {
		t.Fatalf("%d runs after refused starts", n)
	}
	status, loc, _ := op.post("/ui/playbooks/all/start", form)
	if status != http.StatusSeeOther {
		t.Fatalf("start: %d %q", status, loc)
	}
	r := e.run(strings.TrimPrefix(strings.SplitN(loc, "?", 2)[0], "/ui/runs/"))
	if r.Digest != p.Digest || strings.Join(r.Stages[0].Nodes, ",") != "db-1,db-2" || r.NotBefore == nil || !r.NotBefore.Equal(notBefore) {
		t.Fatalf("the run started: digest %s nodes %v not before %v", r.Digest, r.Stages[0].Nodes, r.NotBefore)
	}
}

// TestPlanPageSaysACanaryThatPromotesItselfDoesSo: the plan of a canary
// with auto_promote_after_s and abort_on says the run goes on by itself
// once its gates have held, and what aborts it, not that it waits for an
// approver.
func TestPlanPageSaysACanaryThatPromotesItselfDoesSo(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.addNodes("db-2")
	e.applyPlaybook(`name: gated
description: a canary gated on health
stages:
  - name: up
    target: {all: true}
    max_concurrency: 1
    canary: 1
    auto_promote_after_s: 15
    abort_on: [healthy]
    steps:
      - {name: upgrade, kind: muster.io/debug.ping}
      - {name: healthy, gate: {http: {url: "https://health.example.com/{{ .node.id }}", expect_status: 200}}}
`, "admin")
	viewer := e.browser().signIn("viewer")
	status, _, body := viewer.get("/ui/playbooks/gated?" + url.Values{"plan": {"1"}, "version": {"1"}, "cluster": {"prod"}}.Encode())
	if status != http.StatusOK {
		t.Fatalf("plan: %d\n%s", status, body)
	}
	for _, want := range []string{"it promotes itself once its gates have held 15 s", "a failing healthy aborts it"} {
		if !strings.Contains(body, want) {
			t.Errorf("the plan lacks %q:\n%s", want, body)
		}
	}
	if strings.Contains(body, "pauses until an approver") {
		t.Errorf("the plan says the canary waits for an approver:\n%s", body)
	}
}
