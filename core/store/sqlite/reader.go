package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/action"
	shsqlite "github.com/musterhq/muster/shared/sqlite"
)

// reader answers the store.Reader queries inside one transaction. The
// reads both stores make with the same SQL are store.Reads'.
type reader struct {
	store.Reads
	tx *sql.Tx
}

// newReader returns the reader of a transaction.
func newReader(tx *sql.Tx) *reader {
	r := &reader{tx: tx}
	r.Reads = store.Reads{Dialect: dialect, Query: r.each}
	return r
}

// each runs a statement and calls fn for every row: store.Query.
func (r *reader) each(ctx context.Context, q string, args []any, fn func(store.Row) error) error {
	rows, err := r.tx.QueryContext(ctx, q, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		if err := fn(rows); err != nil {
			return err
		}
	}
	return rows.Err()
}

var _ store.Reader = (*reader)(nil)

func rawOrNil(s string) json.RawMessage {
	if s == "" {
		return nil
	}
	return json.RawMessage(s)
}

func (r *reader) Clusters(ctx context.Context) ([]store.Cluster, error) {
	rows, err := r.tx.QueryContext(ctx, `SELECT id, status, status_reason, updated_ts FROM clusters ORDER BY id`)
	if err != nil {
		return nil, fmt.Errorf("clusters: %w", err)
	}
	defer rows.Close()
	var out []store.Cluster
	for rows.Next() {
		c, err := scanCluster(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, *c)
	}
	return out, rows.Err()
}

func (r *reader) Cluster(ctx context.Context, id string) (*store.Cluster, error) {
	row := r.tx.QueryRowContext(ctx, `SELECT id, status, status_reason, updated_ts FROM clusters WHERE id = ?`, id)
	c, err := scanCluster(row)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("cluster %q: %w", id, store.ErrNotFound)
	}
	return c, err
}

type scanner interface{ Scan(dest ...any) error }

func scanCluster(s scanner) (*store.Cluster, error) {
	var c store.Cluster
	var ts int64
	if err := s.Scan(&c.ID, &c.Status, &c.StatusReason, &ts); err != nil {
		return nil, err
	}
	c.UpdatedTS = shsqlite.FromMicros(ts)
	return &c, nil
}

const nodeColumns = `cluster_id, id, addr, source, status, status_reason, down_cause, drained, store_id, cursor, kinds, version, last_contact, updated_ts, labels, drained_by, drain_reason`

func (r *reader) Nodes(ctx context.Context, clusterID string) ([]store.Node, error) {
	q := `SELECT ` + nodeColumns + ` FROM nodes`
	var args []any
	if clusterID != "" {
		q += ` WHERE cluster_id = ?`
		args = append(args, clusterID)
	}
	rows, err := r.tx.QueryContext(ctx, q+` ORDER BY cluster_id, id`, args...)
	if err != nil {
		return nil, fmt.Errorf("nodes: %w", err)
	}
	defer rows.Close()
	var out []store.Node
	for rows.Next() {
		n, err := scanNode(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, *n)
	}
	return out, rows.Err()
}

func (r *reader) DownNodes(ctx context.Context, clusterID string) ([]string, error) {
	rows, err := r.tx.QueryContext(ctx, `SELECT id FROM nodes WHERE cluster_id = ? AND status = ? ORDER BY id`, clusterID, store.NodeDown)
	if err != nil {
		return nil, fmt.Errorf("down nodes: %w", err)
	}
	return scanIDs(rows)
}

func (r *reader) Node(ctx context.Context, clusterID, nodeID string) (*store.Node, error) {
	row := r.tx.QueryRowContext(ctx, `SELECT `+nodeColumns+` FROM nodes WHERE cluster_id = ? AND id = ?`, clusterID, nodeID)
	n, err := scanNode(row)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("node %s/%s: %w", clusterID, nodeID, store.ErrNotFound)
	}
	return n, err
}

