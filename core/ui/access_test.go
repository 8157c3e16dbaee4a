package ui

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/musterhq/muster/core/auth"
	"github.com/musterhq/muster/core/store"
)

// The pages show every cluster: a person whose grants cover some clusters
// only is refused by every page, one whose team holds viewer on "*" reads
// them as a global viewer does.
func TestPagesNeedReadOnEveryCluster(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	for _, who := range []string{"stg", "all"} {
		sec, err := auth.CreateToken(ctx, e.st, who, nil, "test", "")
		if err != nil {
			t.Fatal(err)
		}
		e.secrets[who] = sec
	}
	err := e.st.Update(ctx, func(tx store.Tx) error {
		if err := tx.InsertTeam(ctx, &store.Team{Name: "everyone", Members: []string{"all"}}); err != nil {
			return err
		}
		if err := tx.InsertGrant(ctx, &store.Grant{ID: "g1", Person: "stg", Role: store.RoleViewer, Clusters: "stage*"}); err != nil {
			return err
		}
		return tx.InsertGrant(ctx, &store.Grant{ID: "g2", Team: "everyone", Role: store.RoleViewer, Clusters: "*"})
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, page := range []string{"/ui/dashboard", "/ui/approvals", "/ui/clusters", "/ui/runs", "/ui/events"} {
		if status, _, body := e.browser().signIn("stg").get(page); status != http.StatusForbidden ||
			!strings.Contains(body, "use the API or the CLI") {
			t.Errorf("%s as a person scoped to stage*: %d, want 403 saying to use the API", page, status)
		}
		if status, _, _ := e.browser().signIn("all").get(page); status != http.StatusOK {
			t.Errorf("%s as a viewer of * through a team: %d, want 200", page, status)
		}
	}
}
