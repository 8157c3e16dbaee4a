package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/musterhq/muster/core/store"
	shsqlite "github.com/musterhq/muster/shared/sqlite"
)

const runColumns = `id, cluster_id, state, state_reason, requester, approved_by, playbook,
	playbook_version, digest, stages, created_ts, updated_ts, finished_ts, retry_of, deadline_s, deadline_ts, not_before, urgent, schedule_id`

// briefColumns are runColumns with the brief stages in place of the stages
// (the stages for runs stored before there were brief ones).
const briefColumns = `id, cluster_id, state, state_reason, requester, approved_by, playbook,
	playbook_version, digest, CASE stages_brief WHEN '' THEN stages ELSE stages_brief END,
	created_ts, updated_ts, finished_ts, retry_of, deadline_s, deadline_ts, not_before, urgent, schedule_id`

func scanRun(s scanner) (*store.Run, error) {
	var r store.Run
	var stages string
	var created, updated int64
	var finished, deadline, notBefore sql.NullInt64
	if err := s.Scan(&r.ID, &r.ClusterID, &r.State, &r.StateReason, &r.Requester, &r.ApprovedBy,
		&r.Playbook, &r.PlaybookVersion, &r.Digest, &stages, &created, &updated, &finished, &r.RetryOf, &r.DeadlineS, &deadline,
		&notBefore, &r.Urgent, &r.ScheduleID); err != nil {
		return nil, err
	}
	if err := json.Unmarshal([]byte(stages), &r.Stages); err != nil {
		return nil, fmt.Errorf("run %s: stages: %w", r.ID, err)
	}
	r.CreatedTS, r.UpdatedTS, r.FinishedTS = shsqlite.FromMicros(created), shsqlite.FromMicros(updated), shsqlite.FromNullMicros(finished)
	r.DeadlineTS = shsqlite.FromNullMicros(deadline)
	r.NotBefore = shsqlite.FromNullMicros(notBefore)
	return &r, nil
}

func (r *reader) runs(ctx context.Context, q string, args ...any) ([]store.Run, error) {
	return r.runList(ctx, false, q, args...)
}

// runList reads runs, brief ones when brief.
func (r *reader) runList(ctx context.Context, brief bool, q string, args ...any) ([]store.Run, error) {
	rows, err := r.tx.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []store.Run
	for rows.Next() {
		run, err := scanRun(rows)
		if err != nil {
			return nil, err
		}
		if brief {
			run.Stages, run.Brief = store.Brief(run.Stages), true
		}
		out = append(out, *run)
	}
	return out, rows.Err()
}

