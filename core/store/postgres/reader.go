package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/action"
)

// querier is what a reader needs of a transaction.
type querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// reader answers the store.Reader queries inside one transaction. The
// reads both stores make with the same SQL are store.Reads'.
type reader struct {
	store.Reads
	q querier
}

// newReader returns the reader of a transaction.
func newReader(q querier) *reader {
	r := &reader{q: q}
	r.Reads = store.Reads{Dialect: dialect, Query: r.each}
	return r
}

// each runs a statement and calls fn for every row: store.Query.
func (r *reader) each(ctx context.Context, q string, args []any, fn func(store.Row) error) error {
	rows, err := r.query(ctx, q, args...)
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

// clean replaces NUL bytes, which PostgreSQL text cannot hold, in every
// string argument.
func clean(args []any) []any {
	for i, a := range args {
		switch v := a.(type) {
		case string:
			if strings.IndexByte(v, 0) >= 0 {
				args[i] = strings.ReplaceAll(v, "\x00", "\uFFFD")
			}
		case []string:
			for j, s := range v {
				if strings.IndexByte(s, 0) >= 0 {
					v = append([]string(nil), v...)
					v[j] = strings.ReplaceAll(s, "\x00", "\uFFFD")
				}
			}
			args[i] = v
		}
	}
	return args
}

func (r *reader) query(ctx context.Context, q string, args ...any) (pgx.Rows, error) {
	return r.q.Query(ctx, q, clean(args)...)
}

func (r *reader) queryRow(ctx context.Context, q string, args ...any) pgx.Row {
	return r.q.QueryRow(ctx, q, clean(args)...)
}

func nullTS(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	v := action.UTC(*t)
	return &v
}

func fromNullTS(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	v := t.UTC()
	return &v
}

func rawOrNil(s string) json.RawMessage {
	if s == "" {
		return nil
	}
	return json.RawMessage(s)
}

func (r *reader) Clusters(ctx context.Context) ([]store.Cluster, error) {
	rows, err := r.query(ctx, `SELECT id, status, status_reason, updated_ts FROM clusters ORDER BY id`)
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
	c, err := scanCluster(r.queryRow(ctx, `SELECT id, status, status_reason, updated_ts FROM clusters WHERE id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("cluster %q: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("cluster %q: %w", id, err)
	}
	return c, nil
}

func scanCluster(s pgx.Row) (*store.Cluster, error) {
	var c store.Cluster
	if err := s.Scan(&c.ID, &c.Status, &c.StatusReason, &c.UpdatedTS); err != nil {
		return nil, err
	}
	c.UpdatedTS = c.UpdatedTS.UTC()
	return &c, nil
}

const nodeColumns = `cluster_id, id, addr, source, status, status_reason, down_cause, drained, store_id, cursor, kinds, version, last_contact, updated_ts, labels, drained_by, drain_reason`

func (r *reader) Nodes(ctx context.Context, clusterID string) ([]store.Node, error) {
	q := `SELECT ` + nodeColumns + ` FROM nodes`
	var args []any
	if clusterID != "" {
		q += ` WHERE cluster_id = $1`
		args = append(args, clusterID)
	}
	rows, err := r.query(ctx, q+` ORDER BY cluster_id, id`, args...)
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
	rows, err := r.query(ctx, `SELECT id FROM nodes WHERE cluster_id = $1 AND status = $2 ORDER BY id`, clusterID, store.NodeDown)
	if err != nil {
		return nil, fmt.Errorf("down nodes: %w", err)
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

func (r *reader) Node(ctx context.Context, clusterID, nodeID string) (*store.Node, error) {
	n, err := scanNode(r.queryRow(ctx, `SELECT `+nodeColumns+` FROM nodes WHERE cluster_id = $1 AND id = $2`, clusterID, nodeID))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("node %s/%s: %w", clusterID, nodeID, store.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("node %s/%s: %w", clusterID, nodeID, err)
	}
	return n, nil
}

func scanNode(s pgx.Row) (*store.Node, error) {
	var n store.Node
	var labels []byte
	var kinds []string
	err := s.Scan(&n.ClusterID, &n.ID, &n.Addr, &n.Source, &n.Status, &n.StatusReason, &n.DownCause, &n.Drained,
		&n.StoreID, &n.Cursor, &kinds, &n.Version, &n.LastContact, &n.UpdatedTS, &labels, &n.DrainedBy, &n.DrainReason)
	if err != nil {
		return nil, err
	}
	n.Kinds, n.ArgsSchemas = store.FromKindsColumn(kinds)
	if err := json.Unmarshal(labels, &n.Labels); err != nil {
		return nil, fmt.Errorf("node %s/%s: labels: %w", n.ClusterID, n.ID, err)
	}
	if len(n.Labels) == 0 {
		n.Labels = nil
	}
	n.LastContact = fromNullTS(n.LastContact)
	n.UpdatedTS = n.UpdatedTS.UTC()
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

func scanBrief(s pgx.Row) (*store.Record, error) {
	var rec store.Record
	var state, outputs string
	err := s.Scan(&rec.ID, &rec.ClusterID, &rec.NodeID, &state, &rec.StateReason, &rec.ApprovedBy, &rec.FinishedTS,
		&rec.PushedStoreID, &rec.RunID, &rec.Stage, &rec.Step, &rec.Attempt, &outputs)
	if err != nil {
		return nil, err
	}
	rec.State = action.State(state)
	rec.Outputs = rawOrNil(outputs)
	rec.FinishedTS = fromNullTS(rec.FinishedTS)
	return &rec, nil
}

func scanRecord(s pgx.Row) (*store.Record, error) {
	var rec store.Record
	var args, progress, state, outputs string
	err := s.Scan(&rec.ID, &rec.ClusterID, &rec.NodeID, &rec.Kind, &args, &state, &rec.StateReason,
		&progress, &rec.Output, &rec.Origin, &rec.Requester, &rec.ApprovedBy, &rec.TimeoutS,
		&rec.CreatedTS, &rec.ScheduledTS, &rec.StartedTS, &rec.FinishedTS, &rec.UpdatedTS, &rec.RetryOf,
		&rec.ApprovalDigest, &rec.CancelRequested, &rec.SeenOnAgent, &rec.PushedStoreID,
		&rec.RunID, &rec.Stage, &rec.Wave, &rec.Step, &rec.Attempt, &outputs, &rec.NotBefore, &rec.Urgent)
	if err != nil {
		return nil, err
	}
	rec.Args = rawOrNil(args)
	rec.Progress = rawOrNil(progress)
	rec.Outputs = rawOrNil(outputs)
	rec.State = action.State(state)
	rec.CreatedTS = rec.CreatedTS.UTC()
	rec.UpdatedTS = rec.UpdatedTS.UTC()
	rec.ScheduledTS = fromNullTS(rec.ScheduledTS)
	rec.StartedTS = fromNullTS(rec.StartedTS)
	rec.FinishedTS = fromNullTS(rec.FinishedTS)
	rec.NotBefore = fromNullTS(rec.NotBefore)
	return &rec, nil
}

func (r *reader) records(ctx context.Context, q string, args ...any) ([]store.Record, error) {
	return r.recordsWith(ctx, scanRecord, q, args...)
}

// recordsWith reads the records of q, each scanned by scan.
func (r *reader) recordsWith(ctx context.Context, scan func(pgx.Row) (*store.Record, error), q string, args ...any) ([]store.Record, error) {
	rows, err := r.query(ctx, q, args...)
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
	rec, err := scanRecord(r.queryRow(ctx, `SELECT `+actionColumns+` FROM actions WHERE id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("action %q: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("action %q: %w", id, err)
	}
	return rec, nil
}

// ActionIDsWithPrefix returns up to max ids that start with prefix, in byte
// order. The range lets PostgreSQL walk the unique index on id (C collation:
// U+10FFFF sorts after every other character).
func (r *reader) ActionIDsWithPrefix(ctx context.Context, prefix string, max int) ([]string, error) {
	if max <= 0 || !utf8.ValidString(prefix) || strings.IndexByte(prefix, 0) >= 0 {
		return nil, nil // no stored id starts with it
	}
	rows, err := r.query(ctx,
		`SELECT id FROM actions WHERE id >= $1 AND id < $2 AND starts_with(id, $1) ORDER BY id LIMIT $3`,
		prefix, prefix+"\U0010FFFF", max)
	if err != nil {
		return nil, fmt.Errorf("actions with prefix %q: %w", prefix, err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("actions with prefix %q: %w", prefix, err)
	}
	if len(ids) == 0 {
		return nil, nil
	}
	return ids, nil
}

func (r *reader) History(ctx context.Context, actionID string) ([]action.Transition, error) {
	rows, err := r.query(ctx,
		`SELECT ts, from_state, to_state, actor, reason FROM action_history WHERE action_id = $1 ORDER BY seq`, actionID)
	if err != nil {
		return nil, fmt.Errorf("history of %q: %w", actionID, err)
	}
	defer rows.Close()
	var out []action.Transition
	for rows.Next() {
		var t action.Transition
		var from, to string
		if err := rows.Scan(&t.TS, &from, &to, &t.Actor, &t.Reason); err != nil {
			return nil, err
		}
		t.TS, t.From, t.To = t.TS.UTC(), action.State(from), action.State(to)
		out = append(out, t)
	}
	return out, rows.Err()
}

// OpenActions lists the non-final actions of a node (of the cluster when
// nodeID is ""), oldest creation first.
func (r *reader) OpenActions(ctx context.Context, clusterID, nodeID string) ([]store.Record, error) {
	open := []string{string(action.PendingApprove), string(action.PendingSchedule), string(action.New), string(action.Running)}
	var out []store.Record
	var err error
	if nodeID == "" {
		out, err = r.records(ctx, `SELECT `+actionColumns+` FROM actions
			WHERE state = ANY($1) AND cluster_id = $2 ORDER BY created_ts, seq`, open, clusterID)
	} else {
		out, err = r.records(ctx, `SELECT `+actionColumns+` FROM actions
			WHERE cluster_id = $1 AND node_id = $2 AND state = ANY($3)
			ORDER BY created_ts, seq`, clusterID, nodeID, open)
	}
	if err != nil {
		return nil, fmt.Errorf("open actions of %s/%s: %w", clusterID, nodeID, err)
	}
	return out, nil
}

// ApprovalsBefore lists PENDING_APPROVE actions created before t, oldest first.
func (r *reader) ApprovalsBefore(ctx context.Context, t time.Time) ([]store.Record, error) {
	out, err := r.records(ctx, `SELECT `+actionColumns+` FROM actions
		WHERE state = $1 AND created_ts < $2 ORDER BY created_ts, seq`, string(action.PendingApprove), action.UTC(t))
	if err != nil {
		return nil, fmt.Errorf("approvals before %s: %w", t, err)
	}
	return out, nil
}

// ScheduledBefore lists PENDING_SCHEDULE actions scheduled before t, oldest
// first.
func (r *reader) ScheduledBefore(ctx context.Context, t time.Time) ([]store.Record, error) {
	out, err := r.records(ctx, `SELECT `+actionColumns+` FROM actions
		WHERE state = $1 AND scheduled_ts < $2 ORDER BY scheduled_ts, seq`, string(action.PendingSchedule), action.UTC(t))
	if err != nil {
		return nil, fmt.Errorf("scheduled before %s: %w", t, err)
	}
	return out, nil
}

// Events lists events with a sequence number above since, oldest first; a
// limit of 0 or less means no limit.
func (r *reader) Events(ctx context.Context, since int64, limit int) ([]store.Event, error) {
	q := `SELECT seq, ts, type, actor, client_addr, cluster_id, node_id, action_id, run_id, message, data
		FROM events WHERE seq > $1 ORDER BY seq`
	args := []any{since}
	if limit > 0 {
		q += ` LIMIT $2`
		args = append(args, limit)
	}
	rows, err := r.query(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("events: %w", err)
	}
	defer rows.Close()
	var out []store.Event
	for rows.Next() {
		var e store.Event
		var data string
		if err := rows.Scan(&e.Seq, &e.TS, &e.Type, &e.Actor, &e.ClientAddr, &e.ClusterID, &e.NodeID,
			&e.ActionID, &e.RunID, &e.Message, &data); err != nil {
			return nil, err
		}
		e.TS = e.TS.UTC()
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
	if err := r.queryRow(ctx, `SELECT COALESCE(MAX(seq), 0) FROM events`).Scan(&seq); err != nil {
		return 0, fmt.Errorf("latest event: %w", err)
	}
	return seq, nil
}

func (r *reader) Tokens(ctx context.Context) ([]store.Token, error) {
	rows, err := r.query(ctx, `SELECT name, roles, hash, created_ts, expires_ts, cluster_id, uses_left FROM tokens ORDER BY name`)
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
	t, err := scanToken(r.queryRow(ctx, `SELECT name, roles, hash, created_ts, expires_ts, cluster_id, uses_left FROM tokens WHERE hash = $1`, hash))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("token: %w", store.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("token: %w", err)
	}
	return t, nil
}

func scanToken(s pgx.Row) (*store.Token, error) {
	var t store.Token
	var uses *int32
	if err := s.Scan(&t.Name, &t.Roles, &t.Hash, &t.CreatedTS, &t.ExpiresTS, &t.ClusterID, &uses); err != nil {
		return nil, err
	}
	if t.ExpiresTS != nil {
		e := t.ExpiresTS.UTC()
		t.ExpiresTS = &e
	}
	if uses != nil {
		n := int(*uses)
		t.UsesLeft = &n
	}
	if len(t.Roles) == 0 {
		t.Roles = nil
	}
	t.CreatedTS = t.CreatedTS.UTC()
	return &t, nil
}
