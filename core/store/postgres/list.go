package postgres

import (
	"context"

	"github.com/musterhq/muster/core/store"
)

// ListActions lists actions by the statement core/store builds for both
// stores (filters, order, keyset paging after Marker).
func (r *reader) ListActions(ctx context.Context, q store.ListQuery) ([]store.Record, error) {
	return store.ListActions(ctx, r, q, actionColumns, store.DollarNumbers, r.records)
}
