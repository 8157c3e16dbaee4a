package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
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

// listActions is Reader.ListActions of both stores: r is the store's reads,
// columns its action columns, ph its placeholder style, and records runs a
// statement of records in its transaction. A marker that names no action
// is ErrNotFound.
func listActions(ctx context.Context, r Reads, q ListQuery, columns string, ph Placeholder,
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
	b := &listSQL{ph: ph}
	if q.ClusterID != "" {
		b.where = append(b.where, "cluster_id = "+b.arg(q.ClusterID))
	}
	b.within(q.ClusterIn)
	if q.RunID != "" {
		// run_id <> '' lets either store use the run's child index, which
		// holds only the children of runs.
		b.where = append(b.where, "run_id = "+b.arg(q.RunID), "run_id <> ''")
	}
	if q.NodeID != "" {
		b.where = append(b.where, "node_id = "+b.arg(q.NodeID))
	}
	if len(q.NodeIDs) > 0 {
		b.in("node_id", q.NodeIDs)
	}
	if len(q.States) > 0 {
		states := make([]string, len(q.States))
		for i, s := range q.States {
			states[i] = string(s)
		}
		b.in("state", states)
	}
	if len(q.Kinds) > 0 {
		b.in("kind", q.Kinds)
	}
	return b.statement("actions", columns, keys, q.Marker, q.Limit), b.args, nil
}

// listSQL builds a list statement of either store: its conditions and
// their parameters in the placeholder style ph.
type listSQL struct {
	ph    Placeholder
	where []string
	args  []any
}

// arg adds a parameter and returns its placeholder.
func (b *listSQL) arg(v any) string {
	b.args = append(b.args, v)
	return b.ph(len(b.args))
}

// in adds the condition "col is one of vals".
func (b *listSQL) in(col string, vals []string) {
	ps := make([]string, len(vals))
	for i, v := range vals {
		ps[i] = b.arg(v)
	}
	b.where = append(b.where, col+" IN ("+strings.Join(ps, ", ")+")")
}

// within adds the condition "of one of these clusters" when clusters is
// not nil (an empty list matches nothing).
func (b *listSQL) within(clusters []string) {
	switch {
	case clusters == nil:
	case len(clusters) == 0:
		b.where = append(b.where, "1 = 0")
	default:
		b.in("cluster_id", clusters)
	}
}

