package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Policy records (docs/policy-as-data.md): maintenance windows, disruption
// budgets and approval rules kept in the store with their history, made
// through the API, by `muster apply -f`, or seeded from the configuration
// (Source "config"). A record is one kind and id with a spec (JSON that the
// kind's package reads); each change adds a row of history. A deleted
// record holds nothing; it stays, with who deleted it and why.

// Kinds of policy records.
const (
	PolicyWindow       = "window"
	PolicyBudget       = "budget"
	PolicyApprovalRule = "approval_rule"
)

// Events of policy records: the data names the kind, the id, the spec, the
// source and the reason.
const (
	EventPolicyCreated = "policy.created"
	EventPolicyChanged = "policy.changed"
	EventPolicyDeleted = "policy.deleted"
)

// PolicyRecord is one stored policy record.
type PolicyRecord struct {
	Kind string `json:"kind"`
	ID   string `json:"id"`
	// ClusterID is the cluster a window or budget belongs to ("" for an
	// approval rule, whose spec names a cluster glob).
	ClusterID string `json:"cluster_id,omitempty"`
	// Spec is the kind's JSON document.
	Spec string `json:"spec"`
	// Source is "" (the API), "config" or "file:NAME" (muster apply).
	Source string `json:"source,omitempty"`
	// Reason is why the last change was made.
	Reason    string    `json:"reason,omitempty"`
	Version   int       `json:"version"`
	CreatedBy string    `json:"created_by"`
	CreatedTS time.Time `json:"created_ts"`
	UpdatedBy string    `json:"updated_by"`
	UpdatedTS time.Time `json:"updated_ts"`
	// DeletedTS is set once the record was deleted, by DeletedBy for
	// DeleteReason.
	DeletedTS    *time.Time `json:"deleted_ts,omitempty"`
	DeletedBy    string     `json:"deleted_by,omitempty"`
	DeleteReason string     `json:"delete_reason,omitempty"`
}

// PolicyChange is one row of a record's history.
type PolicyChange struct {
	Kind    string    `json:"kind"`
	ID      string    `json:"id"`
	Version int       `json:"version"`
	Op      string    `json:"op"` // created, changed or deleted
	Spec    string    `json:"spec"`
	Source  string    `json:"source,omitempty"`
	Actor   string    `json:"actor"`
	Reason  string    `json:"reason,omitempty"`
	TS      time.Time `json:"ts"`
}

// Ops of PolicyChange.
const (
	PolicyOpCreated = "created"
	PolicyOpChanged = "changed"
	PolicyOpDeleted = "deleted"
)

// PolicyQuery selects policy records: of one kind ("" every kind), of one
// cluster ("" every one), only those not deleted (Live).
type PolicyQuery struct {
	Kind      string
	ClusterID string
	Live      bool
}

const policyColumns = `kind, id, cluster_id, spec, source, reason, version, created_by, created_ts, updated_by, updated_ts, ` +
	`deleted_ts, deleted_by, delete_reason`

// Policies is Reader.Policies of both stores: by kind, then id.
func (r Reads) Policies(ctx context.Context, q PolicyQuery) ([]PolicyRecord, error) {
	b := &listSQL{ph: r.Dialect.Placeholder}
	var conds []string
	if q.Kind != "" {
		conds = append(conds, "kind = "+b.arg(q.Kind))
	}
	if q.ClusterID != "" {
		conds = append(conds, "cluster_id = "+b.arg(q.ClusterID))
	}
	if q.Live {
		conds = append(conds, "deleted_ts IS NULL")
	}
	where := ""
	if len(conds) > 0 {
		where = " WHERE " + strings.Join(conds, " AND ")
	}
	return r.policies(ctx, where+" ORDER BY kind, id", b.args...)
}

// Policy is Reader.Policy of both stores (ErrNotFound when there is none).
func (r Reads) Policy(ctx context.Context, kind, id string) (*PolicyRecord, error) {
	ph := r.Dialect.Placeholder
	ps, err := r.policies(ctx, " WHERE kind = "+ph(1)+" AND id = "+ph(2), kind, id)
	if err != nil {
		return nil, err
	}
	if len(ps) == 0 {
		return nil, fmt.Errorf("%s %q: %w", strings.ReplaceAll(kind, "_", " "), id, ErrNotFound)
	}
	return &ps[0], nil
}

