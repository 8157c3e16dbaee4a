package runs

import (
	"context"

	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/action"
)

// A run that is not RUNNING (paused, or waiting for approval again) holds
// its children not yet sent: they go when it runs again. What was already
// sent to an agent runs on; the agent decides it.

// PausedRuns lists, among the runs of the open actions, those that hold
// their children not yet sent. It reads only when one of the actions is a
// run's child not yet sent.
func PausedRuns(ctx context.Context, r store.Reader, clusterID string, open []store.Record) (map[string]bool, error) {
	ids := map[string]bool{}
	for i := range open {
		if open[i].RunID != "" && open[i].State == action.PendingSchedule && open[i].PushedStoreID == "" {
			ids[open[i].RunID] = true
		}
	}
	if len(ids) == 0 {
		return nil, nil
	}
	running, err := r.RunsInState(ctx, clusterID, store.RunRunning)
	if err != nil {
		return nil, err
	}
	for _, run := range running {
		delete(ids, run.ID)
	}
	return ids, nil
}

// HoldsChild reports whether the action r waits for its run: a child not
// yet sent whose run is among paused (PausedRuns).
func HoldsChild(paused map[string]bool, r *store.Record) bool {
	return r.RunID != "" && r.PushedStoreID == "" && paused[r.RunID]
}
