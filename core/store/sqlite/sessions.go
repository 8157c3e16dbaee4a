package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/musterhq/muster/core/store"
	shsqlite "github.com/musterhq/muster/shared/sqlite"
)

// Web UI sessions (migration 011).

func (r *reader) Session(ctx context.Context, hash string) (*store.Session, error) {
	var s store.Session
	var created, expires int64
	err := r.tx.QueryRowContext(ctx,
		`SELECT hash, token_hash, csrf, created_ts, expires_ts FROM ui_sessions WHERE hash = ?`, hash).
		Scan(&s.Hash, &s.TokenHash, &s.CSRF, &created, &expires)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("session: %w", store.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("session: %w", err)
	}
	s.CreatedTS, s.ExpiresTS = shsqlite.FromMicros(created), shsqlite.FromMicros(expires)
	return &s, nil
}

func (r *reader) SessionCount(ctx context.Context) (int, error) {
	var n int
	if err := r.tx.QueryRowContext(ctx, `SELECT count(*) FROM ui_sessions`).Scan(&n); err != nil {
		return 0, fmt.Errorf("count sessions: %w", err)
	}
	return n, nil
}

// InsertSession stores a new session (ErrExists when the hash is taken).
func (w *writer) InsertSession(ctx context.Context, s *store.Session) error {
	_, _, err := w.exec(ctx, "insert session",
		`INSERT INTO ui_sessions (hash, token_hash, csrf, created_ts, expires_ts) VALUES (?, ?, ?, ?, ?)`,
		s.Hash, s.TokenHash, s.CSRF, shsqlite.Micros(s.CreatedTS), shsqlite.Micros(s.ExpiresTS))
	return err
}

func (w *writer) DeleteSession(ctx context.Context, hash string) error {
	_, _, err := w.exec(ctx, "delete session", `DELETE FROM ui_sessions WHERE hash = ?`, hash)
	return err
}

func (w *writer) DeleteSessionsBefore(ctx context.Context, t time.Time) (int, error) {
	_, n, err := w.exec(ctx, "delete expired sessions", `DELETE FROM ui_sessions WHERE expires_ts <= ?`, shsqlite.Micros(t))
	return int(n), err
}

func (w *writer) TrimSessions(ctx context.Context, tokenHash string, keep int) (int, error) {
	_, n, err := w.exec(ctx, "trim sessions", `DELETE FROM ui_sessions WHERE token_hash = ? AND hash NOT IN
		(SELECT hash FROM ui_sessions WHERE token_hash = ? ORDER BY created_ts DESC, hash DESC LIMIT ?)`,
		tokenHash, tokenHash, max(keep, 0))
	return int(n), err
}
