package store

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/musterhq/muster/shared/action"
)

// Dialect is what the statements core/store writes for both stores (the
// appends here, the reads of reads.go, the action list in list.go) need to
// know of one store's SQL.
type Dialect struct {
	Placeholder Placeholder
	// Time is a time as the store binds it (SQLite: microseconds since the
	// epoch; PostgreSQL: a timestamptz).
	Time func(time.Time) any
	// ReadTime reads a time column as the store's driver gives it (SQLite:
	// microseconds since the epoch; PostgreSQL: a time.Time), in UTC.
	ReadTime func(src any) (time.Time, error)
	// List binds a list of strings (SQLite: a JSON array; PostgreSQL: a
	// text[]); ListInto is a scan destination for one, read into v.
	List     func(v []string) (any, error)
	ListInto func(v *[]string) any
	// Unindexed is the prefix of a column that keeps the planner off its
	// index (SQLite: a unary +; PostgreSQL: none, its planner needs no
	// hint).
	Unindexed string
	// Position is the function that finds a string in another
	// (SQLite: instr; PostgreSQL: strpos).
	Position string
}

// nullTime binds an optional time: NULL for nil.
func (d Dialect) nullTime(t *time.Time) any {
	if t == nil {
		return nil
	}
	return d.Time(*t)
}

// values writes one placeholder a value, from the first, and returns them
// with the values.
func (d Dialect) values(first int, vals ...any) (string, []any) {
	ps := make([]string, len(vals))
	for i := range vals {
		ps[i] = d.Placeholder(first + i)
	}
	return strings.Join(ps, ", "), vals
}

// Exec runs a statement in a store's transaction and returns the rows it
// changed (for the store's count of rows written). what names the write in
// errors.
type Exec func(ctx context.Context, what, stmt string, args ...any) (int64, error)

// Now is the time a store records for a zero timestamp.
func Now() time.Time { return action.UTC(time.Now()) }

// Writes are the writes of a Tx that both stores make with the same SQL:
// action rows, their history and events. Each store's writer embeds them,
// made with its Dialect and how a statement runs in its transaction.
type Writes struct {
	Dialect Dialect
	// Exec runs a statement and returns the rows it changed.
	Exec Exec
	// InsertSeq runs the INSERT ... RETURNING seq of an event and returns
	// the seq (the store remembers it as the newest event of the
	// transaction; PostgreSQL takes the events lock first).
	InsertSeq Exec
	// Query runs a read in the transaction.
	Query Query
	// Returning runs a statement that changes rows and returns them (...
	// RETURNING) and calls each for every row; the store counts them as
	// written. what names the write in errors.
	Returning func(ctx context.Context, what, stmt string, args []any, each func(Row) error) error
	// Outbox, when set, chooses the notification destinations of each
	// event; AppendEvent writes their deliveries with it.
	Outbox Outbox
}

// AppendHistory is Tx.AppendHistory of both stores: it adds one transition
// to an action's history (ErrNotFound when the action does not exist,
// without failing the transaction: PostgreSQL aborts one whose statement
// fails). A zero TS is set to now.
func (w Writes) AppendHistory(ctx context.Context, actionID string, t action.Transition) error {
	d, exec := w.Dialect, w.Exec
	if t.TS.IsZero() {
		t.TS = Now()
	}
	what := fmt.Sprintf("history of %q", actionID)
	ps, args := d.values(1, actionID, d.Time(t.TS), string(t.From), string(t.To), t.Actor, t.Reason)
	n, err := exec(ctx, what, `INSERT INTO action_history (action_id, ts, from_state, to_state, actor, reason)
		SELECT `+ps+` WHERE EXISTS (SELECT 1 FROM actions WHERE id = `+d.Placeholder(len(args)+1)+`)`,
		append(args, actionID)...)
	if err == nil && n == 0 {
		err = fmt.Errorf("%s: %w", what, ErrNotFound)
	}
	return err
}

