package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/action"
)

const deliveryColumns = `id, destination, event_seq, state, attempts, created_ts, next_ts, updated_ts, last_status, last_error`

func scanDelivery(row pgx.Row) (*store.Delivery, error) {
	var d store.Delivery
	if err := row.Scan(&d.ID, &d.Destination, &d.EventSeq, &d.State, &d.Attempts, &d.CreatedTS, &d.NextTS,
		&d.UpdatedTS, &d.LastStatus, &d.LastError); err != nil {
		return nil, err
	}
	d.CreatedTS, d.NextTS, d.UpdatedTS = d.CreatedTS.UTC(), d.NextTS.UTC(), d.UpdatedTS.UTC()
	return &d, nil
}

func (r *reader) Delivery(ctx context.Context, id int64) (*store.Delivery, error) {
	d, err := scanDelivery(r.queryRow(ctx, `SELECT `+deliveryColumns+` FROM notify_deliveries WHERE id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("delivery %d: %w", id, store.ErrNotFound)
	}
	return d, err
}

func (r *reader) Deliveries(ctx context.Context, q store.DeliveryQuery) ([]store.Delivery, error) {
	query := `SELECT ` + deliveryColumns + ` FROM notify_deliveries WHERE destination = $1`
	args := []any{q.Destination}
	switch q.State {
	case "":
	case store.DeliveryPending, store.DeliveryDead:
		// A literal, so that the partial index of the state serves the read.
		query += ` AND state = '` + q.State + `'`
	default:
		args = append(args, q.State)
		query += fmt.Sprintf(` AND state = $%d`, len(args))
	}
	if q.Oldest {
		query += ` ORDER BY id`
	} else {
		if q.Before > 0 {
			args = append(args, q.Before)
			query += fmt.Sprintf(` AND id < $%d`, len(args))
		}
		query += ` ORDER BY id DESC`
	}
	if q.Limit > 0 {
		args = append(args, q.Limit)
		query += fmt.Sprintf(` LIMIT $%d`, len(args))
	}
	rows, err := r.query(ctx, query, args...)
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
	rows, err := r.query(ctx, `SELECT `+deliveryColumns+` FROM notify_deliveries
		WHERE id BETWEEN $1 AND $2 AND created_ts BETWEEN $3 AND $4
		ORDER BY event_seq DESC, destination LIMIT $5`,
		store.DeliveryID(q.FromSeq, 0), store.DeliveryID(q.ToSeq, store.MaxDestinations-1), q.FromTS.UTC(), q.ToTS.UTC(), q.Limit)
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
	rows, err := r.query(ctx, `SELECT destination,
		count(*) FILTER (WHERE state = 'pending'), min(created_ts) FILTER (WHERE state = 'pending'),
		max(updated_ts) FILTER (WHERE state = 'delivered'), max(updated_ts) FILTER (WHERE last_error != ''),
		count(*) FILTER (WHERE state = 'dead'),
		COALESCE((SELECT last_error FROM notify_deliveries l WHERE l.destination = d.destination AND l.last_error != ''
			ORDER BY updated_ts DESC, id DESC LIMIT 1), '')
		FROM notify_deliveries d GROUP BY destination ORDER BY destination`)
	if err != nil {
		return nil, fmt.Errorf("delivery stats: %w", err)
	}
	defer rows.Close()
	var out []store.DeliveryStat
	for rows.Next() {
		var s store.DeliveryStat
		if err := rows.Scan(&s.Destination, &s.Backlog, &s.OldestPending, &s.LastSuccess, &s.LastFailure,
			&s.Dead, &s.LastError); err != nil {
			return nil, err
		}
		s.OldestPending, s.LastSuccess, s.LastFailure = nullTS(s.OldestPending), nullTS(s.LastSuccess), nullTS(s.LastFailure)
		out = append(out, s)
	}
	return out, rows.Err()
}

func (w *writer) UpdateDelivery(ctx context.Context, d *store.Delivery) error {
	if d.UpdatedTS.IsZero() {
		d.UpdatedTS = now()
	}
	what := fmt.Sprintf("update delivery %d", d.ID)
	n, err := w.exec(ctx, what, `UPDATE notify_deliveries SET state = $1, attempts = $2, next_ts = $3,
		updated_ts = $4, last_status = $5, last_error = $6 WHERE id = $7`,
		d.State, d.Attempts, action.UTC(d.NextTS), action.UTC(d.UpdatedTS), d.LastStatus, d.LastError, d.ID)
	if err == nil && n == 0 {
		err = fmt.Errorf("%s: %w", what, store.ErrNotFound)
	}
	return err
}

func (w *writer) MarkDelivered(ctx context.Context, ids []int64, status int, ts time.Time) (int, error) {
	if len(ids) == 0 {
		return 0, nil
	}
	n, err := w.exec(ctx, "mark deliveries delivered", `UPDATE notify_deliveries SET state = 'delivered',
		attempts = attempts + 1, updated_ts = $1, last_status = $2, last_error = '' WHERE id = ANY($3)`,
		action.UTC(ts), status, ids)
	return int(n), err
}

func (w *writer) PurgeDeliveries(ctx context.Context, before time.Time, limit int) (int, error) {
	// Oldest first by id (deliveries are created in event order), up to the
	// first created at or after before: a read of limit rows at most.
	n, err := w.exec(ctx, "purge deliveries", `DELETE FROM notify_deliveries WHERE id IN (
		SELECT id FROM (SELECT id, created_ts FROM notify_deliveries ORDER BY id LIMIT $1) head
		WHERE id < COALESCE((SELECT min(id) FROM (SELECT id, created_ts FROM notify_deliveries ORDER BY id LIMIT $1) h
			WHERE created_ts >= $2), 9223372036854775807))`,
		limit, action.UTC(before))
	return int(n), err
}
