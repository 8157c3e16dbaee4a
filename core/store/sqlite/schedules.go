package sqlite

import (
	"context"
	"fmt"

	"github.com/musterhq/muster/core/store"
)

// ScheduleRuns lists up to limit runs of a schedule, newest first, brief.
func (r *reader) ScheduleRuns(ctx context.Context, scheduleID string, limit int) ([]store.Run, error) {
	out, err := r.runList(ctx, true, `SELECT `+briefColumns+` FROM runs WHERE schedule_id = ?
		ORDER BY created_ts DESC, id DESC LIMIT ?`, scheduleID, limit)
	if err != nil {
		return nil, fmt.Errorf("runs of schedule %s: %w", scheduleID, err)
	}
	return out, nil
}
