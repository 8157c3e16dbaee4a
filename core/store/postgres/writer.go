package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/action"
)

// writer is the store.Tx of one attempt of an Update. It counts the rows it
// changes and remembers the newest event it appended.
//
// A failed statement aborts a PostgreSQL transaction, while the callers may
// go on after ErrExists or ErrNotFound (as they can on SQLite). So the
// writes that can meet a taken key or a missing parent say so by the number
// of rows they touched (ON CONFLICT DO NOTHING, INSERT ... SELECT WHERE
// EXISTS), never by failing.
type writer struct {
	reader
	rows        int64
	lastEvent   int64
	eventLocked bool
}

var _ store.Tx = (*writer)(nil)

func (w *writer) exec(ctx context.Context, what, q string, args ...any) (int64, error) {
	tag, err := w.q.Exec(ctx, q, clean(args)...)
	if err != nil {
		return 0, translate(err, what)
	}
	n := tag.RowsAffected()
	w.rows += n
	return n, nil
}

func now() time.Time { return action.UTC(time.Now()) }

// list is a text[] value: never NULL.
func list(v []string) []string {
	if v == nil {
		return []string{}
	}
	return v
}

// PutCluster creates or replaces a cluster. A zero UpdatedTS is set to now.
func (w *writer) PutCluster(ctx context.Context, c *store.Cluster) error {
	if c.UpdatedTS.IsZero() {
		c.UpdatedTS = now()
	}
	_, err := w.exec(ctx, fmt.Sprintf("put cluster %q", c.ID),
		`INSERT INTO clusters (id, status, status_reason, updated_ts) VALUES ($1, $2, $3, $4)
		ON CONFLICT (id) DO UPDATE SET status = excluded.status,
			status_reason = excluded.status_reason, updated_ts = excluded.updated_ts`,
		c.ID, c.Status, c.StatusReason, action.UTC(c.UpdatedTS))
	return err
}

// PutNode creates or replaces a node; its cluster must exist (ErrNotFound
// otherwise). A zero UpdatedTS is set to now.
func (w *writer) PutNode(ctx context.Context, n *store.Node) error {
	if n.UpdatedTS.IsZero() {
		n.UpdatedTS = now()
	}
	what := fmt.Sprintf("put node %s/%s", n.ClusterID, n.ID)
	labels := []byte("{}")
	if len(n.Labels) > 0 {
		var err error
		if labels, err = json.Marshal(n.Labels); err != nil {
			return fmt.Errorf("%s: labels: %w", what, err)
		}
	}
	rows, err := w.exec(ctx, what,
		`INSERT INTO nodes (`+nodeColumns+`)
		SELECT $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15::jsonb
		WHERE EXISTS (SELECT 1 FROM clusters WHERE id = $1)
		ON CONFLICT (cluster_id, id) DO UPDATE SET addr = excluded.addr, source = excluded.source,
			status = excluded.status, status_reason = excluded.status_reason,
			down_cause = excluded.down_cause, drained = excluded.drained,
			store_id = excluded.store_id, cursor = excluded.cursor, kinds = excluded.kinds,
			version = excluded.version, last_contact = excluded.last_contact,
			updated_ts = excluded.updated_ts, labels = excluded.labels`,
		n.ClusterID, n.ID, n.Addr, n.Source, n.Status, n.StatusReason, n.DownCause, n.Drained, n.StoreID, n.Cursor, list(n.Kinds),
		n.Version, nullTS(n.LastContact), action.UTC(n.UpdatedTS), string(labels))
	if err == nil && rows == 0 {
		err = fmt.Errorf("%s: cluster %q: %w", what, n.ClusterID, store.ErrNotFound)
	}
	return err
}

