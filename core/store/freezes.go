package store

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// Freezes kept as records (docs/architecture.md, "Policy as data"): a span
// of a cluster in which no disruptive work goes, made through the API (or
// seeded from the configuration, Source "config"), with who made it and
// why, and who lifted it early and why. A lifted freeze holds nothing; it
// stays for its history.

// Events of freezes, and of a replica whose configuration disagrees with
// the policy in the store.
const (
	EventFreezeCreated = "freeze.created"
	EventFreezeLifted  = "freeze.lifted"
	// EventCorePolicyDrift: a replica's configuration file declares a
	// policy the store does not hold (or holds lifted); the replica follows
	// the store, and the message says what differs.
	EventCorePolicyDrift = "core.policy_drift"
	// EventCorePolicyUnreadable: a replica cannot read stored policy
	// records (a spec of another version, a window shorter than its least
	// window); the message says each and what is kept instead.
	EventCorePolicyUnreadable = "core.policy_unreadable"
)

// SourceFilePrefix begins the source of what `muster apply -f NAME` made:
// "file:NAME".
const SourceFilePrefix = "file:"

// Freeze is a stored freeze of one cluster, from From (included) to To
// (not included).
type Freeze struct {
	ID        string    `json:"id"`
	ClusterID string    `json:"cluster_id"`
	From      time.Time `json:"from"`
	To        time.Time `json:"to"`
	Reason    string    `json:"reason"`
	// Source is "" (the API), "config" (seeded from core.yaml) or
	// "file:NAME" (muster apply -f NAME).
	Source    string    `json:"source,omitempty"`
	CreatedBy string    `json:"created_by"`
	CreatedTS time.Time `json:"created_ts"`
	// LiftedTS is set once the freeze was lifted early, by LiftedBy for
	// LiftReason.
	LiftedTS   *time.Time `json:"lifted_ts,omitempty"`
	LiftedBy   string     `json:"lifted_by,omitempty"`
	LiftReason string     `json:"lift_reason,omitempty"`
}

// Holds reports whether the freeze holds disruptive work at some time at
// or after t: it is not lifted and has not ended by t.
func (f *Freeze) Holds(t time.Time) bool { return f.LiftedTS == nil && f.To.After(t) }

// FreezeQuery selects freezes: of one cluster (every cluster when ""),
// only those not lifted (Live), only those ending after EndsAfter (when
// set).
type FreezeQuery struct {
	ClusterID string
	Live      bool
	EndsAfter time.Time
}

const freezeColumns = `id, cluster_id, from_ts, to_ts, reason, source, created_by, created_ts, lifted_ts, lifted_by, lift_reason`

// Freezes is Reader.Freezes of both stores: by start, then id.
func (r Reads) Freezes(ctx context.Context, q FreezeQuery) ([]Freeze, error) {
	d := r.Dialect
	b := &listSQL{ph: d.Placeholder}
	var conds []string
	if q.ClusterID != "" {
		conds = append(conds, "cluster_id = "+b.arg(q.ClusterID))
	}
	if q.Live {
		conds = append(conds, "lifted_ts IS NULL")
	}
	if !q.EndsAfter.IsZero() {
		conds = append(conds, "to_ts > "+b.arg(d.Time(q.EndsAfter)))
	}
	where := ""
	if len(conds) > 0 {
		where = " WHERE " + strings.Join(conds, " AND ")
	}
	return r.freezes(ctx, where+" ORDER BY from_ts, id", b.args...)
}

// Freeze is Reader.Freeze of both stores (ErrNotFound when there is none).
func (r Reads) Freeze(ctx context.Context, id string) (*Freeze, error) {
	fs, err := r.freezes(ctx, " WHERE id = "+r.Dialect.Placeholder(1), id)
	if err != nil {
		return nil, err
	}
	if len(fs) == 0 {
		return nil, fmt.Errorf("freeze %q: %w", id, ErrNotFound)
	}
	return &fs[0], nil
}

func (r Reads) freezes(ctx context.Context, rest string, args ...any) ([]Freeze, error) {
	d := r.Dialect
	out := []Freeze{}
	err := r.Query(ctx, `SELECT `+freezeColumns+` FROM freezes`+rest, args, func(row Row) error {
		var f Freeze
		if err := row.Scan(&f.ID, &f.ClusterID, d.timeInto(&f.From), d.timeInto(&f.To), &f.Reason, &f.Source,
			&f.CreatedBy, d.timeInto(&f.CreatedTS), d.nullTimeInto(&f.LiftedTS), &f.LiftedBy, &f.LiftReason); err != nil {
			return err
		}
		out = append(out, f)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("freezes: %w", err)
	}
	return out, nil
}

// InsertFreeze is Tx.InsertFreeze of both stores (ErrExists when the id is
// taken). A zero CreatedTS is now.
func (w Writes) InsertFreeze(ctx context.Context, f *Freeze) error {
	d := w.Dialect
	if f.CreatedTS.IsZero() {
		f.CreatedTS = Now()
	}
	what := fmt.Sprintf("insert freeze %q", f.ID)
	ps, args := d.values(1, f.ID, f.ClusterID, d.Time(f.From), d.Time(f.To), f.Reason, f.Source, f.CreatedBy,
		d.Time(f.CreatedTS), d.nullTime(f.LiftedTS), f.LiftedBy, f.LiftReason)
	n, err := w.Exec(ctx, what, `INSERT INTO freezes (`+freezeColumns+`) VALUES (`+ps+`) ON CONFLICT DO NOTHING`, args...)
	if err == nil && n == 0 {
		err = fmt.Errorf("%s: %w", what, ErrExists)
	}
	return err
}

// LiftFreeze is Tx.LiftFreeze of both stores: it marks the freeze lifted
// at at, by by, for reason, and reports whether it did (false: it was
// lifted already). ErrNotFound: no such freeze.
func (w Writes) LiftFreeze(ctx context.Context, id string, at time.Time, by, reason string) (bool, error) {
	d := w.Dialect
	what := fmt.Sprintf("lift freeze %q", id)
	n, err := w.Exec(ctx, what, `UPDATE freezes SET lifted_ts = `+d.Placeholder(1)+`, lifted_by = `+d.Placeholder(2)+
		`, lift_reason = `+d.Placeholder(3)+` WHERE id = `+d.Placeholder(4)+` AND lifted_ts IS NULL`, d.Time(at), by, reason, id)
	if err != nil || n > 0 {
		return n > 0, err
	}
	if _, err := w.reads().Freeze(ctx, id); err != nil {
		return false, err
	}
	return false, nil
}
