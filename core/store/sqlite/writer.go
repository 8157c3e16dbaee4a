package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"time"

	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/action"
	shsqlite "github.com/musterhq/muster/shared/sqlite"
)

// writer is the store.Tx of one Update. It counts the rows it changes and
// remembers the newest event it appended.
type writer struct {
	reader
	rows      int64
	lastEvent int64
}

var _ store.Tx = (*writer)(nil)

func (w *writer) exec(ctx context.Context, what, q string, args ...any) (sql.Result, int64, error) {
	res, err := w.tx.ExecContext(ctx, q, args...)
	if err != nil {
		return nil, 0, translate(err, what)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return nil, 0, fmt.Errorf("%s: %w", what, err)
	}
	w.rows += n
	return res, n, nil
}

func now() time.Time { return action.UTC(time.Now()) }

// jsonList encodes a list of strings, an empty one as [].
func jsonList(v []string) (string, error) {
	if len(v) == 0 {
		return "[]", nil
	}
	b, err := json.Marshal(v)
	return string(b), err
}

// PutCluster creates or replaces a cluster. A zero UpdatedTS is set to now.
func (w *writer) PutCluster(ctx context.Context, c *store.Cluster) error {
	if c.UpdatedTS.IsZero() {
		c.UpdatedTS = now()
	}
	_, _, err := w.exec(ctx, fmt.Sprintf("put cluster %q", c.ID),
		`INSERT INTO clusters (id, status, status_reason, updated_ts) VALUES (?, ?, ?, ?)
		ON CONFLICT (id) DO UPDATE SET status = excluded.status,
			status_reason = excluded.status_reason, updated_ts = excluded.updated_ts`,
		c.ID, c.Status, c.StatusReason, shsqlite.Micros(c.UpdatedTS))
	return err
}

// PutNode creates or replaces a node; its cluster must exist (ErrNotFound
// otherwise). A zero UpdatedTS is set to now.
func (w *writer) PutNode(ctx context.Context, n *store.Node) error {
	if n.UpdatedTS.IsZero() {
		n.UpdatedTS = now()
	}
	kinds, err := jsonList(n.Kinds)
	if err != nil {
		return fmt.Errorf("put node %s/%s: kinds: %w", n.ClusterID, n.ID, err)
	}
	lbls := []byte("{}")
	if len(n.Labels) > 0 {
		if lbls, err = json.Marshal(n.Labels); err != nil {
			return fmt.Errorf("put node %s/%s: labels: %w", n.ClusterID, n.ID, err)
		}
	}
	_, _, err = w.exec(ctx, fmt.Sprintf("put node %s/%s", n.ClusterID, n.ID),
		`INSERT INTO nodes (`+nodeColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (cluster_id, id) DO UPDATE SET addr = excluded.addr, source = excluded.source,
			status = excluded.status, status_reason = excluded.status_reason, down_cause = excluded.down_cause, drained = excluded.drained,
			store_id = excluded.store_id, cursor = excluded.cursor, kinds = excluded.kinds,
			version = excluded.version, last_contact = excluded.last_contact,
			updated_ts = excluded.updated_ts, labels = excluded.labels`,
		n.ClusterID, n.ID, n.Addr, n.Source, n.Status, n.StatusReason, n.DownCause, n.Drained, n.StoreID, n.Cursor, kinds,
		n.Version, shsqlite.NullMicros(n.LastContact), shsqlite.Micros(n.UpdatedTS), string(lbls))
	return err
}

// DeleteNode removes a node (ErrNotFound when there is none). Its actions stay.
func (w *writer) DeleteNode(ctx context.Context, clusterID, nodeID string) error {
	what := fmt.Sprintf("delete node %s/%s", clusterID, nodeID)
	_, n, err := w.exec(ctx, what, `DELETE FROM nodes WHERE cluster_id = ? AND id = ?`, clusterID, nodeID)
	if err == nil && n == 0 {
		err = fmt.Errorf("%s: %w", what, store.ErrNotFound)
	}
	return err
}

func (w *writer) actionArgs(r *store.Record) []any {
	return []any{r.ClusterID, r.NodeID, r.Kind, string(r.Args), string(r.State), r.StateReason,
		string(r.Progress), r.Output, r.Origin, r.Requester, r.ApprovedBy, r.TimeoutS,
		shsqlite.Micros(r.CreatedTS), shsqlite.NullMicros(r.ScheduledTS), shsqlite.NullMicros(r.StartedTS),
		shsqlite.NullMicros(r.FinishedTS), shsqlite.Micros(r.UpdatedTS), r.RetryOf, r.ApprovalDigest,
		r.CancelRequested, r.SeenOnAgent, r.PushedStoreID, r.RunID, r.Stage, r.Wave}
}

// InsertAction stores a new record (ErrExists when its id is taken). A zero
// CreatedTS is set to now, a zero UpdatedTS to CreatedTS. History is not
// stored: AppendHistory does that.
func (w *writer) InsertAction(ctx context.Context, r *store.Record) error {
	if r.CreatedTS.IsZero() {
		r.CreatedTS = now()
	}
	if r.UpdatedTS.IsZero() {
		r.UpdatedTS = r.CreatedTS
	}
	_, _, err := w.exec(ctx, fmt.Sprintf("insert action %q", r.ID),
		`INSERT INTO actions (`+actionColumns+`)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		append([]any{r.ID}, w.actionArgs(r)...)...)
	return err
}

