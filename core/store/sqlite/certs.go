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

// Join token uses and agent certificates (migration 017).

const certColumns = `serial, cluster_id, node_id, not_before, not_after, issued_ts, issued_by, revoked_ts, revoke_reason, revoked_by`

func scanCert(s scanner) (*store.AgentCert, error) {
	var c store.AgentCert
	var nb, na, issued int64
	var revoked sql.NullInt64
	if err := s.Scan(&c.Serial, &c.ClusterID, &c.NodeID, &nb, &na, &issued, &c.IssuedBy, &revoked,
		&c.RevokeReason, &c.RevokedBy); err != nil {
		return nil, err
	}
	c.NotBefore, c.NotAfter, c.IssuedTS = shsqlite.FromMicros(nb), shsqlite.FromMicros(na), shsqlite.FromMicros(issued)
	if revoked.Valid {
		t := shsqlite.FromMicros(revoked.Int64)
		c.RevokedTS = &t
	}
	return &c, nil
}

func (r *reader) AgentCerts(ctx context.Context, clusterID, nodeID string) ([]store.AgentCert, error) {
	rows, err := r.tx.QueryContext(ctx, `SELECT `+certColumns+` FROM agent_certs
		WHERE (? = '' OR cluster_id = ?) AND (? = '' OR node_id = ?)
		ORDER BY issued_ts DESC, serial`, clusterID, clusterID, nodeID, nodeID)
	if err != nil {
		return nil, fmt.Errorf("agent certificates: %w", err)
	}
	defer rows.Close()
	var out []store.AgentCert
	for rows.Next() {
		c, err := scanCert(rows)
		if err != nil {
			return nil, fmt.Errorf("agent certificates: %w", err)
		}
		out = append(out, *c)
	}
	return out, rows.Err()
}

func (r *reader) AgentCert(ctx context.Context, serial string) (*store.AgentCert, error) {
	c, err := scanCert(r.tx.QueryRowContext(ctx, `SELECT `+certColumns+` FROM agent_certs WHERE serial = ?`, serial))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("agent certificate %s: %w", serial, store.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("agent certificate %s: %w", serial, err)
	}
	return c, nil
}

func (r *reader) RevokedSerials(ctx context.Context) ([]string, error) {
	rows, err := r.tx.QueryContext(ctx, `SELECT serial FROM agent_certs WHERE revoked_ts IS NOT NULL ORDER BY serial`)
	if err != nil {
		return nil, fmt.Errorf("revoked serials: %w", err)
	}
	defer rows.Close()
	out := []string{}
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, rows.Err()
}

// UseToken takes one use of a join token. The writer holds SQLite's only
// write lock, so the read and the decrement cannot interleave with another.
func (w *writer) UseToken(ctx context.Context, hash string) (int, error) {
	var uses sql.NullInt64
	err := w.tx.QueryRowContext(ctx, `SELECT uses_left FROM tokens WHERE hash = ?`, hash).Scan(&uses)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, fmt.Errorf("use token: %w", store.ErrNotFound)
	}
	if err != nil {
		return 0, fmt.Errorf("use token: %w", err)
	}
	if !uses.Valid {
		return -1, nil
	}
	if uses.Int64 <= 0 {
		return 0, fmt.Errorf("use token: %w", store.ErrUsedUp)
	}
	if _, _, err := w.exec(ctx, "use token", `UPDATE tokens SET uses_left = uses_left - 1 WHERE hash = ? AND uses_left > 0`, hash); err != nil {
		return 0, err
	}
	return int(uses.Int64) - 1, nil
}

func (w *writer) InsertAgentCert(ctx context.Context, c *store.AgentCert) error {
	_, _, err := w.exec(ctx, fmt.Sprintf("insert agent certificate %s", c.Serial),
		`INSERT INTO agent_certs (`+certColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		c.Serial, c.ClusterID, c.NodeID, shsqlite.Micros(c.NotBefore), shsqlite.Micros(c.NotAfter),
		shsqlite.Micros(c.IssuedTS), c.IssuedBy, optMicros(c.RevokedTS), c.RevokeReason, c.RevokedBy)
	return err
}

func (w *writer) PruneAgentCerts(ctx context.Context, nodeID string, before time.Time) (int, error) {
	_, n, err := w.exec(ctx, "prune agent certificates",
		`DELETE FROM agent_certs WHERE node_id = ? AND not_after < ?`, nodeID, shsqlite.Micros(before))
	return int(n), err
}

func (w *writer) RevokeAgentCerts(ctx context.Context, clusterID, nodeID string, at time.Time, reason, by string) ([]string, error) {
	rows, err := w.tx.QueryContext(ctx, `UPDATE agent_certs SET revoked_ts = ?, revoke_reason = ?, revoked_by = ?
		WHERE node_id = ? AND (? = '' OR cluster_id = ?) AND (revoked_ts IS NULL OR revoked_ts > ?) RETURNING serial`,
		shsqlite.Micros(at), reason, by, nodeID, clusterID, clusterID, shsqlite.Micros(at))
	if err != nil {
		return nil, translate(err, "revoke agent certificates")
	}
	defer rows.Close()
	out := []string{}
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	w.rows += int64(len(out))
	return out, rows.Err()
}

func (w *writer) RetireAgentCert(ctx context.Context, serial string, at time.Time, reason, by string) (bool, error) {
	_, n, err := w.exec(ctx, "retire agent certificate "+serial,
		`UPDATE agent_certs SET revoked_ts = ?, revoke_reason = ?, revoked_by = ? WHERE serial = ? AND revoked_ts IS NULL`,
		shsqlite.Micros(at), reason, by, serial)
	return n == 1, err
}

// optMicros stores an optional time (NULL when nil).
func optMicros(t *time.Time) any {
	if t == nil {
		return nil
	}
	return shsqlite.Micros(*t)
}

// optInt stores an optional count (NULL when nil).
func optInt(n *int) any {
	if n == nil {
		return nil
	}
	return *n
}
