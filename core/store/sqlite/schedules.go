package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/musterhq/muster/core/store"
	shsqlite "github.com/musterhq/muster/shared/sqlite"
)

const scheduleColumns = `id, name, cluster_id, playbook, version, params, cron, timezone, concurrency, catch_up_s,
	state, state_reason, requester, digest, approved_by, approved_digest, approved_version, active_since_ts,
	last_occurrence_ts, created_ts, updated_ts`

func scanSchedule(s scanner) (*store.Schedule, error) {
	var sc store.Schedule
	var params string
	var since, last sql.NullInt64
	var created, updated int64
	if err := s.Scan(&sc.ID, &sc.Name, &sc.ClusterID, &sc.Playbook, &sc.Version, &params, &sc.Cron, &sc.Timezone,
		&sc.Concurrency, &sc.CatchUpS, &sc.State, &sc.StateReason, &sc.Requester, &sc.Digest, &sc.ApprovedBy,
		&sc.ApprovedDigest, &sc.ApprovedVersion, &since, &last, &created, &updated); err != nil {
		return nil, err
	}
	sc.Params = []byte(params)
	sc.ActiveSince, sc.LastOccurrence = shsqlite.FromNullMicros(since), shsqlite.FromNullMicros(last)
	sc.CreatedTS, sc.UpdatedTS = shsqlite.FromMicros(created), shsqlite.FromMicros(updated)
	return &sc, nil
}

// Schedule returns the schedule with this name.
func (r *reader) Schedule(ctx context.Context, name string) (*store.Schedule, error) {
	sc, err := scanSchedule(r.tx.QueryRowContext(ctx, `SELECT `+scheduleColumns+` FROM schedules WHERE name = ?`, name))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("schedule %q: %w", name, store.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("schedule %q: %w", name, err)
	}
	return sc, nil
}

// Schedules lists every schedule, by name.
func (r *reader) Schedules(ctx context.Context) ([]store.Schedule, error) {
	rows, err := r.tx.QueryContext(ctx, `SELECT `+scheduleColumns+` FROM schedules ORDER BY name`)
	if err != nil {
		return nil, fmt.Errorf("schedules: %w", err)
	}
	defer rows.Close()
	var out []store.Schedule
	for rows.Next() {
		sc, err := scanSchedule(rows)
		if err != nil {
			return nil, fmt.Errorf("schedules: %w", err)
		}
		out = append(out, *sc)
	}
	return out, rows.Err()
}

// ScheduleRuns lists up to limit runs of a schedule, newest first, brief.
func (r *reader) ScheduleRuns(ctx context.Context, scheduleID string, limit int) ([]store.Run, error) {
	out, err := r.runList(ctx, true, `SELECT `+briefColumns+` FROM runs WHERE schedule_id = ?
		ORDER BY created_ts DESC, id DESC LIMIT ?`, scheduleID, limit)
	if err != nil {
		return nil, fmt.Errorf("runs of schedule %s: %w", scheduleID, err)
	}
	return out, nil
}

func scheduleArgs(s *store.Schedule) []any {
	params := string(s.Params)
	if params == "" {
		params = "{}"
	}
	return []any{s.Name, s.ClusterID, s.Playbook, s.Version, params, s.Cron, s.Timezone, s.Concurrency, s.CatchUpS,
		s.State, s.StateReason, s.Requester, s.Digest, s.ApprovedBy, s.ApprovedDigest, s.ApprovedVersion,
		shsqlite.NullMicros(s.ActiveSince), shsqlite.NullMicros(s.LastOccurrence), shsqlite.Micros(s.CreatedTS),
		shsqlite.Micros(s.UpdatedTS)}
}

// InsertSchedule stores a new schedule (ErrExists when its name or id is
// taken). A zero CreatedTS is set to now, a zero UpdatedTS to CreatedTS.
func (w *writer) InsertSchedule(ctx context.Context, s *store.Schedule) error {
	if s.CreatedTS.IsZero() {
		s.CreatedTS = now()
	}
	if s.UpdatedTS.IsZero() {
		s.UpdatedTS = s.CreatedTS
	}
	_, _, err := w.exec(ctx, fmt.Sprintf("insert schedule %q", s.Name), `INSERT INTO schedules (`+scheduleColumns+`)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`, append([]any{s.ID}, scheduleArgs(s)...)...)
	return err
}

// UpdateSchedule replaces the stored schedule with the same id.
func (w *writer) UpdateSchedule(ctx context.Context, s *store.Schedule) error {
	what := fmt.Sprintf("update schedule %q", s.Name)
	_, n, err := w.exec(ctx, what, `UPDATE schedules SET name = ?, cluster_id = ?, playbook = ?, version = ?,
		params = ?, cron = ?, timezone = ?, concurrency = ?, catch_up_s = ?, state = ?, state_reason = ?,
		requester = ?, digest = ?, approved_by = ?, approved_digest = ?, approved_version = ?,
		active_since_ts = ?, last_occurrence_ts = ?, created_ts = ?, updated_ts = ? WHERE id = ?`,
		append(scheduleArgs(s), s.ID)...)
	if err == nil && n == 0 {
		err = fmt.Errorf("%s: %w", what, store.ErrNotFound)
	}
	return err
}

// DeleteSchedule removes a schedule by name; its runs stay.
func (w *writer) DeleteSchedule(ctx context.Context, name string) error {
	what := fmt.Sprintf("delete schedule %q", name)
	_, n, err := w.exec(ctx, what, `DELETE FROM schedules WHERE name = ?`, name)
	if err == nil && n == 0 {
		err = fmt.Errorf("%s: %w", what, store.ErrNotFound)
	}
	return err
}
