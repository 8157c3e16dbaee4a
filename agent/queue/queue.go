// Package queue is the agent's durable action queue in SQLite. Every change of
// an action (its state, progress and output, with the history row that
// records it) is one transaction, committed before the caller is answered.
// Every write bumps a change sequence, so a reader can ask for what changed
// after a cursor.
package queue

import (
	"context"
	"database/sql"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/musterhq/muster/shared/action"
	"github.com/musterhq/muster/shared/sqlite"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// Errors of the queue, matched with errors.Is.
var (
	ErrNotFound = errors.New("action not found")
	// ErrConflict: the id is taken by an action with other content.
	ErrConflict = errors.New("id already used with other content")
	// ErrGone: the id belongs to a purged action (a tombstone).
	ErrGone = errors.New("id belongs to a purged action")
	// ErrFinal: the action is already in a final state.
	ErrFinal = errors.New("action already final")
)

// Queue is the agent's action store.
type Queue struct {
	db      *sqlite.DB
	storeID string
	now     func() time.Time

	// changed is closed, and replaced, after every committed change
	// (Changed).
	changeMu sync.Mutex
	changed  chan struct{}
	// count is the number of notify calls since Open (ChangeCount).
	count atomic.Uint64
}

// Open opens (creating if needed) the queue at <dataDir>/agent.db.
func Open(ctx context.Context, dataDir string) (*Queue, error) {
	sub, err := fs.Sub(migrationFiles, "migrations")
	if err != nil {
		return nil, err
	}
	db, err := sqlite.Open(ctx, filepath.Join(dataDir, "agent.db"), sub)
	if err != nil {
		return nil, err
	}
	q := &Queue{db: db, now: time.Now, changed: make(chan struct{})}
	if err := q.loadStoreID(ctx); err != nil {
		db.Close()
		return nil, err
	}
	return q, nil
}

// SetClock replaces the clock (tests of retention and timeouts).
func (q *Queue) SetClock(now func() time.Time) { q.now = now }

// Close closes the database.
func (q *Queue) Close() error { return q.db.Close() }

// StoreID is a UUID made when the database was created: a new one means the
// database was replaced.
func (q *Queue) StoreID() string { return q.storeID }

func (q *Queue) loadStoreID(ctx context.Context) error {
	return q.db.InTx(ctx, func(tx *sql.Tx) error {
		err := tx.QueryRowContext(ctx, `SELECT value FROM meta WHERE key = 'store_id'`).Scan(&q.storeID)
		if errors.Is(err, sql.ErrNoRows) {
			q.storeID = action.NewID()
			_, err = tx.ExecContext(ctx, `INSERT INTO meta (key, value) VALUES ('store_id', ?)`, q.storeID)
		}
		return err
	})
}

// Changed returns a channel that is closed once a change of the queue (one
// that moves the change sequence) is committed after this call. A reader
// that waits for changes after a cursor takes it before it reads them, so
// that a change committed between its read and its wait still wakes it
// (docs/architecture.md, "The agent").
func (q *Queue) Changed() <-chan struct{} {
	q.changeMu.Lock()
	defer q.changeMu.Unlock()
	return q.changed
}

// ChangeCount counts the committed changes of the queue since Open: it
// moves after every commit that may have changed a record (never before the
// commit), so a reader that saw a count and then read the queue has seen
// every change the count covers. It starts over at 0 with the process (the
// agent's change epoch tells the restarts apart).
func (q *Queue) ChangeCount() uint64 { return q.count.Load() }

// notify wakes every reader waiting on Changed. It is called after a
// commit; a call for a transaction that changed nothing only wakes the
// readers early, and they read again.
func (q *Queue) notify() {
	q.count.Add(1)
	q.changeMu.Lock()
	defer q.changeMu.Unlock()
	close(q.changed)
	q.changed = make(chan struct{})
}

// ConflictError carries the record that holds the id (wraps ErrConflict).
type ConflictError struct{ Existing *action.Action }

func (e *ConflictError) Error() string { return ErrConflict.Error() }
func (e *ConflictError) Unwrap() error { return ErrConflict }

// Enqueue stores a new NEW action. The record must have a valid id, kind and
// canonical args. It returns the stored record and whether it was created:
// the same id with the same kind and args returns the existing record
// (created false), whatever place in a run (RunID, Stage, Step, Wave,
// Attempt) each says, which is not content; other content returns a
// *ConflictError; a purged id returns ErrGone.
func (q *Queue) Enqueue(ctx context.Context, a *action.Action, actor string) (*action.Action, bool, error) {
	var out *action.Action
	created := false
	err := q.db.InTx(ctx, func(tx *sql.Tx) error {
		var dummy string
		err := tx.QueryRowContext(ctx, `SELECT state FROM tombstones WHERE id = ?`, a.ID).Scan(&dummy)
		if err == nil {
			return fmt.Errorf("%w: %s", ErrGone, a.ID)
		} else if !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		existing, err := getTx(ctx, tx, a.ID)
		if err == nil {
			if action.SameContent(existing, a) {
				out = existing
				return nil
			}
			return &ConflictError{Existing: existing}
		} else if !errors.Is(err, ErrNotFound) {
			return err
		}
		now := action.UTC(q.now())
		rec := *a
		rec.State = action.New
		rec.StateReason = ""
		rec.Progress = json.RawMessage("{}")
		rec.Output = ""
		rec.StartedTS, rec.FinishedTS = nil, nil
		if rec.CreatedTS.IsZero() {
			rec.CreatedTS = now
		}
		rec.CreatedTS = action.UTC(rec.CreatedTS)
		if rec.ScheduledTS == nil {
			rec.ScheduledTS = &now
		}
		rec.UpdatedTS = now
		seq, err := bump(ctx, tx)
		if err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, `INSERT INTO actions (id, cluster_id, node_id, kind, args, state, progress,
			origin, requester, approved_by, timeout_s, created_us, scheduled_us, updated_us, change_seq,
			run_id, stage, step, wave, attempt, traceparent)
			VALUES (?, ?, ?, ?, ?, ?, '{}', ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			rec.ID, rec.ClusterID, rec.NodeID, rec.Kind, string(rec.Args), rec.State,
			rec.Origin, rec.Requester, rec.ApprovedBy, rec.TimeoutS,
			sqlite.Micros(rec.CreatedTS), sqlite.NullMicros(rec.ScheduledTS), sqlite.Micros(now), seq,
			rec.RunID, rec.Stage, rec.Step, rec.Wave, rec.Attempt, rec.Traceparent)
		if err != nil {
			return fmt.Errorf("insert action: %w", err)
		}
		if err := addHistory(ctx, tx, rec.ID, now, "", action.New, actor, "queued"); err != nil {
			return err
		}
		created = true
		out = &rec
		return nil
	})
	if err != nil {
		return nil, false, err
	}
	if created {
		q.notify()
	}
	return out, created, nil
}

// Get returns one record with its history.
func (q *Queue) Get(ctx context.Context, id string) (*action.Action, error) {
	a, err := getTx(ctx, q.db.R, id)
	if err != nil {
		return nil, err
	}
	rows, err := q.db.R.QueryContext(ctx, `SELECT ts_us, from_state, to_state, actor, reason
		FROM history WHERE action_id = ? ORDER BY rowid`, id)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var t action.Transition
		var ts int64
		if err := rows.Scan(&ts, &t.From, &t.To, &t.Actor, &t.Reason); err != nil {
			return nil, err
		}
		t.TS = sqlite.FromMicros(ts)
		a.History = append(a.History, t)
	}
	return a, rows.Err()
}

// Changes returns the actions whose change sequence is above since, oldest
// change first, at most limit of them, with the cursor to pass next time and
// whether more follow.
func (q *Queue) Changes(ctx context.Context, since int64, limit int) ([]action.Action, int64, bool, error) {
	rows, err := q.db.R.QueryContext(ctx, `SELECT `+columns+` FROM actions
		WHERE change_seq > ? ORDER BY change_seq LIMIT ?`, since, limit+1)
	if err != nil {
		return nil, since, false, err
	}
	defer rows.Close()
	out := []action.Action{}
	next := since
	more := false
	for rows.Next() {
		if len(out) == limit {
			more = true
			break
		}
		a, seq, err := scan(rows)
		if err != nil {
			return nil, since, false, err
		}
		out = append(out, *a)
		next = seq
	}
	return out, next, more, rows.Err()
}

// Ack records that the caller has durably stored every change up to cursor.
// Only acknowledged finished records are purged before retention_max.
func (q *Queue) Ack(ctx context.Context, cursor int64) error {
	var acked int64
	if err := q.db.R.QueryRowContext(ctx, `SELECT acked_seq FROM counters WHERE id = 1`).Scan(&acked); err != nil {
		return err
	}
	if cursor <= acked {
		return nil // nothing new: write nothing
	}
	return q.db.InTx(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `UPDATE counters SET acked_seq = max(acked_seq, min(?, change_seq)) WHERE id = 1`, cursor)
		return err
	})
}

// Counts returns how many actions are in each state.
func (q *Queue) Counts(ctx context.Context) (map[action.State]int, error) {
	rows, err := q.db.R.QueryContext(ctx, `SELECT state, count(*) FROM actions GROUP BY state`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[action.State]int{}
	for _, s := range []action.State{action.New, action.Running, action.Done, action.Failed, action.Cancelled} {
		out[s] = 0
	}
	for rows.Next() {
		var s action.State
		var n int
		if err := rows.Scan(&s, &n); err != nil {
			return nil, err
		}
		out[s] = n
	}
	return out, rows.Err()
}

// Claim returns the action the runner must work on: the RUNNING one if there
// is one (resumed is true: an earlier process started it), else the oldest NEW
// one (by created_ts, then acceptance order), which it marks RUNNING in the
// same transaction. It returns nil when there is nothing to run.
func (q *Queue) Claim(ctx context.Context, actor string) (a *action.Action, resumed, cancelRequested bool, err error) {
	// An idle queue is checked with a read, so that an idle agent writes
	// nothing; the write transaction below decides.
	var work bool
	if err := q.db.R.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM actions
		WHERE state IN ('NEW', 'RUNNING'))`).Scan(&work); err != nil {
		return nil, false, false, err
	}
	if !work {
		return nil, false, false, nil
	}
	err = q.db.InTx(ctx, func(tx *sql.Tx) error {
		a, resumed, cancelRequested, err = q.claimTx(ctx, tx, actor)
		return err
	})
	if err == nil && a != nil && !resumed {
		q.notify()
	}
	return a, resumed, cancelRequested, err
}

func (q *Queue) claimTx(ctx context.Context, tx *sql.Tx, actor string) (*action.Action, bool, bool, error) {
	row := tx.QueryRowContext(ctx, `SELECT `+columns+`, cancel_requested FROM actions
		WHERE state = 'RUNNING' LIMIT 1`)
	var cr int
	cur, _, err := scanWith(row, &cr)
	if err == nil {
		return cur, true, cr != 0, nil
	} else if !errors.Is(err, ErrNotFound) {
		return nil, false, false, err
	}
	row = tx.QueryRowContext(ctx, `SELECT `+columns+`, cancel_requested FROM actions
		WHERE state = 'NEW' ORDER BY created_us, accept_seq LIMIT 1`)
	next, _, err := scanWith(row, &cr)
	if errors.Is(err, ErrNotFound) {
		return nil, false, false, nil
	} else if err != nil {
		return nil, false, false, err
	}
	now := action.UTC(q.now())
	seq, err := bump(ctx, tx)
	if err != nil {
		return nil, false, false, err
	}
	if _, err := tx.ExecContext(ctx, `UPDATE actions SET state = 'RUNNING', started_us = ?, updated_us = ?,
		change_seq = ? WHERE id = ? AND state = 'NEW'`, sqlite.Micros(now), sqlite.Micros(now), seq, next.ID); err != nil {
		return nil, false, false, fmt.Errorf("claim: %w", err)
	}
	if err := addHistory(ctx, tx, next.ID, now, action.New, action.Running, actor, "started"); err != nil {
		return nil, false, false, err
	}
	next.State, next.StartedTS, next.UpdatedTS = action.Running, &now, now
	return next, false, cr != 0, nil
}

// Step is what one handler step changed.
type Step struct {
	Progress json.RawMessage
	Output   string
	// Outputs is what the command passed on ($MUSTER_OUTPUTS), kept with a
	// final state.
	Outputs json.RawMessage
	// State is RUNNING to carry on, or a final state.
	State  action.State
	Reason string
}

// SaveStep commits the outcome of one step of the RUNNING action id. A step
// that changed nothing writes nothing. It returns the record as stored.
func (q *Queue) SaveStep(ctx context.Context, id, actor string, s Step) (*action.Action, error) {
	var out *action.Action
	changed := false
	err := q.db.InTx(ctx, func(tx *sql.Tx) (err error) {
		out, changed, err = q.saveStepTx(ctx, tx, id, actor, s)
		return err
	})
	if err == nil && changed {
		q.notify()
	}
	return out, err
}

// Finish commits the final step of the RUNNING action id and, in the same
// transaction, claims the next action as Claim does. Both are durable before
// the caller starts the next action, and a busy queue costs one commit per
// action fewer.
func (q *Queue) Finish(ctx context.Context, id, actor string, s Step) (next *action.Action, cancelRequested bool, err error) {
	if !s.State.Final() {
		return nil, false, fmt.Errorf("finish %s: %w", id, action.CheckTransition(action.Running, s.State))
	}
	err = q.db.InTx(ctx, func(tx *sql.Tx) error {
		if _, _, err := q.saveStepTx(ctx, tx, id, actor, s); err != nil {
			return err
		}
		next, _, cancelRequested, err = q.claimTx(ctx, tx, actor)
		return err
	})
	if err == nil {
		q.notify() // a final step always changes the record
	}
	return next, cancelRequested, err
}

// saveStepTx commits one step; changed is false when it wrote nothing.
func (q *Queue) saveStepTx(ctx context.Context, tx *sql.Tx, id, actor string, s Step) (_ *action.Action, changed bool, _ error) {
	cur, err := getTx(ctx, tx, id)
	if err != nil {
		return nil, false, err
	}
	if cur.State != action.Running {
		return nil, false, fmt.Errorf("save step of %s: %w", id, action.CheckTransition(cur.State, s.State))
	}
	if s.State != action.Running {
		if err := action.CheckTransition(cur.State, s.State); err != nil {
			return nil, false, err
		}
	}
	progress := s.Progress
	if len(progress) == 0 {
		progress = cur.Progress
	}
	output := action.ClipOutput(s.Output)
	if s.State == action.Running && string(progress) == string(cur.Progress) && output == cur.Output {
		return cur, false, nil
	}
	now := action.UTC(q.now())
	seq, err := bump(ctx, tx)
	if err != nil {
		return nil, false, err
	}
	var finished *time.Time
	if s.State.Final() {
		finished = &now
		if err := addHistory(ctx, tx, id, now, cur.State, s.State, actor, s.Reason); err != nil {
			return nil, false, err
		}
	}
	outputs := cur.Outputs
	if s.State.Final() && len(s.Outputs) > 0 {
		outputs = s.Outputs
	}
	_, err = tx.ExecContext(ctx, `UPDATE actions SET state = ?, state_reason = ?, progress = ?, output = ?,
		finished_us = ?, updated_us = ?, change_seq = ?, outputs = ? WHERE id = ?`,
		s.State, s.Reason, string(progress), output, sqlite.NullMicros(finished), sqlite.Micros(now), seq,
		string(outputs), id)
	if err != nil {
		return nil, false, fmt.Errorf("save step: %w", err)
	}
	cur.State, cur.StateReason, cur.Progress, cur.Output, cur.Outputs = s.State, s.Reason, progress, output, outputs
	cur.FinishedTS, cur.UpdatedTS = finished, now
	return cur, true, nil
}

// Cancel cancels a NEW action at once, or marks a RUNNING one for the
// runner to stop (running is then true). A final action returns ErrFinal.
func (q *Queue) Cancel(ctx context.Context, id, actor string) (a *action.Action, running bool, err error) {
	err = q.db.InTx(ctx, func(tx *sql.Tx) error {
		cur, err := getTx(ctx, tx, id)
		if errors.Is(err, ErrNotFound) {
			var st string
			if tx.QueryRowContext(ctx, `SELECT state FROM tombstones WHERE id = ?`, id).Scan(&st) == nil {
				return fmt.Errorf("%w: %s is %s (purged)", ErrFinal, id, st)
			}
			return err
		} else if err != nil {
			return err
		}
		switch {
		case cur.State.Final():
			a = cur
			return fmt.Errorf("%w: %s is %s", ErrFinal, id, cur.State)
		case cur.State == action.Running:
			_, err := tx.ExecContext(ctx, `UPDATE actions SET cancel_requested = 1 WHERE id = ?`, id)
			a, running = cur, true
			return err
		}
		now := action.UTC(q.now())
		seq, err := bump(ctx, tx)
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `UPDATE actions SET state = 'CANCELLED', state_reason = ?,
			finished_us = ?, updated_us = ?, change_seq = ? WHERE id = ?`,
			action.ReasonCancelled, sqlite.Micros(now), sqlite.Micros(now), seq, id); err != nil {
			return err
		}
		if err := addHistory(ctx, tx, id, now, cur.State, action.Cancelled, actor, action.ReasonCancelled); err != nil {
			return err
		}
		cur.State, cur.StateReason, cur.FinishedTS, cur.UpdatedTS = action.Cancelled, action.ReasonCancelled, &now, now
		a = cur
		return nil
	})
	if err == nil && !running {
		q.notify()
	}
	return a, running, err
}

// Retention says how long finished records and tombstones are kept.
type Retention struct {
	// Retention: a finished record acknowledged by the core goes after this.
	Retention time.Duration
	// Max: a finished record goes after this, acknowledged or not.
	Max time.Duration
	// Tombstones: a tombstone goes this long after its record was purged.
	Tombstones time.Duration
}

// Purge deletes finished records past retention (leaving a tombstone each)
// and tombstones past theirs. It returns how many records and tombstones went.
func (q *Queue) Purge(ctx context.Context, r Retention) (records, tombstones int64, err error) {
	now := action.UTC(q.now())
	err = q.db.InTx(ctx, func(tx *sql.Tx) error {
		cond := `finished_us IS NOT NULL AND ((finished_us < ? AND change_seq <= (SELECT acked_seq FROM counters WHERE id = 1))
			OR finished_us < ?)`
		args := []any{sqlite.Micros(now.Add(-r.Retention)), sqlite.Micros(now.Add(-r.Max))}
		if _, err := tx.ExecContext(ctx, `INSERT OR REPLACE INTO tombstones (id, state, finished_us, purged_us)
			SELECT id, state, finished_us, ? FROM actions WHERE `+cond, append([]any{sqlite.Micros(now)}, args...)...); err != nil {
			return fmt.Errorf("tombstones: %w", err)
		}
		res, err := tx.ExecContext(ctx, `DELETE FROM actions WHERE `+cond, args...)
		if err != nil {
			return fmt.Errorf("purge: %w", err)
		}
		records, _ = res.RowsAffected()
		res, err = tx.ExecContext(ctx, `DELETE FROM tombstones WHERE purged_us < ?`, sqlite.Micros(now.Add(-r.Tombstones)))
		if err != nil {
			return fmt.Errorf("purge tombstones: %w", err)
		}
		tombstones, _ = res.RowsAffected()
		return nil
	})
	return records, tombstones, err
}

// Tombstoned reports whether id is in the tombstones.
func (q *Queue) Tombstoned(ctx context.Context, id string) (bool, error) {
	var st string
	err := q.db.R.QueryRowContext(ctx, `SELECT state FROM tombstones WHERE id = ?`, id).Scan(&st)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	return err == nil, err
}

// --- helpers ---

const columns = `id, cluster_id, node_id, kind, args, state, state_reason, progress, output, origin,
	requester, approved_by, timeout_s, created_us, scheduled_us, started_us, finished_us, updated_us, change_seq,
	outputs, run_id, stage, step, wave, attempt, traceparent`

type querier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

type scanner interface{ Scan(dest ...any) error }

func getTx(ctx context.Context, q querier, id string) (*action.Action, error) {
	a, _, err := scan(q.QueryRowContext(ctx, `SELECT `+columns+` FROM actions WHERE id = ?`, id))
	return a, err
}

func scan(s scanner) (*action.Action, int64, error) { return scanWith(s) }

func scanWith(s scanner, extra ...any) (*action.Action, int64, error) {
	var a action.Action
	var args, progress, outputs string
	var created, updated, seq int64
	var scheduled, started, finished sql.NullInt64
	dest := []any{&a.ID, &a.ClusterID, &a.NodeID, &a.Kind, &args, &a.State, &a.StateReason, &progress, &a.Output,
		&a.Origin, &a.Requester, &a.ApprovedBy, &a.TimeoutS, &created, &scheduled, &started, &finished, &updated, &seq,
		&outputs, &a.RunID, &a.Stage, &a.Step, &a.Wave, &a.Attempt, &a.Traceparent}
	if err := s.Scan(append(dest, extra...)...); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return nil, 0, ErrNotFound
		}
		return nil, 0, err
	}
	a.Args, a.Progress = json.RawMessage(args), json.RawMessage(progress)
	if outputs != "" {
		a.Outputs = json.RawMessage(outputs)
	}
	a.CreatedTS, a.UpdatedTS = sqlite.FromMicros(created), sqlite.FromMicros(updated)
	a.ScheduledTS, a.StartedTS, a.FinishedTS = sqlite.FromNullMicros(scheduled), sqlite.FromNullMicros(started), sqlite.FromNullMicros(finished)
	return &a, seq, nil
}

// bump advances the change sequence and returns its new value.
func bump(ctx context.Context, tx *sql.Tx) (int64, error) {
	var seq int64
	err := tx.QueryRowContext(ctx, `UPDATE counters SET change_seq = change_seq + 1 WHERE id = 1 RETURNING change_seq`).Scan(&seq)
	if err != nil {
		return 0, fmt.Errorf("bump change sequence: %w", err)
	}
	return seq, nil
}

func addHistory(ctx context.Context, tx *sql.Tx, id string, ts time.Time, from, to action.State, actor, reason string) error {
	_, err := tx.ExecContext(ctx, `INSERT INTO history (action_id, ts_us, from_state, to_state, actor, reason)
		VALUES (?, ?, ?, ?, ?, ?)`, id, sqlite.Micros(ts), from, to, actor, reason)
	if err != nil {
		return fmt.Errorf("history: %w", err)
	}
	return nil
}
