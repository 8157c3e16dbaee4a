package sqlite

import (
	"context"
	"fmt"
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
