package store

import (
	"context"
	"fmt"
	"strings"
)

// Schedules, in both stores.

// scheduleFields are the columns of a schedule row after its id, in the
// order of scheduleValues.
var scheduleFields = []string{"name", "cluster_id", "playbook", "version", "params", "cron", "timezone", "concurrency",
	"catch_up_s", "state", "state_reason", "requester", "digest", "approved_by", "approved_digest", "approved_version",
	"active_since_ts", "last_occurrence_ts", "created_ts", "updated_ts", "source"}

var scheduleColumns = "id, " + strings.Join(scheduleFields, ", ")

// scheduleValues are s's values in the order of scheduleFields, bound as
// the dialect binds them.
func scheduleValues(d Dialect, s *Schedule) []any {
	params := string(s.Params)
	if params == "" {
		params = "{}"
	}
	return []any{s.Name, s.ClusterID, s.Playbook, s.Version, params, s.Cron, s.Timezone, s.Concurrency, s.CatchUpS,
		s.State, s.StateReason, s.Requester, s.Digest, s.ApprovedBy, s.ApprovedDigest, s.ApprovedVersion,
		d.nullTime(s.ActiveSince), d.nullTime(s.LastOccurrence), d.Time(s.CreatedTS), d.Time(s.UpdatedTS), s.Source}
}

func (d Dialect) scanSchedule(row Row) (Schedule, error) {
	var sc Schedule
	var params string
	err := row.Scan(&sc.ID, &sc.Name, &sc.ClusterID, &sc.Playbook, &sc.Version, &params, &sc.Cron, &sc.Timezone,
		&sc.Concurrency, &sc.CatchUpS, &sc.State, &sc.StateReason, &sc.Requester, &sc.Digest, &sc.ApprovedBy,
		&sc.ApprovedDigest, &sc.ApprovedVersion, d.nullTimeInto(&sc.ActiveSince), d.nullTimeInto(&sc.LastOccurrence),
		d.timeInto(&sc.CreatedTS), d.timeInto(&sc.UpdatedTS), &sc.Source)
	sc.Params = []byte(params)
	return sc, err
}

// Schedule is Reader.Schedule of both stores.
func (r Reads) Schedule(ctx context.Context, name string) (*Schedule, error) {
	var sc Schedule
	found, err := r.one(ctx, `SELECT `+scheduleColumns+` FROM schedules WHERE name = `+r.Dialect.Placeholder(1),
		[]any{name}, func(row Row) (err error) {
			sc, err = r.Dialect.scanSchedule(row)
			return err
		})
	if err != nil {
		return nil, fmt.Errorf("schedule %q: %w", name, err)
	}
	if !found {
		return nil, fmt.Errorf("schedule %q: %w", name, ErrNotFound)
	}
	return &sc, nil
}

// Schedules is Reader.Schedules of both stores.
func (r Reads) Schedules(ctx context.Context) ([]Schedule, error) {
	var out []Schedule
	err := r.Query(ctx, `SELECT `+scheduleColumns+` FROM schedules ORDER BY name`, nil, func(row Row) error {
		sc, err := r.Dialect.scanSchedule(row)
		if err != nil {
			return err
		}
		out = append(out, sc)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("schedules: %w", err)
	}
	return out, nil
}

// InsertSchedule is Tx.InsertSchedule of both stores (ErrExists when its
// name or id is taken, without failing the transaction). A zero CreatedTS
// is set to now, a zero UpdatedTS to CreatedTS.
func (w Writes) InsertSchedule(ctx context.Context, s *Schedule) error {
	d := w.Dialect
	stampNew(&s.CreatedTS, &s.UpdatedTS)
	what := fmt.Sprintf("insert schedule %q", s.Name)
	ps, args := d.values(1, append([]any{s.ID}, scheduleValues(d, s)...)...)
	n, err := w.Exec(ctx, what, `INSERT INTO schedules (`+scheduleColumns+`) VALUES (`+ps+`) ON CONFLICT DO NOTHING`, args...)
	if err == nil && n == 0 {
		err = fmt.Errorf("%s: %w", what, ErrExists)
	}
	return err
}

// UpdateSchedule is Tx.UpdateSchedule of both stores: it replaces the
// stored schedule with the same id (ErrNotFound when there is none).
func (w Writes) UpdateSchedule(ctx context.Context, s *Schedule) error {
	d := w.Dialect
	what := fmt.Sprintf("update schedule %q", s.Name)
	sets := make([]string, len(scheduleFields))
	for i, f := range scheduleFields {
		sets[i] = f + " = " + d.Placeholder(i+1)
	}
	args := append(scheduleValues(d, s), s.ID)
	n, err := w.Exec(ctx, what, `UPDATE schedules SET `+strings.Join(sets, ", ")+` WHERE id = `+d.Placeholder(len(args)), args...)
	if err == nil && n == 0 {
		err = fmt.Errorf("%s: %w", what, ErrNotFound)
	}
	return err
}

// DeleteSchedule is Tx.DeleteSchedule of both stores: it removes a schedule
// by name (ErrNotFound when there is none); its runs stay.
func (w Writes) DeleteSchedule(ctx context.Context, name string) error {
	what := fmt.Sprintf("delete schedule %q", name)
	n, err := w.Exec(ctx, what, `DELETE FROM schedules WHERE name = `+w.Dialect.Placeholder(1), name)
	if err == nil && n == 0 {
		err = fmt.Errorf("%s: %w", what, ErrNotFound)
	}
	return err
}
