// Package sqlite opens muster's SQLite databases one way: WAL, synchronous=FULL,
// a busy timeout, foreign keys, immediate write transactions, one writer
// connection beside a pool of readers, and embedded migrations applied in order.
// Every write goes through InTx, or InTxNoSync for a commit that may be lost
// in a power loss (docs/notifications.md, "Cost").
package sqlite

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path"
	"sort"
	"strconv"
	"strings"

	_ "github.com/mattn/go-sqlite3" // registers the "sqlite3" driver
)

// DB is a SQLite database with one writer connection and a pool of readers.
type DB struct {
	// W is the only connection that writes. Use InTx.
	W *sql.DB
	// R serves reads; under WAL they never wait for the writer.
	R *sql.DB
}

const pragmas = "_journal_mode=WAL&_synchronous=FULL&_busy_timeout=5000&_foreign_keys=on&_stmt_cache_size=64"

// Open opens (creating if needed) the database at file and applies the
// migrations found in migrations (files named NNN_name.sql, applied in order
// of NNN, each in its own transaction, tracked by PRAGMA user_version).
//
// The database and its -wal and -shm files are mode 0600 whatever the umask
// and whatever mode an existing file had: they hold every action's args and
// output, and the core's token hashes.
func Open(ctx context.Context, file string, migrations fs.FS) (*DB, error) {
	if err := makePrivate(file); err != nil {
		return nil, fmt.Errorf("open %s: %w", file, err)
	}
	base := "file:" + (&url.URL{Path: file}).EscapedPath() + "?" + pragmas
	w, err := sql.Open("sqlite3", base+"&_txlock=immediate")
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", file, err)
	}
	w.SetMaxOpenConns(1)
	w.SetMaxIdleConns(1)
	w.SetConnMaxLifetime(0)
	w.SetConnMaxIdleTime(0)
	if err := w.PingContext(ctx); err != nil {
		w.Close()
		return nil, fmt.Errorf("open %s: %w", file, err)
	}
	// The first connection made the -wal and -shm files (SQLite gives them
	// the database's mode); an older pair may have had another.
	for _, suffix := range []string{"-wal", "-shm"} {
		if err := os.Chmod(file+suffix, privateMode); err != nil && !errors.Is(err, fs.ErrNotExist) {
			w.Close()
			return nil, fmt.Errorf("open %s: %w", file, err)
		}
	}
	db := &DB{W: w}
	if migrations != nil {
		if err := db.migrate(ctx, migrations); err != nil {
			w.Close()
			return nil, fmt.Errorf("migrate %s: %w", file, err)
		}
	}
	r, err := sql.Open("sqlite3", base+"&_txlock=deferred&_query_only=1")
	if err != nil {
		w.Close()
		return nil, fmt.Errorf("open %s: %w", file, err)
	}
	r.SetMaxOpenConns(4)
	r.SetMaxIdleConns(4)
	db.R = r
	return db, nil
}

// privateMode is the mode of every database file.
const privateMode = 0o600

// makePrivate creates file with mode 0600 when it does not exist (a umask
// only removes bits), and sets 0600 on one that does.
func makePrivate(file string) error {
	f, err := os.OpenFile(file, os.O_RDWR|os.O_CREATE, privateMode)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Chmod(privateMode)
}

// Close closes the readers, then the writer (which checkpoints the WAL).
func (db *DB) Close() error {
	var errs []error
	if db.R != nil {
		errs = append(errs, db.R.Close())
	}
	errs = append(errs, db.W.Close())
	return errors.Join(errs...)
}

// InTx runs fn in one write transaction. It commits when fn returns nil, and
// rolls back when fn returns an error or panics (the panic goes on).
func (db *DB) InTx(ctx context.Context, fn func(tx *sql.Tx) error) (err error) {
	tx, err := db.W.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	return inTx(tx, fn)
}

// InTxNoSync is InTx with a commit that does not wait for the disk
// (synchronous=NORMAL for this commit alone): a crash or a power loss may
// lose it, and the commits of the same kind just before it, but never one
// followed by an ordinary commit, whose sync makes the log durable up to
// it. The writer connection is held throughout, so no other transaction
// commits unsynced.
func (db *DB) InTxNoSync(ctx context.Context, fn func(tx *sql.Tx) error) (err error) {
	conn, err := db.W.Conn(ctx)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "PRAGMA synchronous = NORMAL"); err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer func() {
		if _, rerr := conn.ExecContext(context.WithoutCancel(ctx), "PRAGMA synchronous = FULL"); rerr != nil {
			// Never hand the connection on unsynced: drop it.
			_ = conn.Raw(func(any) error { return driver.ErrBadConn })
			err = errors.Join(err, fmt.Errorf("synchronous back to FULL: %w", rerr))
		}
	}()
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	return inTx(tx, fn)
}

func inTx(tx *sql.Tx, fn func(tx *sql.Tx) error) (err error) {
	defer func() {
		if p := recover(); p != nil {
			_ = tx.Rollback()
			panic(p)
		}
		if err != nil {
			_ = tx.Rollback()
		}
	}()
	if err = fn(tx); err != nil {
		return err
	}
	if err = tx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

type migration struct {
	version int
	name    string
}

func (db *DB) migrate(ctx context.Context, migrations fs.FS) error {
	entries, err := fs.Glob(migrations, "*.sql")
	if err != nil {
		return err
	}
	var ms []migration
	for _, e := range entries {
		base := path.Base(e)
		num, _, ok := strings.Cut(base, "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil || v <= 0 {
			return fmt.Errorf("migration %q: name must be NNN_name.sql", base)
		}
		ms = append(ms, migration{v, e})
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].version < ms[j].version })
	var current int
	if err := db.W.QueryRowContext(ctx, "PRAGMA user_version").Scan(&current); err != nil {
		return err
	}
	for _, m := range ms {
		if m.version <= current {
			continue
		}
		body, err := fs.ReadFile(migrations, m.name)
		if err != nil {
			return err
		}
		err = db.InTx(ctx, func(tx *sql.Tx) error {
			if _, err := tx.ExecContext(ctx, string(body)); err != nil {
				return fmt.Errorf("%s: %w", m.name, err)
			}
			_, err := tx.ExecContext(ctx, fmt.Sprintf("PRAGMA user_version = %d", m.version))
			return err
		})
		if err != nil {
			return err
		}
	}
	return nil
}