// statement is the SELECT of columns from table with the conditions so
// far, in the order of keys and, when marker is set, after the marker's row
// in that order (keyset paging: the marker's values are read in the
// database by subqueries, so they keep their column types in either store;
// a marker that names no row matches nothing). A limit of 0 or less means
// no limit.
func (b *listSQL) statement(table, columns string, keys []SortKey, marker string, limit int) string {
	if marker != "" {
		b.where = append(b.where, after(keys, func(field string) string {
			return "(SELECT " + field + " FROM " + table + " WHERE id = " + b.arg(marker) + ")"
		}))
	}
	stmt := "SELECT " + columns + " FROM " + table
	if len(b.where) > 0 {
		stmt += " WHERE " + strings.Join(b.where, " AND ")
	}
	order := make([]string, len(keys))
	for i, k := range keys {
		order[i] = k.Field + map[bool]string{false: " ASC", true: " DESC"}[k.Desc]
	}
	stmt += " ORDER BY " + strings.Join(order, ", ")
	if limit > 0 {
		stmt += " LIMIT " + b.arg(limit)
	}
	return stmt
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

// listRuns is Reader.ListRuns of both stores: columns and briefColumns are
// the store's run columns (whole and brief), ph its placeholder style, and
// runs reads a statement of runs (brief ones when brief) in its
// transaction. A marker that names no run lists nothing.
func listRuns(ctx context.Context, q RunQuery, columns, briefColumns string, ph Placeholder,
	runs func(ctx context.Context, brief bool, stmt string, args ...any) ([]Run, error)) ([]Run, error) {
	if q.Brief {
		columns = briefColumns
	}
	stmt, args := listRunsSQL(q, columns, ph)
	out, err := runs(ctx, q.Brief, stmt, args...)
	if err != nil {
		return nil, fmt.Errorf("list runs: %w", err)
	}
	return out, nil
}

// listRunsSQL builds the one statement of ListRuns for both stores, in the
// placeholder style ph, selecting columns from runs: newest first (oldest
// with Oldest), then by id, and after the marker's row in that order by
// the same keyset condition as the actions' (after).
func listRunsSQL(q RunQuery, columns string, ph Placeholder) (string, []any) {
	b := &listSQL{ph: ph}
	if q.ClusterID != "" {
		b.where = append(b.where, "cluster_id = "+b.arg(q.ClusterID))
	}
	b.within(q.ClusterIn)
	if len(q.States) > 0 {
		b.in("state", q.States)
	}
	keys := []SortKey{{Field: "created_ts", Desc: !q.Oldest}, {Field: "id", Desc: !q.Oldest}}
	return b.statement("runs", columns, keys, q.Marker, q.Limit), b.args
}

// ErrUnknownMarker is a page marker that names nothing: an ErrInvalidQuery
// (the API answers 400).
var ErrUnknownMarker = fmt.Errorf("%w: unknown page marker", ErrInvalidQuery)

// ActionPage reads one page of the actions q lists, at most q.Limit of them
// (every one when it is 0 or less), for the API's and the UI's lists: it
// asks for one more to tell whether a next page exists, and returns the
// marker of the next page ("" on the last). A marker that names no action
// is ErrUnknownMarker.
func ActionPage(ctx context.Context, r Reader, q ListQuery) ([]Record, string, error) {
	limit := q.Limit
	if limit > 0 {
		q.Limit++
	}
	recs, err := r.ListActions(ctx, q)
	if q.Marker != "" && errors.Is(err, ErrNotFound) {
		return nil, "", fmt.Errorf("%w: %s is not an action", ErrUnknownMarker, q.Marker)
	}
	if err != nil {
		return nil, "", err
	}
	recs, next := cutPage(recs, limit, func(r *Record) string { return r.ID })
	return recs, next, nil
}

// RunPage reads one page of the runs q lists as ActionPage does actions. A
// marker that names no run is ErrUnknownMarker.
func RunPage(ctx context.Context, r Reader, q RunQuery) ([]Run, string, error) {
	if q.Marker != "" {
		if ok, err := RunExists(ctx, r, q.Marker); err != nil {
			return nil, "", err
		} else if !ok {
			return nil, "", fmt.Errorf("%w: %s is not a run", ErrUnknownMarker, q.Marker)
		}
	}
	limit := q.Limit
	if limit > 0 {
		q.Limit++
	}
	list, err := r.ListRuns(ctx, q)
	if err != nil {
		return nil, "", err
	}
	list, next := cutPage(list, limit, func(r *Run) string { return r.ID })
	return list, next, nil
}

// cutPage cuts list, read with one more than limit, to limit, and returns
// the marker of the next page: the id of its last item, "" when nothing
// follows.
func cutPage[T any](list []T, limit int, id func(*T) string) ([]T, string) {
	if limit <= 0 || len(list) <= limit {
		return list, ""
	}
	return list[:limit], id(&list[limit-1])
}

// ScheduleQuery selects a page of schedules: those of ClusterID ("" for
// every cluster) in one of States (none: every state), in name order after
// the schedule named Marker, at most Limit (every one when 0 or less).
type ScheduleQuery struct {
	ClusterID string
	// ClusterIn, when not nil, keeps the schedules of these clusters only.
	ClusterIn []string
	States    []string
	Marker    string
	Limit     int
}

// SchedulePage reads one page of the schedules q lists, as ActionPage does
// actions: keyset by name, and the marker of the next page ("" on the
// last). A marker that names no schedule is ErrUnknownMarker. Schedules are
// made by people and stay few, so the filter runs over the name-ordered
// list the store reads (docs/schedules.md).
func SchedulePage(ctx context.Context, r Reader, q ScheduleQuery) ([]Schedule, string, error) {
	all, err := r.Schedules(ctx)
	if err != nil {
		return nil, "", err
	}
	// Byte order, whatever the database's collation.
	slices.SortFunc(all, func(a, b Schedule) int { return strings.Compare(a.Name, b.Name) })
	found := q.Marker == ""
	out := []Schedule{}
	for i := range all {
		sc := &all[i]
		if sc.Name == q.Marker {
			found = true
		}
		if q.Marker != "" && sc.Name <= q.Marker {
			continue
		}
		if q.ClusterID != "" && sc.ClusterID != q.ClusterID {
			continue
		}
		if q.ClusterIn != nil && !slices.Contains(q.ClusterIn, sc.ClusterID) {
			continue
		}
		if len(q.States) > 0 && !slices.Contains(q.States, sc.State) {
			continue
		}
		out = append(out, *sc)
		if q.Limit > 0 && len(out) > q.Limit {
			break
		}
	}
	if !found {
		return nil, "", fmt.Errorf("%w: %s is not a schedule", ErrUnknownMarker, q.Marker)
	}
	out, next := cutPage(out, q.Limit, func(sc *Schedule) string { return sc.Name })
	return out, next, nil
}
