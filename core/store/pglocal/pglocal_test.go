package pglocal

import (
	"context"
	"net"
	"net/url"
	"os"
	"strconv"
	"testing"
	"time"

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

// Hardening of issue 17 (`muster dev --ha`): a private server listens on
// its socket alone, every role needs its password, and the application's
// role is not a superuser yet can create its tables.
func TestPrivateServerTakesPasswordsOnItsSocketOnly(t *testing.T) {
	ctx := context.Background()
	s, err := Start(ctx, Options{Private: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Stop() })
	if err := s.CreateDatabase(ctx, "muster", ""); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateRole(ctx, "muster", "s3cret'x", "muster"); err != nil {
		t.Fatal(err)
	}
	if c, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(s.Port)), 2*time.Second); err == nil {
		c.Close()
		t.Fatal("a private server listens on TCP")
	}
	for name, dsn := range map[string]string{
		"no password":                    s.socketDSN("muster", url.User("muster")),
		"wrong password":                 s.RoleDSN("muster", "muster", "nope"),
		"superuser without its password": s.socketDSN("muster", url.User(PrivateSuperuser)),
	} {
		if conn, err := pgx.Connect(ctx, dsn); err == nil {
			conn.Close(ctx)
			t.Fatalf("%s: connected", name)
		}
	}
	conn, err := pgx.Connect(ctx, s.RoleDSN("muster", "muster", "s3cret'x"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var super, createDB, createRole bool
	if err := conn.QueryRow(ctx, "SELECT rolsuper, rolcreatedb, rolcreaterole FROM pg_roles WHERE rolname = current_user").
		Scan(&super, &createDB, &createRole); err != nil {
		t.Fatal(err)
	}
	if super || createDB || createRole {
		t.Fatalf("the muster role: superuser %v, createdb %v, createrole %v; want none", super, createDB, createRole)
	}
	if _, err := conn.Exec(ctx, "CREATE TABLE t (v int)"); err != nil {
		t.Fatalf("the muster role cannot create its tables: %v", err)
	}
	fi, err := os.Stat(s.Dir)
	if err != nil || fi.Mode().Perm()&0o077 != 0 {
		t.Fatalf("the socket's directory: %v %v, want no group or other bits", fi.Mode(), err)
	}
}

// TestFreePortIsBelowTheEphemeralRange: Restart binds the server's port
// again, so it must not be one an outgoing connection can take meanwhile.
func TestFreePortIsBelowTheEphemeralRange(t *testing.T) {
	t.Parallel()
	low := ephemeralLow()
	for range 20 {
		port, err := freePort()
		if err != nil {
			t.Fatal(err)
		}
		if port >= low || port < 1024 {
			t.Fatalf("freePort() = %d, want in [1024, %d)", port, low)
		}
	}
}
