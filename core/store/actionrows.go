package store

import (
	"context"
	"fmt"
	"strings"
)

// actionFields are the columns of an action row after its id, in the order
// of actionValues.
var actionFields = []string{"cluster_id", "node_id", "kind", "args", "state", "state_reason", "progress", "output",
	"origin", "requester", "approved_by", "timeout_s", "created_ts", "scheduled_ts", "started_ts", "finished_ts",
	"updated_ts", "retry_of", "approval_digest", "cancel_requested", "seen_on_agent", "pushed_store_id",
	"run_id", "stage", "wave"}

// actionValues are r's values in the order of actionFields, bound as the
// dialect binds them.
func actionValues(d Dialect, r *Record) []any {
	return []any{r.ClusterID, r.NodeID, r.Kind, string(r.Args), string(r.State), r.StateReason,
		string(r.Progress), r.Output, r.Origin, r.Requester, r.ApprovedBy, r.TimeoutS,
		d.Time(r.CreatedTS), d.nullTime(r.ScheduledTS), d.nullTime(r.StartedTS),
		d.nullTime(r.FinishedTS), d.Time(r.UpdatedTS), r.RetryOf, r.ApprovalDigest,
		r.CancelRequested, r.SeenOnAgent, r.PushedStoreID, r.RunID, r.Stage, r.Wave}
}

// InsertAction is Tx.InsertAction of both stores: it stores a new record
// (ErrExists when its id is taken, or its run already has a child for its
// stage and node, without failing the transaction). A zero CreatedTS is set
// to now, a zero UpdatedTS to CreatedTS. History is not stored:
// AppendHistory does that.
func InsertAction(ctx context.Context, d Dialect, exec Exec, r *Record) error {
	if r.CreatedTS.IsZero() {
		r.CreatedTS = Now()
	}
	if r.UpdatedTS.IsZero() {
		r.UpdatedTS = r.CreatedTS
	}
	what := fmt.Sprintf("insert action %q", r.ID)
	ps, args := d.values(1, append([]any{r.ID}, actionValues(d, r)...)...)
	n, err := exec(ctx, what, `INSERT INTO actions (id, `+strings.Join(actionFields, ", ")+`)
		VALUES (`+ps+`) ON CONFLICT DO NOTHING`, args...)
	if err == nil && n == 0 {
		err = fmt.Errorf("%s: %w", what, ErrExists)
	}
	return err
}

// UpdateAction is Tx.UpdateAction of both stores: it replaces every field
// of the stored record with the same id (ErrNotFound when there is none).
func UpdateAction(ctx context.Context, d Dialect, exec Exec, r *Record) error {
	what := fmt.Sprintf("update action %q", r.ID)
	sets := make([]string, len(actionFields))
	for i, f := range actionFields {
		sets[i] = f + " = " + d.Placeholder(i+1)
	}
	args := append(actionValues(d, r), r.ID)
	n, err := exec(ctx, what, `UPDATE actions SET `+strings.Join(sets, ", ")+` WHERE id = `+d.Placeholder(len(args)), args...)
	if err == nil && n == 0 {
		err = fmt.Errorf("%s: %w", what, ErrNotFound)
	}
	return err
}
