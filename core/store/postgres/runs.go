package postgres

import (
	"context"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
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
