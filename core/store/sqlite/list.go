package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/musterhq/muster/core/store"
)

// ListActions selects actions by the query's filters, orders them by its sort
// keys (then id) and, when Marker is set, starts after that action's position
// in this order (keyset paging). A Limit of 0 or less means no limit.
func (r *reader) ListActions(ctx context.Context, q store.ListQuery) ([]store.Record, error) {
	keys, err := store.SortKeys(q.Sort)
	if err != nil {
		return nil, err
	}
	var where []string
	var args []any
	if q.ClusterID != "" {
		where = append(where, "cluster_id = ?")
		args = append(args, q.ClusterID)
	}
	if q.RunID != "" {
		where = append(where, "run_id = ?")
		args = append(args, q.RunID)
	}
	if q.NodeID != "" {
		where = append(where, "node_id = ?")
		args = append(args, q.NodeID)
	}
	if len(q.States) > 0 {
		where = append(where, "state IN ("+placeholders(len(q.States))+")")
		for _, s := range q.States {
			args = append(args, string(s))
		}
	}
	if len(q.Kinds) > 0 {
		where = append(where, "kind IN ("+placeholders(len(q.Kinds))+")")
		for _, k := range q.Kinds {
			args = append(args, k)
		}
	}
	if q.Marker != "" {
		cond, condArgs, err := r.after(ctx, keys, q.Marker)
		if err != nil {
			return nil, err
		}
		where = append(where, cond)
		args = append(args, condArgs...)
	}
	stmt := `SELECT ` + actionColumns + ` FROM actions`
	if len(where) > 0 {
		stmt += " WHERE " + strings.Join(where, " AND ")
	}
	order := make([]string, len(keys))
	for i, k := range keys {
		order[i] = k.Field + map[bool]string{false: " ASC", true: " DESC"}[k.Desc]
	}
	stmt += " ORDER BY " + strings.Join(order, ", ") + " LIMIT ?"
	limit := q.Limit
	if limit <= 0 {
		limit = -1
	}
	args = append(args, limit)
	out, err := r.records(ctx, stmt, args...)
	if err != nil {
		return nil, fmt.Errorf("list actions: %w", err)
	}
	return out, nil
}

// after returns the condition "comes after the marker in the order of keys":
// (k1 > v1) OR (k1 = v1 AND k2 > v2) OR ..., with < for descending keys.
func (r *reader) after(ctx context.Context, keys []store.SortKey, marker string) (string, []any, error) {
	cols := make([]string, len(keys))
	for i, k := range keys {
		cols[i] = k.Field
	}
	vals := make([]any, len(keys))
	ptrs := make([]any, len(keys))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	err := r.tx.QueryRowContext(ctx, `SELECT `+strings.Join(cols, ", ")+` FROM actions WHERE id = ?`, marker).Scan(ptrs...)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil, fmt.Errorf("marker %q: %w", marker, store.ErrNotFound)
	}
	if err != nil {
		return "", nil, fmt.Errorf("marker %q: %w", marker, err)
	}
	var ors []string
	var args []any
	for i, k := range keys {
		var ands []string
		for j := 0; j < i; j++ {
			ands = append(ands, keys[j].Field+" = ?")
			args = append(args, vals[j])
		}
		op := " > ?"
		if k.Desc {
			op = " < ?"
		}
		ands = append(ands, k.Field+op)
		args = append(args, vals[i])
		ors = append(ors, "("+strings.Join(ands, " AND ")+")")
	}
	return "(" + strings.Join(ors, " OR ") + ")", args, nil
}
