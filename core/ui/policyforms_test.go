package ui

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/musterhq/muster/core/nodes"
	"github.com/musterhq/muster/core/ops"
	"github.com/musterhq/muster/core/runs/playbook"
	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/wire"
)

// policies are the live records of kind on cluster prod, by id.
func (e *env) policies(t *testing.T, kind string) map[string]wire.PolicyRecord {
	t.Helper()
	rs, err := e.ui.ops.Policies(context.Background(), ops.Caller{Name: "admin", Roles: []string{store.RoleAdmin}}, kind, "prod", false)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]wire.PolicyRecord{}
	for _, r := range rs {
		out[r.ID] = r
	}
	return out
}

// Issue 33, item 1 from the browser: the Clusters page lists the
// cluster's windows (name, cron, duration, time zone, source) and budget,
// and offers the forms of `muster window` and `muster budget` to those the
// operations let make the change: a first window and a narrower budget to
// an operator, another window, a removal and a wider budget to an
// approver. Each form goes through ops.PutPolicy or ops.DeletePolicy: a
// refusal is the operations' (a 403 naming the role it takes, a 400 naming
// the field), and nothing changes.
func TestClustersPageWindowAndBudgetForms(t *testing.T) {
	t.Parallel()
	e := setup(t)
	viewer, op, appr := e.browser().signIn("viewer"), e.browser().signIn("op"), e.browser().signIn("appr")
	const addForm, budgetForm = `action="/ui/clusters/prod/windows"`, `action="/ui/clusters/prod/budget"`
	for _, c := range []struct {
		b          *browser
		add, setBu bool
	}{{viewer, false, false}, {op, true, true}, {appr, true, true}} {
		_, _, body := c.b.get("/ui/clusters")
		if got := [2]bool{strings.Contains(body, addForm), strings.Contains(body, budgetForm)}; got != [2]bool{c.add, c.setBu} {
			t.Errorf("with no window, the forms offered: %v, want %v", got, [2]bool{c.add, c.setBu})
		}
		if !strings.Contains(body, "No maintenance window is stored") || !strings.Contains(body, "No budget is stored") {
			t.Errorf("the page does not say the cluster has no window and no budget")
		}
	}

	// An operator makes the first window, with its name, escaped reason.
	status, loc, body := op.post("/ui/clusters/prod/windows", url.Values{"csrf": {op.csrf}, "name": {"nightly"}, "cron": {"0 2 * * *"},
		"duration": {"240m"}, "timezone": {"Europe/Berlin"}, "reason": {"change <b>board</b> 12"}})
	if status != http.StatusSeeOther || loc != "/ui/clusters?done=window-added#cluster-prod" {
		t.Fatalf("add the first window as op: %d %s\n%s", status, loc, body)
	}
	w, ok := e.policies(t, wire.KindWindow)["nightly"]
	var spec wire.WindowSpec
	_ = json.Unmarshal(w.Spec, &spec)
	if !ok || spec != (wire.WindowSpec{Cluster: "prod", Cron: "0 2 * * *", Duration: "4h0m0s", Timezone: "Europe/Berlin"}) ||
		w.UpdatedBy != "op" || w.Reason != "change <b>board</b> 12" {
		t.Fatalf("the stored window: %+v %+v", w, spec)
	}
	_, _, body = op.get("/ui/clusters?done=window-added")
	for _, want := range []string{`<tr id="window-nightly">`, `<code class="cron">0 2 * * *</code>`, `<td data-label="Duration">4h0m0s</td>`,
		`<td data-label="Time zone">Europe/Berlin</td>`, `<td data-label="Source">api</td>`, `change &lt;b&gt;board&lt;/b&gt; 12`,
		`class="flash"`} {
		if !strings.Contains(body, want) {
			t.Errorf("the page after the window lacks %q", want)
		}
	}
	if strings.Contains(body, "<b>board") {
		t.Fatal("a window's reason is not escaped")
	}
	// Another window and a removal may let held work go: not the
	// operator's; the form is not offered, and a forged post is the
	// operations' 403, naming the role.
	if strings.Contains(body, addForm) || strings.Contains(body, `action="/ui/windows/nightly/remove"`) {
		t.Error("the operator is offered another window or a removal")
	}
	for path, form := range map[string]url.Values{
		"/ui/clusters/prod/windows":  {"name": {"second"}, "cron": {"0 3 * * *"}, "duration": {"1h"}, "reason": {"more"}},
		"/ui/windows/nightly/remove": {"reason": {"not needed"}},
	} {
		form.Set("csrf", op.csrf)
		status, _, body := op.post(path, form)
		if status != http.StatusForbidden || !strings.Contains(body, "approver") {
			t.Errorf("POST %s as op: %d, want the 403 page naming approver\n%s", path, status, body)
		}
	}
	if ws := e.policies(t, wire.KindWindow); len(ws) != 1 {
		t.Fatalf("windows after the refused posts: %v", ws)
	}
	// Bad fields are 400s naming them, from the operations.
	for _, c := range []struct {
		form url.Values
		want string
	}{
		{url.Values{"cron": {"every day"}, "duration": {"1h"}, "reason": {"x"}}, "cron"},
		{url.Values{"cron": {"0 3 * * *"}, "duration": {"soon"}, "reason": {"x"}}, "duration"},
		{url.Values{"cron": {"0 3 * * *"}, "duration": {"1h"}, "timezone": {"Mars/Olympus"}, "reason": {"x"}}, "timezone"},
		{url.Values{"cron": {"0 3 * * *"}, "duration": {"1h"}}, "reason is required"},
		{url.Values{"cron": {"0 3 * * *"}, "duration": {"1h"}, "name": {"no spaces"}, "reason": {"x"}}, "name"},
		{url.Values{"duration": {"1h"}, "reason": {"x"}}, "cron is required"},
	} {
		c.form.Set("csrf", appr.csrf)
		status, _, body := appr.post("/ui/clusters/prod/windows", c.form)
		if status != http.StatusBadRequest || !strings.Contains(body, c.want) {
			t.Errorf("add window %v: %d, want 400 naming %q\n%s", c.form, status, c.want, body)
		}
	}
	// Add never replaces: the approver's Add with the name the cluster's
	// window has is a 409 and the window stays as it was.
	status, _, body = appr.post("/ui/clusters/prod/windows", url.Values{"csrf": {appr.csrf}, "name": {"nightly"},
		"cron": {"0 5 * * *"}, "duration": {"1h"}, "reason": {"again"}})
	if status != http.StatusConflict || !strings.Contains(body, "has a window named nightly already") {
		t.Errorf("add a window of a taken name: %d, want 409\n%s", status, body)
	}
	if again := e.policies(t, wire.KindWindow)["nightly"]; again.Version != w.Version || string(again.Spec) != string(w.Spec) {
		t.Errorf("the window after a refused Add: %+v, was %+v", again, w)
	}
	// The approver removes the window, with a reason.
	_, _, body = appr.get("/ui/clusters")
	if !strings.Contains(body, `action="/ui/windows/nightly/remove"`) || !strings.Contains(body, addForm) {
		t.Fatal("the approver is not offered the Remove and Add window forms")
	}
	if status, _, body := appr.post("/ui/windows/nightly/remove", url.Values{"csrf": {appr.csrf}}); status != http.StatusBadRequest ||
		!strings.Contains(body, "reason is required") {
		t.Errorf("remove without a reason: %d\n%s", status, body)
	}
	if status, loc, body := appr.post("/ui/windows/nightly/remove", url.Values{"csrf": {appr.csrf}, "reason": {"not needed"}}); status != http.StatusSeeOther ||
		loc != "/ui/clusters?done=window-removed#cluster-prod" {
		t.Fatalf("remove as appr: %d %s\n%s", status, loc, body)
	}
	if ws := e.policies(t, wire.KindWindow); len(ws) != 0 {
		t.Fatalf("windows after the removal: %v", ws)
	}
	if status, _, _ := appr.post("/ui/windows/nightly/remove", url.Values{"csrf": {appr.csrf}, "reason": {"again"}}); status != http.StatusNotFound {
		t.Errorf("remove a removed window: %d, want 404", status)
	}

	// Budgets: the operator sets one and narrows it; widening takes an
	// approver.
	setBudget := func(b *browser, max, reason string) (int, string) {
		status, _, body := b.post("/ui/clusters/prod/budget", url.Values{"csrf": {b.csrf}, "max_unavailable": {max}, "reason": {reason}})
		return status, body
	}
	budget := func() string {
		var s wire.BudgetSpec
		_ = json.Unmarshal(e.policies(t, wire.KindBudget)["prod"].Spec, &s)
		return s.MaxUnavailable
	}
	if status, body := setBudget(op, "2", "capacity review"); status != http.StatusSeeOther || budget() != "2" {
		t.Fatalf("op sets the first budget: %d %q\n%s", status, budget(), body)
	}
	if status, body := setBudget(op, "1", "incident 4711"); status != http.StatusSeeOther || budget() != "1" {
		t.Fatalf("op narrows the budget: %d %q\n%s", status, budget(), body)
	}
	if status, body := setBudget(op, "3", "more replicas"); status != http.StatusForbidden || !strings.Contains(body, "approver") || budget() != "1" {
		t.Fatalf("op widens the budget: %d %q, want the 403 page naming approver\n%s", status, budget(), body)
	}
	if status, body := setBudget(appr, "3", ""); status != http.StatusBadRequest || !strings.Contains(body, "reason is required") || budget() != "1" {
		t.Fatalf("appr widens without a reason: %d %q\n%s", status, budget(), body)
	}
	if status, body := setBudget(appr, "lots", "x"); status != http.StatusBadRequest || !strings.Contains(body, "max_unavailable") {
		t.Fatalf("a budget of lots: %d\n%s", status, body)
	}
	if status, body := setBudget(appr, "3", "more replicas"); status != http.StatusSeeOther || budget() != "3" {
		t.Fatalf("appr widens the budget: %d %q\n%s", status, budget(), body)
	}
	_, _, body = viewer.get("/ui/clusters")
	if !strings.Contains(body, `max_unavailable <strong class="budget-max">3</strong> <span class="reason">(source api, by appr`) {
		t.Errorf("the page does not show the budget record:\n%s", body)
	}
	if status, _, _ := viewer.post("/ui/clusters/prod/budget", url.Values{"csrf": {viewer.csrf}, "max_unavailable": {"1"}, "reason": {"x"}}); status != http.StatusForbidden {
		t.Errorf("viewer sets the budget: %d, want 403", status)
	}
}

