package orchestrate

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/musterhq/muster/core/approval"
	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/action"
)

// OWASP API6 (unrestricted access to sensitive business flows): an approval
// covers the content it was given for. When an agent holds other content for
// an approved id (the agent wins), the approval does not follow it:
// approved_by and the digest are cleared, and the history and the
// action.conflict event say whose approval was voided.
func TestAPI6AnAgentConflictVoidsTheApproval(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name   string
		pulled bool // the pull sees the agent's record, else only the push
	}{{"push answered 409", false}, {"pulled record differs", true}} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			h := setup(t, Config{}, "n1")
			ag := h.agents["n1"]
			h.fullSync()
			id := h.create("n1", func(r *store.Record) {
				r.ApprovedBy = "bob"
				r.ApprovalDigest = approval.Digest(&r.Action)
			})
			now := action.UTC(time.Now())
			ag.put(action.Action{ID: id, ClusterID: cluster, NodeID: "n1", Kind: "muster.io/debug.ping",
				Args: json.RawMessage(`{}`), State: action.New, Progress: json.RawMessage(`{}`),
				Origin: action.OriginCore, ApprovedBy: "bob", CreatedTS: now, UpdatedTS: now})
			if !c.pulled {
				ag.set(func(f *fakeAgent) { f.recs[id].seq = 0 })
			}
			h.events()
			h.fullSync()
			rec := h.record(id)
			wantState(t, rec, action.New)
			if rec.Kind != "muster.io/debug.ping" || rec.ApprovedBy != "" || rec.ApprovalDigest != "" {
				t.Fatalf("after the conflict: kind %s approved_by %q digest %q; want the agent's kind and no approval",
					rec.Kind, rec.ApprovedBy, rec.ApprovalDigest)
			}
			var said bool
			for _, tr := range rec.History {
				said = said || strings.Contains(tr.Reason, "approval by bob covered the old content only")
			}
			if !said {
				t.Fatalf("history does not say the approval was voided: %+v", rec.History)
			}
			if a, _ := ag.get(id); a.Kind != "muster.io/debug.ping" {
				t.Fatalf("the agent's record became %s", a.Kind)
			}
			var evs []store.Event
			ctx := context.Background()
			if err := h.st.Read(ctx, func(r store.Reader) error {
				var err error
				evs, err = r.Events(ctx, 0, 1000)
				return err
			}); err != nil {
				t.Fatal(err)
			}
			var voided bool
			for _, ev := range evs {
				voided = voided || (ev.Type == store.EventActionConflict && ev.ActionID == id && ev.Data["void_approval_by"] == "bob")
			}
			if !voided {
				t.Fatalf("no action.conflict event names the voided approval: %+v", evs)
			}
		})
	}
}
