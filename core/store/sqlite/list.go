package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/musterhq/muster/core/store"
)

// DefaultSort is the order of a list query without sort keys: oldest first.
var DefaultSort = []store.SortKey{{Field: "created_ts"}}

// sortKeys validates keys and returns them with the id appended as the last
// tie-breaker (ascending) unless it is already there. Every SortFields name
// is also the column's name.
func sortKeys(keys []store.SortKey) ([]store.SortKey, error) {
	if len(keys) == 0 {
		keys = DefaultSort
	}
	out := make([]store.SortKey, 0, len(keys)+1)
	seen := map[string]bool{}
	for _, k := range keys {
		if !slices.Contains(store.SortFields, k.Field) {
			return nil, fmt.Errorf("%w: cannot sort by %q (want one of %s)", ErrInvalidQuery, k.Field, strings.Join(store.SortFields, ", "))
		}
		if seen[k.Field] {
			return nil, fmt.Errorf("%w: sort field %q given twice", ErrInvalidQuery, k.Field)
		}
		seen[k.Field] = true
		out = append(out, k)
		if k.Field == "id" { // unique: any further key can never decide
			return out, nil
		}
	}
	return append(out, store.SortKey{Field: "id"}), nil
}

// ListActions selects actions by the query's filters, orders them by its sort
// keys (then id) and, when Marker is set, starts after that action's position
// in this order (keyset paging). A Limit of 0 or less means no limit.
func (r *reader) ListActions(ctx context.Context, q store.ListQuery) ([]store.Record, error) {
	keys, err := sortKeys(q.Sort)
	if err != nil {
		return nil, err
	}
	var where []string
	var args []any
	if q.ClusterID != "" {
		where = append(where, "cluster_id = ?")
		args = append(args, q.ClusterID)
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
