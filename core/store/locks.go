package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// Locks across runs (docs/architecture.md, "Runs and playbooks"): a run,
// one of its stages, or a kind its steps run may take a lock by name. A
// lock is per cluster (the default) or global. Who holds a lock is a row
// of run_locks, taken in the transaction that advances the run (so two
// replicas, or two runs of one loop, never both hold it) and released in
// the one that ends the run or the stage.

// Lock scopes.
const (
	LockCluster = "cluster"
	LockGlobal  = "global"
)

// Lock is a lock a run or a stage takes: its Name, and its Scope (""
// and LockCluster: per cluster; LockGlobal: across clusters).
type Lock struct {
	Name  string `json:"name"`
	Scope string `json:"scope,omitempty"`
}

// Key is the lock's key in the store for a run of cluster clusterID:
// "cluster/CLUSTER/NAME" or "global/NAME".
func (l Lock) Key(clusterID string) string {
	if l.Scope == LockGlobal {
		return "global/" + l.Name
	}
	return "cluster/" + clusterID + "/" + l.Name
}

// KindLock is a lock a stage takes because kinds its steps run declare
// it: the lock, and those kinds.
type KindLock struct {
	Lock
	Kinds []string `json:"kinds"`
}

// Locks are the locks the stage takes while it runs: its own, then those
// its kinds declare.
func (s *RunStage) Locks() []Lock {
	var out []Lock
	if s.Lock != nil {
		out = append(out, *s.Lock)
	}
	for _, k := range s.KindLocks {
		out = append(out, k.Lock)
	}
	return out
}

// RunLock is who holds a lock now: the run, and its stage ("" when the
// run itself took it).
type RunLock struct {
	Key     string
	RunID   string
	Stage   string
	TakenTS time.Time
}

// marshalLock is a run's lock as its row keeps it ("" for none).
func marshalLock(l *Lock) (string, error) {
	if l == nil {
		return "", nil
	}
	b, err := json.Marshal(l)
	return string(b), err
}

// unmarshalLock reads a run row's lock.
func unmarshalLock(s string) (*Lock, error) {
	if s == "" {
		return nil, nil
	}
	var l Lock
	if err := json.Unmarshal([]byte(s), &l); err != nil {
		return nil, err
	}
	return &l, nil
}

// TakeRunLock is Tx.TakeRunLock of both stores: it takes the lock key for
// run runID (and stage) at t when nobody holds it, and returns who holds
// it then, this run or another. Of two transactions taking one free lock,
// one holds it once both are committed: the key is the table's primary key.
func (w Writes) TakeRunLock(ctx context.Context, key, runID, stage string, t time.Time) (RunLock, error) {
	d := w.Dialect
	what := fmt.Sprintf("take lock %q", key)
	ps, args := d.values(1, key, runID, stage, d.Time(t))
	if _, err := w.Exec(ctx, what, `INSERT INTO run_locks (lock_key, run_id, stage, taken_ts) VALUES (`+ps+`)
		ON CONFLICT DO NOTHING`, args...); err != nil {
		return RunLock{}, err
	}
	var l RunLock
	found := false
	err := w.Query(ctx, `SELECT lock_key, run_id, stage, taken_ts FROM run_locks WHERE lock_key = `+d.Placeholder(1),
		[]any{key}, func(row Row) error {
			found = true
			return row.Scan(&l.Key, &l.RunID, &l.Stage, d.timeInto(&l.TakenTS))
		})
	if err != nil {
		return RunLock{}, fmt.Errorf("%s: %w", what, err)
	}
	if !found {
		return RunLock{}, fmt.Errorf("%s: %w", what, ErrNotFound)
	}
	return l, nil
}

// ReleaseRunLock is Tx.ReleaseRunLock of both stores: it releases lock key
// when run runID holds it, and reports whether it did.
func (w Writes) ReleaseRunLock(ctx context.Context, key, runID string) (bool, error) {
	ph := w.Dialect.Placeholder
	n, err := w.Exec(ctx, fmt.Sprintf("release lock %q", key),
		`DELETE FROM run_locks WHERE lock_key = `+ph(1)+` AND run_id = `+ph(2), key, runID)
	return n > 0, err
}

// ReleaseRunLocks is Tx.ReleaseRunLocks of both stores: it releases every
// lock run runID holds and returns how many.
func (w Writes) ReleaseRunLocks(ctx context.Context, runID string) (int, error) {
	n, err := w.Exec(ctx, fmt.Sprintf("release the locks of run %q", runID),
		`DELETE FROM run_locks WHERE run_id = `+w.Dialect.Placeholder(1), runID)
	return int(n), err
}

// RunLock is Reader.RunLock of both stores: who holds lock key
// (ErrNotFound when nobody does).
func (r Reads) RunLock(ctx context.Context, key string) (RunLock, error) {
	d := r.Dialect
	var l RunLock
	found := false
	err := r.Query(ctx, `SELECT lock_key, run_id, stage, taken_ts FROM run_locks WHERE lock_key = `+d.Placeholder(1),
		[]any{key}, func(row Row) error {
			found = true
			return row.Scan(&l.Key, &l.RunID, &l.Stage, d.timeInto(&l.TakenTS))
		})
	if err != nil {
		return RunLock{}, fmt.Errorf("lock %q: %w", key, err)
	}
	if !found {
		return RunLock{}, fmt.Errorf("lock %q: %w", key, ErrNotFound)
	}
	return l, nil
}

// RunLocks is Reader.RunLocks of both stores: the locks run runID holds,
// by key.
func (r Reads) RunLocks(ctx context.Context, runID string) ([]RunLock, error) {
	d := r.Dialect
	var out []RunLock
	err := r.Query(ctx, `SELECT lock_key, run_id, stage, taken_ts FROM run_locks WHERE run_id = `+d.Placeholder(1)+`
		ORDER BY lock_key`, []any{runID}, func(row Row) error {
		var l RunLock
		if err := row.Scan(&l.Key, &l.RunID, &l.Stage, d.timeInto(&l.TakenTS)); err != nil {
			return err
		}
		out = append(out, l)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("locks of run %s: %w", runID, err)
	}
	return out, nil
}
