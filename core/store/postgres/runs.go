package postgres

import (
	"context"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"github.com/musterhq/muster/core/store"
)

// RunIDsWithPrefix returns up to max run ids starting with prefix, in byte
// order.
func (r *reader) RunIDsWithPrefix(ctx context.Context, prefix string, max int) ([]string, error) {
	if max <= 0 || !utf8.ValidString(prefix) || strings.IndexByte(prefix, 0) >= 0 {
		return nil, nil
	}
	rows, err := r.query(ctx,
		`SELECT id FROM runs WHERE id >= $1 AND id < $2 AND starts_with(id, $1) ORDER BY id LIMIT $3`,
		prefix, prefix+"\U0010FFFF", max)
	if err != nil {
		return nil, fmt.Errorf("runs with prefix %q: %w", prefix, err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("runs with prefix %q: %w", prefix, err)
	}
	if len(ids) == 0 {
		return nil, nil
	}
	return ids, nil
}

// RunChildren lists a run's child actions, oldest first.
func (r *reader) RunChildren(ctx context.Context, runID string) ([]store.Record, error) {
	out, err := r.records(ctx, runChildrenQuery(actionColumns), runID)
	if err != nil {
		return nil, fmt.Errorf("children of run %s: %w", runID, err)
	}
	return out, nil
}

// runChildrenQuery reads the columns of the children of one run. It also
// asks for a non-empty run_id, so that the partial index on run_id (actions_run_child)
// serves it: a bound run id alone does not tell the planner so, and the
// whole actions table would be read.
func runChildrenQuery(columns string) string {
	return `SELECT ` + columns + ` FROM actions WHERE run_id = $1 AND run_id != '' ORDER BY created_ts, seq`
}

// RunChildrenBrief is RunChildren with only the fields of
// briefActionColumns.
func (r *reader) RunChildrenBrief(ctx context.Context, runID string) ([]store.Record, error) {
	out, err := r.recordsWith(ctx, scanBrief, runChildrenQuery(briefActionColumns), runID)
	if err != nil {
		return nil, fmt.Errorf("children of run %s: %w", runID, err)
	}
	return out, nil
}