// AppendEvent is Tx.AppendEvent of both stores: it stores e and sets e.Seq
// and, when zero, e.TS.
func (w Writes) AppendEvent(ctx context.Context, e *Event) error {
	d, insert := w.Dialect, w.InsertSeq
	if e.TS.IsZero() {
		e.TS = Now()
	}
	var data string
	if len(e.Data) > 0 {
		b, err := json.Marshal(e.Data)
		if err != nil {
			return fmt.Errorf("event %s: data: %w", e.Type, err)
		}
		data = string(b)
	}
	ps, args := d.values(1, d.Time(e.TS), e.Type, e.Actor, e.ClientAddr, e.ClusterID, e.NodeID, e.ActionID, e.RunID, e.Message, data)
	seq, err := insert(ctx, "append event "+e.Type,
		`INSERT INTO events (ts, type, actor, client_addr, cluster_id, node_id, action_id, run_id, message, data)
		VALUES (`+ps+`) RETURNING seq`, args...)
	if err != nil {
		return err
	}
	e.Seq = seq
	return w.enqueue(ctx, e)
}

// enqueue writes the outbox row of e, in the transaction that appends it,
// and gives each of its destinations that has none a cursor just before it.
func (w Writes) enqueue(ctx context.Context, e *Event) error {
	if w.Outbox == nil {
		return nil
	}
	dests := w.Outbox(e)
	if len(dests) == 0 {
		return nil
	}
	if len(dests) > MaxDestinations {
		return fmt.Errorf("enqueue deliveries of event %s: %d destinations, at most %d", e.Type, len(dests), MaxDestinations)
	}
	d := w.Dialect
	ps, args := d.values(1, e.Seq, d.Time(e.TS), outboxList(dests))
	if _, err := w.Exec(ctx, "enqueue deliveries of event "+e.Type,
		`INSERT INTO notify_outbox (seq, created_ts, destinations) VALUES (`+ps+`)`, args...); err != nil {
		return err
	}
	// A destination's cursor is inserted only when none is seen, so that
	// the statement touches no row the worker updates (PostgreSQL would
	// fail a serializable transaction whose ON CONFLICT meets a row
	// updated since its snapshot).
	rows := make([]string, len(dests))
	args = args[:0]
	for i, dest := range dests {
		args = append(args, dest, e.Seq-1)
		rows[i] = "(" + d.Placeholder(len(args)-1) + ", CAST(" + d.Placeholder(len(args)) + " AS BIGINT))"
	}
	_, err := w.Exec(ctx, "cursors of event "+e.Type, `INSERT INTO notify_cursors (destination, seq)
		SELECT column1, column2 FROM (VALUES `+strings.Join(rows, ", ")+`) v
		WHERE NOT EXISTS (SELECT 1 FROM notify_cursors c WHERE c.destination = v.column1)
		ON CONFLICT (destination) DO NOTHING`, args...)
	return err
}

// UpdateDelivery is OutboxTx.UpdateDelivery of both stores.
func (w Writes) UpdateDelivery(ctx context.Context, dv *Delivery) error {
	d := w.Dialect
	if dv.UpdatedTS.IsZero() {
		dv.UpdatedTS = Now()
	}
	what := fmt.Sprintf("update delivery %d", dv.ID)
	seq, _ := splitDeliveryID(dv.ID)
	if dv.ID <= 0 || dv.EventSeq != seq || dv.Destination == "" {
		return fmt.Errorf("%s: %w", what, ErrNotFound)
	}
	ps, args := d.values(1, dv.ID, dv.Destination, dv.EventSeq, dv.State, dv.Attempts, d.Time(dv.CreatedTS),
		d.Time(dv.NextTS), d.Time(dv.UpdatedTS), dv.LastStatus, dv.LastError)
	n, err := w.Exec(ctx, what, `INSERT INTO notify_deliveries (`+deliveryColumns+`) SELECT `+ps+`
		WHERE EXISTS (SELECT 1 FROM notify_outbox WHERE seq = `+d.Placeholder(len(args)+1)+` AND `+
		d.contains("destinations", d.Placeholder(len(args)+2))+`)
		ON CONFLICT (id) DO UPDATE SET state = excluded.state, attempts = excluded.attempts,
		next_ts = excluded.next_ts, updated_ts = excluded.updated_ts, last_status = excluded.last_status,
		last_error = excluded.last_error`, append(args, seq, ","+dv.Destination+",")...)
	if err != nil {
		return err
	}
	if n == 0 {
		return fmt.Errorf("%s: %w", what, ErrNotFound)
	}
	switch {
	case dv.LastError != "":
		_, err = w.Exec(ctx, "last failure of "+dv.Destination, `UPDATE notify_cursors SET last_failure_ts = `+
			d.Placeholder(1)+`, last_error = `+d.Placeholder(2)+` WHERE destination = `+d.Placeholder(3),
			d.Time(dv.UpdatedTS), dv.LastError, dv.Destination)
	case dv.State == DeliveryDelivered:
		_, err = w.Exec(ctx, "last success of "+dv.Destination, `UPDATE notify_cursors SET last_success_ts = `+
			d.Placeholder(1)+` WHERE destination = `+d.Placeholder(2), d.Time(dv.UpdatedTS), dv.Destination)
	}
	return err
}

