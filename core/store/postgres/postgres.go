// Package postgres implements core/store on PostgreSQL (13 or newer), for
// several core replicas sharing one database (docs/architecture.md,
// "Several core replicas", and docs/high-availability.md).
//
// It keeps the semantics core/store/sqlite has with its single writer:
//   - Update runs in a SERIALIZABLE transaction and is run again, from the
//     start, when PostgreSQL reports a serialization failure or a deadlock;
//   - Read runs in a REPEATABLE READ READ ONLY transaction: one snapshot;
//   - events are numbered in commit order (an advisory lock, taken before the
//     first event of a transaction, is held until it commits), so a reader
//     that has seen event n never finds a smaller one later;
//   - Subscribe hears the commits of every replica through LISTEN/NOTIFY,
//     once Start listens (a shared/startstop part: Open starts nothing).
//
// Migrations are embedded and applied under an advisory lock, so replicas may
// start together. Times are timestamptz at microsecond precision; the JSON
// the record carried is kept as text. PostgreSQL text cannot hold a NUL byte:
// one in a string (an action's output, say) is stored as U+FFFD.
package postgres

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/live"
	"github.com/musterhq/muster/shared/startstop"
)

// MinVersion is the oldest PostgreSQL major version the store runs on.
const MinVersion = 13

// NOTIFY channels: the newest event number; a cluster to pass now.
const (
	eventsChannel = "muster_events"
	nudgeChannel  = "muster_nudges"
)

// Advisory lock keys (one 64-bit space per database).
const (
	lockMigrate int64 = 0x6d75737465720001 // "muster" + 1
	lockEvents  int64 = 0x6d75737465720002
)

// DefaultMaxConns is the connection pool's size unless the DSN sets
// pool_max_conns.
const DefaultMaxConns = 16

// maxAttempts bounds how often Update runs fn after serialization failures.
const maxAttempts = 20

// Store is a store.Store on PostgreSQL. Its listener for other replicas'
// commits and nudges is a shared/startstop part: Start, Stop.
type Store struct {
	startstop.Base
	pool     *pgxpool.Pool
	where    string // host:port/database, for errors
	password string // scrubbed from the server's errors
	rows     atomic.Int64

	feed *store.Feed
	// outbox is swapped by SetOutbox at any time (a reload); each
	// Update reads it once.
	outbox live.Value[store.Outbox]

	nudges chan string
}

var (
	_ store.Store       = (*Store)(nil)
	_ startstop.Service = (*Store)(nil)
)

// ErrAmbiguousURL is a postgres:// URL with an @ other than the one that
// ends its user info: a password holding an unescaped @, /, ? or #.
var ErrAmbiguousURL = errors.New("store.dsn: the URL has an @ other than the one ending its user info " +
	"(write an @ of the password as %40, a / as %2F, a ? as %3F, a # as %23); nothing of it is shown")

