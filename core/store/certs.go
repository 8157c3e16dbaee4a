package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// Join token uses and agent certificates, in both stores (SQLite migration
// 017, PostgreSQL migration 012). On PostgreSQL they are shared by every
// replica: the revocation list each of them checks is read from here.

const certColumns = `serial, cluster_id, node_id, not_before, not_after, issued_ts, issued_by, revoked_ts, revoke_reason, revoked_by, labels`

func (d Dialect) scanCert(row Row) (AgentCert, error) {
	var c AgentCert
	var held string
	if err := row.Scan(&c.Serial, &c.ClusterID, &c.NodeID, d.timeInto(&c.NotBefore), d.timeInto(&c.NotAfter),
		d.timeInto(&c.IssuedTS), &c.IssuedBy, d.nullTimeInto(&c.RevokedTS), &c.RevokeReason, &c.RevokedBy, &held); err != nil {
		return c, err
	}
	var err error
	c.Labels, err = labelsOfColumn(held)
	if err != nil {
		return c, fmt.Errorf("agent certificate %s: labels: %w", c.Serial, err)
	}
	return c, nil
}

// labelsOfColumn reads a column LabelsColumn wrote (nil for none).
func labelsOfColumn(col string) (map[string]string, error) {
	var out map[string]string
	if err := json.Unmarshal([]byte(col), &out); err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, nil
	}
	return out, nil
}