// Run returns the run with exactly this id.
func (r *reader) Run(ctx context.Context, id string) (*store.Run, error) {
	run, err := scanRun(r.tx.QueryRowContext(ctx, `SELECT `+runColumns+` FROM runs WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("run %q: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("run %q: %w", id, err)
	}
	return run, nil
}

// RunIDsWithPrefix returns up to max run ids starting with prefix.
func (r *reader) RunIDsWithPrefix(ctx context.Context, prefix string, max int) ([]string, error) {
	rows, err := r.tx.QueryContext(ctx, `SELECT id FROM runs WHERE id >= ? AND id < ? ORDER BY id LIMIT ?`,
		prefix, prefix+"\uffff", max)
	if err != nil {
		return nil, fmt.Errorf("runs with prefix %q: %w", prefix, err)
	}
	return scanIDs(rows)
}

// ListRuns lists runs by the statement core/store builds for both
// stores: newest first, then by id, after the marker.
func (r *reader) ListRuns(ctx context.Context, q store.RunQuery) ([]store.Run, error) {
	return store.ListRuns(ctx, q, runColumns, briefColumns, store.QuestionMarks, r.runList)
}

// RunsInState lists runs in one of states, oldest first.
func (r *reader) RunsInState(ctx context.Context, clusterID string, states ...string) ([]store.Run, error) {
	if len(states) == 0 {
		return nil, nil
	}
	args := []any{}
	for _, s := range states {
		args = append(args, s)
	}
	where := "state IN (" + placeholders(len(states)) + ")"
	if clusterID != "" {
		where += " AND cluster_id = ?"
		args = append(args, clusterID)
	}
	out, err := r.runs(ctx, `SELECT `+runColumns+` FROM runs WHERE `+where+` ORDER BY created_ts, seq`, args...)
	if err != nil {
		return nil, fmt.Errorf("runs in state %v: %w", states, err)
	}
	return out, nil
}

// RunChildren lists a run's child actions, oldest first.
func (r *reader) RunChildren(ctx context.Context, runID string) ([]store.Record, error) {
	out, err := r.records(ctx, runChildrenQuery(actionColumns), runID)
	if err != nil {
		return nil, fmt.Errorf("children of run %s: %w", runID, err)
	}
	return out, nil
}

// runChildrenQuery reads the columns of the children of one run. It also
// asks for a non-empty run_id, so that the partial index on run_id (actions_run_child)
// serves it: a bound run id alone does not tell the planner so, and the
// whole actions table would be read.
func runChildrenQuery(columns string) string {
	return `SELECT ` + columns + ` FROM actions WHERE run_id = ? AND run_id != '' ORDER BY created_ts, seq`
}

// RunChildrenBrief is RunChildren with only the fields of
// briefActionColumns.
func (r *reader) RunChildrenBrief(ctx context.Context, runID string) ([]store.Record, error) {
	out, err := r.recordsWith(ctx, scanBrief, runChildrenQuery(briefActionColumns), runID)
	if err != nil {
		return nil, fmt.Errorf("children of run %s: %w", runID, err)
	}
	return out, nil
}

// RunChildCounts counts the children of runs from the counters the
// triggers of migration 012 keep.
func (r *reader) RunChildCounts(ctx context.Context, runIDs []string) ([]store.ChildCount, error) {
	if len(runIDs) == 0 {
		return nil, nil
	}
	args := make([]any, len(runIDs))
	for i, id := range runIDs {
		args[i] = id
	}
	rows, err := r.tx.QueryContext(ctx, `SELECT run_id, stage, state, approved_by, reason, n FROM run_child_counts
		WHERE run_id IN (`+placeholders(len(runIDs))+`) AND n > 0`, args...)
	if err != nil {
		return nil, fmt.Errorf("child counts: %w", err)
	}
	defer rows.Close()
	var out []store.ChildCount
	for rows.Next() {
		var c store.ChildCount
		if err := rows.Scan(&c.RunID, &c.Stage, &c.State, &c.ApprovedBy, &c.Reason, &c.N); err != nil {
			return nil, fmt.Errorf("child counts: %w", err)
		}
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("child counts: %w", err)
	}
	store.SortChildCounts(out)
	return out, nil
}

// startedNodesQuery counts a run's nodes with a child, per stage, in the
// covering index actions_run_child.
const startedNodesQuery = `SELECT stage, COUNT(DISTINCT node_id) FROM actions
	WHERE run_id = ? AND run_id != '' GROUP BY stage`

// RunStartedNodes counts a run's nodes with a child, per stage, in the
// run's child index (the condition on an empty run_id lets the query
// use it).
func (r *reader) RunStartedNodes(ctx context.Context, runID string) (map[string]int, error) {
	rows, err := r.tx.QueryContext(ctx, startedNodesQuery, runID)
	if err != nil {
		return nil, fmt.Errorf("started nodes of run %s: %w", runID, err)
	}
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var stage string
		var n int
		if err := rows.Scan(&stage, &n); err != nil {
			return nil, fmt.Errorf("started nodes of run %s: %w", runID, err)
		}
		out[stage] = n
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("started nodes of run %s: %w", runID, err)
	}
	return out, nil
}

func (w *writer) runArgs(r *store.Run) ([]any, error) {
	stages, brief, err := store.MarshalStages(r)
	if err != nil {
		return nil, err
	}
	return []any{r.ClusterID, r.State, r.StateReason, r.Requester, r.ApprovedBy, r.Playbook,
		r.PlaybookVersion, r.Digest, stages, shsqlite.Micros(r.CreatedTS), shsqlite.Micros(r.UpdatedTS),
		shsqlite.NullMicros(r.FinishedTS), r.RetryOf, r.DeadlineS, shsqlite.NullMicros(r.DeadlineTS),
		shsqlite.NullMicros(r.NotBefore), r.Urgent, r.ScheduleID, brief}, nil
}

// InsertRun stores a new run (ErrExists when its id is taken). A zero
// CreatedTS is set to now, a zero UpdatedTS to CreatedTS.
func (w *writer) InsertRun(ctx context.Context, r *store.Run) error {
	if r.CreatedTS.IsZero() {
		r.CreatedTS = now()
	}
	if r.UpdatedTS.IsZero() {
		r.UpdatedTS = r.CreatedTS
	}
	args, err := w.runArgs(r)
	if err != nil {
		return err
	}
	_, _, err = w.exec(ctx, fmt.Sprintf("insert run %q", r.ID),
		`INSERT INTO runs (`+runColumns+`, stages_brief) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		append([]any{r.ID}, args...)...)
	return err
}

// UpdateRun replaces the stored run with the same id (ErrNotFound when
// there is none).
func (w *writer) UpdateRun(ctx context.Context, r *store.Run) error {
	args, err := w.runArgs(r)
	if err != nil {
		return err
	}
	what := fmt.Sprintf("update run %q", r.ID)
	_, n, err := w.exec(ctx, what, `UPDATE runs SET cluster_id = ?, state = ?, state_reason = ?,
		requester = ?, approved_by = ?, playbook = ?, playbook_version = ?, digest = ?, stages = ?,
		created_ts = ?, updated_ts = ?, finished_ts = ?, retry_of = ?, deadline_s = ?, deadline_ts = ?,
		not_before = ?, urgent = ?, schedule_id = ?, stages_brief = ? WHERE id = ?`, append(args, r.ID)...)
	if err == nil && n == 0 {
		err = fmt.Errorf("%s: %w", what, store.ErrNotFound)
	}
	return err
}
