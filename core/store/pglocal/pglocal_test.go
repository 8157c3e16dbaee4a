package pglocal

import (
	"context"
	"os"
	"testing"

	"github.com/jackc/pgx/v5"
)

// TestServerLifecycle starts a server, uses a database over TCP and over the
// socket, crashes it, restarts it with its data and stops it.
func TestServerLifecycle(t *testing.T) {
	ctx := context.Background()
	s, err := Start(ctx, Options{Durable: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Stop() })
	if s.Version < 13 {
		t.Fatalf("Version = %d", s.Version)
	}
	if err := s.CreateDatabase(ctx, "app", ""); err != nil {
		t.Fatal(err)
	}
	exec := func(dsn, q string) {
		t.Helper()
		conn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	exec(s.DSN("app"), "CREATE TABLE x (v int); INSERT INTO x VALUES (1)")
	exec(s.SocketDSN("app"), "INSERT INTO x VALUES (2)")

	if err := s.Kill(); err != nil {
		t.Fatal(err)
	}
	if _, err := pgx.Connect(ctx, s.DSN("app")); err == nil {
		t.Fatal("connected to a killed server")
	}
	if err := s.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, s.DSN("app"))
	if err != nil {
		t.Fatal(err)
	}
	var n int
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM x").Scan(&n); err != nil || n != 2 {
		t.Fatalf("after restart: %d rows, %v", n, err)
	}
	conn.Close(ctx)
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(s.Dir); !os.IsNotExist(err) {
		t.Fatalf("directory left after Stop: %v", err)
	}
}
