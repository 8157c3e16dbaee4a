package ui

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/wire"
)

func TestRunPageShowsGatesTheirValuesAndWhoPromoted(t *testing.T) {
	t.Parallel()
	e := setup(t)
	r := e.createRun("op", wire.StageSpec{Name: "roll", Target: wire.Target{Nodes: []string{"db-1"}},
		AbortOn: []string{"healthy"},
		Steps:   []wire.StepSpec{{Name: "healthy", Gate: &wire.Gate{HTTP: &wire.HTTPGate{URL: "https://{{ .node.id }}.example/health"}}}}})
	e.approveRun(r.ID, "appr")
	at := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	e.runChange(func(ctx context.Context, tx store.Tx) error {
		got, err := tx.Run(ctx, r.ID)
		if err != nil {
			return err
		}
		// What RunCore records: a value an endpoint chose, shown as text.
		got.Stages[0].Core = map[string][]store.CoreStep{"db-1": {{Step: "healthy", Attempt: 1, State: "FAILED",
			Value: "<b>503</b>\x1b[31m", Reason: "answered 503, not 200", Checks: 2, Created: at, At: &at, Finished: &at}}}
		got.Stages[0].PromotedBy = "promoted by the rule auto_promote_after_s: its gates held 30s"
		return tx.UpdateRun(ctx, got)
	})
	status, _, body := e.browser().signIn("viewer").get("/ui/runs/" + r.ID)
	if status != http.StatusOK {
		t.Fatalf("run: %d\n%s", status, body)
	}
	for _, want := range []string{"Gates and calls of roll", `data-core-step="db-1/healthy"`, "answered 503, not 200",
		"&lt;b&gt;503&lt;/b&gt;", "aborts on healthy", "promoted by the rule auto_promote_after_s", "2026-12-02"} {
		if !strings.Contains(body, want) {
			t.Errorf("the run's page lacks %q", want)
		}
	}
	if strings.Contains(body, "<b>503") || strings.Contains(body, "\x1b") {
		t.Fatal("a gate's value reached the page unescaped")
	}
}
