package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

func setup(t *testing.T) (*DB, string) {
	t.Helper()
	file := filepath.Join(t.TempDir(), "test.db")
	db, err := Open(context.Background(), file, os.DirFS("testdata/migrations"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db, file
}

func TestOpenAppliesPragmasAndMigrations(t *testing.T) {
	t.Parallel()
	db, _ := setup(t)
	ctx := context.Background()
	var mode string
	var sync, fk, version int
	if err := db.W.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode); err != nil || mode != "wal" {
		t.Fatalf("journal_mode = %q, %v", mode, err)
	}
	if err := db.W.QueryRowContext(ctx, "PRAGMA synchronous").Scan(&sync); err != nil || sync != 2 {
		t.Fatalf("synchronous = %d, %v (want 2, FULL)", sync, err)
	}
	if err := db.W.QueryRowContext(ctx, "PRAGMA foreign_keys").Scan(&fk); err != nil || fk != 1 {
		t.Fatalf("foreign_keys = %d, %v", fk, err)
	}
	if err := db.W.QueryRowContext(ctx, "PRAGMA user_version").Scan(&version); err != nil || version != 2 {
		t.Fatalf("user_version = %d, %v", version, err)
	}
	if _, err := db.W.ExecContext(ctx, "INSERT INTO items (name, size) VALUES ('a', 1)"); err != nil {
		t.Fatalf("migrated schema: %v", err)
	}
}

func TestReopenDoesNotReapplyMigrations(t *testing.T) {
	t.Parallel()
	db, file := setup(t)
	ctx := context.Background()
	if _, err := db.W.ExecContext(ctx, "INSERT INTO items (name) VALUES ('kept')"); err != nil {
		t.Fatal(err)
	}
	db.Close()
	db2, err := Open(ctx, file, os.DirFS("testdata/migrations"))
	if err != nil {
		t.Fatal(err)
	}
	defer db2.Close()
	var n int
	if err := db2.R.QueryRowContext(ctx, "SELECT count(*) FROM items").Scan(&n); err != nil || n != 1 {
		t.Fatalf("rows after reopen = %d, %v", n, err)
	}
}

func TestInTxRollsBackOnErrorAndPanic(t *testing.T) {
	t.Parallel()
	db, _ := setup(t)
	ctx := context.Background()
	boom := errors.New("boom")
	err := db.InTx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.Exec("INSERT INTO items (name) VALUES ('x')"); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("InTx error = %v", err)
	}
	func() {
		defer func() { _ = recover() }()
		_ = db.InTx(ctx, func(tx *sql.Tx) error {
			_, _ = tx.Exec("INSERT INTO items (name) VALUES ('y')")
			panic("bad")
		})
	}()
	var n int
	if err := db.R.QueryRowContext(ctx, "SELECT count(*) FROM items").Scan(&n); err != nil || n != 0 {
		t.Fatalf("rows after rollbacks = %d, %v", n, err)
	}
	if err := db.InTx(ctx, func(tx *sql.Tx) error {
		_, err := tx.Exec("INSERT INTO items (name) VALUES ('z')")
		return err
	}); err != nil {
		t.Fatalf("writer unusable after rollback: %v", err)
	}
}

func TestReaderCannotWrite(t *testing.T) {
	t.Parallel()
	db, _ := setup(t)
	if _, err := db.R.Exec("INSERT INTO items (name) VALUES ('r')"); err == nil {
		t.Fatal("reader pool accepted a write")
	}
}

// Item 13 of the attack review: the database and its WAL files are 0600, on
// a new database and on one whose files a looser umask or an older version
// left readable by others.
func TestDatabaseFilesAreCreatedPrivate(t *testing.T) {
	t.Parallel()
	check := func(t *testing.T, file string) {
		t.Helper()
		for _, f := range []string{file, file + "-wal", file + "-shm"} {
			fi, err := os.Stat(f)
			if err != nil {
				t.Fatal(err)
			}
			if m := fi.Mode().Perm(); m != 0o600 {
				t.Errorf("%s has mode %04o, want 0600", filepath.Base(f), m)
			}
		}
	}
	t.Run("new", func(t *testing.T) {
		t.Parallel()
		db, file := setup(t)
		if _, err := db.W.Exec("INSERT INTO items(name) VALUES ('a')"); err != nil {
			t.Fatal(err)
		}
		check(t, file)
	})
	t.Run("existing", func(t *testing.T) {
		t.Parallel()
		db, file := setup(t)
		if _, err := db.W.Exec("INSERT INTO items(name) VALUES ('a')"); err != nil {
			t.Fatal(err)
		}
		db.Close() // checkpoints and removes -wal and -shm
		// Left behind as a crash would, readable by others.
		for _, f := range []string{file + "-wal", file + "-shm"} {
			if err := os.WriteFile(f, nil, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		for _, f := range []string{file, file + "-wal", file + "-shm"} {
			if err := os.Chmod(f, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		db2, err := Open(context.Background(), file, os.DirFS("testdata/migrations"))
		if err != nil {
			t.Fatal(err)
		}
		defer db2.Close()
		check(t, file)
	})
}

// TestInTxNoSyncCommitsUnsyncedAloneAndRollsBack: InTxNoSync's transaction
// commits with synchronous=NORMAL, and every transaction after it, on the
// one writer connection, with FULL again (whether it committed or rolled
// back); its writes are kept or undone as InTx's.
func TestInTxNoSyncCommitsUnsyncedAloneAndRollsBack(t *testing.T) {
	t.Parallel()
	db, _ := setup(t)
	ctx := context.Background()
	syncMode := func(q interface {
		QueryRowContext(context.Context, string, ...any) *sql.Row
	}) int {
		var mode int
		if err := q.QueryRowContext(ctx, "PRAGMA synchronous").Scan(&mode); err != nil {
			t.Fatal(err)
		}
		return mode
	}
	boom := errors.New("boom")
	for _, fail := range []bool{false, true} {
		err := db.InTxNoSync(ctx, func(tx *sql.Tx) error {
			if mode := syncMode(tx); mode != 1 {
				t.Errorf("synchronous in InTxNoSync = %d, want 1 (NORMAL)", mode)
			}
			if _, err := tx.ExecContext(ctx, "INSERT INTO items (name) VALUES (?)", fmt.Sprint("lazy-", fail)); err != nil {
				return err
			}
			if fail {
				return boom
			}
			return nil
		})
		if fail != errors.Is(err, boom) {
			t.Fatalf("InTxNoSync (fail %v) = %v", fail, err)
		}
		if err := db.InTx(ctx, func(tx *sql.Tx) error {
			if mode := syncMode(tx); mode != 2 {
				t.Errorf("synchronous in InTx after InTxNoSync (fail %v) = %d, want 2 (FULL)", fail, mode)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	var names []string
	rows, err := db.R.QueryContext(ctx, "SELECT name FROM items ORDER BY name")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			t.Fatal(err)
		}
		names = append(names, n)
	}
	if len(names) != 1 || names[0] != "lazy-false" {
		t.Errorf("items = %v, want the committed one alone", names)
	}
}
