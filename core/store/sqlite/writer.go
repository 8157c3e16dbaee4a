package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"time"

	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/action"
	shsqlite "github.com/musterhq/muster/shared/sqlite"
)

// writer is the store.Tx of one Update. It counts the rows it changes and
// remembers the newest event it appended. The writes both stores make with
// the same SQL (action rows, history, events) are store.Writes'.
type writer struct {
	reader
	store.Writes
	rows      int64
	lastEvent int64
}

// newWriter returns the writer of one Update; its transaction is set by
// the Update.
func newWriter() *writer {
	w := &writer{}
	w.Reads = store.Reads{Dialect: dialect, Query: w.each}
	w.Writes = store.Writes{Dialect: dialect, Exec: w.execRows, InsertSeq: w.insertSeq, Query: w.each,
		Returning: w.returning}
	return w
}

var _ store.Tx = (*writer)(nil)

func (w *writer) exec(ctx context.Context, what, q string, args ...any) (sql.Result, int64, error) {
	res, err := w.tx.ExecContext(ctx, q, args...)
	if err != nil {
		return nil, 0, translate(err, what)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return nil, 0, fmt.Errorf("%s: %w", what, err)
	}
	w.rows += n
	return res, n, nil
}

func now() time.Time { return action.UTC(time.Now()) }

// jsonList encodes a list of strings, an empty one as [].
func jsonList(v []string) (string, error) {
	if len(v) == 0 {
		return "[]", nil
	}
	b, err := json.Marshal(v)
	return string(b), err
}

// PutNode creates or replaces a node; its cluster must exist (ErrNotFound
// otherwise). A zero UpdatedTS is set to now.
func (w *writer) PutNode(ctx context.Context, n *store.Node) error {
	if n.UpdatedTS.IsZero() {
		n.UpdatedTS = now()
	}
	kinds, err := jsonList(store.KindsColumn(n.Kinds, n.ArgsSchemas, n.Secrets))
	if err != nil {
		return fmt.Errorf("put node %s/%s: kinds: %w", n.ClusterID, n.ID, err)
	}
	lbls, err := store.LabelsColumn(n.Labels)
	if err != nil {
		return fmt.Errorf("put node %s/%s: labels: %w", n.ClusterID, n.ID, err)
	}
	held, err := store.LabelsColumn(n.CoreLabels)
	if err != nil {
		return fmt.Errorf("put node %s/%s: core labels: %w", n.ClusterID, n.ID, err)
	}
	_, _, err = w.exec(ctx, fmt.Sprintf("put node %s/%s", n.ClusterID, n.ID),
		`INSERT INTO nodes (`+store.NodeColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (cluster_id, id) DO UPDATE SET addr = excluded.addr, source = excluded.source,
			status = excluded.status, status_reason = excluded.status_reason, down_cause = excluded.down_cause, drained = excluded.drained,
			store_id = excluded.store_id, cursor = excluded.cursor, kinds = excluded.kinds,
			version = excluded.version, last_contact = excluded.last_contact,
			updated_ts = excluded.updated_ts, labels = excluded.labels,
			drained_by = excluded.drained_by, drain_reason = excluded.drain_reason,
			core_labels = excluded.core_labels, replaces = excluded.replaces`,
		n.ClusterID, n.ID, n.Addr, n.Source, n.Status, n.StatusReason, n.DownCause, n.Drained, n.StoreID, n.Cursor, kinds,
		n.Version, shsqlite.NullMicros(n.LastContact), shsqlite.Micros(n.UpdatedTS), lbls, n.DrainedBy, n.DrainReason,
		held, n.Replaces)
	return err
}

// dialect is SQLite's, for the statements core/store writes for both stores.
var dialect = store.Dialect{Placeholder: store.QuestionMarks, Time: func(t time.Time) any { return shsqlite.Micros(t) },
	ReadTime: readMicros, List: func(v []string) (any, error) { return jsonList(v) },
	ListInto: func(v *[]string) any { return jsonListColumn{v} }, Unindexed: "+", Position: "instr"}

// jsonListColumn scans a list column, a JSON array, into v.
type jsonListColumn struct{ v *[]string }

func (c jsonListColumn) Scan(src any) error {
	switch s := src.(type) {
	case nil:
		*c.v = nil
		return nil
	case string:
		return json.Unmarshal([]byte(s), c.v)
	case []byte:
		return json.Unmarshal(s, c.v)
	}
	return fmt.Errorf("list column: %T, want a JSON array", src)
}

// readMicros reads a time column: microseconds since the epoch.
func readMicros(src any) (time.Time, error) {
	v, ok := src.(int64)
	if !ok {
		return time.Time{}, fmt.Errorf("time column: %T, want microseconds", src)
	}
	return shsqlite.FromMicros(v), nil
}

// execRows is exec as a store.Exec.
func (w *writer) execRows(ctx context.Context, what, q string, args ...any) (int64, error) {
	_, n, err := w.exec(ctx, what, q, args...)
	return n, err
}

// insertSeq runs an INSERT ... RETURNING seq of an event, remembers the
// seq as the newest event and returns it.
func (w *writer) insertSeq(ctx context.Context, what, q string, args ...any) (int64, error) {
	var seq int64
	if err := w.tx.QueryRowContext(ctx, q, args...).Scan(&seq); err != nil {
		return 0, translate(err, what)
	}
	w.rows++
	w.lastEvent = seq
	return seq, nil
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
