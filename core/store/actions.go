package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/musterhq/muster/shared/action"
)

// The reads of actions, their history, events and clusters, in both
// stores. Action ids by prefix are read by each store (a prefix range
// differs).

const actionColumns = `id, cluster_id, node_id, kind, args, state, state_reason, progress, output,
	origin, requester, approved_by, timeout_s, created_ts, scheduled_ts, started_ts, finished_ts,
	updated_ts, retry_of, approval_digest, cancel_requested, seen_on_agent, pushed_store_id,
	run_id, stage, wave, step, attempt, outputs, not_before, urgent`

// briefActionColumns are the columns of a brief child (RunChildrenBrief),
// read by scanBrief.
const briefActionColumns = `id, cluster_id, node_id, state, state_reason, approved_by, finished_ts,
	pushed_store_id, run_id, stage, step, attempt, outputs`

func rawOrNil(s string) json.RawMessage {
	if s == "" {
		return nil
	}
	return json.RawMessage(s)
}

func (d Dialect) scanBrief(row Row) (Record, error) {
	var rec Record
	var state, outputs string
	err := row.Scan(&rec.ID, &rec.ClusterID, &rec.NodeID, &state, &rec.StateReason, &rec.ApprovedBy,
		d.nullTimeInto(&rec.FinishedTS), &rec.PushedStoreID, &rec.RunID, &rec.Stage, &rec.Step, &rec.Attempt, &outputs)
	rec.State = action.State(state)
	rec.Outputs = rawOrNil(outputs)
	return rec, err
}

func (d Dialect) scanRecord(row Row) (Record, error) {
	var rec Record
	var args, progress, state, outputs string
	err := row.Scan(&rec.ID, &rec.ClusterID, &rec.NodeID, &rec.Kind, &args, &state, &rec.StateReason,
		&progress, &rec.Output, &rec.Origin, &rec.Requester, &rec.ApprovedBy, &rec.TimeoutS,
		d.timeInto(&rec.CreatedTS), d.nullTimeInto(&rec.ScheduledTS), d.nullTimeInto(&rec.StartedTS),
		d.nullTimeInto(&rec.FinishedTS), d.timeInto(&rec.UpdatedTS), &rec.RetryOf, &rec.ApprovalDigest,
		&rec.CancelRequested, &rec.SeenOnAgent, &rec.PushedStoreID, &rec.RunID, &rec.Stage, &rec.Wave, &rec.Step,
		&rec.Attempt, &outputs, d.nullTimeInto(&rec.NotBefore), &rec.Urgent)
	rec.Args = rawOrNil(args)
	rec.Progress = rawOrNil(progress)
	rec.Outputs = rawOrNil(outputs)
	rec.State = action.State(state)
	return rec, err
}

func (r Reads) records(ctx context.Context, stmt string, args ...any) ([]Record, error) {
	return r.recordsWith(ctx, r.Dialect.scanRecord, stmt, args...)
}

// recordsWith reads the records of stmt, each scanned by scan.
func (r Reads) recordsWith(ctx context.Context, scan func(Row) (Record, error), stmt string, args ...any) ([]Record, error) {
	var out []Record
	err := r.Query(ctx, stmt, args, func(row Row) error {
		rec, err := scan(row)
		if err != nil {
			return err
		}
		out = append(out, rec)
		return nil
	})
	return out, err
}

// Action is Reader.Action of both stores: the record with exactly this id.
// Its History is not filled: History reads it.
func (r Reads) Action(ctx context.Context, id string) (*Record, error) {
	out, err := r.records(ctx, `SELECT `+actionColumns+` FROM actions WHERE id = `+r.Dialect.Placeholder(1), id)
	if err != nil {
		return nil, fmt.Errorf("action %q: %w", id, err)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("action %q: %w", id, ErrNotFound)
	}
	return &out[0], nil
}

// ListActions is Reader.ListActions of both stores, by the statement of
// listActionsSQL (filters, order, keyset paging after Marker).
func (r Reads) ListActions(ctx context.Context, q ListQuery) ([]Record, error) {
	return listActions(ctx, r, q, actionColumns, r.Dialect.Placeholder, r.records)
}

