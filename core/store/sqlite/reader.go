package sqlite

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/musterhq/muster/core/store"
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
	return store.EachRow(rows, fn)
}

var _ store.Reader = (*reader)(nil)

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
