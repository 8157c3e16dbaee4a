package store

import (
	"context"
	"database/sql"
	"time"
)

// Row is one row of a result, as either store's driver gives it.
type Row interface{ Scan(dest ...any) error }

// Rows is a result as either store's driver gives it.
type Rows interface {
	Row
	Next() bool
	Err() error
}

// EachRow calls fn for every row of rows, in order, stopping at the first
// error: the loop of each store's Query (which closes rows).
func EachRow(rows Rows, fn func(Row) error) error {
	for rows.Next() {
		if err := fn(rows); err != nil {
			return err
		}
	}
	return rows.Err()
}

// Query runs a statement in a store's transaction and calls each for every
// row of its result, in order, stopping at the first error.
type Query func(ctx context.Context, stmt string, args []any, each func(Row) error) error

// Reads are the reads of a Reader that both stores make with the same SQL.
// Each store's reader embeds them, made with its Dialect and how a
// statement runs in its transaction.
type Reads struct {
	Dialect Dialect
	// Query runs a statement and calls each for every row.
	Query Query
}

// one runs a statement expected to return at most one row and calls scan
// with it; it reports whether there was one.
func (r Reads) one(ctx context.Context, stmt string, args []any, scan func(Row) error) (bool, error) {
	found := false
	err := r.Query(ctx, stmt, args, func(row Row) error {
		if found {
			return nil
		}
		found = true
		return scan(row)
	})
	return found, err
}

// strs runs a statement of one string column and returns its values,
// an empty list when there are none.
func strs(ctx context.Context, q Query, stmt string, args ...any) ([]string, error) {
	out := []string{}
	err := q(ctx, stmt, args, func(row Row) error {
		var s string
		if err := row.Scan(&s); err != nil {
			return err
		}
		out = append(out, s)
		return nil
	})
	return out, err
}

// timeColumn scans a time column into t by the dialect's ReadTime (NULL
// leaves the zero time).
type timeColumn struct {
	read func(src any) (time.Time, error)
	t    *time.Time
}

func (c timeColumn) Scan(src any) error {
	if src == nil {
		*c.t = time.Time{}
		return nil
	}
	t, err := c.read(src)
	*c.t = t
	return err
}

// nullTimeColumn scans an optional time column into t: nil for NULL.
type nullTimeColumn struct {
	read func(src any) (time.Time, error)
	t    **time.Time
}

func (c nullTimeColumn) Scan(src any) error {
	if src == nil {
		*c.t = nil
		return nil
	}
	t, err := c.read(src)
	if err != nil {
		return err
	}
	*c.t = &t
	return nil
}

// timeInto is a scan destination for a time column, read into t.
func (d Dialect) timeInto(t *time.Time) sql.Scanner { return &timeColumn{read: d.ReadTime, t: t} }

// nullTimeInto is a scan destination for an optional time column, read
// into t.
func (d Dialect) nullTimeInto(t **time.Time) sql.Scanner {
	return &nullTimeColumn{read: d.ReadTime, t: t}
}
