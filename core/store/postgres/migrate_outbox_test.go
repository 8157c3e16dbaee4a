package postgres

import (
	"context"
	"path"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/musterhq/muster/core/store/pgtest"
	"github.com/musterhq/muster/core/store/storetest"
)

// migratedBefore makes a database on the test server migrated up to, not
// including, the migration numbered before: the store as an older release
// left it. It returns the database's DSN.
func migratedBefore(t *testing.T, before int) string {
	t.Helper()
	ctx := context.Background()
	dsn := pgtest.NewDatabase(t)
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	ms, err := migrations()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL,
		applied_ts TIMESTAMPTZ NOT NULL DEFAULT now())`); err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		if m.version >= before {
			break
		}
		body, err := migrationFiles.ReadFile(m.name)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := conn.Exec(ctx, string(body)); err != nil {
			t.Fatalf("%s: %v", m.name, err)
		}
		if _, err := conn.Exec(ctx, "INSERT INTO schema_migrations (version, name) VALUES ($1, $2)", m.version, path.Base(m.name)); err != nil {
			t.Fatal(err)
		}
	}
	return dsn
}

// TestMigrationMovesDeliveriesToTheOutbox: migration 018 gives each event
// with deliveries one outbox row naming its destinations by rank, and each
// destination a cursor before its first pending delivery; deliveries keep
// their state, the queue its order, the stats their last failure; an event
// a purge cut short is dropped whole (core/store/sqlite's twin test).
func TestMigrationMovesDeliveriesToTheOutbox(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dsn := migratedBefore(t, 18)
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	_, err = conn.Exec(ctx, `INSERT INTO events (seq, ts, type, actor) OVERRIDING SYSTEM VALUE VALUES
			(6, now(), 'run.paused', 'core'), (7, now(), 'run.paused', 'core'), (9, now(), 'run.failed', 'core'),
			(10, now(), 'run.failed', 'core');
		INSERT INTO notify_deliveries (id, destination, event_seq, state, attempts, created_ts, next_ts, updated_ts, last_status, last_error) VALUES
			(6*1024+1, 'b', 6, 'delivered', 1, now(), now(), now(), 200, ''),
			(7*1024, 'a', 7, 'delivered', 2, now(), now(), now(), 204, ''),
			(7*1024+1, 'b', 7, 'dead', 3, now(), now(), now(), 404, '404 Not Found'),
			(9*1024, 'b', 9, 'pending', 2, now(), now(), now() + interval '1 second', 503, '503 Service Unavailable'),
			(9*1024+1, 'a', 9, 'pending', 0, now(), now(), now(), 0, ''),
			(10*1024, 'b', 10, 'delivered', 1, now(), now(), now(), 200, '')`)
	conn.Close(ctx)
	if err != nil {
		t.Fatal(err)
	}
	s := open(t, dsn)
	storetest.CheckMigratedOutbox(t, s)
}
