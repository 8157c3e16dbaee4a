package sqlite

import (
	"context"
	"database/sql"
	"path/filepath"
	"strings"
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

// TestUpgradeRefusesTokenNamesThatDifferOnlyInCase: a database made before
// names were unique ignoring case may hold alice and Alice; the upgrade stops
// with one clear error rather than pick one, and changes nothing.
func TestUpgradeRefusesTokenNamesThatDifferOnlyInCase(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	s, err := Open(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	// Back to the schema before the case-insensitive index, with two names
	// that differ only in case.
	if _, err := s.db.W.ExecContext(ctx, `DROP INDEX tokens_name_nocase;
		INSERT INTO tokens (name, roles, hash, created_ts) VALUES ('alice', '["operator"]', 'h1', 0), ('Alice', '["approver"]', 'h2', 0);
		PRAGMA user_version = 5`); err != nil {
		t.Fatal(err)
	}
	s.Close()
	_, err = Open(ctx, dir)
	if err == nil || !strings.Contains(err.Error(), "differ only in case") {
		t.Fatalf("open with alice and Alice: %v, want an error saying the names differ only in case", err)
	}
	t.Logf("%v", err)
	// Nothing changed: the database is still at version 5, both tokens kept.
	db, err := sql.Open("sqlite3", filepath.Join(dir, FileName))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var version, n int
	if err := db.QueryRowContext(ctx, "PRAGMA user_version").Scan(&version); err != nil {
		t.Fatal(err)
	}
	if err := db.QueryRowContext(ctx, "SELECT count(*) FROM tokens").Scan(&n); err != nil {
		t.Fatal(err)
	}
	if version != 5 || n != 2 {
		t.Fatalf("after the refused upgrade: user_version %d, %d tokens; want 5 and 2", version, n)
	}
}