// Open connects to the database dsn names (a postgres:// URL or key=value
// pairs), checks the server's version and applies the migrations. It
// starts nothing: Start listens for other replicas' events. A bad DSN, an
// unreachable server or one older than MinVersion is one clear error, which
// names the DSN only as Describe shows it: a password never appears.
func Open(ctx context.Context, dsn string) (*Store, error) {
	if ambiguousURL(dsn) {
		// pgx would cut the password at an @ or a / of it and take
		// the rest for the host or the database, which its errors then
		// show ("lookup Rest0fPass@db.example"): it never sees the string.
		return nil, ErrAmbiguousURL
	}
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		// pgx's message quotes the string, and its redaction misses a
		// password it could not parse: nothing of it is shown.
		return nil, errors.New("store.dsn: not a connection string pgx can read (a postgres:// URL or key=value pairs); " +
			"is a character of the password (@, :, / or a space) not escaped?")
	}
	if cfg.ConnConfig.ConnectTimeout == 0 {
		cfg.ConnConfig.ConnectTimeout = 5 * time.Second
	}
	if !strings.Contains(dsn, "pool_max_conns") {
		// Passes, API calls and sweeps each hold a connection for one
		// transaction; pgx's default (the number of CPUs, at least 4)
		// would make them queue on a small machine.
		cfg.MaxConns = DefaultMaxConns
	}
	where, pw := Describe(dsn), cfg.ConnConfig.Password
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("store.dsn (%s): %s", where, scrub(oneLine(err), pw))
	}
	fail := func(err error) (*Store, error) {
		pool.Close()
		return nil, err
	}
	var num int
	if err := pool.QueryRow(ctx, "SELECT current_setting('server_version_num')::int").Scan(&num); err != nil {
		return fail(fmt.Errorf("cannot reach PostgreSQL at %s: %s", where, scrub(oneLine(err), pw)))
	}
	if err := checkVersion(num); err != nil {
		return fail(fmt.Errorf("PostgreSQL at %s %w", where, err))
	}
	if err := migrate(ctx, pool); err != nil {
		return fail(fmt.Errorf("migrate PostgreSQL at %s: %s", where, scrub(oneLine(err), pw)))
	}
	var latest int64
	if err := pool.QueryRow(ctx, "SELECT COALESCE(MAX(seq), 0) FROM events").Scan(&latest); err != nil {
		return fail(fmt.Errorf("PostgreSQL at %s: %s", where, scrub(oneLine(err), pw)))
	}
	return &Store{pool: pool, where: where, password: pw, feed: store.NewFeed(latest), nudges: make(chan string, 64)}, nil
}

// Start listens (LISTEN/NOTIFY) for the commits and nudges of every replica
// until Stop, Close or the end of ctx. It opens the listening connection
// before it returns, so a server that refuses it is its error; then it
// announces the newest event, so that no commit made since Open goes
// unannounced.
func (s *Store) Start(ctx context.Context) error {
	ctx, done, err := s.StartInit(ctx)
	if err != nil {
		return err
	}
	conn, err := s.listen(ctx)
	if err == nil {
		if err = s.announceLatest(ctx); err != nil {
			conn.Close(context.Background())
		}
	}
	if err != nil {
		done()
		return fmt.Errorf("PostgreSQL at %s: listen: %s", s.where, scrub(oneLine(err), s.password))
	}
	go func() {
		defer done()
		s.listenLoop(ctx, conn)
	}()
	return nil
}

// announceLatest publishes the newest event number to the subscribers. A
// listener calls it once it listens, so that nothing committed before is
// missed.
func (s *Store) announceLatest(ctx context.Context) error {
	var seq int64
	if err := s.pool.QueryRow(ctx, "SELECT COALESCE(MAX(seq), 0) FROM events").Scan(&seq); err != nil {
		return err
	}
	s.feed.Publish(seq)
	return nil
}

// checkVersion refuses a server older than MinVersion; num is its
// server_version_num (130004 for 13.4; 90624 for 9.6.24).
func checkVersion(num int) error {
	if major := num / 10000; major < MinVersion {
		ver := fmt.Sprintf("%d.%d", major, num%10000)
		if major < 10 {
			ver = fmt.Sprintf("%d.%d.%d", major, num/100%100, num%100)
		}
		return fmt.Errorf("is version %s; muster needs %d or newer", ver, MinVersion)
	}
	return nil
}

// scrub removes a password from a message, should a driver's error ever
// quote it.
func scrub(msg, password string) string {
	if password == "" {
		return msg
	}
	return strings.ReplaceAll(msg, password, "xxxxx")
}

// oneLine keeps an error on one line (PostgreSQL details may span several).
func oneLine(err error) string {
	return strings.Join(strings.Fields(err.Error()), " ")
}

// Read runs fn in a REPEATABLE READ READ ONLY transaction: one snapshot.
func (s *Store) Read(ctx context.Context, fn func(r store.Reader) error) error {
	tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return translateConn(fmt.Errorf("begin read: %w", err))
	}
	defer func() { _ = tx.Rollback(context.Background()) }()
	return translateConn(fn(newReader(tx)))
}

