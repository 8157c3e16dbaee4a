//go:build !cgo

package sqlite

import "fmt"

// translate wraps err with what. Without cgo the SQLite driver refuses to open
// a database (its own error says cgo is required), so no constraint error can
// reach this point: the binary still builds, for the client commands, on a
// machine without a C compiler (see "Platforms" in docs/operations.md).
func translate(err error, what string) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s: %w", what, err)
}