func (r Reads) policies(ctx context.Context, rest string, args ...any) ([]PolicyRecord, error) {
	d := r.Dialect
	out := []PolicyRecord{}
	err := r.Query(ctx, `SELECT `+policyColumns+` FROM policies`+rest, args, func(row Row) error {
		var p PolicyRecord
		if err := row.Scan(&p.Kind, &p.ID, &p.ClusterID, &p.Spec, &p.Source, &p.Reason, &p.Version, &p.CreatedBy,
			d.timeInto(&p.CreatedTS), &p.UpdatedBy, d.timeInto(&p.UpdatedTS), d.nullTimeInto(&p.DeletedTS), &p.DeletedBy,
			&p.DeleteReason); err != nil {
			return err
		}
		out = append(out, p)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("policy records: %w", err)
	}
	return out, nil
}

// PolicyHistory is Reader.PolicyHistory of both stores: every change of
// one record, oldest first.
func (r Reads) PolicyHistory(ctx context.Context, kind, id string) ([]PolicyChange, error) {
	d := r.Dialect
	out := []PolicyChange{}
	err := r.Query(ctx, `SELECT kind, id, version, op, spec, source, actor, reason, ts FROM policy_history WHERE kind = `+
		d.Placeholder(1)+` AND id = `+d.Placeholder(2)+` ORDER BY version`, []any{kind, id}, func(row Row) error {
		var c PolicyChange
		if err := row.Scan(&c.Kind, &c.ID, &c.Version, &c.Op, &c.Spec, &c.Source, &c.Actor, &c.Reason, d.timeInto(&c.TS)); err != nil {
			return err
		}
		out = append(out, c)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("history of %s %s: %w", kind, id, err)
	}
	return out, nil
}

// PutPolicy is Tx.PutPolicy of both stores: it stores p as the record's
// next version (its first when there is none, or again after a delete),
// with a row of history, and sets p's version and times. p.UpdatedBy and
// p.UpdatedTS (zero: now) say who and when.
func (w Writes) PutPolicy(ctx context.Context, p *PolicyRecord) (string, error) {
	d := w.Dialect
	if p.UpdatedTS.IsZero() {
		p.UpdatedTS = Now()
	}
	op := PolicyOpCreated
	cur, err := w.reads().Policy(ctx, p.Kind, p.ID)
	switch {
	case err == nil:
		p.Version = cur.Version + 1
		p.CreatedBy, p.CreatedTS = cur.CreatedBy, cur.CreatedTS
		if cur.DeletedTS == nil {
			op = PolicyOpChanged
		} else {
			p.CreatedBy, p.CreatedTS = p.UpdatedBy, p.UpdatedTS
		}
		what := fmt.Sprintf("update %s %q", p.Kind, p.ID)
		ps := d.Placeholder
		if _, err := w.Exec(ctx, what, `UPDATE policies SET cluster_id = `+ps(1)+`, spec = `+ps(2)+`, source = `+ps(3)+
			`, reason = `+ps(4)+`, version = `+ps(5)+`, created_by = `+ps(6)+`, created_ts = `+ps(7)+`, updated_by = `+ps(8)+
			`, updated_ts = `+ps(9)+`, deleted_ts = NULL, deleted_by = '', delete_reason = '' WHERE kind = `+ps(10)+
			` AND id = `+ps(11), p.ClusterID, p.Spec, p.Source, p.Reason, p.Version, p.CreatedBy, d.Time(p.CreatedTS),
			p.UpdatedBy, d.Time(p.UpdatedTS), p.Kind, p.ID); err != nil {
			return "", err
		}
	case errors.Is(err, ErrNotFound):
		p.Version, p.CreatedBy, p.CreatedTS = 1, p.UpdatedBy, p.UpdatedTS
		what := fmt.Sprintf("insert %s %q", p.Kind, p.ID)
		vs, args := d.values(1, p.Kind, p.ID, p.ClusterID, p.Spec, p.Source, p.Reason, p.Version, p.CreatedBy,
			d.Time(p.CreatedTS), p.UpdatedBy, d.Time(p.UpdatedTS), nil, "", "")
		if _, err := w.Exec(ctx, what, `INSERT INTO policies (`+policyColumns+`) VALUES (`+vs+`)`, args...); err != nil {
			return "", err
		}
	default:
		return "", err
	}
	p.DeletedTS, p.DeletedBy, p.DeleteReason = nil, "", ""
	return op, w.policyHistory(ctx, PolicyChange{Kind: p.Kind, ID: p.ID, Version: p.Version, Op: op, Spec: p.Spec,
		Source: p.Source, Actor: p.UpdatedBy, Reason: p.Reason, TS: p.UpdatedTS})
}

// DeletePolicy is Tx.DeletePolicy of both stores: it marks a live record
// deleted at at, by by, for reason, with a row of history, and reports
// whether it did (false: deleted already). ErrNotFound: no such record.
func (w Writes) DeletePolicy(ctx context.Context, kind, id string, at time.Time, by, reason string) (bool, error) {
	d := w.Dialect
	cur, err := w.reads().Policy(ctx, kind, id)
	if err != nil {
		return false, err
	}
	if cur.DeletedTS != nil {
		return false, nil
	}
	ps := d.Placeholder
	what := fmt.Sprintf("delete %s %q", kind, id)
	if _, err := w.Exec(ctx, what, `UPDATE policies SET deleted_ts = `+ps(1)+`, deleted_by = `+ps(2)+`, delete_reason = `+ps(3)+
		`, version = `+ps(4)+` WHERE kind = `+ps(5)+` AND id = `+ps(6), d.Time(at), by, reason, cur.Version+1, kind, id); err != nil {
		return false, err
	}
	return true, w.policyHistory(ctx, PolicyChange{Kind: kind, ID: id, Version: cur.Version + 1, Op: PolicyOpDeleted,
		Spec: cur.Spec, Source: cur.Source, Actor: by, Reason: reason, TS: at})
}

func (w Writes) policyHistory(ctx context.Context, c PolicyChange) error {
	d := w.Dialect
	vs, args := d.values(1, c.Kind, c.ID, c.Version, c.Op, c.Spec, c.Source, c.Actor, c.Reason, d.Time(c.TS))
	_, err := w.Exec(ctx, fmt.Sprintf("history of %s %q", c.Kind, c.ID),
		`INSERT INTO policy_history (kind, id, version, op, spec, source, actor, reason, ts) VALUES (`+vs+`)`, args...)
	return err
}