// Update runs fn in one SERIALIZABLE transaction, and runs it again (up to
// maxAttempts times, with a short random pause) when PostgreSQL aborts it
// for a serialization failure or a deadlock. Subscribers are notified after
// the commit when fn appended events; other replicas hear of it by NOTIFY.
//
// When ctx carries a store.Fence, the transaction first checks that the
// fence's lease is still held at that epoch and unexpired, and writes
// nothing otherwise (store.ErrFenced). Being serializable, it also fails if
// the lease changes hands before it commits.
func (s *Store) Update(ctx context.Context, fn func(tx store.Tx) error) error {
	var w *writer
	fence, fenced := store.FenceOf(ctx)
	err := s.serializable(ctx, func(tx pgx.Tx) error {
		w = newWriter(tx)
		w.Outbox = s.Outbox()
		if fenced {
			if err := checkFence(ctx, tx, fence); err != nil {
				return err
			}
		}
		if store.LazyCommit(ctx) {
			if _, err := tx.Exec(ctx, "SET LOCAL synchronous_commit = off"); err != nil {
				return fmt.Errorf("lazy commit: %w", err)
			}
		}
		if err := fn(w); err != nil {
			return err
		}
		if w.lastEvent > 0 && store.LazyCommit(ctx) {
			return store.ErrLazyEvent
		}
		if w.lastEvent > 0 {
			// Delivered to every listener when, and only if, the commit succeeds.
			if _, err := tx.Exec(ctx, "SELECT pg_notify($1, $2)", eventsChannel, strconv.FormatInt(w.lastEvent, 10)); err != nil {
				return fmt.Errorf("notify: %w", err)
			}
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

// checkFence refuses the transaction unless f's lease is current.
func checkFence(ctx context.Context, tx pgx.Tx, f store.Fence) error {
	var ok bool
	err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM leases WHERE cluster_id = $1 AND holder = $2
		AND epoch = $3 AND expires_ts > now())`, f.ClusterID, f.Holder, f.Epoch).Scan(&ok)
	if err != nil {
		return fmt.Errorf("check lease of %s: %w", f.ClusterID, err)
	}
	if !ok {
		return fmt.Errorf("cluster %s, epoch %d of %s: %w", f.ClusterID, f.Epoch, f.Holder, store.ErrFenced)
	}
	return nil
}

// serializable runs fn in a SERIALIZABLE transaction, again after a
// serialization failure or a deadlock, and commits it. An error from a
// broken connection is store.ErrUnavailable.
func (s *Store) serializable(ctx context.Context, fn func(tx pgx.Tx) error) error {
	for attempt := 1; ; attempt++ {
		err := s.txOnce(ctx, fn)
		if err == nil {
			return nil
		}
		if !retryable(err) || attempt >= maxAttempts {
			return translateConn(err)
		}
		pause := time.Duration(rand.Int64N(int64(time.Millisecond) << min(attempt, 6)))
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (retrying after: %v)", ctx.Err(), err)
		case <-time.After(pause):
		}
	}
}

func (s *Store) txOnce(ctx context.Context, fn func(tx pgx.Tx) error) (err error) {
	tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.Serializable})
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer func() {
		if p := recover(); p != nil {
			_ = tx.Rollback(context.Background())
			panic(p)
		}
		if err != nil {
			_ = tx.Rollback(context.Background())
		}
	}()
	if err = fn(tx); err != nil {
		return err
	}
	if err = tx.Commit(ctx); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

// retryable reports a serialization failure or a deadlock: the transaction
// did nothing and may run again.
func retryable(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && (pe.Code == "40001" || pe.Code == "40P01")
}

// translateConn marks an error of a connection that could not be made or
// broke (the server is down, restarting or unreachable) as
// store.ErrUnavailable.
func translateConn(err error) error {
	if err == nil || errors.Is(err, store.ErrUnavailable) || errors.Is(err, context.Canceled) {
		return err
	}
	var pe *pgconn.PgError
	var ce *pgconn.ConnectError
	var ne net.Error
	switch {
	case errors.As(err, &pe):
		// connection_exception, admin_shutdown, crash_shutdown, cannot_connect_now
		if !strings.HasPrefix(pe.Code, "08") && pe.Code != "57P01" && pe.Code != "57P02" && pe.Code != "57P03" {
			return err
		}
	case errors.As(err, &ce), errors.As(err, &ne), errors.Is(err, pgconn.ErrConnClosed),
		errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
	default:
		return err
	}
	return fmt.Errorf("%w: %w", store.ErrUnavailable, err)
}

// listen opens the connection that receives other replicas' events.
func (s *Store) listen(ctx context.Context) (*pgx.Conn, error) {
	conn, err := pgx.ConnectConfig(ctx, s.pool.Config().ConnConfig.Copy())
	if err != nil {
		return nil, err
	}
	if _, err := conn.Exec(ctx, "LISTEN "+eventsChannel+"; LISTEN "+nudgeChannel); err != nil {
		conn.Close(context.Background())
		return nil, err
	}
	return conn, nil
}

// listenLoop forwards notifications to the subscribers. When the connection
// breaks, it connects again (backing off up to 2 s) and reads the newest
// event number, so that no commit made meanwhile goes unannounced.
func (s *Store) listenLoop(ctx context.Context, conn *pgx.Conn) {
	backoff := 100 * time.Millisecond
	for {
		for conn == nil {
			select {
			case <-ctx.Done():
				return
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, 2*time.Second)
			c, err := s.listen(ctx)
			if err != nil {
				continue
			}
			if err := s.announceLatest(ctx); err != nil {
				c.Close(context.Background())
				continue
			}
			conn, backoff = c, 100*time.Millisecond
		}
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			conn.Close(context.Background())
			conn = nil
			if ctx.Err() != nil {
				return
			}
			continue
		}
		switch n.Channel {
		case eventsChannel:
			if seq, err := strconv.ParseInt(n.Payload, 10, 64); err == nil {
				s.feed.Publish(seq)
			}
		case nudgeChannel:
			select { // a nudge is a hint: drop it rather than wait
			case s.nudges <- n.Payload:
			default:
			}
		}
	}
}

// PublishNudge asks every replica, this one included, for a pass of the
// cluster now; the one holding its lease makes it (Nudges).
func (s *Store) PublishNudge(ctx context.Context, clusterID string) error {
	if _, err := s.pool.Exec(ctx, "SELECT pg_notify($1, $2)", nudgeChannel, clusterID); err != nil {
		return translateConn(fmt.Errorf("nudge %s: %w", clusterID, err))
	}
	return nil
}

// Nudges receives the clusters nudged by PublishNudge on any replica, while
// Start listens. It has one reader; nudges that find it full are dropped.
func (s *Store) Nudges() <-chan string { return s.nudges }

// Subscribe returns a channel receiving the newest event sequence number
// after every commit, by any replica, that appended events (see store.Feed).
func (s *Store) Subscribe() (<-chan int64, func()) { return s.feed.Subscribe() }

// SetOutbox makes AppendEvent enqueue notification deliveries; safe to
// call while Updates run (each uses the outbox it started with).
func (s *Store) SetOutbox(o store.Outbox) { s.outbox.Store(o) }

// Outbox returns the outbox in use (nil: none).
func (s *Store) Outbox() store.Outbox { return s.outbox.Load() }

// RowsWritten counts the rows inserted, updated or deleted by committed
// Updates since Open.
func (s *Store) RowsWritten() int64 { return s.rows.Load() }

// Close stops listening (Stop), closes subscriber channels and the pool.
func (s *Store) Close() error {
	s.Stop()
	if !s.feed.Close() {
		return nil
	}
	s.pool.Close()
	return nil
}

// translate maps constraint violations onto the store's sentinels.
func translate(err error, what string) error {
	if err == nil {
		return nil
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch pe.Code {
		case "23505": // unique_violation
			return fmt.Errorf("%s: %w", what, store.ErrExists)
		case "23503": // foreign_key_violation
			return fmt.Errorf("%s: %w (foreign key)", what, store.ErrNotFound)
		}
	}
	return fmt.Errorf("%s: %w", what, err)
}
