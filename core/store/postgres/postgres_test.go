package postgres

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/core/store/pgtest"
	"github.com/musterhq/muster/core/store/storetest"
	"github.com/musterhq/muster/shared/action"
	"github.com/musterhq/muster/shared/startstop"
	"github.com/musterhq/muster/shared/testgoroutine"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// open opens a store on dsn and starts its listener; it is closed when the
// test ends.
func open(t *testing.T, dsn string) *Store {
	t.Helper()
	s, err := Open(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	return s
}

// TestStore runs the store behaviour suite on fresh PostgreSQL databases.
func TestStore(t *testing.T) {
	storetest.Run(t, func(t *testing.T) storetest.Opener {
		dsn := pgtest.NewDatabase(t)
		return func(t *testing.T) store.Store { return open(t, dsn) }
	})
}

func TestCheckVersion(t *testing.T) {
	t.Parallel()
	cases := []struct {
		num  int
		want string // "" for accepted
	}{
		{90624, "is version 9.6.24; muster needs 13 or newer"},
		{120017, "is version 12.17; muster needs 13 or newer"},
		{130000, ""},
		{150004, ""},
		{170002, ""},
	}
	for _, c := range cases {
		err := checkVersion(c.num)
		if (err == nil) != (c.want == "") || (err != nil && err.Error() != c.want) {
			t.Errorf("checkVersion(%d) = %v, want %q", c.num, err, c.want)
		}
	}
}

// TestOpenFailsWithOneClearLine: a bad DSN, a server nobody listens for and
// a missing database each fail Open with one line that says what is wrong,
// and never the password.
func TestOpenFailsWithOneClearLine(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	srv := pgtest.Server()
	cases := []struct {
		name string
		dsn  string
		want []string
	}{
		{"not a DSN", "postgres://muster:s3cret@127.0.0.1:notaport/db", []string{"store.dsn:"}},
		{"bad port", "host=127.0.0.1 port=seventy password=s3cret", []string{"store.dsn:"}},
		{"nobody listens", fmt.Sprintf("postgres://muster:s3cret@127.0.0.1:%d/muster?connect_timeout=2", closed),
			[]string{"cannot reach PostgreSQL at host=127.0.0.1 port=" + strconv.Itoa(closed) + " database=muster user=muster:"}},
		{"no such database", strings.Replace(srv.DSN("nope"), "muster@", "muster:s3cret@", 1),
			[]string{"cannot reach PostgreSQL at", `database "nope" does not exist`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			s, err := Open(context.Background(), c.dsn)
			if err == nil {
				s.Close()
				t.Fatal("Open succeeded")
			}
			msg := err.Error()
			for _, w := range c.want {
				if !strings.Contains(msg, w) {
					t.Errorf("error %q does not say %q", msg, w)
				}
			}
			if strings.Contains(msg, "\n") || strings.Contains(msg, "s3cret") {
				t.Errorf("error is not one line without the password: %q", msg)
			}
		})
	}
}

// TestReplicasMigrateTogether: stores opened at once on an empty database
// apply each migration once, under the advisory lock, and all open.
func TestReplicasMigrateTogether(t *testing.T) {
	t.Parallel()
	dsn := pgtest.NewDatabase(t)
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 4 {
		wg.Go(func() {
			s, err := Open(context.Background(), dsn)
			if err == nil {
				s.Close()
			}
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	ms, err := migrations()
	if err != nil {
		t.Fatal(err)
	}
	s := open(t, dsn)
	var n, max int
	if err := s.pool.QueryRow(context.Background(), "SELECT count(*), max(version) FROM schema_migrations").Scan(&n, &max); err != nil {
		t.Fatal(err)
	}
	if n != len(ms) || max != ms[len(ms)-1].version {
		t.Fatalf("schema_migrations: %d rows up to %d, want %d up to %d", n, max, len(ms), ms[len(ms)-1].version)
	}
}

// TestNewerSchemaIsRefused: a database migrated by a newer muster is not
// touched.
func TestNewerSchemaIsRefused(t *testing.T) {
	t.Parallel()
	dsn := pgtest.NewDatabase(t)
	s := open(t, dsn)
	if _, err := s.pool.Exec(context.Background(), "INSERT INTO schema_migrations (version, name) VALUES (999, '999_future.sql')"); err != nil {
		t.Fatal(err)
	}
	_, err := Open(context.Background(), dsn)
	if err == nil || !strings.Contains(err.Error(), "the schema is at version 999, newer than this muster knows") {
		t.Fatalf("Open = %v", err)
	}
}

// waitSeq waits until ch announces seq or a larger number.
func waitSeq(t *testing.T, ch <-chan int64, seq int64) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case got := <-ch:
			if got >= seq {
				return
			}
		case <-deadline:
			t.Fatalf("event %d not announced within 10s", seq)
		}
	}
}

func appendEvent(t *testing.T, s store.Store) int64 {
	t.Helper()
	ctx := context.Background()
	e := &store.Event{Type: store.EventNodeUp, Actor: "core"}
	if err := s.Update(ctx, func(tx store.Tx) error { return tx.AppendEvent(ctx, e) }); err != nil {
		t.Fatal(err)
	}
	return e.Seq
}

// TestSubscribeHearsOtherReplicas: a commit with events on one store reaches
// the subscribers of another store on the same database (LISTEN/NOTIFY),
// also after the listening connection was cut and made again.
func TestSubscribeHearsOtherReplicas(t *testing.T) {
	t.Parallel()
	dsn := pgtest.NewDatabase(t)
	a, b := open(t, dsn), open(t, dsn)
	ch, cancel := b.Subscribe()
	defer cancel()
	waitSeq(t, ch, appendEvent(t, a))

	// Cut b's listening connection; what commits meanwhile is announced
	// once it is back.
	var db string
	ctx := context.Background()
	if err := b.pool.QueryRow(ctx, "SELECT current_database()").Scan(&db); err != nil {
		t.Fatal(err)
	}
	var cut int
	err := b.pool.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
		WHERE datname = $1 AND query LIKE 'LISTEN %'`, db).Scan(&cut)
	if err != nil || cut != 2 {
		t.Fatalf("terminated %d listeners (want a's and b's): %v", cut, err)
	}
	waitSeq(t, ch, appendEvent(t, a))
	waitSeq(t, ch, appendEvent(t, a))
}

// TestNULBytesAreReplaced: PostgreSQL text cannot hold NUL; an agent's output
// with one is stored with U+FFFD instead of failing the pass.
func TestNULBytesAreReplaced(t *testing.T) {
	t.Parallel()
	s := open(t, pgtest.NewDatabase(t))
	ctx := context.Background()
	r := &store.Record{Action: action.Action{ID: action.NewID(), ClusterID: "c1", NodeID: "n1", Kind: "k/x",
		State: action.Failed, StateReason: "bad\x00reason", Output: "a\x00b", Origin: action.OriginAgent}}
	err := s.Update(ctx, func(tx store.Tx) error {
		if err := tx.InsertAction(ctx, r); err != nil {
			return err
		}
		return tx.AppendEvent(ctx, &store.Event{Type: store.EventActionStateChanged, Actor: "n1", Message: "m\x00",
			Data: map[string]any{"out": "x\x00y"}})
	})
	if err != nil {
		t.Fatal(err)
	}
	err = s.Read(ctx, func(rd store.Reader) error {
		got, err := rd.Action(ctx, r.ID)
		if err != nil {
			return err
		}
		if got.Output != "a\uFFFDb" || got.StateReason != "bad\uFFFDreason" {
			t.Errorf("stored output %q, reason %q", got.Output, got.StateReason)
		}
		evs, err := rd.Events(ctx, 0, 0)
		if err != nil {
			return err
		}
		if len(evs) != 1 || evs[0].Message != "m\uFFFD" {
			t.Errorf("events %+v", evs)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestNudgesReachEveryReplica: a nudge published on one store is heard by
// every store on the database.
func TestNudgesReachEveryReplica(t *testing.T) {
	t.Parallel()
	dsn := pgtest.NewDatabase(t)
	a, b := open(t, dsn), open(t, dsn)
	if err := a.PublishNudge(context.Background(), "c1"); err != nil {
		t.Fatal(err)
	}
	for _, s := range []*Store{a, b} {
		select {
		case c := <-s.Nudges():
			if c != "c1" {
				t.Fatalf("nudge for %q, want c1", c)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("nudge not heard within 10s")
		}
	}
}

// TestOpenStartsNothing: Open starts no goroutine (the listener is Start's);
// Stop of a store never started returns at once and ends it for good; Close
// after that is fine. Not parallel: it looks at every goroutine.
func TestOpenStartsNothing(t *testing.T) {
	s, err := Open(context.Background(), pgtest.NewDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	testgoroutine.None(t, "core/store/postgres.(*Store)")
	testgoroutine.None(t, "core/store/postgres.Open")
	testgoroutine.Returns(t, 5*time.Second, "Stop before Start", s.Stop)
	if err := s.Start(context.Background()); !errors.Is(err, startstop.ErrStopped) {
		t.Fatalf("Start after Stop = %v, want ErrStopped", err)
	}
	testgoroutine.None(t, "core/store/postgres.(*Store)")
}

// TestStopEndsTheListener: the listener runs from Start to Stop, and a
// nudge is heard only while it runs.
func TestStopEndsTheListener(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	s, err := Open(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !testgoroutine.Running("core/store/postgres.(*Store)") {
		t.Fatal("no listener after Start")
	}
	s.Stop()
	testgoroutine.None(t, "core/store/postgres.(*Store)")
}
