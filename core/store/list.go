package store

import (
	"context"
	"fmt"
	"strconv"
	"strings"
)

// Placeholder writes the n-th parameter (from 1) of a statement in a
// dialect's style: QuestionMarks for SQLite, DollarNumbers for PostgreSQL.
type Placeholder func(n int) string

// QuestionMarks is SQLite's placeholder style: ?, ?, ...
func QuestionMarks(int) string { return "?" }

// DollarNumbers is PostgreSQL's placeholder style: $1, $2, ...
func DollarNumbers(n int) string { return "$" + strconv.Itoa(n) }

// ListActions is Reader.ListActions of both stores: r is the store's reader,
// columns its action columns, ph its placeholder style, and records runs a
// statement of records in its transaction. A marker that names no action
// is ErrNotFound.
func ListActions(ctx context.Context, r Reader, q ListQuery, columns string, ph Placeholder,
	records func(ctx context.Context, stmt string, args ...any) ([]Record, error)) ([]Record, error) {
	stmt, args, err := listActionsSQL(q, columns, ph)
	if err != nil {
		return nil, err
	}
	if q.Marker != "" {
		if _, err := r.Action(ctx, q.Marker); err != nil {
			return nil, fmt.Errorf("marker: %w", err)
		}
	}
	out, err := records(ctx, stmt, args...)
	if err != nil {
		return nil, fmt.Errorf("list actions: %w", err)
	}
	return out, nil
}

// listActionsSQL builds the one statement of ListActions for both stores, in the placeholder style ph, selecting columns from actions: the
// query's filters, its order (SortKeys, so ErrInvalidQuery for a sort no
// store can run) and, when Marker is set, the keyset condition "after the
// marker's row in this order" (keyset paging). The marker's values are
// read in the database by subqueries, so they keep their column types in
// either store. A Limit of 0 or less means no limit.
// The statement matches no rows when the marker names no action.
func listActionsSQL(q ListQuery, columns string, ph Placeholder) (string, []any, error) {
	keys, err := SortKeys(q.Sort)
	if err != nil {
		return "", nil, err
	}
	var where []string
	var args []any
	arg := func(v any) string {
		args = append(args, v)
		return ph(len(args))
	}
	in := func(col string, vals []string) string {
		ps := make([]string, len(vals))
		for i, v := range vals {
			ps[i] = arg(v)
		}
		return col + " IN (" + strings.Join(ps, ", ") + ")"
	}
	if q.ClusterID != "" {
		where = append(where, "cluster_id = "+arg(q.ClusterID))
	}
	if q.RunID != "" {
		where = append(where, "run_id = "+arg(q.RunID))
	}
	if q.NodeID != "" {
		where = append(where, "node_id = "+arg(q.NodeID))
	}
	if len(q.States) > 0 {
		states := make([]string, len(q.States))
		for i, s := range q.States {
			states[i] = string(s)
		}
		where = append(where, in("state", states))
	}
	if len(q.Kinds) > 0 {
		where = append(where, in("kind", q.Kinds))
	}
	if q.Marker != "" {
		where = append(where, after(keys, func(field string) string {
			return "(SELECT " + field + " FROM actions WHERE id = " + arg(q.Marker) + ")"
		}))
	}
	stmt := "SELECT " + columns + " FROM actions"
	if len(where) > 0 {
		stmt += " WHERE " + strings.Join(where, " AND ")
	}
	order := make([]string, len(keys))
	for i, k := range keys {
		order[i] = k.Field + map[bool]string{false: " ASC", true: " DESC"}[k.Desc]
	}
	stmt += " ORDER BY " + strings.Join(order, ", ")
	if q.Limit > 0 {
		stmt += " LIMIT " + arg(q.Limit)
	}
	return stmt, args, nil
}

// after returns the condition "comes after the marker in the order of keys":
// (k1 > v1) OR (k1 = v1 AND k2 > v2) OR ..., with < for descending keys,
// where val writes the marker's value of a field.
func after(keys []SortKey, val func(field string) string) string {
	var ors []string
	for i, k := range keys {
		var ands []string
		for _, prev := range keys[:i] {
			ands = append(ands, prev.Field+" = "+val(prev.Field))
		}
		op := " > "
		if k.Desc {
			op = " < "
		}
		ands = append(ands, k.Field+op+val(k.Field))
		ors = append(ors, "("+strings.Join(ands, " AND ")+")")
	}
	return "(" + strings.Join(ors, " OR ") + ")"
}
