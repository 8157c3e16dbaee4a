package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/musterhq/muster/core/store"
	shsqlite "github.com/musterhq/muster/shared/sqlite"
)

const deliveryColumns = `id, destination, event_seq, state, attempts, created_ts, next_ts, updated_ts, last_status, last_error`

func scanDelivery(s scanner) (*store.Delivery, error) {
	var d store.Delivery
	var created, next, updated int64
	if err := s.Scan(&d.ID, &d.Destination, &d.EventSeq, &d.State, &d.Attempts, &created, &next, &updated,
		&d.LastStatus, &d.LastError); err != nil {
		return nil, err
	}
	d.CreatedTS, d.NextTS, d.UpdatedTS = shsqlite.FromMicros(created), shsqlite.FromMicros(next), shsqlite.FromMicros(updated)
	return &d, nil
}

func (r *reader) Delivery(ctx context.Context, id int64) (*store.Delivery, error) {
	d, err := scanDelivery(r.tx.QueryRowContext(ctx, `SELECT `+deliveryColumns+` FROM notify_deliveries WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("delivery %d: %w", id, store.ErrNotFound)
	}
	return d, err
}

func (r *reader) Deliveries(ctx context.Context, q store.DeliveryQuery) ([]store.Delivery, error) {
	query := `SELECT ` + deliveryColumns + ` FROM notify_deliveries WHERE destination = ?`
	args := []any{q.Destination}
	switch q.State {
	case "":
	case store.DeliveryPending, store.DeliveryDead:
		// A literal, so that the partial index of the state serves the read.
		query += ` AND state = '` + q.State + `'`
	default:
		query += ` AND state = ?`
		args = append(args, q.State)
	}
	if q.Oldest {
		query += ` ORDER BY id`
	} else {
		if q.Before > 0 {
			query += ` AND id < ?`
			args = append(args, q.Before)
		}
		query += ` ORDER BY id DESC`
	}
	if q.Limit > 0 {
		query += ` LIMIT ?`
		args = append(args, q.Limit)
	}
	rows, err := r.tx.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("deliveries: %w", err)
	}
	defer rows.Close()
	var out []store.Delivery
	for rows.Next() {
		d, err := scanDelivery(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, *d)
	}
	return out, rows.Err()
}

func (r *reader) EventDeliveries(ctx context.Context, q store.EventDeliveryQuery) ([]store.Delivery, error) {
	rows, err := r.tx.QueryContext(ctx, `SELECT `+deliveryColumns+` FROM notify_deliveries
		WHERE id BETWEEN ? AND ? AND created_ts BETWEEN ? AND ? ORDER BY event_seq DESC, destination LIMIT ?`,
		store.DeliveryID(q.FromSeq, 0), store.DeliveryID(q.ToSeq, store.MaxDestinations-1),
		shsqlite.Micros(q.FromTS), shsqlite.Micros(q.ToTS), q.Limit)
	if err != nil {
		return nil, fmt.Errorf("event deliveries: %w", err)
	}
	defer rows.Close()
	var out []store.Delivery
	for rows.Next() {
		d, err := scanDelivery(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, *d)
	}
	return out, rows.Err()
}

func (r *reader) PendingDeliveries(ctx context.Context, destination string, limit int) ([]store.Delivery, error) {
	return r.Deliveries(ctx, store.DeliveryQuery{Destination: destination, State: store.DeliveryPending, Limit: limit, Oldest: true})
}

func (r *reader) DeliveryStats(ctx context.Context) ([]store.DeliveryStat, error) {
	rows, err := r.tx.QueryContext(ctx, `SELECT destination,
		SUM(state = 'pending'), MIN(CASE WHEN state = 'pending' THEN created_ts END),
		MAX(CASE WHEN state = 'delivered' THEN updated_ts END),
		MAX(CASE WHEN last_error != '' THEN updated_ts END), SUM(state = 'dead')
		FROM notify_deliveries GROUP BY destination ORDER BY destination`)
	if err != nil {
		return nil, fmt.Errorf("delivery stats: %w", err)
	}
	var out []store.DeliveryStat
	for rows.Next() {
		var s store.DeliveryStat
		var oldest, success, failure sql.NullInt64
		if err := rows.Scan(&s.Destination, &s.Backlog, &oldest, &success, &failure, &s.Dead); err != nil {
			rows.Close()
			return nil, err
		}
		s.OldestPending, s.LastSuccess, s.LastFailure = shsqlite.FromNullMicros(oldest),
			shsqlite.FromNullMicros(success), shsqlite.FromNullMicros(failure)
		out = append(out, s)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	for i := range out {
		if out[i].LastFailure == nil {
			continue
		}
		if err := r.tx.QueryRowContext(ctx, `SELECT last_error FROM notify_deliveries
			WHERE destination = ? AND last_error != '' ORDER BY updated_ts DESC, id DESC LIMIT 1`,
			out[i].Destination).Scan(&out[i].LastError); err != nil {
			return nil, fmt.Errorf("delivery stats: %w", err)
		}
	}
	return out, nil
}

func (w *writer) UpdateDelivery(ctx context.Context, d *store.Delivery) error {
	if d.UpdatedTS.IsZero() {
		d.UpdatedTS = now()
	}
	what := fmt.Sprintf("update delivery %d", d.ID)
	_, n, err := w.exec(ctx, what, `UPDATE notify_deliveries SET state = ?, attempts = ?, next_ts = ?,
		updated_ts = ?, last_status = ?, last_error = ? WHERE id = ?`,
		d.State, d.Attempts, shsqlite.Micros(d.NextTS), shsqlite.Micros(d.UpdatedTS), d.LastStatus, d.LastError, d.ID)
	if err == nil && n == 0 {
		err = fmt.Errorf("%s: %w", what, store.ErrNotFound)
	}
	return err
}

func (w *writer) MarkDelivered(ctx context.Context, ids []int64, status int, ts time.Time) (int, error) {
	if len(ids) == 0 {
		return 0, nil
	}
	args := []any{shsqlite.Micros(ts), status}
	for _, id := range ids {
		args = append(args, id)
	}
	_, n, err := w.exec(ctx, "mark deliveries delivered", `UPDATE notify_deliveries SET state = 'delivered',
		attempts = attempts + 1, updated_ts = ?, last_status = ?, last_error = ''
		WHERE id IN (?`+strings.Repeat(", ?", len(ids)-1)+`)`, args...)
	return int(n), err
}

func (w *writer) PurgeDeliveries(ctx context.Context, before time.Time, limit int) (int, error) {
	// Oldest first by id (deliveries are created in event order), up to the
	// first created at or after before: a read of limit rows at most.
	_, n, err := w.exec(ctx, "purge deliveries", `DELETE FROM notify_deliveries WHERE id < (
		SELECT COALESCE(MIN(id), (SELECT MAX(id) + 1 FROM (SELECT id FROM notify_deliveries ORDER BY id LIMIT ?)))
		FROM (SELECT id, created_ts FROM notify_deliveries ORDER BY id LIMIT ?) WHERE created_ts >= ?)`,
		limit, limit, shsqlite.Micros(before))
	return int(n), err
}