func scanNode(s scanner) (*store.Node, error) {
	var n store.Node
	var kinds, lbls string
	var last sql.NullInt64
	var ts int64
	err := s.Scan(&n.ClusterID, &n.ID, &n.Addr, &n.Source, &n.Status, &n.StatusReason, &n.DownCause, &n.Drained,
		&n.StoreID, &n.Cursor, &kinds, &n.Version, &last, &ts, &lbls, &n.DrainedBy, &n.DrainReason)
	if err != nil {
		return nil, err
	}
	var entries []string
	if err := json.Unmarshal([]byte(kinds), &entries); err != nil {
		return nil, fmt.Errorf("node %s/%s: kinds: %w", n.ClusterID, n.ID, err)
	}
	n.Kinds, n.ArgsSchemas = store.FromKindsColumn(entries)
	if err := json.Unmarshal([]byte(lbls), &n.Labels); err != nil {
		return nil, fmt.Errorf("node %s/%s: labels: %w", n.ClusterID, n.ID, err)
	}
	if len(n.Labels) == 0 {
		n.Labels = nil
	}
	n.LastContact = shsqlite.FromNullMicros(last)
	n.UpdatedTS = shsqlite.FromMicros(ts)
	return &n, nil
}

const actionColumns = `id, cluster_id, node_id, kind, args, state, state_reason, progress, output,
	origin, requester, approved_by, timeout_s, created_ts, scheduled_ts, started_ts, finished_ts,
	updated_ts, retry_of, approval_digest, cancel_requested, seen_on_agent, pushed_store_id,
	run_id, stage, wave, step, attempt, outputs, not_before, urgent`

// briefActionColumns are the columns of a brief child (RunChildrenBrief),
// read by scanBrief.
const briefActionColumns = `id, cluster_id, node_id, state, state_reason, approved_by, finished_ts,
	pushed_store_id, run_id, stage, step, attempt, outputs`

func scanBrief(s scanner) (*store.Record, error) {
	var rec store.Record
	var state, outputs string
	var finished sql.NullInt64
	err := s.Scan(&rec.ID, &rec.ClusterID, &rec.NodeID, &state, &rec.StateReason, &rec.ApprovedBy, &finished,
		&rec.PushedStoreID, &rec.RunID, &rec.Stage, &rec.Step, &rec.Attempt, &outputs)
	if err != nil {
		return nil, err
	}
	rec.State = action.State(state)
	rec.Outputs = rawOrNil(outputs)
	rec.FinishedTS = shsqlite.FromNullMicros(finished)
	return &rec, nil
}

func scanRecord(s scanner) (*store.Record, error) {
	var rec store.Record
	var args, progress, state, outputs string
	var created, updated int64
	var scheduled, started, finished, notBefore sql.NullInt64
	err := s.Scan(&rec.ID, &rec.ClusterID, &rec.NodeID, &rec.Kind, &args, &state, &rec.StateReason,
		&progress, &rec.Output, &rec.Origin, &rec.Requester, &rec.ApprovedBy, &rec.TimeoutS,
		&created, &scheduled, &started, &finished, &updated, &rec.RetryOf, &rec.ApprovalDigest,
		&rec.CancelRequested, &rec.SeenOnAgent, &rec.PushedStoreID, &rec.RunID, &rec.Stage, &rec.Wave, &rec.Step, &rec.Attempt, &outputs,
		&notBefore, &rec.Urgent)
	if err != nil {
		return nil, err
	}
	rec.Args = rawOrNil(args)
	rec.Progress = rawOrNil(progress)
	rec.Outputs = rawOrNil(outputs)
	rec.State = action.State(state)
	rec.CreatedTS = shsqlite.FromMicros(created)
	rec.UpdatedTS = shsqlite.FromMicros(updated)
	rec.ScheduledTS = shsqlite.FromNullMicros(scheduled)
	rec.StartedTS = shsqlite.FromNullMicros(started)
	rec.FinishedTS = shsqlite.FromNullMicros(finished)
	rec.NotBefore = shsqlite.FromNullMicros(notBefore)
	return &rec, nil
}

func (r *reader) records(ctx context.Context, q string, args ...any) ([]store.Record, error) {
	return r.recordsWith(ctx, scanRecord, q, args...)
}

