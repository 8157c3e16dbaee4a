package store

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/musterhq/muster/shared/action"
)

// Runs, in both stores. Their ids by prefix and their child actions are
// read by each store (a prefix range and the action columns differ).

// runFields are the columns of a run row after its id, in the order of
// runValues.
var runFields = []string{"cluster_id", "state", "state_reason", "requester", "approved_by", "playbook",
	"playbook_version", "digest", "stages", "created_ts", "updated_ts", "finished_ts", "retry_of", "deadline_s",
	"deadline_ts", "not_before", "urgent", "schedule_id", "stages_brief", "run_lock"}

const runColumns = `id, cluster_id, state, state_reason, requester, approved_by, playbook,
	playbook_version, digest, stages, created_ts, updated_ts, finished_ts, retry_of, deadline_s, deadline_ts, not_before, urgent, schedule_id,
	run_lock`

// briefColumns are runColumns with the brief stages in place of the stages
// (the stages for runs stored before there were brief ones).
const briefColumns = `id, cluster_id, state, state_reason, requester, approved_by, playbook,
	playbook_version, digest, CASE stages_brief WHEN '' THEN stages ELSE stages_brief END,
	created_ts, updated_ts, finished_ts, retry_of, deadline_s, deadline_ts, not_before, urgent, schedule_id, run_lock`

// runValues are r's values in the order of runFields, bound as the dialect
// binds them.
func runValues(d Dialect, r *Run) ([]any, error) {
	stages, brief, err := MarshalStages(r)
	if err != nil {
		return nil, err
	}
	lock, err := marshalLock(r.Lock)
	if err != nil {
		return nil, fmt.Errorf("run %s: lock: %w", r.ID, err)
	}
	return []any{r.ClusterID, r.State, r.StateReason, r.Requester, r.ApprovedBy, r.Playbook,
		r.PlaybookVersion, r.Digest, stages, d.Time(r.CreatedTS), d.Time(r.UpdatedTS), d.nullTime(r.FinishedTS),
		r.RetryOf, r.DeadlineS, d.nullTime(r.DeadlineTS), d.nullTime(r.NotBefore), r.Urgent, r.ScheduleID, brief, lock}, nil
}

func (d Dialect) scanRun(row Row) (Run, error) {
	var r Run
	var stages, lock string
	if err := row.Scan(&r.ID, &r.ClusterID, &r.State, &r.StateReason, &r.Requester, &r.ApprovedBy,
		&r.Playbook, &r.PlaybookVersion, &r.Digest, &stages, d.timeInto(&r.CreatedTS), d.timeInto(&r.UpdatedTS),
		d.nullTimeInto(&r.FinishedTS), &r.RetryOf, &r.DeadlineS, d.nullTimeInto(&r.DeadlineTS),
		d.nullTimeInto(&r.NotBefore), &r.Urgent, &r.ScheduleID, &lock); err != nil {
		return r, err
	}
	var err error
	if r.Lock, err = unmarshalLock(lock); err != nil {
		return r, fmt.Errorf("run %s: lock: %w", r.ID, err)
	}
	if err := json.Unmarshal([]byte(stages), &r.Stages); err != nil {
		return r, fmt.Errorf("run %s: stages: %w", r.ID, err)
	}
	return r, nil
}

// runList reads runs, brief ones when brief.
func (r Reads) runList(ctx context.Context, brief bool, stmt string, args ...any) ([]Run, error) {
	var out []Run
	err := r.Query(ctx, stmt, args, func(row Row) error {
		run, err := r.Dialect.scanRun(row)
		if err != nil {
			return err
		}
		if brief {
			run.Stages, run.Brief = Brief(run.Stages), true
		}
		out = append(out, run)
		return nil
	})
	return out, err
}

// in is "col IN (...)" with a placeholder a value, from the first, and
// the values.
func (d Dialect) in(col string, first int, vals []string) (string, []any) {
	args := make([]any, len(vals))
	for i, v := range vals {
		args[i] = v
	}
	ps, args := d.values(first, args...)
	return col + " IN (" + ps + ")", args
}

// Run is Reader.Run of both stores: the run with exactly this id.
func (r Reads) Run(ctx context.Context, id string) (*Run, error) {
	out, err := r.runList(ctx, false, `SELECT `+runColumns+` FROM runs WHERE id = `+r.Dialect.Placeholder(1), id)
	if err != nil {
		return nil, fmt.Errorf("run %q: %w", id, err)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("run %q: %w", id, ErrNotFound)
	}
	return &out[0], nil
}

// ListRuns is Reader.ListRuns of both stores, by the statement of
// listRunsSQL: newest first, then by id, after the marker.
func (r Reads) ListRuns(ctx context.Context, q RunQuery) ([]Run, error) {
	return listRuns(ctx, q, runColumns, briefColumns, r.Dialect.Placeholder, r.runList)
}

// RunsInState is Reader.RunsInState of both stores: runs in one of states,
// oldest first.
func (r Reads) RunsInState(ctx context.Context, clusterID string, states ...string) ([]Run, error) {
	if len(states) == 0 {
		return nil, nil
	}
	where, args := r.Dialect.in("state", 1, states)
	if clusterID != "" {
		args = append(args, clusterID)
		where += " AND cluster_id = " + r.Dialect.Placeholder(len(args))
	}
	out, err := r.runList(ctx, false, `SELECT `+runColumns+` FROM runs WHERE `+where+` ORDER BY created_ts, seq`, args...)
	if err != nil {
		return nil, fmt.Errorf("runs in state %v: %w", states, err)
	}
	return out, nil
}