// DeleteNode removes a node (ErrNotFound when there is none). Its actions stay.
func (w *writer) DeleteNode(ctx context.Context, clusterID, nodeID string) error {
	what := fmt.Sprintf("delete node %s/%s", clusterID, nodeID)
	n, err := w.exec(ctx, what, `DELETE FROM nodes WHERE cluster_id = $1 AND id = $2`, clusterID, nodeID)
	if err == nil && n == 0 {
		err = fmt.Errorf("%s: %w", what, store.ErrNotFound)
	}
	return err
}

func actionArgs(r *store.Record) []any {
	return []any{r.ClusterID, r.NodeID, r.Kind, string(r.Args), string(r.State), r.StateReason,
		string(r.Progress), r.Output, r.Origin, r.Requester, r.ApprovedBy, r.TimeoutS,
		action.UTC(r.CreatedTS), nullTS(r.ScheduledTS), nullTS(r.StartedTS),
		nullTS(r.FinishedTS), action.UTC(r.UpdatedTS), r.RetryOf, r.ApprovalDigest,
		r.CancelRequested, r.SeenOnAgent, r.PushedStoreID, r.RunID, r.Stage, r.Wave}
}

// InsertAction stores a new record (ErrExists when its id is taken, or its
// run already has a child for its stage and node). A zero
// CreatedTS is set to now, a zero UpdatedTS to CreatedTS. History is not
// stored: AppendHistory does that.
func (w *writer) InsertAction(ctx context.Context, r *store.Record) error {
	if r.CreatedTS.IsZero() {
		r.CreatedTS = now()
	}
	if r.UpdatedTS.IsZero() {
		r.UpdatedTS = r.CreatedTS
	}
	what := fmt.Sprintf("insert action %q", r.ID)
	n, err := w.exec(ctx, what,
		`INSERT INTO actions (`+actionColumns+`)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20,
			$21, $22, $23, $24, $25, $26)
		ON CONFLICT DO NOTHING`,
		append([]any{r.ID}, actionArgs(r)...)...)
	if err == nil && n == 0 {
		err = fmt.Errorf("%s: %w", what, store.ErrExists)
	}
	return err
}

// UpdateAction replaces every field of the stored record with the same id
// (ErrNotFound when there is none).
func (w *writer) UpdateAction(ctx context.Context, r *store.Record) error {
	what := fmt.Sprintf("update action %q", r.ID)
	n, err := w.exec(ctx, what, `UPDATE actions SET cluster_id = $1, node_id = $2, kind = $3, args = $4,
		state = $5, state_reason = $6, progress = $7, output = $8, origin = $9, requester = $10,
		approved_by = $11, timeout_s = $12, created_ts = $13, scheduled_ts = $14, started_ts = $15,
		finished_ts = $16, updated_ts = $17, retry_of = $18, approval_digest = $19, cancel_requested = $20,
		seen_on_agent = $21, pushed_store_id = $22, run_id = $23, stage = $24, wave = $25 WHERE id = $26`,
		append(actionArgs(r), r.ID)...)
	if err == nil && n == 0 {
		err = fmt.Errorf("%s: %w", what, store.ErrNotFound)
	}
	return err
}

// AppendHistory adds one transition to an action's history (ErrNotFound when
// the action does not exist). A zero TS is set to now.
func (w *writer) AppendHistory(ctx context.Context, actionID string, t action.Transition) error {
	if t.TS.IsZero() {
		t.TS = now()
	}
	what := fmt.Sprintf("history of %q", actionID)
	n, err := w.exec(ctx, what,
		`INSERT INTO action_history (action_id, ts, from_state, to_state, actor, reason)
		SELECT $1, $2, $3, $4, $5, $6 WHERE EXISTS (SELECT 1 FROM actions WHERE id = $1)`,
		actionID, action.UTC(t.TS), string(t.From), string(t.To), t.Actor, t.Reason)
	if err == nil && n == 0 {
		err = fmt.Errorf("%s: %w", what, store.ErrNotFound)
	}
	return err
}