// AgentCerts is Reader.AgentCerts of both stores.
func (r Reads) AgentCerts(ctx context.Context, clusterID, nodeID string) ([]AgentCert, error) {
	d := r.Dialect
	var out []AgentCert
	err := r.Query(ctx, `SELECT `+certColumns+` FROM agent_certs
		WHERE (`+d.Placeholder(1)+` = '' OR cluster_id = `+d.Placeholder(2)+`)
		AND (`+d.Placeholder(3)+` = '' OR node_id = `+d.Placeholder(4)+`)
		ORDER BY issued_ts DESC, serial`, []any{clusterID, clusterID, nodeID, nodeID}, func(row Row) error {
		c, err := d.scanCert(row)
		if err != nil {
			return err
		}
		out = append(out, c)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("agent certificates: %w", err)
	}
	return out, nil
}

// AgentCert is Reader.AgentCert of both stores.
func (r Reads) AgentCert(ctx context.Context, serial string) (*AgentCert, error) {
	var c AgentCert
	found, err := r.one(ctx, `SELECT `+certColumns+` FROM agent_certs WHERE serial = `+r.Dialect.Placeholder(1),
		[]any{serial}, func(row Row) (err error) {
			c, err = r.Dialect.scanCert(row)
			return err
		})
	if err != nil {
		return nil, fmt.Errorf("agent certificate %s: %w", serial, err)
	}
	if !found {
		return nil, fmt.Errorf("agent certificate %s: %w", serial, ErrNotFound)
	}
	return &c, nil
}

// RevokedSerials is Reader.RevokedSerials of both stores.
func (r Reads) RevokedSerials(ctx context.Context) ([]string, error) {
	out, err := strs(ctx, r.Query, `SELECT serial FROM agent_certs WHERE revoked_ts IS NOT NULL ORDER BY serial`)
	if err != nil {
		return nil, fmt.Errorf("revoked serials: %w", err)
	}
	return out, nil
}

// UseToken is Tx.UseToken of both stores: one conditional UPDATE, which
// either database applies atomically (of two enrollments racing for the
// last use, one updates no row), then, when it updated none, a read to
// tell a missing token, an unlimited one and a used-up one apart.
func (w Writes) UseToken(ctx context.Context, hash string) (int, error) {
	const what = "use token"
	ph := w.Dialect.Placeholder
	left, found := 0, false
	err := w.Returning(ctx, what, `UPDATE tokens SET uses_left = uses_left - 1
		WHERE hash = `+ph(1)+` AND uses_left > 0 RETURNING uses_left`, []any{hash}, func(row Row) error {
		found = true
		return row.Scan(&left)
	})
	if err != nil || found {
		return left, err
	}
	var uses *int64
	found = false
	err = w.Query(ctx, `SELECT uses_left FROM tokens WHERE hash = `+ph(1), []any{hash}, func(row Row) error {
		found = true
		return row.Scan(&uses)
	})
	switch {
	case err != nil:
		return 0, fmt.Errorf("%s: %w", what, err)
	case !found:
		return 0, fmt.Errorf("%s: %w", what, ErrNotFound)
	case uses == nil:
		return -1, nil
	}
	return 0, fmt.Errorf("%s: %w", what, ErrUsedUp)
}

// InsertAgentCert is Tx.InsertAgentCert of both stores (ErrExists when the
// serial is taken, without failing the transaction).
func (w Writes) InsertAgentCert(ctx context.Context, c *AgentCert) error {
	d := w.Dialect
	what := fmt.Sprintf("insert agent certificate %s", c.Serial)
	held, err := LabelsColumn(c.Labels)
	if err != nil {
		return fmt.Errorf("%s: labels: %w", what, err)
	}
	ps, args := d.values(1, c.Serial, c.ClusterID, c.NodeID, d.Time(c.NotBefore), d.Time(c.NotAfter), d.Time(c.IssuedTS),
		c.IssuedBy, d.nullTime(c.RevokedTS), c.RevokeReason, c.RevokedBy, held)
	n, err := w.Exec(ctx, what, `INSERT INTO agent_certs (`+certColumns+`) VALUES (`+ps+`) ON CONFLICT DO NOTHING`, args...)
	if err == nil && n == 0 {
		err = fmt.Errorf("%s: %w", what, ErrExists)
	}
	return err
}

// PruneAgentCerts is Tx.PruneAgentCerts of both stores.
func (w Writes) PruneAgentCerts(ctx context.Context, nodeID string, before time.Time) (int, error) {
	d := w.Dialect
	n, err := w.Exec(ctx, "prune agent certificates", `DELETE FROM agent_certs WHERE node_id = `+d.Placeholder(1)+
		` AND not_after < `+d.Placeholder(2), nodeID, d.Time(before))
	return int(n), err
}

// RetireAgentCert is Tx.RetireAgentCert of both stores.
func (w Writes) RetireAgentCert(ctx context.Context, serial string, at time.Time, reason, by string) (bool, error) {
	d := w.Dialect
	n, err := w.Exec(ctx, "retire agent certificate "+serial, `UPDATE agent_certs SET revoked_ts = `+d.Placeholder(1)+
		`, revoke_reason = `+d.Placeholder(2)+`, revoked_by = `+d.Placeholder(3)+
		` WHERE serial = `+d.Placeholder(4)+` AND revoked_ts IS NULL`, d.Time(at), reason, by, serial)
	return n == 1, err
}

// RevokeAgentCerts is Tx.RevokeAgentCerts of both stores.
func (w Writes) RevokeAgentCerts(ctx context.Context, clusterID, nodeID string, at time.Time, reason, by string) ([]string, error) {
	d := w.Dialect
	out := []string{}
	err := w.Returning(ctx, "revoke agent certificates", `UPDATE agent_certs SET revoked_ts = `+d.Placeholder(1)+
		`, revoke_reason = `+d.Placeholder(2)+`, revoked_by = `+d.Placeholder(3)+`
		WHERE node_id = `+d.Placeholder(4)+` AND (`+d.Placeholder(5)+` = '' OR cluster_id = `+d.Placeholder(6)+`)
		AND (revoked_ts IS NULL OR revoked_ts > `+d.Placeholder(7)+`) RETURNING serial`,
		[]any{d.Time(at), reason, by, nodeID, clusterID, clusterID, d.Time(at)}, func(row Row) error {
			var s string
			if err := row.Scan(&s); err != nil {
				return err
			}
			out = append(out, s)
			return nil
		})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// DeleteToken is Tx.DeleteToken of both stores: it removes a token
// (ErrNotFound when there is none) and, in the same transaction, its web UI
// sessions.
func (w Writes) DeleteToken(ctx context.Context, name string) error {
	ph := w.Dialect.Placeholder
	what := fmt.Sprintf("delete token %q", name)
	if _, err := w.Exec(ctx, what, `DELETE FROM ui_sessions WHERE token_hash IN (SELECT hash FROM tokens WHERE name = `+
		ph(1)+`)`, name); err != nil {
		return err
	}
	n, err := w.Exec(ctx, what, `DELETE FROM tokens WHERE name = `+ph(1), name)
	if err == nil && n == 0 {
		err = fmt.Errorf("%s: %w", what, ErrNotFound)
	}
	return err
}

const tokenColumns = `name, roles, hash, created_ts, expires_ts, cluster_id, uses_left, labels`

func (d Dialect) scanToken(row Row) (Token, error) {
	var t Token
	var uses *int64
	var held string
	if err := row.Scan(&t.Name, d.ListInto(&t.Roles), &t.Hash, d.timeInto(&t.CreatedTS), d.nullTimeInto(&t.ExpiresTS),
		&t.ClusterID, &uses, &held); err != nil {
		return t, err
	}
	var err error
	if t.Labels, err = labelsOfColumn(held); err != nil {
		return t, fmt.Errorf("token %s: labels: %w", t.Name, err)
	}
	if uses != nil {
		n := int(*uses)
		t.UsesLeft = &n
	}
	if len(t.Roles) == 0 {
		t.Roles = nil
	}
	return t, nil
}

// Tokens is Reader.Tokens of both stores.
func (r Reads) Tokens(ctx context.Context) ([]Token, error) {
	var out []Token
	err := r.Query(ctx, `SELECT `+tokenColumns+` FROM tokens ORDER BY name`, nil, func(row Row) error {
		t, err := r.Dialect.scanToken(row)
		if err != nil {
			return err
		}
		out = append(out, t)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("tokens: %w", err)
	}
	return out, nil
}

// TokenByHash is Reader.TokenByHash of both stores.
func (r Reads) TokenByHash(ctx context.Context, hash string) (*Token, error) {
	var t Token
	found, err := r.one(ctx, `SELECT `+tokenColumns+` FROM tokens WHERE hash = `+r.Dialect.Placeholder(1), []any{hash},
		func(row Row) (err error) {
			t, err = r.Dialect.scanToken(row)
			return err
		})
	if err != nil {
		return nil, fmt.Errorf("token: %w", err)
	}
	if !found {
		return nil, fmt.Errorf("token: %w", ErrNotFound)
	}
	return &t, nil
}

// InsertToken is Tx.InsertToken of both stores: it stores a new token
// (ErrExists when the hash is taken, or the name is, ignoring case, without
// failing the transaction). A zero CreatedTS is set to now.
func (w Writes) InsertToken(ctx context.Context, t *Token) error {
	d := w.Dialect
	stampNew(&t.CreatedTS, nil)
	what := fmt.Sprintf("insert token %q", t.Name)
	roles, err := d.List(t.Roles)
	if err != nil {
		return fmt.Errorf("%s: roles: %w", what, err)
	}
	var uses any
	if t.UsesLeft != nil {
		uses = *t.UsesLeft
	}
	held, err := LabelsColumn(t.Labels)
	if err != nil {
		return fmt.Errorf("%s: labels: %w", what, err)
	}
	ps, args := d.values(1, t.Name, roles, t.Hash, d.Time(t.CreatedTS), d.nullTime(t.ExpiresTS), t.ClusterID, uses, held)
	n, err := w.Exec(ctx, what, `INSERT INTO tokens (`+tokenColumns+`)
		VALUES (`+ps+`) ON CONFLICT DO NOTHING`, args...)
	if err == nil && n == 0 {
		err = fmt.Errorf("%s: %w", what, ErrExists)
	}
	return err
}
