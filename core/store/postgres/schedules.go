package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/action"
)

const scheduleColumns = `id, name, cluster_id, playbook, version, params, cron, timezone, concurrency, catch_up_s,
	state, state_reason, requester, digest, approved_by, approved_digest, approved_version, active_since_ts,
	last_occurrence_ts, created_ts, updated_ts`

func scanSchedule(s pgx.Row) (*store.Schedule, error) {
	var sc store.Schedule
	var params string
	if err := s.Scan(&sc.ID, &sc.Name, &sc.ClusterID, &sc.Playbook, &sc.Version, &params, &sc.Cron, &sc.Timezone,
		&sc.Concurrency, &sc.CatchUpS, &sc.State, &sc.StateReason, &sc.Requester, &sc.Digest, &sc.ApprovedBy,
		&sc.ApprovedDigest, &sc.ApprovedVersion, &sc.ActiveSince, &sc.LastOccurrence, &sc.CreatedTS, &sc.UpdatedTS); err != nil {
		return nil, err
	}
	sc.Params = []byte(params)
	sc.ActiveSince, sc.LastOccurrence = fromNullTS(sc.ActiveSince), fromNullTS(sc.LastOccurrence)
	sc.CreatedTS, sc.UpdatedTS = sc.CreatedTS.UTC(), sc.UpdatedTS.UTC()
	return &sc, nil
}

// Schedule returns the schedule with this name.
func (r *reader) Schedule(ctx context.Context, name string) (*store.Schedule, error) {
	sc, err := scanSchedule(r.queryRow(ctx, `SELECT `+scheduleColumns+` FROM schedules WHERE name = $1`, name))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("schedule %q: %w", name, store.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("schedule %q: %w", name, err)
	}
	return sc, nil
}

// Schedules lists every schedule, by name.
func (r *reader) Schedules(ctx context.Context) ([]store.Schedule, error) {
	rows, err := r.query(ctx, `SELECT `+scheduleColumns+` FROM schedules ORDER BY name`)
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
	out, err := r.runList(ctx, true, `SELECT `+briefColumns+` FROM runs WHERE schedule_id = $1
		ORDER BY created_ts DESC, id DESC LIMIT $2`, scheduleID, limit)
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
		nullTS(s.ActiveSince), nullTS(s.LastOccurrence), action.UTC(s.CreatedTS), action.UTC(s.UpdatedTS)}
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
	what := fmt.Sprintf("insert schedule %q", s.Name)
	n, err := w.exec(ctx, what, `INSERT INTO schedules (`+scheduleColumns+`) VALUES ($1, $2, $3, $4, $5, $6, $7,
		$8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21) ON CONFLICT DO NOTHING`,
		append([]any{s.ID}, scheduleArgs(s)...)...)
	if err == nil && n == 0 {
		err = fmt.Errorf("%s: %w", what, store.ErrExists)
	}
	return err
}

// UpdateSchedule replaces the stored schedule with the same id.
func (w *writer) UpdateSchedule(ctx context.Context, s *store.Schedule) error {
	what := fmt.Sprintf("update schedule %q", s.Name)
	n, err := w.exec(ctx, what, `UPDATE schedules SET name = $1, cluster_id = $2, playbook = $3, version = $4,
		params = $5, cron = $6, timezone = $7, concurrency = $8, catch_up_s = $9, state = $10, state_reason = $11,
		requester = $12, digest = $13, approved_by = $14, approved_digest = $15, approved_version = $16,
		active_since_ts = $17, last_occurrence_ts = $18, created_ts = $19, updated_ts = $20 WHERE id = $21`,
		append(scheduleArgs(s), s.ID)...)
	if err == nil && n == 0 {
		err = fmt.Errorf("%s: %w", what, store.ErrNotFound)
	}
	return err
}

// DeleteSchedule removes a schedule by name; its runs stay.
func (w *writer) DeleteSchedule(ctx context.Context, name string) error {
	what := fmt.Sprintf("delete schedule %q", name)
	n, err := w.exec(ctx, what, `DELETE FROM schedules WHERE name = $1`, name)
	if err == nil && n == 0 {
		err = fmt.Errorf("%s: %w", what, store.ErrNotFound)
	}
	return err
}
