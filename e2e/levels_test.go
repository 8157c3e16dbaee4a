package e2e

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/musterhq/muster/shared/client"
	"github.com/musterhq/muster/shared/testwait"
	"github.com/musterhq/muster/shared/wire"
)

// levelsRule asks, on the fleet's cluster, one approval from the db
// people and one from the sre people; pat is both.
//
// Scenario 1 of the access issue names teams (db holds approver on
// prod-db-*, sre on prod-*): with teams and grants in the configuration,
// the levels are `teams: [db]` and `teams: [sre]` and the approvers
// hold their role through those grants; the assertions stay the same.
const levelsRule = `approval:
  default: required
  ttl: 24h
  rules:
    - cluster: "e2e"
      kind: "*"
      levels:
        - persons: [dana, pat]
          min: 1
        - persons: [sam, pat]
          min: 1
`

// Scenario 1 on a real core and agent: a run needs one approval from db
// and one from sre. The requester's own approval is refused; one from db
// leaves it PENDING_APPROVE showing "1 more from sre" (in the answer, in
// GET and in its event); a person in both counts once; the second
// approval starts it, and it runs to DONE.
func TestARunNeedsEveryLevel(t *testing.T) {
	t.Parallel()
	f := newFleetWith(t, fleetOptions{nodes: 1, coreExtra: levelsRule})
	ctx := ctxT(t)
	approverToken := func(name string, roles ...string) *client.Core {
		sec, err := f.admin.CreateToken(ctx, name, roles)
		if err != nil {
			t.Fatal(err)
		}
		return client.NewCore("http://"+f.core.Addr(), sec.Token, &http.Client{Timeout: 10 * time.Second})
	}
	rita := approverToken("rita", "operator", "approver")
	dana, sam, pat := approverToken("dana", "approver"), approverToken("sam", "approver"), approverToken("pat", "approver")

	r, err := rita.CreateRun(ctx, &wire.CreateRunRequest{ClusterID: "e2e", Stages: []wire.StageSpec{{Name: "ping",
		Kind: "muster.io/debug.ping", Args: json.RawMessage(`{}`), Target: wire.Target{Nodes: []string{"node-1"}}}}})
	if err != nil {
		t.Fatal(err)
	}
	if r.State != "PENDING_APPROVE" {
		t.Fatalf("run %s, want PENDING_APPROVE", r.State)
	}
	if _, err := rita.ApproveRun(ctx, r.ID, r.Digest); err == nil || !strings.Contains(err.Error(), "rita requested") {
		t.Fatalf("the requester's approval: %v, want a refusal", err)
	}
	got, err := pat.ApproveRun(ctx, r.ID, r.Digest)
	if err != nil {
		t.Fatal(err)
	}
	if got.State != "PENDING_APPROVE" || got.Approval == nil || got.Approval.Missing != "1 more from sam or pat" {
		t.Fatalf("after pat: %s %+v", got.State, got.Approval)
	}
	// pat is in both: counted once, at the first level.
	if _, err := pat.ApproveRun(ctx, r.ID, r.Digest); err == nil || !strings.Contains(err.Error(), "approved it already") {
		t.Fatalf("pat again: %v", err)
	}
	if _, err := dana.ApproveRun(ctx, r.ID, r.Digest); err == nil || !strings.Contains(err.Error(), "are met: 1 more from sam or pat") {
		t.Fatalf("dana after pat: %v", err)
	}
	shown, err := f.admin.Run(ctx, r.ID)
	if err != nil || shown.State != "PENDING_APPROVE" || shown.Approval == nil ||
		shown.Approval.Lines[1] != "level 2 (sam or pat): 0 of 1 — can approve: sam" {
		t.Fatalf("GET after pat: %v %+v", err, shown)
	}
	evs, err := f.admin.Events(ctx, 0, 100, client.EventFilter{RunID: r.ID, Types: []string{"run.approval_recorded"}})
	if err != nil || len(evs.Events) != 1 || !strings.Contains(evs.Events[0].Message, "1 more from sam or pat") {
		t.Fatalf("events %+v, %v", evs, err)
	}
	if got, err = sam.ApproveRun(ctx, r.ID, r.Digest); err != nil || got.State != "RUNNING" && got.State != "DONE" {
		t.Fatalf("after sam: %v %+v", err, got)
	}
	testwait.Within(t, 30*time.Second, "the run DONE", func() bool {
		cur, err := f.admin.Run(ctx, r.ID)
		return err == nil && cur.State == "DONE"
	})
}
