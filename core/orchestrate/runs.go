package orchestrate

import (
	"context"
	"fmt"

	"github.com/musterhq/muster/core/store"
)

// Runs is what the orchestrator needs of the run engine (core/runs): it
// moves a cluster's runs on at every pass, so each wave is created inside
// the pass that then pushes it, and expires runs nobody approved.
type Runs interface {
	// Advance creates the child actions the runs' limits admit now and
	// settles their stages; it returns how many children it created and
	// writes nothing when nothing changed.
	Advance(ctx context.Context, tx store.Tx, clusterID string) (int, error)
	// Expire cancels the runs that waited for approval too long.
	Expire(ctx context.Context, tx store.Tx) (int, error)
}

// advanceRuns moves the cluster's active runs on. It only reads when the
// cluster has none, so an idle pass still writes nothing.
func (o *Orchestrator) advanceRuns(ctx context.Context, clusterID string) (int, error) {
	if o.cfg.Runs == nil {
		return 0, nil
	}
	active := false
	err := o.st.Read(ctx, func(r store.Reader) error {
		runs, err := r.RunsInState(ctx, clusterID, store.RunRunning, store.RunPaused)
		active = len(runs) > 0
		return err
	})
	if err != nil || !active {
		return 0, err
	}
	created := 0
	err = o.st.Update(ctx, func(tx store.Tx) error {
		var err error
		created, err = o.cfg.Runs.Advance(ctx, tx, clusterID)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("runs of %s: %w", clusterID, err)
	}
	return created, nil
}

// expireRuns cancels the runs waiting for approval past its TTL.
func (o *Orchestrator) expireRuns(ctx context.Context) (int, error) {
	if o.cfg.Runs == nil {
		return 0, nil
	}
	n := 0
	err := o.st.Update(ctx, func(tx store.Tx) error {
		var err error
		n, err = o.cfg.Runs.Expire(ctx, tx)
		return err
	})
	return n, err
}
