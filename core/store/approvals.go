package store

import (
	"context"
	"fmt"
	"time"
)

// Approvals recorded per level, in both stores (SQLite and PostgreSQL
// migration 025; docs/runs-and-playbooks.md, "Approval levels").

// What an approval is of (Approval.SubjectKind).
const (
	SubjectAction   = "action"
	SubjectRun      = "run"
	SubjectSchedule = "schedule"
	// SubjectResume is a run's resume past the errors of a stage.
	SubjectResume = "resume"
	// SubjectPromote is the promote of a run's canary.
	SubjectPromote = "promote"
	// SubjectOnAlert is the on_alert playbook of a cluster (its id).
	SubjectOnAlert = "on_alert"
)

// Approval is one person's approval of a subject at one level, bound to
// the digest they saw. One of another digest than the subject's now is
// void: it is kept, and counts for nothing.
type Approval struct {
	SubjectKind string
	SubjectID   string
	Digest      string
	Person      string
	// Level is the key of the level it counts for (approval.Level.Key).
	Level     string
	DecidedTS time.Time
}

// Approvals is Reader.Approvals of both stores.
func (r Reads) Approvals(ctx context.Context, kind, id string) ([]Approval, error) {
	d := r.Dialect
	out := []Approval{}
	err := r.Query(ctx, `SELECT subject_kind, subject_id, digest, person, level, decided_ts FROM approvals
		WHERE subject_kind = `+d.Placeholder(1)+` AND subject_id = `+d.Placeholder(2)+` ORDER BY decided_ts, person`,
		[]any{kind, id}, func(row Row) error {
			var a Approval
			if err := row.Scan(&a.SubjectKind, &a.SubjectID, &a.Digest, &a.Person, &a.Level, d.timeInto(&a.DecidedTS)); err != nil {
				return err
			}
			out = append(out, a)
			return nil
		})
	if err != nil {
		return nil, fmt.Errorf("approvals of %s %s: %w", kind, id, err)
	}
	return out, nil
}

// InsertApproval is Tx.InsertApproval of both stores (ErrExists when the
// person approved this digest of the subject already, names ignoring case,
// without failing the transaction).
func (w Writes) InsertApproval(ctx context.Context, a *Approval) error {
	d := w.Dialect
	what := fmt.Sprintf("approval of %s %s by %s", a.SubjectKind, a.SubjectID, a.Person)
	stampNew(&a.DecidedTS, nil)
	ps, args := d.values(1, a.SubjectKind, a.SubjectID, a.Digest, a.Person, a.Level, d.Time(a.DecidedTS))
	n, err := w.Exec(ctx, what, `INSERT INTO approvals (subject_kind, subject_id, digest, person, level, decided_ts) VALUES (`+
		ps+`) ON CONFLICT DO NOTHING`, args...)
	if err == nil && n == 0 {
		err = fmt.Errorf("%s: %w", what, ErrExists)
	}
	return err
}