// MarkDelivered is OutboxTx.MarkDelivered of both stores: two statements,
// whatever the number of deliveries.
func (w Writes) MarkDelivered(ctx context.Context, destination string, ids []int64, status int, ts time.Time) error {
	if len(ids) == 0 {
		return nil
	}
	d := w.Dialect
	last, _ := splitDeliveryID(slices.Max(ids))
	args := []any{d.Time(ts), status, destination}
	in := make([]string, len(ids))
	for i, id := range ids {
		args = append(args, id)
		in[i] = d.Placeholder(len(args))
	}
	// Those retried or redelivered have a row of their own.
	if _, err := w.Exec(ctx, "mark deliveries delivered", `UPDATE notify_deliveries SET state = 'delivered',
		attempts = attempts + 1, updated_ts = `+d.Placeholder(1)+`, last_status = `+d.Placeholder(2)+`, last_error = ''
		WHERE destination = `+d.Placeholder(3)+` AND state = 'pending' AND id IN (`+strings.Join(in, ", ")+`)`, args...); err != nil {
		return err
	}
	_, err := w.Exec(ctx, "move the cursor of "+destination, `UPDATE notify_cursors SET
		seq = CASE WHEN seq < `+d.Placeholder(1)+` THEN `+d.Placeholder(2)+` ELSE seq END,
		last_success_ts = `+d.Placeholder(3)+` WHERE destination = `+d.Placeholder(4), last, last, d.Time(ts), destination)
	return err
}

// SkipTo is OutboxTx.SkipTo of both stores.
func (w Writes) SkipTo(ctx context.Context, destination string, seq int64) error {
	d := w.Dialect
	_, err := w.Exec(ctx, "move the cursor of "+destination, `UPDATE notify_cursors SET seq = `+d.Placeholder(1)+
		` WHERE destination = `+d.Placeholder(2)+` AND seq < `+d.Placeholder(3), seq, destination, seq)
	return err
}

// PurgeDeliveries is OutboxTx.PurgeDeliveries of both stores: the outbox
// rows oldest first, up to the first created at or after before (a read
// of limit rows at most), then the delivery rows of the events gone.
func (w Writes) PurgeDeliveries(ctx context.Context, before time.Time, limit int) (int, error) {
	d := w.Dialect
	n, err := w.Exec(ctx, "purge the outbox", `DELETE FROM notify_outbox WHERE seq IN (
		SELECT seq FROM (SELECT seq FROM notify_outbox ORDER BY seq LIMIT `+d.Placeholder(1)+`) head
		WHERE seq < COALESCE((SELECT MIN(seq) FROM (SELECT seq, created_ts FROM notify_outbox ORDER BY seq
			LIMIT `+d.Placeholder(2)+`) h WHERE created_ts >= `+d.Placeholder(3)+`), 9223372036854775807))`,
		limit, limit, d.Time(before))
	if err != nil || n == 0 {
		return int(n), err
	}
	_, err = w.Exec(ctx, "purge deliveries", `DELETE FROM notify_deliveries WHERE
		NOT EXISTS (SELECT 1 FROM notify_outbox) OR id < (SELECT MIN(seq) FROM notify_outbox) * `+
		fmt.Sprint(MaxDestinations))
	return int(n), err
}

