package postgres

import (
	"context"
	"testing"

	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/core/store/pgtest"
	"github.com/musterhq/muster/core/store/storetest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// open opens a store on dsn, closed when the test ends.
func open(t *testing.T, dsn string) *Store {
	t.Helper()
	s, err := Open(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// TestStore runs the store behaviour suite on fresh PostgreSQL databases.
func TestStore(t *testing.T) {
	storetest.Run(t, func(t *testing.T) storetest.Opener {
		dsn := pgtest.NewDatabase(t)
		return func(t *testing.T) store.Store { return open(t, dsn) }
	})
}
