package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/action"
)

const runColumns = `id, cluster_id, state, state_reason, requester, approved_by, playbook,
	playbook_version, digest, stages, created_ts, updated_ts, finished_ts, retry_of, deadline_s, deadline_ts, not_before, urgent, schedule_id`

// briefColumns are runColumns with the brief stages in place of the stages
// (the stages for runs stored before there were brief ones).
const briefColumns = `id, cluster_id, state, state_reason, requester, approved_by, playbook,
	playbook_version, digest, CASE stages_brief WHEN '' THEN stages ELSE stages_brief END,
	created_ts, updated_ts, finished_ts, retry_of, deadline_s, deadline_ts, not_before, urgent, schedule_id`

func scanRun(s pgx.Row) (*store.Run, error) {
	var r store.Run
	var stages string
	if err := s.Scan(&r.ID, &r.ClusterID, &r.State, &r.StateReason, &r.Requester, &r.ApprovedBy,
		&r.Playbook, &r.PlaybookVersion, &r.Digest, &stages, &r.CreatedTS, &r.UpdatedTS, &r.FinishedTS, &r.RetryOf, &r.DeadlineS, &r.DeadlineTS,
		&r.NotBefore, &r.Urgent, &r.ScheduleID); err != nil {
		return nil, err
	}
	if err := json.Unmarshal([]byte(stages), &r.Stages); err != nil {
		return nil, fmt.Errorf("run %s: stages: %w", r.ID, err)
	}
	r.CreatedTS, r.UpdatedTS, r.FinishedTS = r.CreatedTS.UTC(), r.UpdatedTS.UTC(), fromNullTS(r.FinishedTS)
	r.DeadlineTS = fromNullTS(r.DeadlineTS)
	r.NotBefore = fromNullTS(r.NotBefore)
	return &r, nil
}

func (r *reader) runs(ctx context.Context, q string, args ...any) ([]store.Run, error) {
	return r.runList(ctx, false, q, args...)
}

