package sqlite

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/musterhq/muster/core/store"
	shsqlite "github.com/musterhq/muster/shared/sqlite"
)

// The outbox's views are made by core/store from the reads below; its
// writes are store.Writes'.

func (r *reader) Delivery(ctx context.Context, id int64) (*store.Delivery, error) {
	return store.ReadDelivery(ctx, r, id)
}

func (r *reader) Deliveries(ctx context.Context, q store.DeliveryQuery) ([]store.Delivery, error) {
	return store.ListDeliveries(ctx, r, q)
}

func (r *reader) EventDeliveries(ctx context.Context, q store.EventDeliveryQuery) ([]store.Delivery, error) {
	return store.ListEventDeliveries(ctx, r, q)
}

func (r *reader) PendingDeliveries(ctx context.Context, destination string, limit int) ([]store.Delivery, error) {
	return store.ListPending(ctx, r, destination, limit)
}

func (r *reader) DeliveryStats(ctx context.Context, destinations ...string) ([]store.DeliveryStat, error) {
	return store.ReadDeliveryStats(ctx, r, destinations...)
}

var _ store.OutboxRows = (*reader)(nil)

func (r *reader) OutboxEntries(ctx context.Context, q store.OutboxScan) ([]store.OutboxEntry, error) {
	stmt, args := store.OutboxEntriesSQL(dialect, q)
	rows, err := r.tx.QueryContext(ctx, stmt, args...)
	if err != nil {
		return nil, fmt.Errorf("outbox: %w", err)
	}
	defer rows.Close()
	var out []store.OutboxEntry
	for rows.Next() {
		var e store.OutboxEntry
		var created int64
		var dests string
		if err := rows.Scan(&e.Seq, &created, &dests); err != nil {
			return nil, err
		}
		e.CreatedTS, e.Destinations = shsqlite.FromMicros(created), store.ParseOutboxList(dests)
		out = append(out, e)
	}
	return out, rows.Err()
}

func (r *reader) DeliveryRows(ctx context.Context, q store.DeliveryScan) ([]store.Delivery, error) {
	stmt, args := store.DeliveryRowsSQL(dialect, q)
	rows, err := r.tx.QueryContext(ctx, stmt, args...)
	if err != nil {
		return nil, fmt.Errorf("deliveries: %w", err)
	}
	defer rows.Close()
	var out []store.Delivery
	for rows.Next() {
		var d store.Delivery
		var created, next, updated int64
		if err := rows.Scan(&d.ID, &d.Destination, &d.EventSeq, &d.State, &d.Attempts, &created, &next, &updated,
			&d.LastStatus, &d.LastError); err != nil {
			return nil, err
		}
		d.CreatedTS, d.NextTS, d.UpdatedTS = shsqlite.FromMicros(created), shsqlite.FromMicros(next), shsqlite.FromMicros(updated)
		out = append(out, d)
	}
	return out, rows.Err()
}

func (r *reader) Cursors(ctx context.Context, destination string) ([]store.Cursor, error) {
	stmt, args := store.CursorsSQL(dialect, destination)
	rows, err := r.tx.QueryContext(ctx, stmt, args...)
	if err != nil {
		return nil, fmt.Errorf("outbox cursors: %w", err)
	}
	defer rows.Close()
	var out []store.Cursor
	for rows.Next() {
		var c store.Cursor
		var success, failure sql.NullInt64
		if err := rows.Scan(&c.Destination, &c.Seq, &success, &failure, &c.LastError); err != nil {
			return nil, err
		}
		c.LastSuccess, c.LastFailure = shsqlite.FromNullMicros(success), shsqlite.FromNullMicros(failure)
		out = append(out, c)
	}
	return out, rows.Err()
}

func (r *reader) OutboxCount(ctx context.Context, destination string, after int64) (int, error) {
	stmt, args := store.OutboxCountSQL(dialect, destination, after)
	var n int
	if err := r.tx.QueryRowContext(ctx, stmt, args...).Scan(&n); err != nil {
		return 0, fmt.Errorf("outbox backlog of %s: %w", destination, err)
	}
	return n, nil
}

func (r *reader) DeliveryRowCounts(ctx context.Context) ([]store.DeliveryRowCount, error) {
	rows, err := r.tx.QueryContext(ctx, store.DeliveryRowCountsSQL)
	if err != nil {
		return nil, fmt.Errorf("delivery counts: %w", err)
	}
	defer rows.Close()
	var out []store.DeliveryRowCount
	for rows.Next() {
		var c store.DeliveryRowCount
		var after int
		if err := rows.Scan(&c.Destination, &c.State, &after, &c.N); err != nil {
			return nil, err
		}
		c.AfterCursor = after == 1
		out = append(out, c)
	}
	return out, rows.Err()
}
