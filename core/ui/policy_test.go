package ui

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/musterhq/muster/core/policy"
	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/wire"
)

// Issue 33, item 1 on the Clusters page: the cluster's windows and budget
// as records, with who made them, from where and why, escaped; a deleted
// one is not listed.
func TestClustersPageListsPolicyRecordsWithWhoAndWhy(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	if err := e.st.Update(ctx, func(tx store.Tx) error {
		w, err := policy.CheckWindow(wire.WindowSpec{Cluster: "prod", Cron: "0 2 * * *", Duration: "4h", Timezone: "Europe/Berlin"}, 0)
		if err != nil {
			return err
		}
		if _, err := policy.Put(ctx, tx, &store.PolicyRecord{Kind: store.PolicyWindow, ID: "nightly", ClusterID: "prod", Spec: w.Spec,
			Source: "file:policy.yaml", Reason: "change <b>board</b>"}, "ann", ""); err != nil {
			return err
		}
		b, err := policy.CheckBudget(wire.BudgetSpec{Cluster: "prod", MaxUnavailable: "2"})
		if err != nil {
			return err
		}
		if _, err := policy.Put(ctx, tx, &store.PolicyRecord{Kind: store.PolicyBudget, ID: "prod", ClusterID: "prod", Spec: b.Spec,
			Reason: "more replicas"}, "olga", ""); err != nil {
			return err
		}
		if _, err := policy.Put(ctx, tx, &store.PolicyRecord{Kind: store.PolicyWindow, ID: "gone", ClusterID: "prod", Spec: w.Spec,
			Reason: "x"}, "ann", ""); err != nil {
			return err
		}
		_, err = policy.Delete(ctx, tx, store.PolicyWindow, "gone", store.Now(), "ann", "", "not needed")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	status, _, body := e.browser().signIn("viewer").get("/ui/clusters")
	if status != http.StatusOK {
		t.Fatalf("clusters: %d\n%s", status, body)
	}
	for _, want := range []string{`<td data-label="Name"><code>nightly</code></td>`, `<code class="cron">0 2 * * *</code>`,
		`<td data-label="Duration">4h0m0s</td>`, `<td data-label="Time zone">Europe/Berlin</td>`,
		`<td data-label="Source">file:policy.yaml</td>`, `by ann, <time`, `: change &lt;b&gt;board&lt;/b&gt;</span>`,
		`max_unavailable <strong class="budget-max">2</strong>`, `(source api, by olga, `, `: more replicas)`} {
		if !strings.Contains(body, want) {
			t.Errorf("the clusters page lacks %q", want)
		}
	}
	if strings.Contains(body, "<code>gone</code>") {
		t.Error("a deleted window is listed")
	}
	if strings.Contains(body, "<b>board") {
		t.Fatal("a reason is not escaped")
	}
}
