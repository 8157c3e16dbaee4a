package sqlite

import (
	"context"
	"testing"

	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/core/store/storetest"
)

// TestStore runs the store behaviour suite on SQLite files in temporary
// directories.
func TestStore(t *testing.T) {
	storetest.Run(t, func(t *testing.T) storetest.Opener {
		dir := t.TempDir()
		return func(t *testing.T) store.Store {
			t.Helper()
			s, err := Open(context.Background(), dir)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			return s
		}
	})
}