// Issue 33, item 6 from the browser: an approver sees an Approve button on
// a cluster's on_alert playbook that waits for one, and approves it as
// `muster cluster approve-on-alert` does (ops.ApproveOnAlert), bound to the
// digest the page showed; an operator sees no button and is refused.
func TestClustersPageApprovesTheOnAlertPlaybook(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.ui.ops.Members().Store(nodes.Membership{"prod": {Nodes: []string{"db-1"}, OnAlert: &nodes.OnAlert{Playbook: "heal"}}})
	put := func(version int, doc string) string {
		e.runChange(func(ctx context.Context, tx store.Tx) error {
			return tx.InsertPlaybook(ctx, &store.Playbook{Name: "heal", Version: version, Document: doc, Digest: playbook.Digest(doc), CreatedBy: "root"})
		})
		var v *wire.OnAlert
		err := e.st.Read(context.Background(), func(r store.Reader) (err error) {
			v, err = e.ui.ops.OnAlertView(context.Background(), r, "prod")
			return err
		})
		if err != nil || v == nil {
			t.Fatal(v, err)
		}
		return v.Digest
	}
	doc := "name: heal\nparams: [{name: missing, type: string}]\nstages:\n  - {name: a, kind: muster.io/debug.ping, target: {all: true}}\n"
	digest := put(1, doc)
	const form = `action="/ui/clusters/prod/on-alert/approve"`
	op, appr := e.browser().signIn("op"), e.browser().signIn("appr")
	if _, _, body := op.get("/ui/clusters"); strings.Contains(body, form) {
		t.Error("an operator is offered the on_alert approval")
	}
	_, _, body := appr.get("/ui/clusters")
	if !strings.Contains(body, form) || !strings.Contains(body, `name="digest" value="`+digest+`"`) {
		t.Fatalf("the approver is not offered the on_alert approval of digest %s:\n%s", digest, body)
	}
	if status, _, _ := op.post("/ui/clusters/prod/on-alert/approve", url.Values{"csrf": {op.csrf}, "digest": {digest}}); status != http.StatusForbidden {
		t.Errorf("op approves: %d, want 403", status)
	}
	// The playbook changed since the page: the approval is refused.
	newer := put(2, strings.Replace(doc, "name: a", "name: b", 1))
	if status, _, body := appr.post("/ui/clusters/prod/on-alert/approve", url.Values{"csrf": {appr.csrf}, "digest": {digest}}); status != http.StatusConflict {
		t.Errorf("approve a digest that moved: %d, want 409\n%s", status, body)
	}
	if status, _, _ := appr.post("/ui/clusters/prod/on-alert/approve", url.Values{"csrf": {appr.csrf}}); status != http.StatusBadRequest {
		t.Errorf("approve without a digest: %d, want 400", status)
	}
	status, loc, body := appr.post("/ui/clusters/prod/on-alert/approve", url.Values{"csrf": {appr.csrf}, "digest": {newer}})
	if status != http.StatusSeeOther || loc != "/ui/clusters?done=on-alert-approved#cluster-prod" {
		t.Fatalf("approve: %d %s\n%s", status, loc, body)
	}
	_, _, body = appr.get("/ui/clusters")
	if !strings.Contains(body, "v2, approved by appr.") || strings.Contains(body, form) {
		t.Fatalf("the page after the approval:\n%s", body)
	}
	if status, _, _ := appr.post("/ui/clusters/staging/on-alert/approve", url.Values{"csrf": {appr.csrf}, "digest": {newer}}); status != http.StatusNotFound {
		t.Errorf("approve on a cluster without one: %d, want 404", status)
	}
}

