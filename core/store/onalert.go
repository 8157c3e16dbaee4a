package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// A cluster's on_alert playbook (SQLite and PostgreSQL migration 031): the
// playbook its declared membership names (core.yaml, expect.on_alert),
// approved once like a schedule (the digest approved), and started by the
// core at most once per alert.

// Events of on_alert playbooks.
const (
	// EventOnAlertApproved: a person approved a cluster's on_alert
	// playbook as it is now (its digest).
	EventOnAlertApproved = "cluster.on_alert_approved"
	// EventOnAlertApprovalRecorded: an approval of a cluster's on_alert
	// playbook that leaves levels unmet.
	EventOnAlertApprovalRecorded = "cluster.on_alert_approval_recorded"
	// EventOnAlertStarted: the cluster went ALERT and the core made the
	// on_alert run.
	EventOnAlertStarted = "cluster.on_alert_started"
	// EventOnAlertSkipped: the cluster went ALERT but no run was made (not
	// approved, the approval voided by a change, or the plan failed).
	EventOnAlertSkipped = "cluster.on_alert_skipped"
	// EventOnAlertFinished: the on_alert run ended; when not DONE, the
	// cluster stays ALERT and the message says so.
	EventOnAlertFinished = "cluster.on_alert_finished"
)

// OnAlert is the stored state of a cluster's on_alert playbook.
type OnAlert struct {
	ClusterID string
	// Digest is the digest approved, by ApprovedBy at ApprovedTS ("":
	// never approved).
	Digest     string
	ApprovedBy string
	ApprovedTS *time.Time
	// Alerts counts the alerts handled; AlertSince is when the current
	// one began (nil: the cluster misses no node now), Missing its missing
	// nodes then.
	Alerts     int
	AlertSince *time.Time
	Missing    []string
	// RunID is the run made for the last alert ("": none), Outcome what
	// became of it: "" while it runs, its final state, or why no run was
	// made.
	RunID     string
	Outcome   string
	UpdatedTS time.Time
}

const onAlertColumns = `cluster_id, digest, approved_by, approved_ts, alerts, alert_since, missing, run_id, outcome, updated_ts`

// OnAlert is Reader.OnAlert of both stores (ErrNotFound when the cluster
// has no state yet).
func (r Reads) OnAlert(ctx context.Context, clusterID string) (*OnAlert, error) {
	d := r.Dialect
	var a OnAlert
	var missing string
	found, err := r.one(ctx, `SELECT `+onAlertColumns+` FROM on_alert WHERE cluster_id = `+d.Placeholder(1),
		[]any{clusterID}, func(row Row) error {
			return row.Scan(&a.ClusterID, &a.Digest, &a.ApprovedBy, d.nullTimeInto(&a.ApprovedTS), &a.Alerts,
				d.nullTimeInto(&a.AlertSince), &missing, &a.RunID, &a.Outcome, d.timeInto(&a.UpdatedTS))
		})
	if err != nil {
		return nil, fmt.Errorf("on_alert of cluster %s: %w", clusterID, err)
	}
	if !found {
		return nil, fmt.Errorf("on_alert of cluster %s: %w", clusterID, ErrNotFound)
	}
	if err := json.Unmarshal([]byte(missing), &a.Missing); err != nil {
		return nil, fmt.Errorf("on_alert of cluster %s: missing: %w", clusterID, err)
	}
	return &a, nil
}

// PutOnAlert is Tx.PutOnAlert of both stores: it stores the state over
// the cluster's earlier one. A zero UpdatedTS is now.
func (w Writes) PutOnAlert(ctx context.Context, a *OnAlert) error {
	d := w.Dialect
	if a.UpdatedTS.IsZero() {
		a.UpdatedTS = Now()
	}
	missing, err := json.Marshal(a.Missing)
	if err != nil {
		return err
	}
	if a.Missing == nil {
		missing = []byte("[]")
	}
	ps, args := d.values(1, a.ClusterID, a.Digest, a.ApprovedBy, d.nullTime(a.ApprovedTS), a.Alerts, d.nullTime(a.AlertSince),
		string(missing), a.RunID, a.Outcome, d.Time(a.UpdatedTS))
	_, err = w.Exec(ctx, "on_alert of cluster "+a.ClusterID, `INSERT INTO on_alert (`+onAlertColumns+`) VALUES (`+ps+`)
		ON CONFLICT (cluster_id) DO UPDATE SET digest = excluded.digest, approved_by = excluded.approved_by,
		approved_ts = excluded.approved_ts, alerts = excluded.alerts, alert_since = excluded.alert_since,
		missing = excluded.missing, run_id = excluded.run_id, outcome = excluded.outcome, updated_ts = excluded.updated_ts`, args...)
	return err
}
