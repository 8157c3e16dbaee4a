package core

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/musterhq/muster/core/schedule"
	"github.com/musterhq/muster/core/store"
)

// Freezes are records in the store (docs/architecture.md, "Policy as
// data"). The configuration's freezes seed it, at start and at each
// reload: each one becomes a record (source "config", by "config") with an
// id derived from it, made once however many replicas declare it. The
// store is then followed: a freeze lifted through the API stays lifted
// whatever the file says. What this replica's file and the store disagree
// on is its drift, shown by `muster core status` and told by a
// core.policy_drift event.

// actorConfig is the actor of the freezes the configuration seeds.
const actorConfig = "config"

// seedFreezes stores the configuration's freezes that the store lacks and
// returns the drift: one line per freeze the file and the store disagree
// on (a configured one lifted in the store; a config-sourced one in force
// that the file no longer declares). A drift that differs from last's is
// an event.
func seedFreezes(ctx context.Context, st store.Store, cfg Config, last []string) ([]string, error) {
	now := time.Now().UTC()
	var drift []string
	err := st.Update(ctx, func(tx store.Tx) error {
		drift = nil
		want := map[string]bool{}
		for _, cl := range cfg.Clusters {
			for _, spec := range cl.Freezes {
				f, err := schedule.NewFreeze(spec.From, spec.To, spec.Reason)
				if err != nil {
					return fmt.Errorf("cluster %s: freeze: %w", cl.ID, err) // Validate refused it already
				}
				id := schedule.ConfigFreezeID(cl.ID, spec)
				want[id] = true
				cur, err := tx.Freeze(ctx, id)
				switch {
				case err == nil:
					if cur.LiftedTS != nil && cur.To.After(now) {
						drift = append(drift, fmt.Sprintf("freeze %s of cluster %s (%s) is in the file but was lifted by %s: %s",
							id, cl.ID, spec.Reason, cur.LiftedBy, cur.LiftReason))
					}
					continue
				case !errors.Is(err, store.ErrNotFound):
					return err
				}
				if !f.To.After(now) {
					continue // over: nothing to hold
				}
				rec := &store.Freeze{ID: id, ClusterID: cl.ID, From: f.From.UTC(), To: f.To.UTC(), Reason: f.Reason,
					Source: store.SourceConfig, CreatedBy: actorConfig, CreatedTS: now}
				if err := tx.InsertFreeze(ctx, rec); err != nil {
					return err
				}
				if err := tx.AppendEvent(ctx, &store.Event{Type: store.EventFreezeCreated, Actor: actorConfig, ClusterID: cl.ID,
					Message: fmt.Sprintf("cluster %s frozen from %s until %s by the configuration: %s", cl.ID,
						rec.From.Format(time.RFC3339), rec.To.Format(time.RFC3339), rec.Reason),
					Data: map[string]any{"freeze": id, "from": rec.From, "to": rec.To, "reason": rec.Reason, "source": rec.Source}}); err != nil {
					return err
				}
			}
		}
		stored, err := tx.Freezes(ctx, store.FreezeQuery{Live: true, EndsAfter: now})
		if err != nil {
			return err
		}
		for _, f := range stored {
			if f.Source == store.SourceConfig && !want[f.ID] {
				drift = append(drift, fmt.Sprintf("freeze %s of cluster %s (%s) is in the store from a configuration but not in this file",
					f.ID, f.ClusterID, f.Reason))
			}
		}
		slices.Sort(drift)
		if len(drift) == 0 || slices.Equal(drift, last) {
			return nil
		}
		return tx.AppendEvent(ctx, &store.Event{Type: store.EventCorePolicyDrift, Actor: store.ActorCore,
			Message: "this replica's configuration disagrees with the policy in the store, which it follows: " +
				strings.Join(drift, "; "),
			Data: map[string]any{"drift": drift}})
	})
	if err != nil {
		return nil, fmt.Errorf("freezes of the configuration: %w", err)
	}
	return drift, nil
}

// configFreezeIDs are the ids of the freezes cfg declares.
func configFreezeIDs(cfg Config) map[string]string {
	out := map[string]string{}
	for _, cl := range cfg.Clusters {
		for _, f := range cl.Freezes {
			out[schedule.ConfigFreezeID(cl.ID, f)] = cl.ID
		}
	}
	return out
}

// liftRemovedFreezes lifts, as the configuration, the freezes old declared
// and next (a reload of this replica's file) no longer does: removing a
// freeze from the file and sending SIGHUP is a change someone made. A
// start lifts nothing: a replica started with an older file only reports
// its drift (seedFreezes).
func liftRemovedFreezes(ctx context.Context, st store.Store, old, next Config) error {
	gone := configFreezeIDs(old)
	for id := range configFreezeIDs(next) {
		delete(gone, id)
	}
	if len(gone) == 0 {
		return nil
	}
	now := time.Now().UTC()
	const why = "removed from the configuration file at a reload"
	return st.Update(ctx, func(tx store.Tx) error {
		for id := range gone {
			f, err := tx.Freeze(ctx, id)
			if errors.Is(err, store.ErrNotFound) {
				continue
			}
			if err != nil {
				return err
			}
			if !f.Holds(now) {
				continue
			}
			if _, err := tx.LiftFreeze(ctx, id, now, actorConfig, why); err != nil {
				return err
			}
			if err := tx.AppendEvent(ctx, &store.Event{Type: store.EventFreezeLifted, Actor: actorConfig, ClusterID: f.ClusterID,
				Message: fmt.Sprintf("freeze %s of cluster %s (%s) lifted by the configuration: %s", id, f.ClusterID, f.Reason, why),
				Data:    map[string]any{"freeze": id, "reason": why, "freeze_reason": f.Reason}}); err != nil {
				return err
			}
		}
		return nil
	})
}
