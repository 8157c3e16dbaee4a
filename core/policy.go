package core

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/musterhq/muster/core/policy"
	"github.com/musterhq/muster/core/schedule"
	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/wire"
)

// Freezes, windows, budgets and approval rules are records in the store
// (docs/policy-as-data.md). The configuration's seed it, at start and at
// each reload: each one becomes a record (source "config", by "config")
// with an id derived from it, made once however many replicas declare it.
// The store is then followed: a freeze lifted or a window deleted through
// the API stays so whatever the file says. What this replica's file and
// the store disagree on is its drift, shown by `muster core status` and
// told by a core.policy_drift event.

// actorConfig is the actor of what the configuration seeds.
const actorConfig = policy.ActorConfig

// seedFreezes stores the configuration's freezes that the store lacks and
// returns the drift: one line per freeze the file and the store disagree
// on (a configured one lifted in the store; a config-sourced one in force
// that the file no longer declares).
func seedFreezes(ctx context.Context, tx store.Tx, cfg Config, now time.Time) ([]string, error) {
	var drift []string
	want := map[string]bool{}
	for _, cl := range cfg.Clusters {
		for _, spec := range cl.Freezes {
			f, err := schedule.NewFreeze(spec.From, spec.To, spec.Reason)
			if err != nil {
				return nil, fmt.Errorf("cluster %s: freeze: %w", cl.ID, err) // Validate refused it already
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
				return nil, err
			}
			if !f.To.After(now) {
				continue // over: nothing to hold
			}
			rec := &store.Freeze{ID: id, ClusterID: cl.ID, From: f.From.UTC(), To: f.To.UTC(), Reason: f.Reason,
				Source: store.SourceConfig, CreatedBy: actorConfig, CreatedTS: now}
			if err := tx.InsertFreeze(ctx, rec); err != nil {
				return nil, err
			}
			if err := tx.AppendEvent(ctx, &store.Event{Type: store.EventFreezeCreated, Actor: actorConfig, ClusterID: cl.ID,
				Message: fmt.Sprintf("cluster %s frozen from %s until %s by the configuration: %s", cl.ID,
					rec.From.Format(time.RFC3339), rec.To.Format(time.RFC3339), rec.Reason),
				Data: map[string]any{"freeze": id, "from": rec.From, "to": rec.To, "reason": rec.Reason, "source": rec.Source}}); err != nil {
				return nil, err
			}
		}
	}
	stored, err := tx.Freezes(ctx, store.FreezeQuery{Live: true, EndsAfter: now})
	if err != nil {
		return nil, err
	}
	for _, f := range stored {
		if f.Source == store.SourceConfig && !want[f.ID] {
			drift = append(drift, fmt.Sprintf("freeze %s of cluster %s (%s) is in the store from a configuration but not in this file",
				f.ID, f.ClusterID, f.Reason))
		}
	}
	return drift, nil
}

// seedPolicy makes the store hold the policy this replica's configuration
// declares (its freezes, windows, budgets and approval rules; old is the
// configuration before a reload, nil at start) and returns the drift: one
// line per record the file and the store disagree on. A drift that
// differs from last's is a core.policy_drift event.
func seedPolicy(ctx context.Context, st store.Store, old *Config, next Config, last []string) ([]string, error) {
	now := time.Now().UTC()
	var drift []string
	err := st.Update(ctx, func(tx store.Tx) error {
		var err error
		if drift, err = seedFreezes(ctx, tx, next, now); err != nil {
			return err
		}
		var was []store.PolicyRecord
		if old != nil {
			was = configRecords(*old)
		}
		more, err := policy.Seed(ctx, tx, was, configRecords(next), now)
		if err != nil {
			return err
		}
		drift = append(drift, more...)
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
		return nil, fmt.Errorf("policy of the configuration: %w", err)
	}
	return drift, nil
}

// configRecords are the windows, budgets and approval rules cfg declares,
// as records (ids derived from what they say, so that every replica
// seeding the same makes one record).
func configRecords(cfg Config) []store.PolicyRecord {
	var out []store.PolicyRecord
	add := func(kind, id string, r policy.Record, err error) {
		if err == nil { // Validate refused the others already
			out = append(out, store.PolicyRecord{Kind: kind, ID: id, ClusterID: r.ClusterID, Spec: r.Spec})
		}
	}
	for _, cl := range cfg.Clusters {
		for _, w := range cl.Windows {
			r, err := policy.CheckWindow(wire.WindowSpec{Cluster: cl.ID, Cron: w.Cron, Duration: w.Duration.String(),
				Timezone: w.Timezone}, cfg.MinWindow)
			add(store.PolicyWindow, configID("w", r.Spec), r, err)
		}
		if m := cl.Budget.MaxUnavailable; m != "" {
			r, err := policy.CheckBudget(wire.BudgetSpec{Cluster: cl.ID, MaxUnavailable: m})
			add(store.PolicyBudget, cl.ID, r, err)
		}
	}
	for i, rule := range cfg.Approval.Rules {
		r, err := policy.CheckRule(policy.FromRule(rule, i))
		add(store.PolicyApprovalRule, configID("r", r.Spec), r, err)
	}
	return out
}

// configID is the id of a record of the configuration: "cfg-" and a digest
// of what it says.
func configID(kind, spec string) string {
	sum := sha256.Sum256([]byte(kind + "\x00" + spec))
	return "cfg-" + kind + "-" + hex.EncodeToString(sum[:6])
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
// its drift (seedPolicy).
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
