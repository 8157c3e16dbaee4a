package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/musterhq/muster/core/store"
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

type scanner interface{ Scan(dest ...any) error }

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