// History is Reader.History of both stores.
func (r Reads) History(ctx context.Context, actionID string) ([]action.Transition, error) {
	d := r.Dialect
	var out []action.Transition
	err := r.Query(ctx, `SELECT ts, from_state, to_state, actor, reason FROM action_history WHERE action_id = `+
		d.Placeholder(1)+` ORDER BY seq`, []any{actionID}, func(row Row) error {
		var t action.Transition
		var from, to string
		if err := row.Scan(d.timeInto(&t.TS), &from, &to, &t.Actor, &t.Reason); err != nil {
			return err
		}
		t.From, t.To = action.State(from), action.State(to)
		out = append(out, t)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("history of %q: %w", actionID, err)
	}
	return out, nil
}

// OpenActions is Reader.OpenActions of both stores: the non-final actions
// of a node (of the cluster when nodeID is ""), oldest creation first.
func (r Reads) OpenActions(ctx context.Context, clusterID, nodeID string) ([]Record, error) {
	d := r.Dialect
	open := []string{string(action.PendingApprove), string(action.PendingSchedule), string(action.New), string(action.Running)}
	var out []Record
	var err error
	if nodeID == "" {
		// By state first: the cost follows the open actions, not the
		// cluster's history (Unindexed keeps SQLite's planner off the
		// cluster index).
		in, args := d.in("state", 1, open)
		out, err = r.records(ctx, `SELECT `+actionColumns+` FROM actions
			WHERE `+in+` AND `+d.Unindexed+`cluster_id = `+d.Placeholder(len(args)+1)+`
			ORDER BY created_ts, seq`, append(args, clusterID)...)
	} else {
		in, args := d.in("state", 3, open)
		out, err = r.records(ctx, `SELECT `+actionColumns+` FROM actions
			WHERE cluster_id = `+d.Placeholder(1)+` AND node_id = `+d.Placeholder(2)+` AND `+in+`
			ORDER BY created_ts, seq`, append([]any{clusterID, nodeID}, args...)...)
	}
	if err != nil {
		return nil, fmt.Errorf("open actions of %s/%s: %w", clusterID, nodeID, err)
	}
	return out, nil
}

// ApprovalsBefore is Reader.ApprovalsBefore of both stores: the
// PENDING_APPROVE actions created before t, oldest first.
func (r Reads) ApprovalsBefore(ctx context.Context, t time.Time) ([]Record, error) {
	d := r.Dialect
	out, err := r.records(ctx, `SELECT `+actionColumns+` FROM actions
		WHERE state = `+d.Placeholder(1)+` AND created_ts < `+d.Placeholder(2)+` ORDER BY created_ts, seq`,
		string(action.PendingApprove), d.Time(t))
	if err != nil {
		return nil, fmt.Errorf("approvals before %s: %w", t, err)
	}
	return out, nil
}

// ScheduledBefore is Reader.ScheduledBefore of both stores: the
// PENDING_SCHEDULE actions scheduled before t, oldest first.
func (r Reads) ScheduledBefore(ctx context.Context, t time.Time) ([]Record, error) {
	d := r.Dialect
	out, err := r.records(ctx, `SELECT `+actionColumns+` FROM actions
		WHERE state = `+d.Placeholder(1)+` AND scheduled_ts < `+d.Placeholder(2)+` ORDER BY scheduled_ts, seq`,
		string(action.PendingSchedule), d.Time(t))
	if err != nil {
		return nil, fmt.Errorf("scheduled before %s: %w", t, err)
	}
	return out, nil
}

// RunChildrenSQL is the statement of RunChildren (RunChildrenBrief when
// brief), in the placeholder style ph (the stores' tests check its plan).
// It also asks for a non-empty run_id, so that the partial index on run_id
// (actions_run_child) serves it: a bound run id alone does not tell the
// planner so, and the whole actions table would be read.
func RunChildrenSQL(ph Placeholder, brief bool) string {
	columns := actionColumns
	if brief {
		columns = briefActionColumns
	}
	return `SELECT ` + columns + ` FROM actions WHERE run_id = ` + ph(1) + ` AND run_id != '' ORDER BY created_ts, seq`
}

// RunChildren is Reader.RunChildren of both stores: a run's child actions,
// oldest first.
func (r Reads) RunChildren(ctx context.Context, runID string) ([]Record, error) {
	out, err := r.records(ctx, RunChildrenSQL(r.Dialect.Placeholder, false), runID)
	if err != nil {
		return nil, fmt.Errorf("children of run %s: %w", runID, err)
	}
	return out, nil
}

// RunChildrenBrief is Reader.RunChildrenBrief of both stores: RunChildren
// with only the fields of briefActionColumns.
func (r Reads) RunChildrenBrief(ctx context.Context, runID string) ([]Record, error) {
	out, err := r.recordsWith(ctx, r.Dialect.scanBrief, RunChildrenSQL(r.Dialect.Placeholder, true), runID)
	if err != nil {
		return nil, fmt.Errorf("children of run %s: %w", runID, err)
	}
	return out, nil
}

// Events is Reader.Events of both stores: the events with a sequence
// number above since, oldest first; a limit of 0 or less means no limit.
func (r Reads) Events(ctx context.Context, since int64, limit int) ([]Event, error) {
	d := r.Dialect
	stmt := `SELECT seq, ts, type, actor, client_addr, cluster_id, node_id, action_id, run_id, message, data
		FROM events WHERE seq > ` + d.Placeholder(1) + ` ORDER BY seq`
	args := []any{since}
	if limit > 0 {
		stmt += ` LIMIT ` + d.Placeholder(2)
		args = append(args, limit)
	}
	var out []Event
	err := r.Query(ctx, stmt, args, func(row Row) error {
		var e Event
		var data string
		if err := row.Scan(&e.Seq, d.timeInto(&e.TS), &e.Type, &e.Actor, &e.ClientAddr, &e.ClusterID, &e.NodeID,
			&e.ActionID, &e.RunID, &e.Message, &data); err != nil {
			return err
		}
		if data != "" {
			if err := json.Unmarshal([]byte(data), &e.Data); err != nil {
				return fmt.Errorf("event %d: data: %w", e.Seq, err)
			}
		}
		out = append(out, e)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("events: %w", err)
	}
	return out, nil
}

// LatestSeq is Reader.LatestSeq of both stores: the newest event's number
// (0 with none), the maximum of the primary key, one read of its index.
func (r Reads) LatestSeq(ctx context.Context) (int64, error) {
	var seq int64
	if _, err := r.one(ctx, `SELECT COALESCE(MAX(seq), 0) FROM events`, nil, func(row Row) error {
		return row.Scan(&seq)
	}); err != nil {
		return 0, fmt.Errorf("latest event: %w", err)
	}
	return seq, nil
}

func (d Dialect) scanCluster(row Row) (Cluster, error) {
	var c Cluster
	var labels string
	err := row.Scan(&c.ID, &c.Status, &c.StatusReason, d.timeInto(&c.UpdatedTS), &labels)
	if err == nil && labels != "" && labels != "{}" {
		err = json.Unmarshal([]byte(labels), &c.Labels)
	}
	return c, err
}

// Clusters is Reader.Clusters of both stores.
func (r Reads) Clusters(ctx context.Context) ([]Cluster, error) {
	var out []Cluster
	err := r.Query(ctx, `SELECT id, status, status_reason, updated_ts, labels FROM clusters ORDER BY id`, nil, func(row Row) error {
		c, err := r.Dialect.scanCluster(row)
		if err != nil {
			return err
		}
		out = append(out, c)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("clusters: %w", err)
	}
	return out, nil
}

// Cluster is Reader.Cluster of both stores.
func (r Reads) Cluster(ctx context.Context, id string) (*Cluster, error) {
	var c Cluster
	found, err := r.one(ctx, `SELECT id, status, status_reason, updated_ts, labels FROM clusters WHERE id = `+r.Dialect.Placeholder(1),
		[]any{id}, func(row Row) (err error) {
			c, err = r.Dialect.scanCluster(row)
			return err
		})
	if err != nil {
		return nil, fmt.Errorf("cluster %q: %w", id, err)
	}
	if !found {
		return nil, fmt.Errorf("cluster %q: %w", id, ErrNotFound)
	}
	return &c, nil
}
