package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/action"
)

// Web UI sessions (migration 006), shared by every replica.

func (r *reader) Session(ctx context.Context, hash string) (*store.Session, error) {
	var s store.Session
	err := r.queryRow(ctx, `SELECT hash, token_hash, csrf, created_ts, expires_ts FROM ui_sessions WHERE hash = $1`, hash).
		Scan(&s.Hash, &s.TokenHash, &s.CSRF, &s.CreatedTS, &s.ExpiresTS)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("session: %w", store.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("session: %w", err)
	}
	s.CreatedTS, s.ExpiresTS = s.CreatedTS.UTC(), s.ExpiresTS.UTC()
	return &s, nil
}

func (r *reader) SessionCount(ctx context.Context) (int, error) {
	var n int
	if err := r.queryRow(ctx, `SELECT count(*) FROM ui_sessions`).Scan(&n); err != nil {
		return 0, fmt.Errorf("count sessions: %w", err)
	}
	return n, nil
}

// InsertSession stores a new session (ErrExists when the hash is taken).
func (w *writer) InsertSession(ctx context.Context, s *store.Session) error {
	const what = "insert session"
	n, err := w.exec(ctx, what,
		`INSERT INTO ui_sessions (hash, token_hash, csrf, created_ts, expires_ts) VALUES ($1, $2, $3, $4, $5) ON CONFLICT DO NOTHING`,
		s.Hash, s.TokenHash, s.CSRF, action.UTC(s.CreatedTS), action.UTC(s.ExpiresTS))
	if err == nil && n == 0 {
		err = fmt.Errorf("%s: %w", what, store.ErrExists)
	}
	return err
}

func (w *writer) DeleteSession(ctx context.Context, hash string) error {
	_, err := w.exec(ctx, "delete session", `DELETE FROM ui_sessions WHERE hash = $1`, hash)
	return err
}

func (w *writer) DeleteSessionsBefore(ctx context.Context, t time.Time) (int, error) {
	n, err := w.exec(ctx, "delete expired sessions", `DELETE FROM ui_sessions WHERE expires_ts <= $1`, action.UTC(t))
	return int(n), err
}

func (w *writer) TrimSessions(ctx context.Context, tokenHash string, keep int) (int, error) {
	n, err := w.exec(ctx, "trim sessions", `DELETE FROM ui_sessions WHERE token_hash = $1 AND hash NOT IN
		(SELECT hash FROM ui_sessions WHERE token_hash = $1 ORDER BY created_ts DESC, hash DESC LIMIT $2)`,
		tokenHash, max(keep, 0))
	return int(n), err
}
