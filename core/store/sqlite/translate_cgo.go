//go:build cgo

package sqlite

import (
	"errors"
	"fmt"

	"github.com/mattn/go-sqlite3"

	"github.com/musterhq/muster/core/store"
)

// translate maps SQLite constraint errors onto the store's sentinels.
func translate(err error, what string) error {
	if err == nil {
		return nil
	}
	var se sqlite3.Error
	if errors.As(err, &se) {
		switch se.ExtendedCode {
		case sqlite3.ErrConstraintPrimaryKey, sqlite3.ErrConstraintUnique:
			return fmt.Errorf("%s: %w", what, store.ErrExists)
		case sqlite3.ErrConstraintForeignKey:
			return fmt.Errorf("%s: %w (foreign key)", what, store.ErrNotFound)
		}
	}
	return fmt.Errorf("%s: %w", what, err)
}