// actionFields are the columns of an action row after its id, in the order
// of actionValues.
var actionFields = []string{"cluster_id", "node_id", "kind", "args", "state", "state_reason", "progress", "output",
	"origin", "requester", "approved_by", "timeout_s", "created_ts", "scheduled_ts", "started_ts", "finished_ts",
	"updated_ts", "retry_of", "approval_digest", "cancel_requested", "seen_on_agent", "pushed_store_id",
	"run_id", "stage", "wave", "step", "attempt", "outputs", "not_before", "urgent"}

// actionValues are r's values in the order of actionFields, bound as the
// dialect binds them.
func actionValues(d Dialect, r *Record) []any {
	return []any{r.ClusterID, r.NodeID, r.Kind, string(r.Args), string(r.State), r.StateReason,
		string(r.Progress), r.Output, r.Origin, r.Requester, r.ApprovedBy, r.TimeoutS,
		d.Time(r.CreatedTS), d.nullTime(r.ScheduledTS), d.nullTime(r.StartedTS),
		d.nullTime(r.FinishedTS), d.Time(r.UpdatedTS), r.RetryOf, r.ApprovalDigest,
		r.CancelRequested, r.SeenOnAgent, r.PushedStoreID, r.RunID, r.Stage, r.Wave, r.Step, r.Attempt,
		string(r.Outputs), d.nullTime(r.NotBefore), r.Urgent}
}

// InsertAction is Tx.InsertAction of both stores: it stores a new record
// (ErrExists when its id is taken, or its run already has a child for its
// stage and node, without failing the transaction). A zero CreatedTS is set
// to now, a zero UpdatedTS to CreatedTS. History is not stored:
// AppendHistory does that.
func (w Writes) InsertAction(ctx context.Context, r *Record) error {
	d, exec := w.Dialect, w.Exec
	stampNew(&r.CreatedTS, &r.UpdatedTS)
	what := fmt.Sprintf("insert action %q", r.ID)
	ps, args := d.values(1, append([]any{r.ID}, actionValues(d, r)...)...)
	n, err := exec(ctx, what, `INSERT INTO actions (id, `+strings.Join(actionFields, ", ")+`)
		VALUES (`+ps+`) ON CONFLICT DO NOTHING`, args...)
	if err == nil && n == 0 {
		err = fmt.Errorf("%s: %w", what, ErrExists)
	}
	return err
}

// UpdateAction is Tx.UpdateAction of both stores: it replaces every field
// of the stored record with the same id (ErrNotFound when there is none).
func (w Writes) UpdateAction(ctx context.Context, r *Record) error {
	d, exec := w.Dialect, w.Exec
	what := fmt.Sprintf("update action %q", r.ID)
	sets := make([]string, len(actionFields))
	for i, f := range actionFields {
		sets[i] = f + " = " + d.Placeholder(i+1)
	}
	args := append(actionValues(d, r), r.ID)
	n, err := exec(ctx, what, `UPDATE actions SET `+strings.Join(sets, ", ")+` WHERE id = `+d.Placeholder(len(args)), args...)
	if err == nil && n == 0 {
		err = fmt.Errorf("%s: %w", what, ErrNotFound)
	}
	return err
}

