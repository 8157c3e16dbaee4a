package ui

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/musterhq/muster/core/approval"
	"github.com/musterhq/muster/core/auth"
	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/live"
)

// TestApprovalsShowLevelsAndWhoCanApprove: the Approvals page and a run's
// page list each level, who approved and who can approve, escaped.
func TestApprovalsShowLevelsAndWhoCanApprove(t *testing.T) {
	t.Parallel()
	pol := approval.DefaultPolicy()
	pol.Rules = []approval.Rule{{Kind: "*", Cluster: "prod", Levels: []approval.Level{
		{Persons: []string{"appr", "<b>eve</b>"}}, {Persons: []string{"admin"}}}}}
	e := setup(t, func(c *Config) { c.Policy = live.New(pol) })
	// Who can approve names people holding approve on the cluster: eve
	// through a grant of her own (appr and admin by their tokens' roles).
	if err := e.st.Update(context.Background(), func(tx store.Tx) error {
		return tx.InsertGrant(context.Background(), &store.Grant{ID: "eve", Person: "<b>eve</b>", Role: store.RoleApprover, Clusters: "prod"})
	}); err != nil {
		t.Fatal(err)
	}
	a := e.create("op", `{"seconds":1}`)
	r := e.createRun("op")
	b := e.browser()
	b.signIn("appr")
	status, _, body := b.get("/ui/approvals")
	if status != http.StatusOK {
		t.Fatalf("approvals %d", status)
	}
	for _, want := range []string{
		"level 1 (appr or &lt;b&gt;eve&lt;/b&gt;): 0 of 1 — can approve: &lt;b&gt;eve&lt;/b&gt;, appr",
		"level 2 (admin): 0 of 1 — can approve: admin",
	} {
		if strings.Count(body, want) != 2 { // the action's card and the run's
			t.Errorf("approvals show %q %d times, want 2", want, strings.Count(body, want))
		}
	}
	if strings.Contains(body, "<b>eve") || !strings.Contains(body, `data-action="`+a.ID+`"`) {
		t.Fatal("a name from the configuration is not escaped, or the action is not listed")
	}
	status, _, body = b.get("/ui/runs/" + r.ID)
	if status != http.StatusOK || !strings.Contains(body, "Approval levels") ||
		!strings.Contains(body, "level 2 (admin): 0 of 1 — can approve: admin") {
		t.Fatalf("run page %d lacks the levels:\n%s", status, body)
	}
}

// TestApprovingOneLevelSaysItWaits: approving through the page at one
// level of two says the approval is recorded and the action waits, not
// that it is approved.
func TestApprovingOneLevelSaysItWaits(t *testing.T) {
	t.Parallel()
	pol := approval.DefaultPolicy()
	pol.Rules = []approval.Rule{{Kind: "*", Cluster: "prod", Levels: []approval.Level{
		{Persons: []string{"appr"}}, {Persons: []string{"admin"}}}}}
	e := setup(t, func(c *Config) { c.Policy = live.New(pol) })
	a := e.create("op", `{"seconds":1}`)
	b := e.browser()
	b.signIn("appr")
	status, loc, _ := b.post("/ui/actions/"+a.ID+"/approve", map[string][]string{"csrf": {b.csrf}, "next": {"/ui/approvals"}})
	if status != http.StatusSeeOther {
		t.Fatalf("approve: %d", status)
	}
	_, _, body := b.get(loc)
	if !strings.Contains(body, "Recorded your approval of action "+a.ID+": it waits for the approvals of its other levels.") ||
		!strings.Contains(body, "level 1 (appr): 1 of 1 — approved by appr") {
		t.Fatalf("after one level:\n%s", body)
	}
}

// TestNoApproveButtonForWhomNoLevelCounts: a page offers no Approve button
// that the approval would refuse: not to an approver of no level, nor to
// one who approved already; both read why.
func TestNoApproveButtonForWhomNoLevelCounts(t *testing.T) {
	t.Parallel()
	pol := approval.DefaultPolicy()
	pol.Rules = []approval.Rule{{Kind: "*", Cluster: "prod", Levels: []approval.Level{
		{Persons: []string{"appr"}}, {Persons: []string{"admin"}}}}}
	e := setup(t, func(c *Config) { c.Policy = live.New(pol) })
	sec, err := auth.CreateToken(context.Background(), e.st, "olga", []string{store.RoleApprover}, "test", "")
	if err != nil {
		t.Fatal(err)
	}
	e.secrets["olga"] = sec
	a := e.create("op", `{"seconds":1}`)
	r := e.createRun("op")
	for _, c := range []struct{ who, path, why string }{
		{"olga", "/ui/actions/" + a.ID, "Your approval counts at no level that still needs one: 1 more from appr, 1 more from admin."},
		{"olga", "/ui/runs/" + r.ID, "Your approval counts at no level that still needs one"},
		{"admin", "/ui/actions/" + a.ID, ""},
	} {
		b := e.browser()
		b.signIn(c.who)
		_, _, body := b.get(c.path)
		has := strings.Contains(body, `class="approve"`)
		if (c.why == "") != has || !strings.Contains(body, c.why) {
			t.Errorf("%s on %s: button %v, want reason %q", c.who, c.path, has, c.why)
		}
	}
	b := e.browser()
	b.signIn("appr")
	if status, _, _ := b.post("/ui/actions/"+a.ID+"/approve", map[string][]string{"csrf": {b.csrf}}); status != http.StatusSeeOther {
		t.Fatalf("appr's approval: %d", status)
	}
	_, _, body := b.get("/ui/actions/" + a.ID)
	if strings.Contains(body, `class="approve"`) || !strings.Contains(body, "You approved it already; 1 more from admin.") {
		t.Fatalf("after appr's approval, appr's page:\n%s", body)
	}
}