func FuzzDecodePolicyForms(f *testing.F) {
	for _, s := range []string{"cron=0+2+*+*+*&duration=4h&reason=x", "name=nightly&cron=@daily&duration=1h&timezone=Europe/Berlin&reason=y",
		"name=no+spaces&cron=x&duration=1h", "cron=&duration=1h", "cron=x&duration=", "cron=%1b%5b31m&duration=1h&reason=%e2%80%ae",
		"max_unavailable=10%25&reason=more", "max_unavailable=&reason=x", "max_unavailable=" + strings.Repeat("9", 30),
		"reason=" + strings.Repeat("r", 600), "digest=abc", "digest=", "digest=%00"} {
		f.Add(s)
	}
	plain := func(s string, max int) bool { return len(s) <= max && !hasControl(s) && utf8.ValidString(s) }
	f.Fuzz(func(t *testing.T, body string) {
		v, err := url.ParseQuery(body)
		if err != nil {
			return
		}
		if w, err := decodeWindow(v); err == nil {
			if w.Cron == "" || w.Duration == "" || !plain(w.Cron, maxCronField) || !plain(w.Duration, maxDurationField) ||
				!plain(w.Timezone, maxTZField) || !plain(w.Reason, maxReason) || (w.Name != "" && !plain(w.Name, 128)) {
				t.Fatalf("decodeWindow(%q) accepted %+v", body, w)
			}
		}
		if b, err := decodeBudget(v); err == nil && (b.MaxUnavailable == "" || !plain(b.MaxUnavailable, maxLimitField) || !plain(b.Reason, maxReason)) {
			t.Fatalf("decodeBudget(%q) accepted %+v", body, b)
		}
		if r, err := decodeRemoveWindow(v); err == nil && !plain(r, maxReason) {
			t.Fatalf("decodeRemoveWindow(%q) accepted %q", body, r)
		}
		if d, err := decodeOnAlertApproval(v); err == nil && (d == "" || !plain(d, maxDigestField)) {
			t.Fatalf("decodeOnAlertApproval(%q) accepted %q", body, d)
		}
	})
}
