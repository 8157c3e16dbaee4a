package store

import (
	"context"
	"fmt"
	"time"
)

// Web UI sessions, in both stores (SQLite migration 011, PostgreSQL
// migration 006). On PostgreSQL they are shared by every replica.

// Session is Reader.Session of both stores.
func (r Reads) Session(ctx context.Context, hash string) (*Session, error) {
	d := r.Dialect
	var s Session
	found, err := r.one(ctx, `SELECT hash, token_hash, csrf, created_ts, expires_ts, person, groups, id_expires_ts
		FROM ui_sessions WHERE hash = `+d.Placeholder(1), []any{hash}, func(row Row) error {
		return row.Scan(&s.Hash, &s.TokenHash, &s.CSRF, d.timeInto(&s.CreatedTS), d.timeInto(&s.ExpiresTS),
			&s.Person, d.ListInto(&s.Groups), d.nullTimeInto(&s.IDExpiresTS))
	})
	if err != nil {
		return nil, fmt.Errorf("session: %w", err)
	}
	if !found {
		return nil, fmt.Errorf("session: %w", ErrNotFound)
	}
	if len(s.Groups) == 0 {
		s.Groups = nil
	}
	return &s, nil
}

// SessionCount is Reader.SessionCount of both stores.
func (r Reads) SessionCount(ctx context.Context) (int, error) {
	var n int
	if _, err := r.one(ctx, `SELECT count(*) FROM ui_sessions`, nil, func(row Row) error {
		return row.Scan(&n)
	}); err != nil {
		return 0, fmt.Errorf("count sessions: %w", err)
	}
	return n, nil
}

// InsertSession is Tx.InsertSession of both stores (ErrExists when the hash
// is taken, without failing the transaction).
func (w Writes) InsertSession(ctx context.Context, s *Session) error {
	d := w.Dialect
	const what = "insert session"
	groups, err := d.List(nonNil(s.Groups))
	if err != nil {
		return fmt.Errorf("%s: groups: %w", what, err)
	}
	ps, args := d.values(1, s.Hash, s.TokenHash, s.CSRF, d.Time(s.CreatedTS), d.Time(s.ExpiresTS),
		s.Person, groups, d.nullTime(s.IDExpiresTS))
	n, err := w.Exec(ctx, what, `INSERT INTO ui_sessions (hash, token_hash, csrf, created_ts, expires_ts, person, groups,
		id_expires_ts) VALUES (`+ps+`) ON CONFLICT DO NOTHING`, args...)
	if err == nil && n == 0 {
		err = fmt.Errorf("%s: %w", what, ErrExists)
	}
	return err
}

// nonNil is v, or an empty list for nil (the columns are NOT NULL).
func nonNil(v []string) []string {
	if v == nil {
		return []string{}
	}
	return v
}

// Person is Reader.Person of both stores.
func (r Reads) Person(ctx context.Context, name string) (*Person, error) {
	d := r.Dialect
	var p Person
	found, err := r.one(ctx, `SELECT name, source, groups, last_seen_ts FROM people WHERE lower(name) = lower(`+
		d.Placeholder(1)+`)`, []any{name}, func(row Row) error {
		return row.Scan(&p.Name, &p.Source, d.ListInto(&p.Groups), d.timeInto(&p.LastSeenTS))
	})
	if err != nil {
		return nil, fmt.Errorf("person %q: %w", name, err)
	}
	if !found {
		return nil, fmt.Errorf("person %q: %w", name, ErrNotFound)
	}
	if len(p.Groups) == 0 {
		p.Groups = nil
	}
	return &p, nil
}

// DeleteSession is Tx.DeleteSession of both stores.
func (w Writes) DeleteSession(ctx context.Context, hash string) error {
	_, err := w.Exec(ctx, "delete session", `DELETE FROM ui_sessions WHERE hash = `+w.Dialect.Placeholder(1), hash)
	return err
}

// DeleteSessionsBefore is Tx.DeleteSessionsBefore of both stores.
func (w Writes) DeleteSessionsBefore(ctx context.Context, t time.Time) (int, error) {
	d := w.Dialect
	n, err := w.Exec(ctx, "delete expired sessions", `DELETE FROM ui_sessions WHERE expires_ts <= `+d.Placeholder(1), d.Time(t))
	return int(n), err
}

// TrimSessions is Tx.TrimSessions of both stores.
func (w Writes) TrimSessions(ctx context.Context, tokenHash string, keep int) (int, error) {
	d := w.Dialect
	n, err := w.Exec(ctx, "trim sessions", `DELETE FROM ui_sessions WHERE token_hash = `+d.Placeholder(1)+` AND hash NOT IN
		(SELECT hash FROM ui_sessions WHERE token_hash = `+d.Placeholder(2)+` ORDER BY created_ts DESC, hash DESC LIMIT `+
		d.Placeholder(3)+`)`, tokenHash, tokenHash, max(keep, 0))
	return int(n), err
}
