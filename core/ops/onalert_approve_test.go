package ops_test

import (
	"context"
	"errors"
	"testing"

	"github.com/musterhq/muster/core/nodes"
	"github.com/musterhq/muster/core/ops"
	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/live"
)

// An on_alert playbook's approval holds the rules of a schedule's: the
// person who applied the playbook version may not approve it (four eyes
// over the content, a 403), and nothing is recorded; another approver's
// approval holds.
func TestOnAlertApprovalRefusesThePlaybooksApplier(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	o := ops.New(ops.Config{Store: e.st, Policy: e.policy, Nudge: e.syncs,
		Members: live.New(nodes.Membership{"prod": {OnAlert: &nodes.OnAlert{Playbook: "heal"}}})})
	doc := "name: heal\nstages:\n  - name: sleep\n    kind: " + kindSleep + "\n    args: {seconds: 1}\n    target: {nodes: [db-1]}\n"
	if _, _, err := o.ApplyPlaybook(ctx, both, doc); err != nil {
		t.Fatal(err)
	}
	if _, err := o.ApproveOnAlert(ctx, both, "prod", ""); !errors.Is(err, ops.ErrForbidden) {
		t.Fatalf("the applier approved the on_alert playbook: %v", err)
	}
	_ = e.st.Read(ctx, func(rd store.Reader) error {
		if v, err := o.OnAlertView(ctx, rd, "prod"); err != nil || v.Approved {
			t.Fatalf("after the refusal: %+v, %v", v, err)
		}
		return nil
	})
	v, err := o.ApproveOnAlert(ctx, approver, "prod", "")
	if err != nil {
		t.Fatal(err)
	}
	if !v.Approved || v.ApprovedBy != approver.Name {
		t.Fatalf("after another approver: approved %t by %q", v.Approved, v.ApprovedBy)
	}
}
