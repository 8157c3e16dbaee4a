package postgres

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"

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
	arg := func(v any) string {
		args = append(args, v)
		return "$" + strconv.Itoa(len(args))
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
		where = append(where, "state = ANY("+arg(states)+")")
	}
	if len(q.Kinds) > 0 {
		where = append(where, "kind = ANY("+arg(q.Kinds)+")")
	}
	if q.Marker != "" {
		cond, err := r.after(ctx, keys, q.Marker, arg)
		if err != nil {
			return nil, err
		}
		where = append(where, cond)
	}
	stmt := `SELECT ` + actionColumns + ` FROM actions`
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
	out, err := r.records(ctx, stmt, args...)
	if err != nil {
		return nil, fmt.Errorf("list actions: %w", err)
	}
	return out, nil
}

// after returns the condition "comes after the marker in the order of keys":
// (k1 > v1) OR (k1 = v1 AND k2 > v2) OR ..., with < for descending keys.
// The marker's values are compared in the database, by a subquery, so they
// keep their column types.
func (r *reader) after(ctx context.Context, keys []store.SortKey, marker string, arg func(any) string) (string, error) {
	var found bool
	err := r.queryRow(ctx, `SELECT true FROM actions WHERE id = $1`, marker).Scan(&found)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", fmt.Errorf("marker %q: %w", marker, store.ErrNotFound)
	}
	if err != nil {
		return "", fmt.Errorf("marker %q: %w", marker, err)
	}
	m := arg(marker)
	val := func(field string) string { return "(SELECT " + field + " FROM actions WHERE id = " + m + ")" }
	var ors []string
	for i, k := range keys {
		var ands []string
		for j := 0; j < i; j++ {
			ands = append(ands, keys[j].Field+" = "+val(keys[j].Field))
		}
		op := " > "
		if k.Desc {
			op = " < "
		}
		ands = append(ands, k.Field+op+val(k.Field))
		ors = append(ors, "("+strings.Join(ands, " AND ")+")")
	}
	return "(" + strings.Join(ors, " OR ") + ")", nil
}
