package sqlite

import (
	"context"
	"fmt"

	"github.com/musterhq/muster/core/store"
)

// RunIDsWithPrefix returns up to max run ids starting with prefix.
func (r *reader) RunIDsWithPrefix(ctx context.Context, prefix string, max int) ([]string, error) {
	rows, err := r.tx.QueryContext(ctx, `SELECT id FROM runs WHERE id >= ? AND id < ? ORDER BY id LIMIT ?`,
		prefix, prefix+"\uffff", max)
	if err != nil {
		return nil, fmt.Errorf("runs with prefix %q: %w", prefix, err)
	}
	return scanIDs(rows)
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
	return `SELECT ` + columns + ` FROM actions WHERE run_id = ? AND run_id != '' ORDER BY created_ts, seq`
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