// UpdateAction replaces every field of the stored record with the same id
// (ErrNotFound when there is none).
func (w *writer) UpdateAction(ctx context.Context, r *store.Record) error {
	what := fmt.Sprintf("update action %q", r.ID)
	_, n, err := w.exec(ctx, what, `UPDATE actions SET cluster_id = ?, node_id = ?, kind = ?, args = ?,
		state = ?, state_reason = ?, progress = ?, output = ?, origin = ?, requester = ?,
		approved_by = ?, timeout_s = ?, created_ts = ?, scheduled_ts = ?, started_ts = ?,
		finished_ts = ?, updated_ts = ?, retry_of = ?, approval_digest = ?, cancel_requested = ?,
		seen_on_agent = ?, pushed_store_id = ?, run_id = ?, stage = ?, wave = ? WHERE id = ?`,
		append(w.actionArgs(r), r.ID)...)
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
	_, _, err := w.exec(ctx, fmt.Sprintf("history of %q", actionID),
		`INSERT INTO action_history (action_id, ts, from_state, to_state, actor, reason) VALUES (?, ?, ?, ?, ?, ?)`,
		actionID, shsqlite.Micros(t.TS), string(t.From), string(t.To), t.Actor, t.Reason)
	return err
}

// AppendEvent stores e and sets e.Seq and, when zero, e.TS.
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
	res, _, err := w.exec(ctx, "append event "+e.Type,
		`INSERT INTO events (ts, type, actor, client_addr, cluster_id, node_id, action_id, run_id, message, data)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		shsqlite.Micros(e.TS), e.Type, e.Actor, e.ClientAddr, e.ClusterID, e.NodeID, e.ActionID, e.RunID, e.Message, data)
	if err != nil {
		return err
	}
	seq, err := res.LastInsertId()
	if err != nil {
		return fmt.Errorf("append event %s: %w", e.Type, err)
	}
	e.Seq = seq
	w.lastEvent = seq
	return nil
}

// PurgeActions deletes up to limit finished actions last changed before t,
// oldest first, but for the children of runs still open (a run that lost
// them would create them again); their history goes with them (ON DELETE CASCADE).
func (w *writer) PurgeActions(ctx context.Context, before time.Time, limit int) (int, error) {
	// The states are literals so that the partial index actions_finished
	// (migration 004) serves the query.
	_, n, err := w.exec(ctx, "purge actions", `DELETE FROM actions WHERE seq IN (
		SELECT seq FROM actions WHERE state IN ('DONE', 'FAILED', 'CANCELLED', 'LOST') AND updated_ts < ?
			AND (run_id = '' OR run_id NOT IN (SELECT id FROM runs WHERE state IN ('PENDING_APPROVE', 'RUNNING', 'PAUSED')))
		ORDER BY updated_ts, seq LIMIT ?)`, shsqlite.Micros(before), limit)
	return int(n), err
}

// PurgeEvents deletes up to limit events older than t, oldest first.
func (w *writer) PurgeEvents(ctx context.Context, before time.Time, limit int) (int, error) {
	_, n, err := w.exec(ctx, "purge events", `DELETE FROM events WHERE seq IN (
		SELECT seq FROM events WHERE ts < ? ORDER BY seq LIMIT ?)`, shsqlite.Micros(before), limit)
	return int(n), err
}

// InsertToken stores a new token (ErrExists when the hash is taken, or the
// name is, ignoring case: migration 006). A zero CreatedTS is set to now.
func (w *writer) InsertToken(ctx context.Context, t *store.Token) error {
	if t.CreatedTS.IsZero() {
		t.CreatedTS = now()
	}
	roles, err := jsonList(t.Roles)
	if err != nil {
		return fmt.Errorf("insert token %q: roles: %w", t.Name, err)
	}
	_, _, err = w.exec(ctx, fmt.Sprintf("insert token %q", t.Name),
		`INSERT INTO tokens (name, roles, hash, created_ts) VALUES (?, ?, ?, ?)`,
		t.Name, roles, t.Hash, shsqlite.Micros(t.CreatedTS))
	return err
}

// DeleteToken removes a token (ErrNotFound when there is none).
func (w *writer) DeleteToken(ctx context.Context, name string) error {
	what := fmt.Sprintf("delete token %q", name)
	// Its web UI sessions go with it, in the same transaction.
	if _, _, err := w.exec(ctx, what, `DELETE FROM ui_sessions WHERE token_hash IN (SELECT hash FROM tokens WHERE name = ?)`, name); err != nil {
		return err
	}
	_, n, err := w.exec(ctx, what, `DELETE FROM tokens WHERE name = ?`, name)
	if err == nil && n == 0 {
		err = fmt.Errorf("%s: %w", what, store.ErrNotFound)
	}
	return err
}
