package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/musterhq/muster/core/store"
	shsqlite "github.com/musterhq/muster/shared/sqlite"
)

const playbookColumns = `name, version, description, document, digest, created_by, created_ts`

func scanPlaybook(s scanner) (*store.Playbook, error) {
	var p store.Playbook
	var created int64
	if err := s.Scan(&p.Name, &p.Version, &p.Description, &p.Document, &p.Digest, &p.CreatedBy, &created); err != nil {
		return nil, err
	}
	p.CreatedTS = shsqlite.FromMicros(created)
	return &p, nil
}

func (r *reader) playbooks(ctx context.Context, q string, args ...any) ([]store.Playbook, error) {
	rows, err := r.tx.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []store.Playbook
	for rows.Next() {
		p, err := scanPlaybook(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, *p)
	}
	return out, rows.Err()
}

// Playbook returns one version of a playbook, the newest when version is 0.
func (r *reader) Playbook(ctx context.Context, name string, version int) (*store.Playbook, error) {
	q, args := `SELECT `+playbookColumns+` FROM playbooks WHERE name = ? ORDER BY version DESC LIMIT 1`, []any{name}
	if version > 0 {
		q, args = `SELECT `+playbookColumns+` FROM playbooks WHERE name = ? AND version = ?`, []any{name, version}
	}
	p, err := scanPlaybook(r.tx.QueryRowContext(ctx, q, args...))
	if errors.Is(err, sql.ErrNoRows) {
		if version > 0 {
			return nil, fmt.Errorf("playbook %s version %d: %w", name, version, store.ErrNotFound)
		}
		return nil, fmt.Errorf("playbook %s: %w", name, store.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("playbook %s: %w", name, err)
	}
	return p, nil
}

// Playbooks lists the newest version of every playbook, by name.
func (r *reader) Playbooks(ctx context.Context) ([]store.Playbook, error) {
	out, err := r.playbooks(ctx, `SELECT `+playbookColumns+` FROM playbooks p
		WHERE version = (SELECT MAX(version) FROM playbooks WHERE name = p.name) ORDER BY name`)
	if err != nil {
		return nil, fmt.Errorf("playbooks: %w", err)
	}
	return out, nil
}

// PlaybookVersions lists every version of a playbook, oldest first.
func (r *reader) PlaybookVersions(ctx context.Context, name string) ([]store.Playbook, error) {
	out, err := r.playbooks(ctx, `SELECT `+playbookColumns+` FROM playbooks WHERE name = ? ORDER BY version`, name)
	if err != nil {
		return nil, fmt.Errorf("versions of playbook %s: %w", name, err)
	}
	return out, nil
}

// InsertPlaybook stores a new version of a playbook. A zero CreatedTS is
// set to now.
func (w *writer) InsertPlaybook(ctx context.Context, p *store.Playbook) error {
	if p.CreatedTS.IsZero() {
		p.CreatedTS = now()
	}
	_, _, err := w.exec(ctx, fmt.Sprintf("insert playbook %s version %d", p.Name, p.Version),
		`INSERT INTO playbooks (`+playbookColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?)`,
		p.Name, p.Version, p.Description, p.Document, p.Digest, p.CreatedBy, shsqlite.Micros(p.CreatedTS))
	return err
}