// runList reads runs, brief ones when brief.
func (r *reader) runList(ctx context.Context, brief bool, q string, args ...any) ([]store.Run, error) {
	rows, err := r.query(ctx, q, args...)
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
	run, err := scanRun(r.queryRow(ctx, `SELECT `+runColumns+` FROM runs WHERE id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("run %q: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("run %q: %w", id, err)
	}
	return run, nil
}

// RunIDsWithPrefix returns up to max run ids starting with prefix, in byte
// order.
func (r *reader) RunIDsWithPrefix(ctx context.Context, prefix string, max int) ([]string, error) {
	if max <= 0 || !utf8.ValidString(prefix) || strings.IndexByte(prefix, 0) >= 0 {
		return nil, nil
	}
	rows, err := r.query(ctx,
		`SELECT id FROM runs WHERE id >= $1 AND id < $2 AND starts_with(id, $1) ORDER BY id LIMIT $3`,
		prefix, prefix+"\U0010FFFF", max)
	if err != nil {
		return nil, fmt.Errorf("runs with prefix %q: %w", prefix, err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("runs with prefix %q: %w", prefix, err)
	}
	if len(ids) == 0 {
		return nil, nil
	}
	return ids, nil
}

// ListRuns lists runs by the statement core/store builds for both
// stores: newest first, then by id, after the marker.
func (r *reader) ListRuns(ctx context.Context, q store.RunQuery) ([]store.Run, error) {
	return store.ListRuns(ctx, q, runColumns, briefColumns, store.DollarNumbers, r.runList)
}

// RunsInState lists runs in one of states, oldest first.
func (r *reader) RunsInState(ctx context.Context, clusterID string, states ...string) ([]store.Run, error) {
	if len(states) == 0 {
		return nil, nil
	}
	q, args := `SELECT `+runColumns+` FROM runs WHERE state = ANY($1)`, []any{states}
	if clusterID != "" {
		q += ` AND cluster_id = $2`
		args = append(args, clusterID)
	}
	out, err := r.runs(ctx, q+` ORDER BY created_ts, seq`, args...)
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
	return `SELECT ` + columns + ` FROM actions WHERE run_id = $1 AND run_id != '' ORDER BY created_ts, seq`
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
// trigger of migration 007 keeps.
func (r *reader) RunChildCounts(ctx context.Context, runIDs []string) ([]store.ChildCount, error) {
	if len(runIDs) == 0 {
		return nil, nil
	}
	rows, err := r.query(ctx, `SELECT run_id, stage, state, approved_by, reason, n FROM run_child_counts
		WHERE run_id = ANY($1) AND n > 0`, runIDs)
	if err != nil {
		return nil, fmt.Errorf("child counts: %w", err)
	}
	defer rows.Close()
	var out []store.ChildCount
	for rows.Next() {
		var c store.ChildCount
		var state string
		var n int64
		if err := rows.Scan(&c.RunID, &c.Stage, &state, &c.ApprovedBy, &c.Reason, &n); err != nil {
			return nil, fmt.Errorf("child counts: %w", err)
		}
		c.State, c.N = action.State(state), int(n)
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("child counts: %w", err)
	}
	store.SortChildCounts(out)
	return out, nil
}

// RunStartedNodes counts a run's nodes with a child, per stage, in the
// run's child index (the condition on an empty run_id lets the query
// use it).
func (r *reader) RunStartedNodes(ctx context.Context, runID string) (map[string]int, error) {
	rows, err := r.query(ctx, `SELECT stage, COUNT(DISTINCT node_id) FROM actions
		WHERE run_id = $1 AND run_id <> '' GROUP BY stage`, runID)
	if err != nil {
		return nil, fmt.Errorf("started nodes of run %s: %w", runID, err)
	}
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var stage string
		var n int64
		if err := rows.Scan(&stage, &n); err != nil {
			return nil, fmt.Errorf("started nodes of run %s: %w", runID, err)
		}
		out[stage] = int(n)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("started nodes of run %s: %w", runID, err)
	}
	return out, nil
}

func runArgs(r *store.Run) ([]any, error) {
	stages, brief, err := store.MarshalStages(r)
	if err != nil {
		return nil, err
	}
	return []any{r.ClusterID, r.State, r.StateReason, r.Requester, r.ApprovedBy, r.Playbook,
		r.PlaybookVersion, r.Digest, stages, action.UTC(r.CreatedTS), action.UTC(r.UpdatedTS), nullTS(r.FinishedTS), r.RetryOf, r.DeadlineS, nullTS(r.DeadlineTS),
		nullTS(r.NotBefore), r.Urgent, r.ScheduleID, brief}, nil
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
	args, err := runArgs(r)
	if err != nil {
		return err
	}
	what := fmt.Sprintf("insert run %q", r.ID)
	n, err := w.exec(ctx, what, `INSERT INTO runs (`+runColumns+`, stages_brief)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20) ON CONFLICT DO NOTHING`,
		append([]any{r.ID}, args...)...)
	if err == nil && n == 0 {
		err = fmt.Errorf("%s: %w", what, store.ErrExists)
	}
	return err
}

// UpdateRun replaces the stored run with the same id (ErrNotFound when
// there is none).
func (w *writer) UpdateRun(ctx context.Context, r *store.Run) error {
	args, err := runArgs(r)
	if err != nil {
		return err
	}
	what := fmt.Sprintf("update run %q", r.ID)
	n, err := w.exec(ctx, what, `UPDATE runs SET cluster_id = $1, state = $2, state_reason = $3,
		requester = $4, approved_by = $5, playbook = $6, playbook_version = $7, digest = $8, stages = $9,
		created_ts = $10, updated_ts = $11, finished_ts = $12, retry_of = $13, deadline_s = $14,
		deadline_ts = $15, not_before = $16, urgent = $17, schedule_id = $18, stages_brief = $19 WHERE id = $20`, append(args, r.ID)...)
	if err == nil && n == 0 {
		err = fmt.Errorf("%s: %w", what, store.ErrNotFound)
	}
	return err
}
