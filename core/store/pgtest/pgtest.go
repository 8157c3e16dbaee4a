// Package pgtest gives tests a real PostgreSQL: one server per test binary,
// started by Main from TestMain (core/store/pglocal), and a fresh database
// per test from NewDatabase.
//
//	func TestMain(m *testing.M) { pgtest.Main(m) }
//
// Without the server binaries Main fails the test binary with a line saying
// how to install them: PostgreSQL tests never skip.
package pgtest

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/musterhq/muster/core/store/pglocal"
)

var (
	server *pglocal.Server
	dbs    atomic.Int64
)

// Main starts the server, runs the tests, stops the server and exits.
func Main(m *testing.M) {
	os.Exit(Run(m))
}

// Run is Main for a TestMain that does more: it returns the exit code.
func Run(m *testing.M) int {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	s, err := pglocal.Start(ctx, pglocal.Options{})
	cancel()
	if err != nil {
		fmt.Fprintf(os.Stderr, "pgtest: cannot start PostgreSQL: %v\n", err)
		return 1
	}
	server = s
	defer s.Stop()
	return m.Run()
}

// Server returns the binary's server (nil unless Main runs).
func Server() *pglocal.Server { return server }

// NewDatabase creates an empty database for t and returns its DSN
// (loopback TCP). The database goes away with the server.
func NewDatabase(t testing.TB) string {
	t.Helper()
	if server == nil {
		t.Fatal("pgtest: no server: call pgtest.Main(m) from TestMain")
	}
	name := fmt.Sprintf("t%d", dbs.Add(1))
	if err := server.CreateDatabase(context.Background(), name, ""); err != nil {
		t.Fatal(err)
	}
	return server.DSN(name)
}