// AppendEvent stores e and sets e.Seq and, when zero, e.TS. The first event
// of a transaction takes the events lock, held until the transaction ends:
// numbers are drawn in commit order.
func (w *writer) AppendEvent(ctx context.Context, e *store.Event) error {
	if e.TS.IsZero() {
		e.TS = now()
	}
	var data string
	if len(e.Data) > 0 {
		b, err := json.Marshal(e.Data)
		if err != nil {
			return fmt.Errorf("event %s: data: %w", e.Type, err)
		}
		data = string(b)
	}
	what := "append event " + e.Type
	if !w.eventLocked {
		if _, err := w.q.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, lockEvents); err != nil {
			return fmt.Errorf("%s: lock: %w", what, err)
		}
		w.eventLocked = true
	}
	var seq int64
	err := w.queryRow(ctx,
		`INSERT INTO events (ts, type, actor, client_addr, cluster_id, node_id, action_id, run_id, message, data)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) RETURNING seq`,
		action.UTC(e.TS), e.Type, e.Actor, e.ClientAddr, e.ClusterID, e.NodeID, e.ActionID, e.RunID, e.Message, data).Scan(&seq)
	if err != nil {
		return translate(err, what)
	}
	w.rows++
	e.Seq = seq
	w.lastEvent = seq
	return nil
}

// PurgeActions deletes up to limit finished actions last changed before t,
// oldest first, but for the children of runs still open (a run that lost
// them would create them again); their history goes with them (ON DELETE CASCADE). The
// states are literals so that the partial index actions_finished serves
// the query.
func (w *writer) PurgeActions(ctx context.Context, before time.Time, limit int) (int, error) {
	n, err := w.exec(ctx, "purge actions", `DELETE FROM actions WHERE seq IN (
		SELECT seq FROM actions WHERE state IN ('DONE', 'FAILED', 'CANCELLED', 'LOST') AND updated_ts < $1
			AND (run_id = '' OR run_id NOT IN (SELECT id FROM runs WHERE state IN ('PENDING_APPROVE', 'RUNNING', 'PAUSED')))
		ORDER BY updated_ts, seq LIMIT $2)`, action.UTC(before), limit)
	return int(n), err
}

// PurgeEvents deletes up to limit events older than t, oldest first.
func (w *writer) PurgeEvents(ctx context.Context, before time.Time, limit int) (int, error) {
	n, err := w.exec(ctx, "purge events", `DELETE FROM events WHERE seq IN (
		SELECT seq FROM events WHERE ts < $1 ORDER BY seq LIMIT $2)`, action.UTC(before), limit)
	return int(n), err
}

// InsertToken stores a new token (ErrExists when the hash is taken, or the
// name is, ignoring case: migration 003). A zero CreatedTS is set to now.
func (w *writer) InsertToken(ctx context.Context, t *store.Token) error {
	if t.CreatedTS.IsZero() {
		t.CreatedTS = now()
	}
	what := fmt.Sprintf("insert token %q", t.Name)
	n, err := w.exec(ctx, what,
		`INSERT INTO tokens (name, roles, hash, created_ts) VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING`,
		t.Name, list(t.Roles), t.Hash, action.UTC(t.CreatedTS))
	if err == nil && n == 0 {
		err = fmt.Errorf("%s: %w", what, store.ErrExists)
	}
	return err
}

// DeleteToken removes a token (ErrNotFound when there is none).
func (w *writer) DeleteToken(ctx context.Context, name string) error {
	what := fmt.Sprintf("delete token %q", name)
	// Its web UI sessions go with it, in the same transaction.
	if _, err := w.exec(ctx, what, `DELETE FROM ui_sessions WHERE token_hash IN (SELECT hash FROM tokens WHERE name = $1)`, name); err != nil {
		return err
	}
	n, err := w.exec(ctx, what, `DELETE FROM tokens WHERE name = $1`, name)
	if err == nil && n == 0 {
		err = fmt.Errorf("%s: %w", what, store.ErrNotFound)
	}
	return err
}
