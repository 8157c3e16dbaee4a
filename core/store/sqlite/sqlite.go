// Package sqlite implements core/store on one SQLite file (<data_dir>/core.db),
// opened through shared/sqlite: WAL, one writer connection, a pool of readers
// and the embedded migrations of this package.
//
// Times are stored as integer microseconds since the Unix epoch in UTC, so
// ordering by a time column is ordering by time. JSON fields (args, progress,
// kinds, roles, event data) are stored as text.
package sqlite

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"io/fs"
	"path/filepath"
	"sync/atomic"

	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/live"
	shsqlite "github.com/musterhq/muster/shared/sqlite"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// FileName is the name of the database file inside the core's data directory.
const FileName = "core.db"

// Store is a store.Store on SQLite.
type Store struct {
	db   *shsqlite.DB
	rows atomic.Int64

	feed *store.Feed
	// outbox is swapped by SetOutbox at any time (a reload); each
	// Update reads it once.
	outbox live.Value[store.Outbox]
}

var _ store.Store = (*Store)(nil)

// Open opens (creating it if needed) the store in dataDir/core.db.
func Open(ctx context.Context, dataDir string) (*Store, error) {
	return OpenFile(ctx, filepath.Join(dataDir, FileName))
}

// OpenFile opens (creating it if needed) the store in the database file file.
func OpenFile(ctx context.Context, file string) (*Store, error) {
	migrations, err := fs.Sub(migrationFiles, "migrations")
	if err != nil {
		return nil, err
	}
	db, err := shsqlite.Open(ctx, file, migrations)
	if err != nil {
		return nil, err
	}
	var latest int64
	if err := db.R.QueryRowContext(ctx, "SELECT COALESCE(MAX(seq), 0) FROM events").Scan(&latest); err != nil {
		db.Close()
		return nil, fmt.Errorf("open %s: %w", file, err)
	}
	return &Store{db: db, feed: store.NewFeed(latest)}, nil
}

// Read runs fn in a read transaction on the reader pool: one consistent
// snapshot of the database.
func (s *Store) Read(ctx context.Context, fn func(r store.Reader) error) error {
	tx, err := s.db.R.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return fmt.Errorf("begin read: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	return fn(newReader(tx))
}

// Update runs fn in one write transaction. Subscribers are notified after the
// commit when fn appended events.
func (s *Store) Update(ctx context.Context, fn func(tx store.Tx) error) error {
	w := newWriter()
	w.Outbox = s.Outbox()
	inTx := s.db.InTx
	if store.LazyCommit(ctx) {
		inTx = s.db.InTxNoSync
	}
	err := inTx(ctx, func(tx *sql.Tx) error {
		w.tx = tx
		if err := fn(w); err != nil {
			return err
		}
		if w.lastEvent > 0 && store.LazyCommit(ctx) {
			return store.ErrLazyEvent
		}
		return nil
	})
	if err != nil {
		return err
	}
	s.rows.Add(w.rows)
	if w.lastEvent > 0 {
		s.feed.Publish(w.lastEvent)
	}
	return nil
}

// Subscribe returns a channel receiving the newest event sequence number after
// every commit that appended events (see store.Feed).
func (s *Store) Subscribe() (<-chan int64, func()) { return s.feed.Subscribe() }

// RowsWritten counts the rows inserted, updated or deleted by committed
// Updates since Open.
func (s *Store) RowsWritten() int64 { return s.rows.Load() }

// SetOutbox makes AppendEvent enqueue notification deliveries; safe to
// call while Updates run (each uses the outbox it started with).
func (s *Store) SetOutbox(o store.Outbox) { s.outbox.Store(o) }

// Outbox returns the outbox in use (nil: none).
func (s *Store) Outbox() store.Outbox { return s.outbox.Load() }

// Close closes subscriber channels and the database.
func (s *Store) Close() error {
	if !s.feed.Close() {
		return nil
	}
	return s.db.Close()
}
