package postgres

import (
	"context"
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
	return store.EachRow(rows, fn)
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