// RunHead is what picking a run to move on needs of it: its id, cluster
// and state (Reader.RunsInStateBrief).
type RunHead struct {
	ID, ClusterID, State string
}

// RunsInStateBrief is Reader.RunsInStateBrief of both stores: the heads of
// the runs in one of states, oldest first, as RunsInState orders them.
func (r Reads) RunsInStateBrief(ctx context.Context, clusterID string, states ...string) ([]RunHead, error) {
	if len(states) == 0 {
		return nil, nil
	}
	where, args := r.Dialect.in("state", 1, states)
	if clusterID != "" {
		args = append(args, clusterID)
		where += " AND cluster_id = " + r.Dialect.Placeholder(len(args))
	}
	var out []RunHead
	err := r.Query(ctx, `SELECT id, cluster_id, state FROM runs WHERE `+where+` ORDER BY created_ts, seq`, args, func(row Row) error {
		var h RunHead
		if err := row.Scan(&h.ID, &h.ClusterID, &h.State); err != nil {
			return err
		}
		out = append(out, h)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("runs in state %v: %w", states, err)
	}
	return out, nil
}

// ScheduleRuns is Reader.ScheduleRuns of both stores: up to limit runs of a
// schedule, newest first, brief.
func (r Reads) ScheduleRuns(ctx context.Context, scheduleID string, limit int) ([]Run, error) {
	ph := r.Dialect.Placeholder
	out, err := r.runList(ctx, true, `SELECT `+briefColumns+` FROM runs WHERE schedule_id = `+ph(1)+`
		ORDER BY created_ts DESC, id DESC LIMIT `+ph(2), scheduleID, limit)
	if err != nil {
		return nil, fmt.Errorf("runs of schedule %s: %w", scheduleID, err)
	}
	return out, nil
}

// RunChildCounts is Reader.RunChildCounts of both stores: the counts of the
// children of runs, from the counters the triggers of the stores'
// migrations keep.
func (r Reads) RunChildCounts(ctx context.Context, runIDs []string) ([]ChildCount, error) {
	if len(runIDs) == 0 {
		return nil, nil
	}
	where, args := r.Dialect.in("run_id", 1, runIDs)
	var out []ChildCount
	err := r.Query(ctx, `SELECT run_id, stage, state, approved_by, reason, n FROM run_child_counts
		WHERE `+where+` AND n > 0`, args, func(row Row) error {
		var c ChildCount
		var state string
		var n int64
		if err := row.Scan(&c.RunID, &c.Stage, &state, &c.ApprovedBy, &c.Reason, &n); err != nil {
			return err
		}
		c.State, c.N = action.State(state), int(n)
		out = append(out, c)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("child counts: %w", err)
	}
	SortChildCounts(out)
	return out, nil
}

// StartedNodesSQL is the statement of RunStartedNodes, in the placeholder
// style ph (the stores' tests check its plan): it counts a run's nodes
// with a child, per stage, in the run's child index (the condition on an
// empty run_id lets the query use it).
func StartedNodesSQL(ph Placeholder) string {
	return `SELECT stage, COUNT(DISTINCT node_id) FROM actions WHERE run_id = ` + ph(1) + ` AND run_id != '' GROUP BY stage`
}

// RunStartedNodes is Reader.RunStartedNodes of both stores.
func (r Reads) RunStartedNodes(ctx context.Context, runID string) (map[string]int, error) {
	out := map[string]int{}
	err := r.Query(ctx, StartedNodesSQL(r.Dialect.Placeholder), []any{runID}, func(row Row) error {
		var stage string
		var n int64
		if err := row.Scan(&stage, &n); err != nil {
			return err
		}
		out[stage] = int(n)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("started nodes of run %s: %w", runID, err)
	}
	return out, nil
}

// InsertRun is Tx.InsertRun of both stores: it stores a new run (ErrExists
// when its id is taken, without failing the transaction). A zero CreatedTS
// is set to now, a zero UpdatedTS to CreatedTS.
func (w Writes) InsertRun(ctx context.Context, r *Run) error {
	d := w.Dialect
	stampNew(&r.CreatedTS, &r.UpdatedTS)
	vals, err := runValues(d, r)
	if err != nil {
		return err
	}
	what := fmt.Sprintf("insert run %q", r.ID)
	ps, args := d.values(1, append([]any{r.ID}, vals...)...)
	n, err := w.Exec(ctx, what, `INSERT INTO runs (id, `+strings.Join(runFields, ", ")+`) VALUES (`+ps+`)
		ON CONFLICT DO NOTHING`, args...)
	if err == nil && n == 0 {
		err = fmt.Errorf("%s: %w", what, ErrExists)
	}
	return err
}

// UpdateRun is Tx.UpdateRun of both stores: it replaces the stored run with
// the same id (ErrNotFound when there is none).
func (w Writes) UpdateRun(ctx context.Context, r *Run) error {
	d := w.Dialect
	args, err := runValues(d, r)
	if err != nil {
		return err
	}
	what := fmt.Sprintf("update run %q", r.ID)
	sets := make([]string, len(runFields))
	for i, f := range runFields {
		sets[i] = f + " = " + d.Placeholder(i+1)
	}
	args = append(args, r.ID)
	n, err := w.Exec(ctx, what, `UPDATE runs SET `+strings.Join(sets, ", ")+` WHERE id = `+d.Placeholder(len(args)), args...)
	if err == nil && n == 0 {
		err = fmt.Errorf("%s: %w", what, ErrNotFound)
	}
	return err
}
