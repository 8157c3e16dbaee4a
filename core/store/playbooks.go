package store

import (
	"context"
	"fmt"
)

// Playbooks, in both stores.

const playbookColumns = `name, version, description, document, digest, created_by, created_ts, source`

func (d Dialect) scanPlaybook(row Row) (Playbook, error) {
	var p Playbook
	err := row.Scan(&p.Name, &p.Version, &p.Description, &p.Document, &p.Digest, &p.CreatedBy, d.timeInto(&p.CreatedTS), &p.Source)
	return p, err
}

// playbooks runs a statement of playbook rows.
func (r Reads) playbooks(ctx context.Context, stmt string, args ...any) ([]Playbook, error) {
	var out []Playbook
	err := r.Query(ctx, stmt, args, func(row Row) error {
		p, err := r.Dialect.scanPlaybook(row)
		if err != nil {
			return err
		}
		out = append(out, p)
		return nil
	})
	return out, err
}

// Playbook is Reader.Playbook of both stores: one version of a playbook,
// the newest when version is 0.
func (r Reads) Playbook(ctx context.Context, name string, version int) (*Playbook, error) {
	ph := r.Dialect.Placeholder
	stmt, args := `SELECT `+playbookColumns+` FROM playbooks WHERE name = `+ph(1)+` ORDER BY version DESC LIMIT 1`, []any{name}
	if version > 0 {
		stmt, args = `SELECT `+playbookColumns+` FROM playbooks WHERE name = `+ph(1)+` AND version = `+ph(2), []any{name, version}
	}
	out, err := r.playbooks(ctx, stmt, args...)
	switch {
	case err != nil:
		return nil, fmt.Errorf("playbook %s: %w", name, err)
	case len(out) == 0 && version > 0:
		return nil, fmt.Errorf("playbook %s version %d: %w", name, version, ErrNotFound)
	case len(out) == 0:
		return nil, fmt.Errorf("playbook %s: %w", name, ErrNotFound)
	}
	return &out[0], nil
}

// Playbooks is Reader.Playbooks of both stores: the newest version of every
// playbook, by name.
func (r Reads) Playbooks(ctx context.Context) ([]Playbook, error) {
	out, err := r.playbooks(ctx, `SELECT `+playbookColumns+` FROM playbooks p
		WHERE version = (SELECT MAX(version) FROM playbooks WHERE name = p.name) ORDER BY name`)
	if err != nil {
		return nil, fmt.Errorf("playbooks: %w", err)
	}
	return out, nil
}

// PlaybookVersions is Reader.PlaybookVersions of both stores: every version
// of a playbook, oldest first.
func (r Reads) PlaybookVersions(ctx context.Context, name string) ([]Playbook, error) {
	out, err := r.playbooks(ctx, `SELECT `+playbookColumns+` FROM playbooks WHERE name = `+r.Dialect.Placeholder(1)+
		` ORDER BY version`, name)
	if err != nil {
		return nil, fmt.Errorf("versions of playbook %s: %w", name, err)
	}
	return out, nil
}

// InsertPlaybook is Tx.InsertPlaybook of both stores: it stores a new
// version of a playbook (ErrExists when it is taken, without failing the
// transaction). A zero CreatedTS is set to now.
func (w Writes) InsertPlaybook(ctx context.Context, p *Playbook) error {
	d := w.Dialect
	stampNew(&p.CreatedTS, nil)
	what := fmt.Sprintf("insert playbook %s version %d", p.Name, p.Version)
	ps, args := d.values(1, p.Name, p.Version, p.Description, p.Document, p.Digest, p.CreatedBy, d.Time(p.CreatedTS), p.Source)
	n, err := w.Exec(ctx, what, `INSERT INTO playbooks (`+playbookColumns+`) VALUES (`+ps+`) ON CONFLICT DO NOTHING`, args...)
	if err == nil && n == 0 {
		err = fmt.Errorf("%s: %w", what, ErrExists)
	}
	return err
}
