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

// Join token uses and agent certificates (migration 012), shared by every
// replica: the revocation list each of them checks is read from here.

const certColumns = `serial, cluster_id, node_id, not_before, not_after, issued_ts, issued_by, revoked_ts, revoke_reason, revoked_by`

func scanCert(s pgx.Row) (*store.AgentCert, error) {
	var c store.AgentCert
	if err := s.Scan(&c.Serial, &c.ClusterID, &c.NodeID, &c.NotBefore, &c.NotAfter, &c.IssuedTS, &c.IssuedBy,
		&c.RevokedTS, &c.RevokeReason, &c.RevokedBy); err != nil {
		return nil, err
	}
	c.NotBefore, c.NotAfter, c.IssuedTS = c.NotBefore.UTC(), c.NotAfter.UTC(), c.IssuedTS.UTC()
	if c.RevokedTS != nil {
		t := c.RevokedTS.UTC()
		c.RevokedTS = &t
	}
	return &c, nil
}

func (r *reader) AgentCerts(ctx context.Context, clusterID, nodeID string) ([]store.AgentCert, error) {
	rows, err := r.query(ctx, `SELECT `+certColumns+` FROM agent_certs
		WHERE ($1 = '' OR cluster_id = $1) AND ($2 = '' OR node_id = $2)
		ORDER BY issued_ts DESC, serial`, clusterID, nodeID)
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
	c, err := scanCert(r.queryRow(ctx, `SELECT `+certColumns+` FROM agent_certs WHERE serial = $1`, serial))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("agent certificate %s: %w", serial, store.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("agent certificate %s: %w", serial, err)
	}
	return c, nil
}

func (r *reader) RevokedSerials(ctx context.Context) ([]string, error) {
	rows, err := r.query(ctx, `SELECT serial FROM agent_certs WHERE revoked_ts IS NOT NULL ORDER BY serial`)
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

// UseToken takes one use of a join token with one conditional UPDATE, which
// PostgreSQL applies atomically whatever the isolation level: of two
// enrollments racing for the last use, one updates no row.
func (w *writer) UseToken(ctx context.Context, hash string) (int, error) {
	var left int32
	err := w.queryRow(ctx, `UPDATE tokens SET uses_left = uses_left - 1
		WHERE hash = $1 AND uses_left > 0 RETURNING uses_left`, hash).Scan(&left)
	if err == nil {
		w.rows++
		return int(left), nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return 0, translate(err, "use token")
	}
	var uses *int32
	err = w.queryRow(ctx, `SELECT uses_left FROM tokens WHERE hash = $1`, hash).Scan(&uses)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return 0, fmt.Errorf("use token: %w", store.ErrNotFound)
	case err != nil:
		return 0, translate(err, "use token")
	case uses == nil:
		return -1, nil
	}
	return 0, fmt.Errorf("use token: %w", store.ErrUsedUp)
}

func (w *writer) InsertAgentCert(ctx context.Context, c *store.AgentCert) error {
	what := fmt.Sprintf("insert agent certificate %s", c.Serial)
	n, err := w.exec(ctx, what,
		`INSERT INTO agent_certs (`+certColumns+`) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) ON CONFLICT DO NOTHING`,
		c.Serial, c.ClusterID, c.NodeID, action.UTC(c.NotBefore), action.UTC(c.NotAfter), action.UTC(c.IssuedTS),
		c.IssuedBy, nullTS(c.RevokedTS), c.RevokeReason, c.RevokedBy)
	if err == nil && n == 0 {
		err = fmt.Errorf("%s: %w", what, store.ErrExists)
	}
	return err
}

func (w *writer) PruneAgentCerts(ctx context.Context, nodeID string, before time.Time) (int, error) {
	n, err := w.exec(ctx, "prune agent certificates",
		`DELETE FROM agent_certs WHERE node_id = $1 AND not_after < $2`, nodeID, action.UTC(before))
	return int(n), err
}

func (w *writer) RetireAgentCert(ctx context.Context, serial string, at time.Time, reason, by string) (bool, error) {
	n, err := w.exec(ctx, "retire agent certificate "+serial,
		`UPDATE agent_certs SET revoked_ts = $1, revoke_reason = $2, revoked_by = $3 WHERE serial = $4 AND revoked_ts IS NULL`,
		action.UTC(at), reason, by, serial)
	return n == 1, err
}

func (w *writer) RevokeAgentCerts(ctx context.Context, clusterID, nodeID string, at time.Time, reason, by string) ([]string, error) {
	rows, err := w.query(ctx, `UPDATE agent_certs SET revoked_ts = $1, revoke_reason = $2, revoked_by = $3
		WHERE node_id = $4 AND ($5 = '' OR cluster_id = $5) AND (revoked_ts IS NULL OR revoked_ts > $1) RETURNING serial`,
		action.UTC(at), reason, by, nodeID, clusterID)
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
	if err := rows.Err(); err != nil {
		return nil, translate(err, "revoke agent certificates")
	}
	w.rows += int64(len(out))
	return out, nil
}