// PurgeActions is Tx.PurgeActions of both stores: it deletes up to limit
// finished actions last changed before t, oldest first, but for the
// children of runs still open (a run that lost them would create them
// again); their history goes with them (ON DELETE CASCADE). The states are
// literals so that the partial index actions_finished serves the query.
func (w Writes) PurgeActions(ctx context.Context, before time.Time, limit int) (int, error) {
	d := w.Dialect
	n, err := w.Exec(ctx, "purge actions", `DELETE FROM actions WHERE seq IN (
		SELECT seq FROM actions WHERE state IN ('DONE', 'FAILED', 'CANCELLED', 'LOST') AND updated_ts < `+d.Placeholder(1)+`
			AND (run_id = '' OR run_id NOT IN (SELECT id FROM runs WHERE state IN ('PENDING_APPROVE', 'RUNNING', 'PAUSED')))
		ORDER BY updated_ts, seq LIMIT `+d.Placeholder(2)+`)`, d.Time(before), limit)
	return int(n), err
}

// PurgeRuns is Tx.PurgeRuns of both stores: it deletes up to limit
// finished runs (DONE, PARTIAL, FAILED, CANCELLED, ABORTED) that finished
// before t, oldest first, whole: their children (with their history), the
// counts of their children, their approvals and any lock they still name,
// then the runs. The playbook versions then left referenced by no run and
// no schedule go too, but for each playbook's newest version. It returns
// how many runs it deleted.
func (w Writes) PurgeRuns(ctx context.Context, before time.Time, limit int) (int, error) {
	d := w.Dialect
	var ids []string
	err := w.Query(ctx, `SELECT id FROM runs WHERE state IN ('DONE', 'PARTIAL', 'FAILED', 'CANCELLED', 'ABORTED')
		AND finished_ts IS NOT NULL AND finished_ts < `+d.Placeholder(1)+` ORDER BY finished_ts, seq LIMIT `+d.Placeholder(2),
		[]any{d.Time(before), limit}, func(row Row) error {
			var id string
			if err := row.Scan(&id); err != nil {
				return err
			}
			ids = append(ids, id)
			return nil
		})
	if err != nil || len(ids) == 0 {
		return 0, err
	}
	in, args := d.values(1, toAny(ids)...)
	for _, st := range []struct{ what, stmt string }{
		{"purge the children of runs", `DELETE FROM actions WHERE run_id IN (` + in + `)`},
		{"purge the child counts of runs", `DELETE FROM run_child_counts WHERE run_id IN (` + in + `)`},
		{"purge the approvals of runs", `DELETE FROM approvals WHERE subject_kind IN ('run', 'resume', 'promote') AND subject_id IN (` + in + `)`},
		{"purge the locks of runs", `DELETE FROM run_locks WHERE run_id IN (` + in + `)`},
		{"purge runs", `DELETE FROM runs WHERE id IN (` + in + `)`},
	} {
		if _, err := w.Exec(ctx, st.what, st.stmt, args...); err != nil {
			return 0, err
		}
	}
	_, err = w.Exec(ctx, "purge playbook versions", `DELETE FROM playbooks WHERE
		version < (SELECT MAX(p.version) FROM playbooks p WHERE p.name = playbooks.name)
		AND NOT EXISTS (SELECT 1 FROM runs r WHERE r.playbook = playbooks.name AND r.playbook_version = playbooks.version)
		AND NOT EXISTS (SELECT 1 FROM schedules s WHERE s.playbook = playbooks.name
			AND (s.version = playbooks.version OR s.approved_version = playbooks.version))`)
	return len(ids), err
}

func toAny(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

// PurgeEvents is Tx.PurgeEvents of both stores: it deletes up to limit
// events older than t, oldest first.
func (w Writes) PurgeEvents(ctx context.Context, before time.Time, limit int) (int, error) {
	d := w.Dialect
	n, err := w.Exec(ctx, "purge events", `DELETE FROM events WHERE seq IN (
		SELECT seq FROM events WHERE ts < `+d.Placeholder(1)+` ORDER BY seq LIMIT `+d.Placeholder(2)+`)`, d.Time(before), limit)
	return int(n), err
}

// stampNew sets the times of a row inserted: a zero created to now, a zero
// updated (when the row has one) to created.
func stampNew(created, updated *time.Time) {
	if created.IsZero() {
		*created = Now()
	}
	if updated != nil && updated.IsZero() {
		*updated = *created
	}
}
