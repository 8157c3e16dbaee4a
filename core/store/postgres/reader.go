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