// recordsWith reads the records of q, each scanned by scan.
func (r *reader) recordsWith(ctx context.Context, scan func(scanner) (*store.Record, error), q string, args ...any) ([]store.Record, error) {
	rows, err := r.tx.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []store.Record
	for rows.Next() {
		rec, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, *rec)
	}
	return out, rows.Err()
}

// Action returns the record with exactly this id. Its History is not filled:
// History reads it.
func (r *reader) Action(ctx context.Context, id string) (*store.Record, error) {
	row := r.tx.QueryRowContext(ctx, `SELECT `+actionColumns+` FROM actions WHERE id = ?`, id)
	rec, err := scanRecord(row)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("action %q: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("action %q: %w", id, err)
	}
	return rec, nil
}

func (r *reader) ActionIDsWithPrefix(ctx context.Context, prefix string, max int) ([]string, error) {
	if max <= 0 {
		return nil, nil
	}
	// The range condition lets SQLite walk the unique index on id; 0xFF sorts
	// after every byte of UTF-8 text.
	rows, err := r.tx.QueryContext(ctx,
		`SELECT id FROM actions WHERE id >= ?1 AND id < ?2 AND substr(id, 1, length(?1)) = ?1 ORDER BY id LIMIT ?3`,
		prefix, prefix+"\xff", max)
	if err != nil {
		return nil, fmt.Errorf("actions with prefix %q: %w", prefix, err)
	}
	return scanIDs(rows)
}

// scanIDs reads and closes rows of one text column.
func scanIDs(rows *sql.Rows) ([]string, error) {
	defer rows.Close()
	var out []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		out = append(out, id)
	}
	return out, rows.Err()
}

func (r *reader) History(ctx context.Context, actionID string) ([]action.Transition, error) {
	rows, err := r.tx.QueryContext(ctx,
		`SELECT ts, from_state, to_state, actor, reason FROM action_history WHERE action_id = ? ORDER BY seq`, actionID)
	if err != nil {
		return nil, fmt.Errorf("history of %q: %w", actionID, err)
	}
	defer rows.Close()
	var out []action.Transition
	for rows.Next() {
		var t action.Transition
		var ts int64
		var from, to string
		if err := rows.Scan(&ts, &from, &to, &t.Actor, &t.Reason); err != nil {
			return nil, err
		}
		t.TS, t.From, t.To = shsqlite.FromMicros(ts), action.State(from), action.State(to)
		out = append(out, t)
	}
	return out, rows.Err()
}

// OpenActions lists the non-final actions of a node (of the cluster when
// nodeID is ""), oldest creation first.
func (r *reader) OpenActions(ctx context.Context, clusterID, nodeID string) ([]store.Record, error) {
	open := []any{action.PendingApprove, action.PendingSchedule, action.New, action.Running}
	var out []store.Record
	var err error
	if nodeID == "" {
		// By state first: the cost follows the open actions, not the
		// cluster's history ("+" keeps the planner off the cluster index).
		out, err = r.records(ctx, `SELECT `+actionColumns+` FROM actions
			WHERE state IN (?, ?, ?, ?) AND +cluster_id = ?
			ORDER BY created_ts, seq`, append(open, clusterID)...)
	} else {
		out, err = r.records(ctx, `SELECT `+actionColumns+` FROM actions
			WHERE cluster_id = ? AND node_id = ? AND state IN (?, ?, ?, ?)
			ORDER BY created_ts, seq`, append([]any{clusterID, nodeID}, open...)...)
	}
	if err != nil {
		return nil, fmt.Errorf("open actions of %s/%s: %w", clusterID, nodeID, err)
	}
	return out, nil
}

// ApprovalsBefore lists PENDING_APPROVE actions created before t, oldest first.
func (r *reader) ApprovalsBefore(ctx context.Context, t time.Time) ([]store.Record, error) {
	out, err := r.records(ctx, `SELECT `+actionColumns+` FROM actions
		WHERE state = ? AND created_ts < ? ORDER BY created_ts, seq`, action.PendingApprove, shsqlite.Micros(t))
	if err != nil {
		return nil, fmt.Errorf("approvals before %s: %w", t, err)
	}
	return out, nil
}

