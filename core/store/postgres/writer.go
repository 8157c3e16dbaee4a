package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/action"
)

// writer is the store.Tx of one attempt of an Update. It counts the rows it
// changes and remembers the newest event it appended.
//
// A failed statement aborts a PostgreSQL transaction, while the callers may
// go on after ErrExists or ErrNotFound (as they can on SQLite). So the
// writes that can meet a taken key or a missing parent say so by the number
// of rows they touched (ON CONFLICT DO NOTHING, INSERT ... SELECT WHERE
// EXISTS), never by failing.
type writer struct {
	reader
	store.Writes
	rows        int64
	lastEvent   int64
	eventLocked bool
}

var _ store.Tx = (*writer)(nil)

// newWriter returns the writer of one attempt of an Update in tx. The writes
// both stores make with the same SQL (action rows, history, events) are
// store.Writes'.
func newWriter(tx pgx.Tx) *writer {
	w := &writer{reader: reader{q: tx}}
	w.Reads = store.Reads{Dialect: dialect, Query: w.each}
	w.Writes = store.Writes{Dialect: dialect, Exec: w.exec, InsertSeq: w.insertSeq, Query: w.each,
		Returning: w.returning}
	return w
}

func (w *writer) exec(ctx context.Context, what, q string, args ...any) (int64, error) {
	tag, err := w.q.Exec(ctx, q, clean(args)...)
	if err != nil {
		return 0, translate(err, what)
	}
	n := tag.RowsAffected()
	w.rows += n
	return n, nil
}

func now() time.Time { return action.UTC(time.Now()) }

// list is a text[] value: never NULL.
func list(v []string) []string {
	if v == nil {
		return []string{}
	}
	return v
}

// PutNode creates or replaces a node; its cluster must exist (ErrNotFound
// otherwise). A zero UpdatedTS is set to now.
func (w *writer) PutNode(ctx context.Context, n *store.Node) error {
	if n.UpdatedTS.IsZero() {
		n.UpdatedTS = now()
	}
	what := fmt.Sprintf("put node %s/%s", n.ClusterID, n.ID)
	labels, err := store.LabelsColumn(n.Labels)
	if err != nil {
		return fmt.Errorf("%s: labels: %w", what, err)
	}
	held, err := store.LabelsColumn(n.CoreLabels)
	if err != nil {
		return fmt.Errorf("%s: core labels: %w", what, err)
	}
	rows, err := w.exec(ctx, what,
		`INSERT INTO nodes (`+store.NodeColumns+`)
		SELECT $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15::jsonb, $16, $17, $18::jsonb, $19
		WHERE EXISTS (SELECT 1 FROM clusters WHERE id = $1)
		ON CONFLICT (cluster_id, id) DO UPDATE SET addr = excluded.addr, source = excluded.source,
			status = excluded.status, status_reason = excluded.status_reason,
			down_cause = excluded.down_cause, drained = excluded.drained,
			store_id = excluded.store_id, cursor = excluded.cursor, kinds = excluded.kinds,
			version = excluded.version, last_contact = excluded.last_contact,
			updated_ts = excluded.updated_ts, labels = excluded.labels,
			drained_by = excluded.drained_by, drain_reason = excluded.drain_reason,
			core_labels = excluded.core_labels, replaces = excluded.replaces`,
		n.ClusterID, n.ID, n.Addr, n.Source, n.Status, n.StatusReason, n.DownCause, n.Drained, n.StoreID, n.Cursor, list(store.KindsColumn(n.Kinds, n.ArgsSchemas, n.Secrets)),
		n.Version, nullTS(n.LastContact), action.UTC(n.UpdatedTS), labels, n.DrainedBy, n.DrainReason, held, n.Replaces)
	if err == nil && rows == 0 {
		err = fmt.Errorf("%s: cluster %q: %w", what, n.ClusterID, store.ErrNotFound)
	}
	return err
}

// dialect is PostgreSQL's, for the statements core/store writes for both stores.
var dialect = store.Dialect{Placeholder: store.DollarNumbers, Time: func(t time.Time) any { return action.UTC(t) },
	ReadTime: readTime, List: func(v []string) (any, error) { return list(v), nil },
	ListInto: func(v *[]string) any { return v }, Position: "strpos"}

// readTime reads a timestamptz column, in UTC.
func readTime(src any) (time.Time, error) {
	t, ok := src.(time.Time)
	if !ok {
		return time.Time{}, fmt.Errorf("time column: %T, want a time", src)
	}
	return t.UTC(), nil
}

// returning runs a statement that changes rows and returns them, calls each
// for every row and counts them as written.
func (w *writer) returning(ctx context.Context, what, q string, args []any, each func(store.Row) error) error {
	n := int64(0)
	err := w.each(ctx, q, args, func(row store.Row) error {
		n++
		return each(row)
	})
	w.rows += n
	return translate(err, what)
}

// insertSeq takes the events lock (once a transaction), runs an INSERT ...
// RETURNING seq of an event, remembers the seq as the newest event and
// returns it.
func (w *writer) insertSeq(ctx context.Context, what, q string, args ...any) (int64, error) {
	if !w.eventLocked {
		if _, err := w.q.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, lockEvents); err != nil {
			return 0, fmt.Errorf("%s: lock: %w", what, err)
		}
		w.eventLocked = true
	}
	var seq int64
	if err := w.queryRow(ctx, q, args...).Scan(&seq); err != nil {
		return 0, translate(err, what)
	}
	w.rows++
	w.lastEvent = seq
	return seq, nil
}
