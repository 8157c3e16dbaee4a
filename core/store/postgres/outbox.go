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
	if q.State != "" {
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
		WHERE created_ts BETWEEN $1 AND $2 AND event_seq BETWEEN $3 AND $4
		ORDER BY event_seq DESC, destination LIMIT $5`,
		q.FromTS.UTC(), q.ToTS.UTC(), q.FromSeq, q.ToSeq, q.Limit)
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

func (w *writer) PurgeDeliveries(ctx context.Context, before time.Time, limit int) (int, error) {
	n, err := w.exec(ctx, "purge deliveries", `DELETE FROM notify_deliveries WHERE id IN (
		SELECT id FROM notify_deliveries WHERE created_ts < $1 ORDER BY created_ts, id LIMIT $2)`,
		action.UTC(before), limit)
	return int(n), err
}