// ScheduledBefore lists PENDING_SCHEDULE actions scheduled before t, oldest
// first.
func (r *reader) ScheduledBefore(ctx context.Context, t time.Time) ([]store.Record, error) {
	out, err := r.records(ctx, `SELECT `+actionColumns+` FROM actions
		WHERE state = ? AND scheduled_ts < ? ORDER BY scheduled_ts, seq`, action.PendingSchedule, shsqlite.Micros(t))
	if err != nil {
		return nil, fmt.Errorf("scheduled before %s: %w", t, err)
	}
	return out, nil
}

// Events lists events with a sequence number above since, oldest first; a
// limit of 0 or less means no limit.
func (r *reader) Events(ctx context.Context, since int64, limit int) ([]store.Event, error) {
	if limit <= 0 {
		limit = -1
	}
	rows, err := r.tx.QueryContext(ctx, `SELECT seq, ts, type, actor, client_addr, cluster_id, node_id,
		action_id, run_id, message, data FROM events WHERE seq > ? ORDER BY seq LIMIT ?`, since, limit)
	if err != nil {
		return nil, fmt.Errorf("events: %w", err)
	}
	defer rows.Close()
	var out []store.Event
	for rows.Next() {
		var e store.Event
		var ts int64
		var data string
		if err := rows.Scan(&e.Seq, &ts, &e.Type, &e.Actor, &e.ClientAddr, &e.ClusterID, &e.NodeID,
			&e.ActionID, &e.RunID, &e.Message, &data); err != nil {
			return nil, err
		}
		e.TS = shsqlite.FromMicros(ts)
		if data != "" {
			if err := json.Unmarshal([]byte(data), &e.Data); err != nil {
				return nil, fmt.Errorf("event %d: data: %w", e.Seq, err)
			}
		}
		out = append(out, e)
	}
	return out, rows.Err()
}

// LatestSeq returns the newest event's number (0 with none): the maximum
// of the primary key, one read of its index.
func (r *reader) LatestSeq(ctx context.Context) (int64, error) {
	var seq int64
	if err := r.tx.QueryRowContext(ctx, `SELECT COALESCE(MAX(seq), 0) FROM events`).Scan(&seq); err != nil {
		return 0, fmt.Errorf("latest event: %w", err)
	}
	return seq, nil
}

func (r *reader) Tokens(ctx context.Context) ([]store.Token, error) {
	rows, err := r.tx.QueryContext(ctx, `SELECT name, roles, hash, created_ts, expires_ts, cluster_id, uses_left FROM tokens ORDER BY name`)
	if err != nil {
		return nil, fmt.Errorf("tokens: %w", err)
	}
	defer rows.Close()
	var out []store.Token
	for rows.Next() {
		t, err := scanToken(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, *t)
	}
	return out, rows.Err()
}

func (r *reader) TokenByHash(ctx context.Context, hash string) (*store.Token, error) {
	row := r.tx.QueryRowContext(ctx, `SELECT name, roles, hash, created_ts, expires_ts, cluster_id, uses_left FROM tokens WHERE hash = ?`, hash)
	t, err := scanToken(row)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("token: %w", store.ErrNotFound)
	}
	return t, err
}

func scanToken(s scanner) (*store.Token, error) {
	var t store.Token
	var roles string
	var ts int64
	var expires, uses sql.NullInt64
	if err := s.Scan(&t.Name, &roles, &t.Hash, &ts, &expires, &t.ClusterID, &uses); err != nil {
		return nil, err
	}
	if expires.Valid {
		e := shsqlite.FromMicros(expires.Int64)
		t.ExpiresTS = &e
	}
	if uses.Valid {
		n := int(uses.Int64)
		t.UsesLeft = &n
	}
	if err := json.Unmarshal([]byte(roles), &t.Roles); err != nil {
		return nil, fmt.Errorf("token %q: roles: %w", t.Name, err)
	}
	if len(t.Roles) == 0 {
		t.Roles = nil
	}
	t.CreatedTS = shsqlite.FromMicros(ts)
	return &t, nil
}
